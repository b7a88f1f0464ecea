"""A/B of the bridge's command latency, two builds side by side (spare jails,
src/sandbox/spare.c): `POST /v1/sandbox` + first `/exec` of `true` with the
warm pool (bridge.warm_pool_target=2), and `/exec true` in an existing
sandbox; every sample from an idle daemon (bench/bridge_pool.py's method),
the two daemons' samples interleaved.

    python3 bench/bridge_spare.py OLD_BINARY NEW_BINARY [N]"""

import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from bridge_pool import TARGET, _create_and_exec, _existing_exec, _paced, _pool_full  # noqa: E402
from harness import V, Workdir, fmt_ms, interleaved, summary  # noqa: E402


def main():
    old, new = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    work = Workdir()
    try:
        ds = {k: work.daemon(b, sets=[f"bridge.warm_pool_target={TARGET}"]).start()
              for k, b in (("old", old), ("new", new))}
        variants = []
        for k, d in ds.items():
            _pool_full(d)
            variants.append(V(f"{k} exec", _paced(d, _existing_exec(d)), n))
            variants.append(V(f"{k} pool", (lambda d: lambda: (_pool_full(d), _create_and_exec(d)())[1])(d), n))
        samples = interleaved(variants, max(1, n // 5), 1, 600)
    finally:
        work.cleanup()
    for k, v in samples.items():
        s = summary(v)
        print(f"{k:10s} n={s['n']:3d} p50 {fmt_ms(s['p50'])} ms  p99 {fmt_ms(s['p99'])} ms")


if __name__ == "__main__":
    main()
