#!/usr/bin/python3
"""8-client throughput of stateless python `1+1` with a CPU breakdown.

Usage: bench/thru.py [--binary B] [--secs S] [--rounds N] [--set K=V ...] [--no-bare]

Alternates windows of the daemon (8 keep-alive clients, POST /execute/python)
and of bare `python3 -S -c pass` (8 threads, Popen + blocking wait). For the
daemon windows it also reports, per request: CPU of the daemon (per thread),
of the jails (cpuacct of the daemon's cgroup root: template + forked
executors), and minor faults of the jails (memory.stat of that root).
"""
import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CLEAN_ENV, Client, Workdir, proc_table, value_of  # noqa: E402

CONC = 8
TCK = os.sysconf("SC_CLK_TCK")


def window(make_op, secs):
    stop = time.monotonic() + secs
    lats, errors = [], [0]
    lock = threading.Lock()

    def worker():
        op = make_op()
        mine = []
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            ok = op()
            dt = time.perf_counter() - t0
            if ok:
                mine.append(dt)
            else:
                errors[0] += 1
        with lock:
            lats.extend(mine)

    ts = [threading.Thread(target=worker) for _ in range(CONC)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return lats, errors[0], time.perf_counter() - t0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100 * len(xs)))] if xs else float("nan")


def thread_cpu(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        out[f"{name}"] = out.get(name, 0) + (int(f[11]) + int(f[12])) / TCK
    return out


def kthreads_cpu():
    """CPU seconds of kernel threads (children of kthreadd): namespace and
    mount teardown, RCU callbacks run there, outside every cgroup."""
    return sum(t for pid, (ppid, t, _) in proc_table().items() if ppid == 2 or pid == 2) / TCK


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def mem_stat(path, key):
    try:
        with open(path) as f:
            for line in f:
                k, v = line.split()
                if k == key:
                    return int(v)
    except OSError:
        pass
    return 0


def find_root(pid):
    """The daemon's cgroup root per controller ("sandboxd-<pid>-<ms>", jail/jail.c)."""
    prefix = f"sandboxd-{pid}-"
    for ctrl in ("cpuacct", "memory"):
        for dirpath, dirnames, _ in os.walk(f"/sys/fs/cgroup/{ctrl}"):
            hit = [n for n in dirnames if n.startswith(prefix)]
            if hit:
                yield ctrl, os.path.join(dirpath, hit[0])
                break
            dirnames[:] = [n for n in dirnames if not n.startswith(("x", "s"))] if dirpath.count("/") < 7 else []


def jail_counters(roots):
    cpu = sum(read_int(os.path.join(p, "cpuacct.usage")) for c, p in roots if c == "cpuacct") / 1e9
    flt = sum(mem_stat(os.path.join(p, "memory.stat"), "total_pgfault") for c, p in roots if c == "memory")
    return cpu, flt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "build", "sandboxd"))
    ap.add_argument("--secs", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--no-bare", action="store_true")
    a = ap.parse_args()
    wd = Workdir()
    try:
        d = wd.daemon(os.path.abspath(a.binary), sets=a.set).start()

        def daemon_op():
            c = Client(d.port)

            def op():
                st, res = c.request("POST", "/execute/python", {"code": "1+1"})
                return st == 200 and isinstance(res, dict) and not res.get("error") and value_of(res) == "2"
            return op

        def bare_op():
            def op():
                p = subprocess.Popen(["/usr/bin/python3", "-S", "-c", "pass"], env=CLEAN_ENV,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd="/")
                return p.wait() == 0
            return op

        window(daemon_op, 1.0)  # warm-up: pools grown
        roots = list(find_root(d.proc.pid))
        for r in range(a.rounds):
            t0 = thread_cpu(d.proc.pid)
            j0 = jail_counters(roots)
            k0, c0 = kthreads_cpu(), os.times()
            lats, errs, el = window(daemon_op, a.secs)
            t1 = thread_cpu(d.proc.pid)
            j1 = jail_counters(roots)
            k1, c1 = kthreads_cpu(), os.times()
            n = len(lats)
            dcpu = {k: (t1.get(k, 0) - t0.get(k, 0)) * 1e3 / max(n, 1) for k in t1}
            tot = sum(dcpu.values())
            print(f"daemon  {n / el:7.1f}/s p50 {pct(lats, 50) * 1e3:6.1f} ms p99 {pct(lats, 99) * 1e3:6.1f} ms"
                  f" err {errs}  daemon cpu/req {tot:.2f} ms "
                  + " ".join(f"{k}={v:.2f}" for k, v in sorted(dcpu.items(), key=lambda x: -x[1]) if v > 0.005),
                  flush=True)
            if roots:
                print(f"        jails cpu/req {(j1[0] - j0[0]) * 1e3 / max(n, 1):.2f} ms"
                      f"  faults/req {(j1[1] - j0[1]) / max(n, 1):.0f}"
                      f"  kthreads cpu/req {(k1 - k0) * 1e3 / max(n, 1):.2f} ms"
                      f"  client cpu/req {(c1.user + c1.system - c0.user - c0.system) * 1e3 / max(n, 1):.2f} ms",
                      flush=True)
            if not a.no_bare:
                lats, errs, el = window(bare_op, a.secs)
                print(f"bare -S {len(lats) / el:7.1f}/s p50 {pct(lats, 50) * 1e3:6.1f} ms "
                      f"p99 {pct(lats, 99) * 1e3:6.1f} ms err {errs}", flush=True)
    finally:
        wd.cleanup()


if __name__ == "__main__":
    main()
