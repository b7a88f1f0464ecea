#!/usr/bin/env python3
"""Interleaved A/B of section 3's shell row (bench/run.py section_minimal):
`POST /execute/shell` of `/bin/true` back to back in blocks, each block
followed by the daemon's settle, as run.py measures it, against several
daemon binaries with the same configuration, plus `bwrap /bin/true`.

    bench/shell_ab.py --bin main=/work/main/build/sandboxd --bin new=build/sandboxd [--n 200]

--steady: after the warm-up, one untimed block per daemon first, so the
pools have grown to the block size (the first block mixes pool hits with
cold spawns while a pool grows; docs/benchmarks.md)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH, repeated")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--code", default="/bin/true")
    ap.add_argument("--steady", action="store_true")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE for every daemon")
    args = ap.parse_args()
    wd = H.Workdir(args.set)
    try:
        variants = [H.V("bwrap", H.spawn_timer(H.BWRAP + ["/bin/true"]), args.n)]
        for spec in args.bin:
            name, path = spec.split("=", 1)
            d = wd.daemon(path).start()
            fn = H.exec_timer(d.client, "/execute/shell", args.code, None)
            fn()  # correctness check before timing
            for _ in range(args.n // args.rounds if args.steady else 0):
                fn()
            d.settle()
            variants.append(H.V(name, fn, args.n, d.settle))
        samples = H.interleaved(variants, args.rounds, 3, 900)
        base = H.summary(samples["bwrap"])["p50"]
        for k, v in samples.items():
            s = H.summary(v)
            print(f"{k:8} n={s['n']} p50={H.fmt_ms(s['p50'])} ms p99={H.fmt_ms(s['p99'])} ms"
                  f"  {s['p50'] / base:.2f}× bwrap")
    finally:
        wd.cleanup()


if __name__ == "__main__":
    main()
