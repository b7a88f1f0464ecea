"""Issue 13's per-request floor: what one request costs the daemon beyond
the HTTP exchange itself, measured against a baseline binary in the same
run (ratios, not absolutes: the machine is shared):

  - `GET /health` (the HTTP floor: parse, route, reply; no worker);
  - the warm context round trip (`x + 1` in a live python context, one
    keep-alive client, HTTP p50);
  - stateless python `1+1` back to back (`POST /execute/python`);

each for this tree's daemon (default settings), for one with
http.inline=false (every blocking request handed to a worker and back:
the hand-off's cost) and, with --before BIN, for a baseline daemon (a
build of the tree before the change), rows interleaved. With --strace,
also the syscalls the daemon's threads make for N warm context requests,
counted with `strace -c`, per request.

Writes its table into docs/benchmarks.md between the floor:begin and
floor:end markers (`make bench` runs it with --strace and no baseline)."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (DOC, V, BenchError, Workdir, check_exec, exec_timer, fmt_ms, fmt_x, health_timer,  # noqa: E402
                     interleaved, ratio, summary, write_marked)

BEGIN, END = "<!-- floor:begin -->", "<!-- floor:end -->"
PROFILES = {"full": dict(n=400, rounds=8, budget_s=90, strace_n=50),
            "quick": dict(n=20, rounds=2, budget_s=10, strace_n=5)}
ROWS = [("health", "`GET /health`"), ("ctx", "warm context `x + 1`"), ("stateless", "stateless python `1+1`")]


def ctx_path(daemon):
    path = f"/languages/python/sandboxes/fl{uuid.uuid4().hex[:12]}/execute"
    check_exec(*daemon.client.request("POST", path, {"code": "x = 1"}), None, "context setup")
    return path


def samplers(tag, daemon, n):
    ctx = exec_timer(daemon.client, ctx_path(daemon), "x + 1", "2")
    stateless = exec_timer(daemon.client, "/execute/python", "1+1", "2")
    return [V(f"{tag}:health", health_timer(daemon.client), n), V(f"{tag}:ctx", ctx, n),
            V(f"{tag}:stateless", stateless, n, daemon.settle)]


def count_syscalls(daemon, n):
    """Syscalls of every daemon thread (not of its children: jails, mkfs)
    over n warm context requests, per request: (total, {name: count})."""
    path = ctx_path(daemon)
    run = exec_timer(daemon.client, path, "x + 1", "2")
    run()
    out = os.path.join(daemon.data_dir, "strace.txt")
    # Each thread by id, without -f: the children the daemon forks meanwhile
    # (a workspace image's mkfs, a pool refill) are not the request's.
    tids = sorted(os.listdir(f"/proc/{daemon.proc.pid}/task"), key=int)
    tracer = subprocess.Popen(["strace", "-c", "-o", out] + [a for t in tids for a in ("-p", t)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attach to every thread
    for _ in range(n):
        run()
    time.sleep(0.3)
    tracer.terminate()
    tracer.wait(timeout=30)
    counts = {}
    with open(out) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m.group(2) != "total":
                counts[m.group(2)] = int(m.group(1)) / n
    return sum(counts.values()), counts


def measure(p, work, daemons, out, strace):
    ds = {tag: work.daemon(b, sets=sets).start() for tag, (b, sets) in daemons.items()}
    try:
        rows = []
        for tag, d in ds.items():
            d.settle()
            rows += samplers(tag, d, p["n"])
        out["rows"] = {k: summary(v) for k, v in interleaved(rows, p["rounds"], 10, p["budget_s"]).items() if v}
        if strace and not shutil.which("strace"):
            print("request_floor: strace missing: no syscall counts", file=sys.stderr)
        elif strace:
            out["syscalls"] = {tag: count_syscalls(d, p["strace_n"]) for tag, d in ds.items()}
    finally:
        for d in ds.values():
            d.stop()


def report(out, tags):
    L = [BEGIN, "", f"### Issue 13: the per-request floor ({out['date']}, `bench/request_floor.py`, "
         f"{out['profile']} profile)", "",
         "One keep-alive client, rows interleaved in one run (load average at the start: "
         f"{out['load']}); the ratio is each row's p50 over `GET /health`'s on the same daemon.", "",
         "| daemon | row | n | p50 ms | p99 ms | × `GET /health` (p50) |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    rows = out.get("rows", {})
    for tag in tags:
        h = rows.get(f"{tag}:health")
        for k, what in ROWS:
            r = rows.get(f"{tag}:{k}")
            if r:
                x = fmt_x(ratio(r["p50"], h["p50"])) if h else "–"
                L.append(f"| {tag} | {what} | {r['n']} | {fmt_ms(r['p50'])} | {fmt_ms(r['p99'])} | {x} |")
    for other in tags[1:]:
        a = tags[0]
        L += ["", f"{a} ÷ {other} (p50): " + ", ".join(
            f"{what} {fmt_x(ratio(rows[f'{a}:{k}']['p50'], rows[f'{other}:{k}']['p50']))}"
            for k, what in ROWS if f"{a}:{k}" in rows and f"{other}:{k}" in rows)]
    sc = out.get("syscalls")
    if sc:
        L += ["", "Daemon syscalls per warm context request (`strace -c -p` of every thread, children excluded):", "",
              "| daemon | total | top calls |", "| --- | ---: | --- |"]
        for tag in tags:
            if tag in sc:
                total, c = sc[tag]
                top = sorted(c.items(), key=lambda kv: -kv[1])[:8]
                L.append(f"| {tag} | {total:.1f} | " + ", ".join(f"{k} {v:.1f}" for k, v in top) + " |")
    L += ["", END]
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(DOC), "..", "build", "sandboxd"))
    ap.add_argument("--before", metavar="BIN", help="a baseline daemon binary, measured beside --bin")
    ap.add_argument("--strace", action="store_true", help="count the daemon's syscalls per request")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--doc", default=DOC)
    args = ap.parse_args()
    daemons = {"default": (os.path.abspath(args.bin), []),
               "http.inline=false": (os.path.abspath(args.bin), ["http.inline=false"])}
    if args.before:
        daemons["before"] = (os.path.abspath(args.before), [])
    profile = "quick" if args.quick else "full"
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "profile": profile,
           "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    work = Workdir()
    try:
        measure(PROFILES[profile], work, daemons, out, args.strace)
    finally:
        work.cleanup()
    text = report(out, list(daemons))
    print(text)
    if not args.no_write:
        write_marked(args.doc, text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
