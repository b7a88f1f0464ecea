#!/usr/bin/env python3
"""Interleaved A/B of section 3's shell row: `POST /execute/shell` of
`/bin/true`, back to back in blocks (as bench/run.py measures it), against
two daemon binaries with the same configuration, plus bwrap /bin/true.

    bench/shell_ab.py --a /work/main/build/sandboxd --b build/sandboxd [--n 200]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--code", default="/bin/true")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    wd = H.Workdir(args.set)
    try:
        da, db = wd.daemon(args.a).start(), wd.daemon(args.b).start()
        variants = [H.V("bwrap", H.spawn_timer(H.BWRAP + ["/bin/true"]), args.n)]
        for key, d in (("A", da), ("B", db)):
            fn = H.exec_timer(d.client, "/execute/shell", args.code, None)
            fn()
            variants.append(H.V(key, fn, args.n, d.settle))
        samples = H.interleaved(variants, args.rounds, 3, 600)
        for k, v in samples.items():
            s = H.summary(v)
            print(f"{k:6} n={s['n']} p50={H.fmt_ms(s['p50'])} ms p99={H.fmt_ms(s['p99'])} ms")
    finally:
        wd.cleanup()


if __name__ == "__main__":
    main()
