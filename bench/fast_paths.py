"""Issue 13's two fast paths, each beside the setting that turns it off,
measured in one run with the rows interleaved (ratios, not absolutes: the
machine is shared):

  a. a new sandbox and its first execution, with warm sandboxes (the
     runtime API's sandbox.warm_runtime, default 2: a prepared sandbox with
     a started python kernel), with ready workspace images only
     (pool.workspace_images, default 4) and without either: the runtime API's
     `POST /languages/python/sandboxes/<new id>/execute` of `print(1)`, and
     the bridge's `POST /v1/sandbox` + `POST /v1/sandbox/:id/exec` of
     `echo 1`; a third daemon runs as before this change (no image pool,
     sandbox.journal_sync=always);
  a'. the workspace part alone (build/bench/ws_open: workspace_open with a
     ready image vs with mkfs, interleaved, no daemon);
  b. the warm context round trip (`x + 1` in a live context, HTTP p50) with
     sandbox.journal_sync=group (default), none and always (an fsync per
     cell before the reply: the old behaviour).

Every new-sandbox sample starts from an idle daemon (untimed settle: the
image pool refilled, jails reaped). Writes its table into docs/benchmarks.md
between the fast:begin and fast:end markers (`make bench` runs it after
bench/run.py)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (DOC, V, BenchError, Workdir, check_exec, exec_timer, fmt_ms, fmt_x,  # noqa: E402
                     interleaved, ratio, summary, write_marked)

BEGIN, END = "<!-- fast:begin -->", "<!-- fast:end -->"
PROFILES = {"full": dict(ws_n=30, new_n=30, new_rounds=5, new_budget_s=150, ctx_n=300, ctx_rounds=6, ctx_budget_s=60),
            "quick": dict(ws_n=3, new_n=3, new_rounds=1, new_budget_s=20, ctx_n=20, ctx_rounds=2, ctx_budget_s=10)}
DAEMONS = {"pool": [],
           "images": ["sandbox.warm_runtime=0"],
           "nopool": ["pool.workspace_images=0", "sandbox.warm_runtime=0"],
           "before": ["pool.workspace_images=0", "sandbox.journal_sync=always", "sandbox.warm_runtime=0"],
           "none": ["sandbox.journal_sync=none"]}
NEW_ROWS = [("api-pool", "runtime API, warm sandboxes (default, `sandbox.warm_runtime=2`)"),
            ("api-images", "runtime API, sandbox.warm_runtime=0: ready images only"),
            ("api-nopool", "runtime API, sandbox.warm_runtime=0, pool.workspace_images=0"),
            ("api-before", "runtime API, as before (no warm sandboxes, no images, journal_sync=always)"),
            ("bridge-pool", "bridge, ready images (default)"),
            ("bridge-nopool", "bridge, pool.workspace_images=0"),
            ("bridge-before", "bridge, as before (no images, journal_sync=always)")]
WS_ROWS = [("ws-api-pool", "ws-api-mkfs", "runtime API quota (`limits.workspace_*`, 16 MiB)"),
           ("ws-bridge-pool", "ws-bridge-mkfs", "bridge quota (`bridge.workspace_*`, 256 MiB)")]
CTX_ROWS = [("group", "sandbox.journal_sync=group (default)"),
            ("none", "sandbox.journal_sync=none"),
            ("always", "sandbox.journal_sync=always (fsync per cell, as before)")]


def warm_ready(daemon, timeout=30):
    """Untimed: waits until the daemon's warm sandboxes (GET /ready
    warmSandboxes, when it keeps any) are all ready again, then lets it go
    idle: a sample is a new sandbox on an idle daemon whose pools are full."""
    want = 0 if any(kv.startswith("sandbox.warm_runtime=0") for kv in daemon.sets) else 2
    deadline = time.monotonic() + timeout
    while want:
        status, st = daemon.client.request("GET", "/ready")
        if status == 200 and st.get("warmSandboxes", {}).get("ready", 0) >= want:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"warm sandboxes not ready within {timeout} s: {st.get('warmSandboxes')}")
        time.sleep(0.01)
    daemon.settle()


def new_api(daemon):
    def fn():
        warm_ready(daemon)
        sid = "fp" + uuid.uuid4().hex[:12]
        t0 = time.perf_counter()
        status, res = daemon.client.request("POST", f"/languages/python/sandboxes/{sid}/execute", {"code": "print(1)"})
        dt = time.perf_counter() - t0
        check_exec(status, res, None, "new sandbox print(1)")
        if res.get("logs", {}).get("stdout") != ["1"]:
            raise BenchError(f"new sandbox print(1): {json.dumps(res)[:300]}")
        daemon.client.request("DELETE", f"/languages/python/sandboxes/{sid}")
        return dt
    return fn


def new_bridge(daemon):
    def fn():
        daemon.settle()
        c = daemon.client
        t0 = time.perf_counter()
        status, res = c.request("POST", "/v1/sandbox")
        if status != 200 or not isinstance(res, dict) or "id" not in res:
            raise BenchError(f"POST /v1/sandbox: HTTP {status}: {str(res)[:300]}")
        status, raw = c.request("POST", f"/v1/sandbox/{res['id']}/exec", {"argv": ["echo", "1"]})
        dt = time.perf_counter() - t0
        raw = raw if isinstance(raw, (bytes, bytearray)) else json.dumps(raw).encode()
        if status != 200 or b'"exit_code":0' not in raw.replace(b" ", b""):
            raise BenchError(f"/exec echo 1: HTTP {status}: {raw[:300]!r}")
        c.request("DELETE", f"/v1/sandbox/{res['id']}")
        return dt
    return fn


def warm_ctx(daemon):
    sid = "fw" + uuid.uuid4().hex[:12]
    path = f"/languages/python/sandboxes/{sid}/execute"
    check_exec(*daemon.client.request("POST", path, {"code": "x = 1"}), None, "context setup")
    return exec_timer(daemon.client, path, "x + 1", "2")


def measure_ws(p, binary, out):
    tool = os.path.join(os.path.dirname(binary), "bench", "ws_open")
    if not os.access(tool, os.X_OK):
        print(f"fast_paths: {tool} missing (make build/bench/ws_open): no workspace rows", file=sys.stderr)
        return
    d = tempfile.mkdtemp(prefix="sandboxd-wsopen-")
    res = subprocess.run([tool, d, str(p["ws_n"])], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise BenchError(f"ws_open: {res.stderr.strip()[:300]}")
    out["ws"] = {ln.split()[0]: {"p50": float(ln.split()[1]), "p99": float(ln.split()[2]), "n": p["ws_n"]}
                 for ln in res.stdout.splitlines() if len(ln.split()) == 3}


def measure(p, work, binary, out):
    ds = {k: work.daemon(binary, sets=v).start() for k, v in DAEMONS.items()}
    try:
        for d in ds.values():
            d.settle()
        # One untimed new sandbox each: one-time costs (first cgroup, caches) out of the figures.
        for k in ("pool", "images", "nopool", "before"):
            new_api(ds[k])()
        for k in ("pool", "nopool", "before"):
            new_bridge(ds[k])()
        rows = [V(f"api-{k}", new_api(ds[k]), p["new_n"]) for k in ("pool", "images", "nopool", "before")]
        rows += [V(f"bridge-{k}", new_bridge(ds[k]), p["new_n"]) for k in ("pool", "nopool", "before")]
        out["new"] = {k: summary(v) for k, v in
                      interleaved(rows, p["new_rounds"], 0, p["new_budget_s"]).items() if v}
        ctx = {"group": ds["pool"], "none": ds["none"], "always": ds["before"]}
        for d in ctx.values():
            d.settle()
        rows = [V(k, warm_ctx(d), p["ctx_n"]) for k, d in ctx.items()]
        out["ctx"] = {k: summary(v) for k, v in
                      interleaved(rows, p["ctx_rounds"], 10, p["ctx_budget_s"]).items() if v}
    finally:
        for d in ds.values():
            d.stop()


def table(L, title, ref_name, figures, rows, ref_of):
    """A p50/p99 table of figures[k] for (k, label) in rows, each × its ref_of(k) row."""
    L += [title, "", f"| row | n | p50 ms | p99 ms | × {ref_name} (p50) |", "| --- | ---: | ---: | ---: | ---: |"]
    for k, what in rows:
        if k in figures:
            ref = figures.get(ref_of(k))
            r = fmt_x(ratio(figures[k]["p50"], ref["p50"])) if ref else "–"
            L.append(f"| {what} | {figures[k]['n']} | {fmt_ms(figures[k]['p50'])} | {fmt_ms(figures[k]['p99'])} | {r} |")
    L.append("")


def report(out):
    L = [BEGIN, "", f"### Issue 13 fast paths ({out['date']}, `bench/fast_paths.py`, {out['profile']} profile)", ""]
    L.append("Rows of one table were interleaved in the same run, so their **ratios** hold even on a loaded "
             "machine; the absolute milliseconds do not (load average at the start: "
             f"{out['load']}).")
    L.append("")
    table(L, "**New sandbox + first execution** (runtime API: `print(1)` in a new sandbox id; bridge: "
          "`POST /v1/sandbox` + first `/exec` of `echo 1`; each sample from an idle daemon):",
          "as before", out.get("new", {}), NEW_ROWS, lambda k: k.split("-")[0] + "-before")
    w = out.get("ws", {})
    if w:
        L.append("**The workspace part alone** (`bench/ws_open.c`: `workspace_open` of a new sandbox, "
                 "mount included, with a ready image vs formatting one; interleaved, no daemon):")
        L.append("")
        L.append("| quota | n | ready image p50 ms | mkfs p50 ms | ready ÷ mkfs (p50) |")
        L.append("| --- | ---: | ---: | ---: | ---: |")
        for a, b, what in WS_ROWS:
            if a in w and b in w:
                L.append(f"| {what} | {w[a]['n']} | {fmt_ms(w[a]['p50'])} | {fmt_ms(w[b]['p50'])} | "
                         f"{fmt_x(ratio(w[a]['p50'], w[b]['p50']))} |")
        L.append("")
    table(L, "**Warm context round trip** (`x + 1` in a live python context, one keep-alive client):",
          "always", out.get("ctx", {}), CTX_ROWS, lambda k: "always")
    L.append(END)
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(DOC), "..", "build", "sandboxd"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--doc", default=DOC)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    profile = "quick" if args.quick else "full"
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "profile": profile,
           "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    work = Workdir()
    try:
        measure_ws(PROFILES[profile], binary, out)
        measure(PROFILES[profile], work, binary, out)
    finally:
        work.cleanup()
    text = report(out)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if not args.no_write:
        write_marked(args.doc, text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
