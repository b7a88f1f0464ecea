"""Section 6 of bench/run.py: a new bridge sandbox and its first command
(`POST /v1/sandbox` + `POST /v1/sandbox/:id/exec` of `true`, SSE read to
its end), with the warm pool (bridge.warm_pool_target=2) and without,
beside the warm stateless execution it should cost about as much as
(`POST /execute/shell` of `true`) and a later /exec in an existing sandbox.

Each daemon is its own (the pool must not shift the other sections'
figures). Every sample starts from an idle daemon (untimed: the pool row
also waits until the pool is full again): what a client sees when its
requests are spaced apart, and the same footing for every row (on this
VM a request right after another is several ms faster than one after an
idle pause, whatever it does). A burst beyond the pool's size gets the
no-pool figure for the overflow."""

import json
import time

from harness import V, BenchError, check_exec, exec_timer, fmt_ms, fmt_x, interleaved, ratio, summary

PARAMS = {"full": dict(n=40, rounds=4, budget_s=90), "quick": dict(n=3, rounds=1, budget_s=15)}
TARGET = 2
ROWS = [("stateless", "warm stateless `POST /execute/shell` `true` (reference)"),
        ("exec", "`/exec` `true` in an existing sandbox"),
        ("nopool", "new sandbox + first `/exec` `true`, no warm pool"),
        ("pool", f"new sandbox + first `/exec` `true`, warm pool of {TARGET}")]


def _exec_true(client, sid):
    status, res = client.request("POST", f"/v1/sandbox/{sid}/exec", {"argv": ["true"]})
    raw = res if isinstance(res, (bytes, bytearray)) else json.dumps(res).encode()
    if status != 200 or b'"exit_code":0' not in raw.replace(b" ", b""):
        raise BenchError(f"/exec true in {sid}: HTTP {status}: {raw[:300]!r}")


def _new_sandbox(client):
    status, res = client.request("POST", "/v1/sandbox")
    if status != 200 or not isinstance(res, dict) or "id" not in res:
        raise BenchError(f"POST /v1/sandbox: HTTP {status}: {str(res)[:300]}")
    return res["id"]


def _create_and_exec(daemon):
    """One sample: create + first /exec timed; the delete is not."""
    def fn():
        c = daemon.client
        t0 = time.perf_counter()
        sid = _new_sandbox(c)
        _exec_true(c, sid)
        dt = time.perf_counter() - t0
        c.request("DELETE", f"/v1/sandbox/{sid}")
        return dt
    return fn


def _existing_exec(daemon):
    sid = _new_sandbox(daemon.client)
    _exec_true(daemon.client, sid)

    def fn():
        t0 = time.perf_counter()
        _exec_true(daemon.client, sid)
        return time.perf_counter() - t0
    return fn


def _pool_full(daemon, timeout=30):
    """Untimed: waits until the pool holds its target again, then lets the daemon go idle."""
    deadline = time.monotonic() + timeout
    while True:
        status, st = daemon.client.request("GET", "/v1/pool/stats")
        if status == 200 and st.get("warm", 0) >= TARGET:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"the warm pool did not refill within {timeout} s: {st}")
        time.sleep(0.01)
    daemon.settle()


def _paced(daemon, fn):
    def run():
        daemon.settle()
        return fn()
    return run


def section_bridge_pool(work, binary, out):
    prm = PARAMS[out.get("profile", "full")]
    pooled = work.daemon(binary, sets=[f"bridge.warm_pool_target={TARGET}"]).start()
    cold = work.daemon(binary).start()
    try:
        _pool_full(pooled)
        stateless = exec_timer(pooled.client, "/execute/shell", "true", None)
        check_exec(*pooled.client.request("POST", "/execute/shell", {"code": "true"}), None, "shell true")
        variants = [V("stateless", _paced(pooled, stateless), prm["n"]),
                    V("exec", _paced(pooled, _existing_exec(pooled)), prm["n"]),
                    V("nopool", _paced(cold, _create_and_exec(cold)), prm["n"]),
                    V("pool", lambda: (_pool_full(pooled), _create_and_exec(pooled)())[1], prm["n"])]
        samples = interleaved(variants, prm["rounds"], 1, prm["budget_s"])
    finally:
        pooled.stop()
        cold.stop()
    out["bridge_pool"] = {k: summary(v) for k, v in samples.items() if v}
    s = out["bridge_pool"]
    print("  bridge     new sandbox + first /exec: pool "
          f"{fmt_ms(s['pool']['p50'])} ms  no pool {fmt_ms(s['nopool']['p50'])} ms  "
          f"stateless shell true {fmt_ms(s['stateless']['p50'])} ms", flush=True)


def report_bridge_pool(out, L):
    """Appends the section's markdown table to L."""
    if "bridge_pool" not in out:
        return
    s = out["bridge_pool"]
    ref = s.get("stateless")
    L.append("### 6. Bridge: new sandbox + first `/exec`, with and without the warm pool")
    L.append("")
    L.append("`POST /v1/sandbox` then `POST /v1/sandbox/:id/exec` of `[\"true\"]` (its SSE read to the end), "
             "each daemon its own; every sample starts from an idle daemon, and the warm-pool row lets the "
             "pool refill (untimed) first (docs/bridge/pool.md).")
    L.append("")
    L.append("| row | n | p50 ms | p99 ms | × stateless shell `true` (p50) |")
    L.append("| --- | ---: | ---: | ---: | ---: |")
    for k, what in ROWS:
        if k in s:
            r = fmt_x(ratio(s[k]["p50"], ref["p50"])) if ref else "–"
            L.append(f"| {what} | {s[k]['n']} | {fmt_ms(s[k]['p50'])} | {fmt_ms(s[k]['p99'])} | {r} |")
    L.append("")


def compact_bridge_pool(out, line):
    for k, _ in ROWS:
        if k in out.get("bridge_pool", {}):
            line(f"bridge {k}", out["bridge_pool"][k], out["bridge_pool"].get("stateless"), "(÷ stateless)")
