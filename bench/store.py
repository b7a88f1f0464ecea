#!/usr/bin/python3
"""Store operations per second: SQLite vs PostgreSQL (issue 16, item 7).

Runs build/bench/store_ops (bench/store_ops.c: the public store interface,
every call checked) once on a fresh SQLite file and once on a throwaway
PostgreSQL cluster (tests/pg/pg_cluster.sh: Debian's initdb/pg_ctl, a unix
socket in a temp dir; fsync turned back on, as SQLite's synchronous=FULL),
and prints a markdown
table with the ratio. Without Debian's server binaries the PostgreSQL column
is skipped with a message (exit status 0); any failed operation is exit 1.

    /usr/bin/python3 bench/store.py --bin build/bench/store_ops [-n 2000] [--threads 4] [--repeat 3]

With --repeat R each backend runs R times (SQLite and PostgreSQL
alternating, a fresh database each time) and each figure is the median.
"""
import argparse
import statistics
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_CLUSTER = os.path.join(ROOT, "tests", "pg", "pg_cluster.sh")

ROWS = [
    ("sandbox.put", "`store_sandbox_put` (a new sandbox row)"),
    ("sandbox.get", "`store_sandbox_get` (every routed request reads its sandbox)"),
    ("sandbox.touch", "`store_sandbox_touch` (every request renews the expiry)"),
    ("sandbox.claim", "`store_sandbox_claim` (the lease: one conditional UPDATE)"),
    ("cell.append", "`store_cell_append` (a context cell's journal entry)"),
]


def run_ops(binary, url, n, threads):
    """{op: ops/s} from one store_ops run; None for a skipped op."""
    p = subprocess.run([binary, url, str(n), str(threads)], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"store.py: store_ops on {url.split('?')[0]} failed: {p.stderr.strip() or p.returncode}")
    out = {}
    for line in p.stdout.splitlines():
        f = line.split()
        out[f[0]] = None if f[1] == "skipped" else float(f[3])
    return out


def median_of(runs):
    """{op: median ops/s} over runs; None where an op was skipped."""
    out = {}
    for op in runs[0]:
        vals = [r[op] for r in runs if r.get(op) is not None]
        out[op] = statistics.median(vals) if vals else None
    return out


def pg_dir():
    """A directory pg_cluster.sh creates and hands to the postgres account:
    beside, not inside, our private (0700) temp dir, which that account
    could not enter."""
    return os.path.join(tempfile.gettempdir(), f"sbx-pg-bench-{os.getpid()}")


def pg_start():
    """(url, None) or (None, why)."""
    p = subprocess.run([PG_CLUSTER, "start", pg_dir()], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["cannot start"])[-1]
    url = p.stdout.strip()
    # The test cluster runs with fsync=off; SQLite runs synchronous=FULL.
    # Durable on both sides, or the comparison measures the disk only.
    psql = shutil.which("psql") or "psql"
    q = subprocess.run([psql, "-X", "-q", url, "-c", "ALTER SYSTEM SET fsync = on", "-c", "SELECT pg_reload_conf()",
                        "-c", "SHOW fsync"], capture_output=True, text=True, timeout=60)
    if q.returncode != 0 or "on" not in q.stdout:
        return None, f"cannot turn fsync on: {q.stderr.strip() or q.stdout.strip()}"
    return url, None


def fmt(v):
    return "–" if v is None else f"{v:,.0f}"


def table(sq, pg, n, threads, pg_why, repeat):
    rows = ROWS + [(f"sandbox.get_x{threads}", f"`store_sandbox_get`, {threads} threads at once (total)")]
    lines = ["| operation | SQLite ops/s | PostgreSQL ops/s | PostgreSQL ÷ SQLite |",
             "| --- | ---: | ---: | ---: |"]
    for op, label in rows:
        a, b = sq.get(op), (pg or {}).get(op)
        ratio = f"{b / a:.2f}×" if a and b else "–"
        if op == "sandbox.claim" and a is None:
            label += " — not in this build (cluster store not merged)"
        lines.append(f"| {label} | {fmt(a)} | {fmt(b)} | {ratio} |")
    lines.append("")
    lines.append(f"N = {n} per operation ({n} × {threads} for the parallel row), one process, sequential calls, "
                 f"median of {repeat} run(s) per backend; "
                 "both durable (SQLite WAL + synchronous=FULL, PostgreSQL fsync=on, synchronous_commit=on), "
                 "PostgreSQL over a unix socket on the same machine.")
    if pg_why:
        lines.append(f"PostgreSQL skipped: {pg_why}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bench", "store_ops"))
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"store.py: {a.bin} is not built (make build/bench/store_ops)")
    sq_runs, pg_runs, why = [], [], None
    for i in range(a.repeat):
        tmp = tempfile.mkdtemp(prefix="sbx-store-bench-")
        try:
            sq_runs.append(run_ops(a.bin, "sqlite:" + os.path.join(tmp, "bench.db"), a.n, a.threads))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if why:
            continue
        url, why = pg_start()
        if not url:
            print(f"store.py: PostgreSQL not measured: {why}", file=sys.stderr)
            continue
        try:
            pg_runs.append(run_ops(a.bin, url, a.n, a.threads))
        finally:
            subprocess.run([PG_CLUSTER, "stop", pg_dir()], capture_output=True, timeout=120)
    print(table(median_of(sq_runs), median_of(pg_runs) if pg_runs else None, a.n, a.threads, why, a.repeat))


if __name__ == "__main__":
    main()
