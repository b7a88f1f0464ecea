#!/usr/bin/python3
"""sandboxd benchmark harness (stdlib only).

Measures the daemon and its baselines side by side in one run and prints
ratios:

  1. one trivial execution per request, per language: sandboxd
     `POST /execute/<lang>` vs the bare interpreter vs the interpreter under
     bwrap (p50/p99 ms);
  2. throughput with 8 concurrent clients vs 8-way parallel bare spawns;
  3. the cheapest jailed execution sandboxd offers (perl `1`) vs
     `bwrap /bin/true` and bare `/bin/true`;
  4. sandboxes and contexts: warm context round trip, first call in a new
     sandbox, restore after a daemon restart as a function of journal
     length, daemon RSS with N idle sandboxes;
  5. the bridge API: /exec back to back, SSE output MB/s, parallel PUTs,
     a 10 MB file round trip, a PTY keystroke echo (bench/bridge.py);
  6. a new bridge sandbox + its first /exec, with and without the warm
     pool, beside a warm stateless execution (bench/bridge_pool.py);
  7. the controller API: execute beside the runtime API, and a new
     tenant's register → create → execute (bench/controller.py).

Usage (`make bench` runs the first form):

  /usr/bin/python3 bench/run.py --bin build/sandboxd          # full run, writes docs/benchmarks.md
  /usr/bin/python3 bench/run.py --bin build/sandboxd --quick --no-write   # smoke test, < 60 s

Every loop is bounded in count and in time; the daemon listens on
127.0.0.1 only and all data lives in temporary directories removed at exit.
"""

import argparse
import datetime
import http.client
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from harness import *  # noqa: F401,F403 (the building blocks)
from bridge import section_bridge
from bridge_pool import section_bridge_pool
from controller import section_controller
from report import compact, report, write_doc

ALL_SECTIONS = {"1", "2", "3", "4", "5", "6", "7"}


# ---------------------------------------------------------------- sections

def sid(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def paced(daemon, fn):
    """A sampler that first lets the daemon go idle (warm pool full), then times fn."""
    def run():
        daemon.settle()
        return fn()
    return run


def daemon_variants(p, daemons, path, code, expect, n):
    """The daemon rows: back-to-back (the headline), idle-paced, and pool.size=0."""
    main, nopool = daemons["main"], daemons.get("nopool")
    fn = exec_timer(main.client, path, code, expect)
    fn()  # correctness check before timing
    vs = [V("sandboxd", fn, n, main.settle),
          V("sandboxd-paced", paced(main, exec_timer(main.client, path, code, expect)), p["paced_n"]),
          V("health-paced", paced(main, health_timer(main.client)), p["paced_n"])]
    if daemons.get("canned"):
        vs.append(V("canned-paced", paced(main, daemons["canned"].timer()), p["paced_n"]))
    for key in ("ideal", "minimal"):
        if daemons.get(key):
            vs.append(V(f"{key}-paced", daemons[key].paced_timer(main), p["paced_n"]))
    if nopool:
        fn0 = exec_timer(nopool.client, path, code, expect)
        fn0()
        vs.append(V("sandboxd-nopool", fn0, p["nopool_n"]))
    return vs


def section_latency(p, daemons, out):
    """1. One trivial execution per request, per language."""
    rows = {}
    daemons = dict(daemons, canned=CannedHttp())
    for lang, code, expect, bare, matched in LANGS:
        path = f"/execute/{lang}"
        # No daemon between HTTP and the kernel, or a minimal eval loop: what
        # bounds the idle row (bench/ideal_server.c).
        floors = {"ideal": IdealServer.start(lang), "minimal": IdealServer.start(lang, minimal=True)}
        variants = daemon_variants(p, dict(daemons, **floors), path, code, expect, p["lat_n"])
        for name, argv in bare:
            variants.append(V(f"bare-{name}", spawn_timer(argv), p["lat_n"]))
            variants.append(V(f"bwrap-{name}", spawn_timer(BWRAP + argv), p["lat_n"]))
        # The idle pause slows everything on this VM (cold caches, halted
        # vCPUs: bench/idle_wake): the bare start after the same pause shows
        # by how much, next to the idle-daemon row.
        variants.append(V("bare-paced", paced(daemons["main"], spawn_timer(dict(bare)["default"])), p["paced_n"]))
        try:
            samples = interleaved(variants, p["lat_rounds"], p["lat_warm"], p["lat_budget_s"])
        finally:
            for floor in floors.values():
                if floor:
                    floor.close()
        rows[lang] = {
            "matched": matched,
            "commands": {**{f"bare-{n}": argv for n, argv in bare}, "bare-paced": dict(bare)["default"],
                         **{f"bwrap-{n}": BWRAP + argv for n, argv in bare},
                         "sandboxd": ["POST", path, code]},
            "stats": {k: summary(v) for k, v in samples.items() if v},
        }
        st = rows[lang]["stats"]
        extra = "".join(f"  {k[9:]} {fmt_ms(st[k]['p50'])} ms" for k in ("sandboxd-paced", "sandboxd-nopool") if k in st)
        print(f"  {lang:<10} sandboxd {fmt_ms(st['sandboxd']['p50'])} ms{extra}  bare {fmt_ms(st['bare-default']['p50'])} ms"
              f"  bwrap {fmt_ms(st['bwrap-default']['p50'])} ms  (n={st['sandboxd']['n']})", flush=True)
    daemons["canned"].close()
    out["latency"] = rows


def section_minimal(p, daemons, out):
    """3. Cheapest jailed execution: a jailed /bin/true over HTTP
    (`POST /execute/shell`, a jail of its own per request, no interpreter) and
    perl `1` vs bwrap /bin/true vs /bin/true."""
    variants = daemon_variants(p, daemons, "/execute/perl", "1", "1", p["min_n"])
    main = daemons["main"]
    shell = exec_timer(main.client, "/execute/shell", "/bin/true", None)
    shell()  # correctness check before timing
    variants += [V("bare", spawn_timer(["/bin/true"]), p["min_n"]),
                 V("bwrap", spawn_timer(BWRAP + ["/bin/true"]), p["min_n"]),
                 V(SHELL_ROW, shell, p["min_n"], main.settle)]
    samples = interleaved(variants, p["min_rounds"], 3, p["min_budget_s"])
    out["minimal"] = {k: summary(v) for k, v in samples.items() if v}
    jail_true_section(p, out)
    s = out["minimal"]
    print(f"  minimal    sandboxd perl 1 {fmt_ms(s['sandboxd']['p50'])} ms"
          f"  sandboxd shell /bin/true {fmt_ms(s[SHELL_ROW]['p50']) if SHELL_ROW in s else '-'} ms"
          f"  bwrap true {fmt_ms(s['bwrap']['p50'])} ms  true {fmt_ms(s['bare']['p50'])} ms", flush=True)


JAIL_TRUE = os.path.join(ROOT, "build", "bench", "jail_true")


def jail_true_section(p, out):
    """The jail itself, without HTTP or an interpreter: bench/jail_true.c
    times jail_spawn + reap of /bin/true (cgroups, mounts, seccomp included)
    interleaved with bwrap /bin/true and bare /bin/true."""
    if not os.path.exists(JAIL_TRUE) or os.geteuid() != 0:
        return
    n = max(50, 2 * p["min_n"])
    try:
        text = subprocess.run([JAIL_TRUE, str(n), os.path.join(ROOT, "src", "runtimes", "kernels")],
                              capture_output=True, text=True, timeout=300).stdout
    except (OSError, subprocess.TimeoutExpired):
        return
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            rows[parts[0]] = {"n": n, "p50": float(parts[1]), "p99": float(parts[2])}
    if {"jail_true", "bwrap_true", "bare_true"} <= set(rows):
        out["jail_true"] = rows
        print(f"  jail       /bin/true {fmt_ms(rows['jail_true']['p50'])} ms  bwrap {fmt_ms(rows['bwrap_true']['p50'])} ms",
              flush=True)


def section_throughput(p, daemon, out):
    """2. 8 concurrent clients vs 8-way parallel bare spawns, interleaved rounds."""
    def daemon_op():
        c = Client(daemon.port)

        def op():
            status, res = c.request("POST", "/execute/python", {"code": "1+1"})
            return status == 200 and isinstance(res, dict) and not res.get("error") and value_of(res) == "2"
        return op

    def spawn_op(argv):
        def factory():
            def op():
                return spawn_blocking(argv) == 0
            return op
        return factory

    variants = [("sandboxd", daemon_op),
                ("bare-fast", spawn_op(["/usr/bin/python3", "-S", "-c", "pass"])),
                ("bare-default", spawn_op(["/usr/bin/python3", "-c", "pass"]))]
    res = {k: {"rates": [], "errors": 0, "lats": []} for k, _ in variants}
    for r in range(p["tp_rounds"]):
        rot = r % len(variants)
        for k, factory in variants[rot:] + variants[:rot]:
            ok, errors, lats = window(factory, CONCURRENCY, p["tp_secs"])
            if k == "sandboxd":
                daemon.settle()
            res[k]["rates"].append(ok / p["tp_secs"])
            res[k]["errors"] += errors
            res[k]["lats"] += lats
    final = {}
    for k, v in res.items():
        st = summary(v["lats"])
        final[k] = {"rate": pct(v["rates"], 50), "rates": v["rates"], "errors": v["errors"],
                    "p50": st["p50"], "p99": st["p99"], "n": st["n"]}
    out["throughput"] = final
    print(f"  throughput sandboxd {final['sandboxd']['rate']:.1f}/s  bare -S {final['bare-fast']['rate']:.1f}/s"
          f"  bare {final['bare-default']['rate']:.1f}/s", flush=True)


def section_contexts(p, daemon, out):
    """4a warm context round trip, 4b first call in a new sandbox."""
    client = daemon.client
    daemon.settle()
    s = sid("bw")
    path = f"/languages/python/sandboxes/{s}/execute"
    check_exec(*client.request("POST", path, {"code": "x = 1"}), None, "context setup")
    fn = exec_timer(client, path, "x + 1", "2")
    samples = interleaved([V("warm", fn, p["ctx_n"])], 1, 10, p["ctx_budget_s"])["warm"]
    out["ctx_warm"] = summary(samples)

    # 4b: one untimed fresh sandbox first, so one-time daemon costs are not in the figure.
    check_exec(*client.request("POST", f"/languages/python/sandboxes/{sid('bn')}/execute", {"code": "x = 1"}),
               None, "new sandbox warm-up")
    firsts = []
    deadline = time.monotonic() + p["new_budget_s"]
    for _ in range(p["new_n"]):
        daemon.settle()
        t0 = time.perf_counter()
        status, res = client.request("POST", f"/languages/python/sandboxes/{sid('bn')}/execute", {"code": "x = 1"})
        firsts.append(time.perf_counter() - t0)
        check_exec(status, res, None, "first call in a new sandbox")
        if time.monotonic() > deadline:
            break
    out["ctx_new"] = summary(firsts)
    print(f"  contexts   warm {fmt_ms(out['ctx_warm']['p50'])} ms  new sandbox {fmt_ms(out['ctx_new']['p50'])} ms",
          flush=True)


def section_restore(p, work, binary, out):
    """4c restore time after SIGKILL + restart, by journal length."""
    d = work.daemon(binary).start()
    cells = p["restore_cells"]
    times = {k: [] for k in cells}
    ready, idle = [], []
    d.settle()
    rng = random.Random(1)
    deadline = time.monotonic() + p["restore_budget_s"]
    for _ in range(p["restore_restarts"]):
        c = Client(d.port)
        built = []
        for rep in range(p["restore_reps"]):
            for k in cells:
                s = sid(f"br{k}")
                path = f"/languages/python/sandboxes/{s}/execute"
                check_exec(*c.request("POST", path, {"code": "x = 1"}), None, "restore build")
                for _ in range(k - 1):
                    check_exec(*c.request("POST", path, {"code": "x = x + 1"}), None, "restore build")
                built.append((k, path))
        c.close()
        d.kill9()
        d.start()
        ready.append(d.ready_s)
        idle.append(d.ready_s + d.settle())
        c = Client(d.port)
        rng.shuffle(built)
        for k, path in built:
            t0 = time.perf_counter()
            status, res = c.request("POST", path, {"code": "x + 1"})
            times[k].append(time.perf_counter() - t0)
            check_exec(status, res, str(k + 1), f"restore of {k} cells")
            d.settle()
        c.close()
        if time.monotonic() > deadline:
            break
    d.stop()
    out["restore"] = {"cells": {str(k): summary(v) for k, v in times.items()},
                      "ready": summary(ready), "idle": summary(idle)}
    print("  restore    " + "  ".join(f"{k} cells {fmt_ms(out['restore']['cells'][str(k)]['p50'])} ms" for k in cells)
          + f"  restart→ready {fmt_ms(out['restore']['ready']['p50'])} ms", flush=True)


def rng_sample(n, k=50):
    """k indices below n, the same in every run."""
    return random.Random(13).sample(range(n), min(k, n))


def dir_parts(path):
    """{top-level entry: allocated bytes} of a data directory."""
    parts = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        parts[name] = dir_bytes(full) if os.path.isdir(full) else os.lstat(full).st_blocks * 512
    return parts


def section_idle(p, work, binary, out):
    """4d daemon RSS with 0 and N idle sandboxes (GET /languages/python/sandboxes/<id>)."""
    # The default caps (sandbox.max_sandboxes 1000, max_disk_bytes 16 GiB of
    # workspace reservations) would refuse most of the N: lift them here.
    n = p["idle_n"]
    d = work.daemon(binary, sets=[f"sandbox.max_sandboxes={n + 10}",
                                  f"sandbox.max_disk_bytes={(n + 10) * 64 * 1024 * 1024}"]).start()
    c = Client(d.port)
    c.request("GET", "/languages")
    d.settle()
    rss0 = d.rss()
    tree0 = tree_usage(d.proc.pid) + (tree_pss_kb(d.proc.pid),)
    disk0 = dir_bytes(d.data_dir)
    lats = []
    t_start = time.perf_counter()
    deadline = time.monotonic() + p["idle_budget_s"]
    for i in range(p["idle_n"]):
        t0 = time.perf_counter()
        status, res = c.request("GET", f"/languages/python/sandboxes/bi-{i:06d}")
        lats.append(time.perf_counter() - t0)
        if status != 200 or not isinstance(res, dict) or res.get("id") != f"bi-{i:06d}":
            raise BenchError(f"sandbox create {i}: HTTP {status}: {str(res)[:300]}")
        if time.monotonic() > deadline:
            break
    total = time.perf_counter() - t_start
    d.settle()
    rss1 = d.rss()
    tree1 = tree_usage(d.proc.pid) + (tree_pss_kb(d.proc.pid),)
    disk1 = dir_bytes(d.data_dir)
    parts1 = dir_parts(d.data_dir)
    # Every sandbox is still there and the same (an unloaded one loads back from its row).
    for i in rng_sample(len(lats)):
        status, res = c.request("GET", f"/languages/python/sandboxes/bi-{i:06d}")
        if status != 200 or not isinstance(res, dict) or res.get("id") != f"bi-{i:06d}":
            raise BenchError(f"sandbox {i} read back: HTTP {status}: {str(res)[:300]}")
    c.close()
    d.stop()
    out["idle"] = {"target": p["idle_n"], "created": len(lats), "total_s": total, "create": summary(lats),
                   "rss0_kb": rss0, "rss1_kb": rss1, "disk0": disk0, "disk1": disk1, "parts1": parts1,
                   "jails0": {"n": tree0[1], "rss_kb": tree0[2], "pss_kb": tree0[3]},
                   "jails1": {"n": tree1[1], "rss_kb": tree1[2], "pss_kb": tree1[3]}}
    print(f"  idle       {len(lats)} sandboxes in {total:.1f} s; VmRSS {rss0.get('VmRSS', 0) / 1024:.1f} →"
          f" {rss1.get('VmRSS', 0) / 1024:.1f} MiB", flush=True)


# ---------------------------------------------------------------- machine facts

def cpu_pressure():
    """'some' CPU pressure (PSI avg10/avg60, %) and the load average: how busy
    the machine was besides us. Figures are inflated when these are high."""
    psi = "?"
    try:
        with open("/proc/pressure/cpu") as f:
            kv = dict(x.split("=") for x in f.readline().split()[1:])
        psi = f"{float(kv['avg10']):.0f} % / {float(kv['avg60']):.0f} %"
    except (OSError, KeyError, ValueError):
        pass
    return {"psi": psi, "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def snapshot_binary(binary, work):
    """Copies the binary, the fork-server shim next to it and its kernels
    (BIN/../src/runtimes/kernels, where the daemon looks by default) to a private directory, so that a rebuild during
    the run cannot mix two builds (e.g. across the restore section's restarts).
    Returns (path to run, sha256 prefix)."""
    import hashlib
    kernels = os.path.join(os.path.dirname(os.path.dirname(binary)), "src", "runtimes", "kernels")
    if not os.path.isdir(kernels):
        return binary, hashlib.sha256(open(binary, "rb").read()).hexdigest()[:12]
    base = tempfile.mkdtemp(prefix="sandboxd-bench-bin-")
    work.dirs.append(base)
    dst = os.path.join(base, "build", "sandboxd")
    os.makedirs(os.path.dirname(dst))
    for attempt in range(30):  # the binary may be being relinked right now
        shutil.copy2(binary, dst)
        if subprocess.run([dst, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=CLEAN_ENV).returncode == 0:
            break
        time.sleep(1)
    else:
        raise BenchError(f"{binary} --version keeps failing")
    shutil.copytree(kernels, os.path.join(base, "src", "runtimes", "kernels"))
    shim = os.path.join(os.path.dirname(binary), "libsandboxd-forkserver.so")
    if os.path.exists(shim):  # without it the daemon runs without templates
        shutil.copy2(shim, os.path.dirname(dst))
    init = os.path.join(os.path.dirname(binary), "sandboxd-init")
    if os.path.exists(init):  # without it each jail's pid 1 stays in-process
        shutil.copy2(init, os.path.dirname(dst))
    with open(dst, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    return dst, digest


def machine(binary):
    facts = {}
    facts["nproc"] = len(os.sched_getaffinity(0))
    try:
        with open("/proc/cpuinfo") as f:
            facts["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        facts["cpu"] = "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1])
        facts["memory"] = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        facts["memory"] = "?"
    u = os.uname()
    facts["kernel"] = f"{u.sysname} {u.release} {u.machine}"
    try:
        with open("/etc/os-release") as f:
            facts["os"] = next((ln.split("=", 1)[1].strip().strip('"') for ln in f if ln.startswith("PRETTY_NAME")), "?")
    except OSError:
        facts["os"] = "?"
    facts["sandboxd"] = run_text([binary, "--version"])
    facts["python3"] = run_text(["/usr/bin/python3", "--version"])
    facts["node"] = run_text(["/usr/bin/node", "--version"])
    facts["perl"] = run_text(["/usr/bin/perl", "-e", "print qq(perl $^V\\n)"])
    facts["ruby"] = run_text(["/usr/bin/ruby", "--version"])
    facts["bwrap"] = run_text(["/usr/bin/bwrap", "--version"])
    facts["harness"] = f"{sys.executable} {sys.version.split()[0]}"
    return facts


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "sandboxd"), help="sandboxd binary")
    ap.add_argument("--quick", action="store_true", help="short run (smoke test, < 60 s)")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--doc", default=DOC, help="markdown file to update (default docs/benchmarks.md)")
    ap.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to every daemon (repeatable); recorded in the report")
    ap.add_argument("--sections", default=",".join(sorted(ALL_SECTIONS)),
                    help="comma-separated subset of 1,2,3,4,5,6,7 (partial runs never write the doc)")
    args = ap.parse_args()

    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        print(f"bench: {binary} is not an executable; build it with `make build/sandboxd`", file=sys.stderr)
        return 2
    for tool in ("/usr/bin/python3", "/usr/bin/node", "/usr/bin/perl", "/usr/bin/ruby", "/usr/bin/bwrap"):
        if not os.access(tool, os.X_OK):
            print(f"bench: {tool} is missing", file=sys.stderr)
            return 2
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    profile = "quick" if args.quick else "full"
    p = PROFILES[profile]

    def on_alarm(signum, frame):
        raise BenchError(f"total time budget of {p['total_budget_s']} s exceeded")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(p["total_budget_s"])

    t_start = time.monotonic()
    work = Workdir(args.sets)
    try:
        run_bin, digest = snapshot_binary(binary, work)
    except (OSError, BenchError) as e:
        work.cleanup()
        print(f"bench: cannot snapshot {binary}: {e}", file=sys.stderr)
        return 2
    out = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "profile": profile, "sets": args.sets, "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()}}
    out["machine"] = machine(run_bin)
    out["machine"]["sandboxd"] += f" (binary sha256 {digest}…)"
    out["busy"] = {"start": cpu_pressure()}
    print(f"sandboxd bench ({profile}): {out['machine']['sandboxd']}, {out['machine']['nproc']} CPUs, "
          f"{out['machine']['kernel']}, load {out['busy']['start']['loadavg']}, CPU pressure "
          f"{out['busy']['start']['psi']}", flush=True)
    if os.getloadavg()[0] > 0.5:
        print("bench: warning: the machine is busy (load above 0.5); figures will be inflated and noisy",
              file=sys.stderr, flush=True)

    failures = []

    def attempt(name, fn, *a):
        t0 = time.monotonic()
        try:
            fn(*a)
            out.setdefault("section_s", {})[name] = round(time.monotonic() - t0, 1)
            print(f"    ({name}: {time.monotonic() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - report every section's failure, keep going
            failures.append(f"{name}: {e.__class__.__name__}: {e}")
            print(f"  FAILED {name}: {e}", file=sys.stderr, flush=True)
            for dm in work.daemons:
                state = (f"running (threads: {thread_states(dm.proc.pid)})" if dm.proc and dm.proc.poll() is None
                         else f"exited {dm.proc.returncode if dm.proc else '?'}")
                tail = "\n    ".join(dm.read_log().splitlines()[-12:])
                print(f"  daemon {' '.join(dm.sets) or '(defaults)'} on port {dm.port}: {state}\n    {tail}",
                      file=sys.stderr, flush=True)
            if isinstance(e, BenchError) and "time budget" in str(e):
                raise

    try:
        if sections & {"1", "2", "3", "4"}:
            daemons = {}
            try:
                daemons["main"] = work.daemon(run_bin).start()
            except Exception as e:  # noqa: BLE001
                failures.append(f"start: {e}")
            if "main" in daemons and sections & {"1", "3"}:
                # A second daemon with the warm pool off: the cold jailed spawn, for the extra rows.
                # pool.zygote=0 too: python's fork-server template is also a warm start.
                for cold in (["pool.size=0", "pool.zygote=0"], ["pool.size=0"]):
                    try:
                        daemons["nopool"] = work.daemon(run_bin, sets=cold).start()
                        out["cold_sets"] = cold
                        out.pop("nopool_error", None)
                        break
                    except Exception as e:  # noqa: BLE001
                        out["nopool_error"] = str(e).splitlines()[0]
                if "nopool_error" in out:
                    print(f"  (no cold-daemon rows: {out['nopool_error']})", file=sys.stderr, flush=True)
            if "main" in daemons:
                d = daemons["main"]
                d.settle()  # let the warm pools fill before anything is timed
                if "1" in sections:
                    attempt("1 latency", section_latency, p, daemons, out)
                if "3" in sections:
                    attempt("3 minimal", section_minimal, p, daemons, out)
                if "nopool" in daemons:
                    daemons["nopool"].stop()
                if "4" in sections:
                    attempt("4a/4b contexts", section_contexts, p, d, out)
                out["http"] = {"opened": d.client.opened, "requests": d.client.requests}
                if "2" in sections:
                    d.settle()
                    attempt("2 throughput", section_throughput, p, d, out)
                d.stop()
            if "4" in sections:
                attempt("4c restore", section_restore, p, work, run_bin, out)
                attempt("4d idle", section_idle, p, work, run_bin, out)
        if "5" in sections:
            attempt("5 bridge", section_bridge, profile, work, run_bin, out)
        if "6" in sections:
            attempt("6 bridge warm pool", section_bridge_pool, work, run_bin, out)
        if "7" in sections:
            attempt("7 controller", section_controller, profile, work, run_bin, out)
    except BenchError as e:
        failures.append(str(e))
    finally:
        signal.alarm(0)
        work.cleanup()

    out["notes"] = [n for dm in work.daemons for n in dm.notes]
    for n in out["notes"]:
        print(f"bench: note: {n}", file=sys.stderr)
    elapsed = time.monotonic() - t_start
    out["elapsed_s"] = elapsed
    out["busy"]["end"] = cpu_pressure()
    out["failures"] = failures
    print(compact(out))
    print(f"\n{profile} run took {elapsed:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    if failures:
        print("bench: FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    if not args.no_write:
        if sections != ALL_SECTIONS:
            print("bench: partial run (--sections), docs not written", file=sys.stderr)
        else:
            write_doc(args.doc, report(out, profile, binary, elapsed))
            print(f"wrote {os.path.relpath(args.doc, os.getcwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
