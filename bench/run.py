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
     length, daemon RSS with N idle sandboxes.

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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
CLEAN_ENV = {"PATH": "/usr/bin:/bin"}  # what `env -i PATH=/usr/bin:/bin` gives
CONCURRENCY = 8
LOG_LEVEL = os.environ.get("BENCH_DAEMON_LOG_LEVEL", "warn")  # daemon logs go to DATA_DIR/daemon.log

BWRAP = ["/usr/bin/bwrap", "--unshare-all", "--die-with-parent",
         "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
         "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
         "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]

# language → (code sent to the daemon, expected text result,
#             [(variant, argv of the bare interpreter)], variant the daemon's kernel matches)
# The daemon's kernels run `python3 -I` (site imported), `ruby --disable-gems`,
# plain node and perl (docs/kernel-protocol.md), hence the "matched" variant.
LANGS = [
    ("python", "1+1", "2", [("default", ["/usr/bin/python3", "-c", "1+1"]),
                            ("fast", ["/usr/bin/python3", "-S", "-c", "1+1"])], "default"),
    ("javascript", "1+1", "2", [("default", ["/usr/bin/node", "-e", "1+1"])], "default"),
    ("perl", "1+1", "2", [("default", ["/usr/bin/perl", "-e", "1+1"])], "default"),
    ("ruby", "1+1", "2", [("default", ["/usr/bin/ruby", "-e", "1+1"]),
                          ("fast", ["/usr/bin/ruby", "--disable-gems", "-e", "1+1"])], "fast"),
]

ROW_ORDER = ["bare-default", "bare-fast", "bwrap-default", "bwrap-fast",
             "sandboxd", "sandboxd-paced", "sandboxd-nopool"]
DAEMON_ROWS = {"sandboxd": "sandboxd, back-to-back",
               "sandboxd-paced": "sandboxd, idle daemon",
               "sandboxd-nopool": "sandboxd, no warm pool"}

PROFILES = {
    "full": dict(
        lat_n=100, lat_rounds=5, lat_warm=5, lat_budget_s=75,      # section 1, per language
        paced_n=25, nopool_n=40,                                    # extra daemon rows, per language
        tp_rounds=3, tp_secs=5.0,                                   # section 2: 3 × 5 s per variant
        min_n=200, min_rounds=5, min_budget_s=30,                   # section 3
        ctx_n=200, ctx_budget_s=30,                                 # 4a
        new_n=20, new_budget_s=60,                                  # 4b
        restore_restarts=2, restore_reps=5, restore_cells=(1, 10, 50), restore_budget_s=150,  # 4c
        idle_n=10000, idle_budget_s=240,                            # 4d
        total_budget_s=900),
    "quick": dict(
        lat_n=4, lat_rounds=2, lat_warm=1, lat_budget_s=4,
        paced_n=2, nopool_n=2,
        tp_rounds=1, tp_secs=3.0,
        min_n=8, min_rounds=2, min_budget_s=4,
        ctx_n=20, ctx_budget_s=5,
        new_n=3, new_budget_s=10,
        restore_restarts=1, restore_reps=1, restore_cells=(1, 10, 50), restore_budget_s=20,
        idle_n=1000, idle_budget_s=20,
        total_budget_s=110),
}


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- statistics

def pct(xs, p):
    """Percentile with linear interpolation between closest ranks."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100.0
    f = int(math.floor(k))
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def summary(xs):
    """Seconds → dict of ms figures."""
    ms = [x * 1000.0 for x in xs]
    return {"n": len(ms), "p50": pct(ms, 50), "p99": pct(ms, 99), "min": min(ms) if ms else float("nan"),
            "max": max(ms) if ms else float("nan")}


def ratio(a, b):
    if not b or b != b or a != a:
        return float("nan")
    return a / b


def fmt_ms(v):
    if v != v:
        return "–"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def fmt_x(v):
    if v != v:
        return "–"
    return f"{v:.2f}×" if v < 10 else f"{v:.1f}×"


# ---------------------------------------------------------------- processes

def run_text(argv, timeout=20):
    try:
        p = subprocess.run(argv, env=CLEAN_ENV, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout, cwd="/")
        return (p.stdout or p.stderr).decode(errors="replace").strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        return f"unavailable ({e.__class__.__name__})"


def spawn_timer(argv):
    """A sampler: one spawn of argv with a clean env, timed around subprocess.run."""
    def fn():
        t0 = time.perf_counter()
        p = subprocess.run(argv, env=CLEAN_ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, cwd="/", timeout=60)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            again = subprocess.run(argv, env=CLEAN_ENV, stdin=subprocess.DEVNULL, capture_output=True,
                                   cwd="/", timeout=60)
            raise BenchError(f"{' '.join(argv)} exited {p.returncode}: {again.stderr.decode(errors='replace')[-500:]}")
        return dt
    return fn


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def proc_table():
    """pid → (ppid, CPU ticks incl. reaped children, RSS pages) for every process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                st = f.read()
        except OSError:
            continue
        f = st[st.rindex(")") + 2:].split()
        # after "pid (comm) ": state ppid ... utime(14) stime cutime cstime ... rss(24)
        table[int(name)] = (int(f[1]), sum(int(x) for x in f[11:15]), int(f[21]))
    return table


def tree_usage(pid):
    """(CPU ticks, number of descendants, RSS KiB of the descendants) of pid's process tree.
    The jails are the daemon's descendants; reaped ones count in cutime/cstime."""
    table = proc_table()
    kids = {}
    for p, (pp, _, _) in table.items():
        kids.setdefault(pp, []).append(p)
    ticks = table.get(pid, (0, 0, 0))[1]
    n = rss = 0
    todo = list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        _, t, r = table[p]
        ticks += t
        n += 1
        rss += r
        todo += kids.get(p, [])
    return ticks, n, rss * (os.sysconf("SC_PAGE_SIZE") // 1024)


def tree_pss_kb(pid):
    """Proportional set size (shared pages split between sharers) of pid's descendants."""
    table = proc_table()
    kids = {}
    for p, (pp, _, _) in table.items():
        kids.setdefault(pp, []).append(p)
    total, todo = 0, list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        todo += kids.get(p, [])
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next((int(ln.split()[1]) for ln in f if ln.startswith("Pss:")), 0)
        except (OSError, ValueError):
            pass
    return total


def settle(pid, quiet_s=0.12, max_s=8.0):
    """Waits until pid's process tree has used no CPU for quiet_s (the warm
    pool refilled, used jails reaped). Returns the seconds waited."""
    t0 = time.monotonic()
    last, since = None, t0
    while time.monotonic() - t0 < max_s:
        ticks = tree_usage(pid)[0]
        now = time.monotonic()
        if ticks != last:
            last, since = ticks, now
        elif now - since >= quiet_s:
            break
        time.sleep(0.03)
    return time.monotonic() - t0


def thread_states(pid):
    """'comm:wchan' of each thread, for a note when the daemon hangs."""
    out = []
    try:
        for t in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            try:
                with open(f"/proc/{pid}/task/{t}/wchan") as f:
                    out.append(f.read().strip() or "running")
            except OSError:
                pass
    except OSError:
        return "?"
    kids = [p for p, (pp, _, _) in proc_table().items() if pp == pid]
    return ", ".join(out) + (f"; {len(kids)} child process(es) left" if kids else "")


def dir_bytes(path):
    total = 0
    for dp, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dp, name)).st_blocks * 512
            except OSError:
                pass
    return total


def unmount_under(path):
    """Lazily unmounts whatever is still mounted below path (workspace images
    left behind by a SIGKILLed daemon). Only our own temporary directories."""
    real = os.path.realpath(path) + "/"
    mps = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 4:
                    mp = parts[4].replace("\\040", " ")
                    if mp.startswith(real):
                        mps.append(mp)
    except OSError:
        return
    for mp in sorted(mps, key=len, reverse=True):
        subprocess.run(["umount", "-l", mp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---------------------------------------------------------------- HTTP client

class Client:
    """One keep-alive http.client connection to the daemon."""

    def __init__(self, port, timeout=45):  # > the daemon's default wall limit (30 s)
        self.port = port
        self.timeout = timeout
        self.conn = None
        self.opened = 0
        self.requests = 0

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                self.opened += 1
            try:
                self.conn.request(method, path, body=data, headers=hdrs)
                resp = self.conn.getresponse()
                payload = resp.read()
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest,
                    BrokenPipeError, ConnectionResetError):
                # The server closed an idle keep-alive connection: reconnect once.
                self.close()
                if attempt:
                    raise
                continue
            if resp.will_close:
                self.close()
            self.requests += 1
            try:
                parsed = json.loads(payload) if payload else None
            except ValueError:
                parsed = payload
            return resp.status, parsed
        raise BenchError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def value_of(res):
    r = res.get("results") or []
    if not r:
        return None
    return r[0].get("text", r[0].get("json"))


def check_exec(status, res, expect, what):
    if status != 200 or not isinstance(res, dict):
        raise BenchError(f"{what}: HTTP {status}: {str(res)[:400]}")
    if res.get("error"):
        raise BenchError(f"{what}: execution error: {json.dumps(res['error'])[:400]}")
    if expect is not None and value_of(res) != expect:
        raise BenchError(f"{what}: expected {expect!r}, got {value_of(res)!r} in {json.dumps(res)[:400]}")
    return res


def exec_timer(client, path, code, expect):
    def fn():
        t0 = time.perf_counter()
        status, res = client.request("POST", path, {"code": code})
        dt = time.perf_counter() - t0
        check_exec(status, res, expect, f"POST {path} {code!r}")
        return dt
    return fn


# ---------------------------------------------------------------- daemon

class Daemon:
    def __init__(self, binary, data_dir, sets=()):
        self.binary = binary
        self.sets = list(sets)
        self.data_dir = data_dir
        self.proc = None
        self.port = None
        self.log_path = os.path.join(data_dir, "daemon.log")
        self.ready_s = None
        self.client = None
        self.notes = []

    def start(self, timeout=30):
        self.port = free_port()
        args = [self.binary, "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data_dir,
                "--log-level", LOG_LEVEL]
        for kv in self.sets:
            args += ["--set", kv]
        log = open(self.log_path, "ab")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                     env=CLEAN_ENV, cwd=ROOT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"daemon exited with {self.proc.returncode}:\n{self.read_log()}")
            try:
                c = Client(self.port, timeout=5)
                status, _ = c.request("GET", "/health")
                c.close()
                if status == 200:
                    self.ready_s = time.perf_counter() - t0
                    if self.client:
                        self.client.close()
                    self.client = Client(self.port)
                    return self
            except OSError:
                pass
            time.sleep(0.01)
        raise BenchError("daemon not ready in time:\n" + self.read_log())

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-3000:]
        except OSError:
            return ""

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL after timeout; anything but a clean exit 0 is noted."""
        if self.client:
            self.client.close()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.notes.append(f"daemon pid {self.proc.pid} did not exit within {timeout} s of SIGTERM "
                                  f"(threads: {thread_states(self.proc.pid)}); SIGKILLed")
                self.proc.kill()
                self.proc.wait()
                return
            if self.proc.returncode != 0:
                self.notes.append(f"daemon pid {self.proc.pid} exited {self.proc.returncode} on SIGTERM")

    def rss(self):
        return proc_status(self.proc.pid)

    def settle(self):
        return settle(self.proc.pid)


class Workdir:
    """Temporary data directories, unmounted and removed at exit."""

    def __init__(self, sets=()):
        self.dirs = []
        self.daemons = []
        self.sets = list(sets)  # --set KEY=VALUE for every daemon

    def daemon(self, binary, data_dir=None, sets=()):
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="sandboxd-bench-")
            self.dirs.append(data_dir)
        d = Daemon(binary, data_dir, list(self.sets) + list(sets))
        self.daemons.append(d)
        return d

    def cleanup(self):
        for d in self.daemons:
            try:
                d.stop()
            except Exception:  # noqa: BLE001 - best effort at exit
                pass
        for path in self.dirs:
            unmount_under(path)
            shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------- samplers

class V:
    """One row of an interleaved measurement: fn() returns seconds.
    settle: called after each of this row's blocks (the daemon's background
    work — pool refill, reaping — must not land on the next row's samples)."""

    def __init__(self, key, fn, n, settle=None):
        self.key, self.fn, self.n, self.settle = key, fn, n, settle


def interleaved(variants, rounds, warm, budget_s):
    """Runs every row's sampler v.n times, in `rounds` blocks whose order
    rotates, so slow drift (other load, page cache) hits every row alike.
    Stops after the current round once budget_s is spent."""
    samples = {v.key: [] for v in variants}
    for v in variants:
        for _ in range(warm):
            v.fn()
        if v.settle:
            v.settle()
    deadline = time.monotonic() + budget_s
    r = 0
    while any(len(samples[v.key]) < v.n for v in variants):
        rot = r % len(variants)
        for v in variants[rot:] + variants[:rot]:
            per = max(1, math.ceil(v.n / rounds))
            for _ in range(min(per, v.n - len(samples[v.key]))):
                samples[v.key].append(v.fn())
            if v.settle:
                v.settle()
        r += 1
        if time.monotonic() > deadline:
            break
    return samples


def window(op_factory, conc, secs):
    """conc threads repeat op() for secs seconds; only operations that both
    start and finish inside the window count. Returns (ok, errors, latencies)."""
    barrier = threading.Barrier(conc + 1)
    state = {"end": 0.0}
    results = [None] * conc
    failures = []

    def worker(i):
        ok, errors, lats = 0, 0, []
        try:
            op = op_factory()
            op()  # warm this thread's connection / pipe path, not counted
        except Exception as e:  # noqa: BLE001
            failures.append(e)
            barrier.abort()
            return
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        end = state["end"]
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                break
            try:
                good = op()
            except Exception as e:  # noqa: BLE001
                good = False
                if len(failures) < 5:
                    failures.append(e)
            t1 = time.perf_counter()
            if t1 > end:
                break
            if good:
                ok += 1
                lats.append(t1 - t0)
            else:
                errors += 1
        results[i] = (ok, errors, lats)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(conc)]
    for t in threads:
        t.start()
    try:
        state["end"] = time.perf_counter() + secs + 0.002
        barrier.wait()
    except threading.BrokenBarrierError:
        raise BenchError(f"throughput warm-up failed: {failures[:1]}")
    for t in threads:
        t.join(secs + 120)
    ok = sum(r[0] for r in results if r)
    errors = sum(r[1] for r in results if r)
    lats = [x for r in results if r for x in r[2]]
    if ok == 0 and failures:
        raise BenchError(f"throughput: every operation failed: {failures[0]}")
    return ok, errors, lats


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
          V("sandboxd-paced", paced(main, exec_timer(main.client, path, code, expect)), p["paced_n"])]
    if nopool:
        fn0 = exec_timer(nopool.client, path, code, expect)
        fn0()
        vs.append(V("sandboxd-nopool", fn0, p["nopool_n"]))
    return vs


def section_latency(p, daemons, out):
    """1. One trivial execution per request, per language."""
    rows = {}
    for lang, code, expect, bare, matched in LANGS:
        path = f"/execute/{lang}"
        variants = daemon_variants(p, daemons, path, code, expect, p["lat_n"])
        for name, argv in bare:
            variants.append(V(f"bare-{name}", spawn_timer(argv), p["lat_n"]))
            variants.append(V(f"bwrap-{name}", spawn_timer(BWRAP + argv), p["lat_n"]))
        samples = interleaved(variants, p["lat_rounds"], p["lat_warm"], p["lat_budget_s"])
        rows[lang] = {
            "matched": matched,
            "commands": {**{f"bare-{n}": argv for n, argv in bare},
                         **{f"bwrap-{n}": BWRAP + argv for n, argv in bare},
                         "sandboxd": ["POST", path, code]},
            "stats": {k: summary(v) for k, v in samples.items() if v},
        }
        st = rows[lang]["stats"]
        extra = "".join(f"  {k[9:]} {fmt_ms(st[k]['p50'])} ms" for k in ("sandboxd-paced", "sandboxd-nopool") if k in st)
        print(f"  {lang:<10} sandboxd {fmt_ms(st['sandboxd']['p50'])} ms{extra}  bare {fmt_ms(st['bare-default']['p50'])} ms"
              f"  bwrap {fmt_ms(st['bwrap-default']['p50'])} ms  (n={st['sandboxd']['n']})", flush=True)
    out["latency"] = rows


def section_minimal(p, daemons, out):
    """3. Cheapest jailed execution: a jailed /bin/true over HTTP
    (`POST /execute/shell`, a fresh jail per request, no interpreter) and
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
# Section 3's row for `POST /execute/shell` of `/bin/true`: bash -c in a fresh jail.
SHELL_ROW = "sandboxd-shell"


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
                return subprocess.run(argv, env=CLEAN_ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd="/", timeout=60).returncode == 0
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
    c.close()
    d.settle()
    rss1 = d.rss()
    tree1 = tree_usage(d.proc.pid) + (tree_pss_kb(d.proc.pid),)
    disk1 = dir_bytes(d.data_dir)
    d.stop()
    out["idle"] = {"target": p["idle_n"], "created": len(lats), "total_s": total, "create": summary(lats),
                   "rss0_kb": rss0, "rss1_kb": rss1, "disk0": disk0, "disk1": disk1,
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


# ---------------------------------------------------------------- report

def ratio_cells(a, b):
    return f"{fmt_x(ratio(a['p50'], b['p50']))} / {fmt_x(ratio(a['p99'], b['p99']))}"


def report(out, profile, argv_bin, elapsed):
    L = []
    m = out["machine"]
    now = out["date"]
    L.append(f"_Generated by `bench/run.py` ({profile} run, {elapsed:.0f} s) on {now}. "
             "Everything between the `bench:` markers is rewritten by `make bench`._")
    b = out["busy"]["start"]
    try:
        busy = float(b["loadavg"].split()[0]) > 1.0 or float(b["psi"].split()[0]) > 10
    except (ValueError, IndexError):
        busy = False
    if busy:
        L.append("")
        L.append(f"**The machine was busy with other work during this run** (load {b['loadavg']}, CPU "
                 f"pressure {b['psi']} at the start; see below). Every absolute figure is inflated, and "
                 "differences are partly hidden by CPU scheduling. Compare rows within this run, and "
                 "re-run `make bench` on an idle machine for absolute numbers.")
    L.append("")
    L.append("### Machine")
    L.append("")
    L.append("| | |")
    L.append("| --- | --- |")
    for k in ("nproc", "cpu", "memory", "kernel", "os", "sandboxd", "python3", "node", "perl", "ruby",
              "bwrap", "harness"):
        label = {"harness": "harness interpreter", "os": "distribution"}.get(k, k)
        L.append(f"| {label} | {m[k]} |")
    b, e = out["busy"]["start"], out["busy"]["end"]
    L.append(f"| load average (1/5/15 min), start → end | {b['loadavg']} → {e['loadavg']} |")
    L.append(f"| CPU pressure, PSI `some` avg10 / avg60 (at start: other work only), start → end | {b['psi']} → {e['psi']} |")
    L.append("")
    L.append("### Method of this run")
    L.append("")
    L.append(f"- Daemon: `{os.path.relpath(argv_bin, ROOT) if argv_bin.startswith(ROOT) else argv_bin} --listen 127.0.0.1:PORT "
             "--data-dir TMP --log-level warn`" + "".join(f" `--set {kv}`" for kv in out.get("sets", [])) +
             (", otherwise the default configuration" if out.get("sets") else ", default configuration") +
             "; a fresh temporary data directory per daemon; the binary and its kernels are copied first, "
             "so a rebuild during the run cannot mix builds.")
    L.append(f"- Latency rows: {profile_desc(out['params'])}")
    L.append("- After every block of daemon requests the harness waits until the daemon's process tree has "
             "used no CPU for 120 ms (warm pools refilled, used jails reaped), so that background work does not "
             "land on the next row's samples.")
    for n in out.get("notes", []):
        L.append(f"- **Daemon anomaly:** {n}.")
    if out.get("nopool_error"):
        L.append(f"- No \"no warm pool\" rows: the second daemon did not start ({out['nopool_error']}).")
    if out.get("cold_sets"):
        L.append("- \"no warm pool\" rows: a second daemon started with "
                 + " ".join(f"`--set {kv}`" for kv in out["cold_sets"]) + ", so every request spawns cold.")
    L.append(f"- HTTP: one keep-alive `http.client` connection; it opened {out['http']['opened']} TCP connection(s) "
             f"for {out['http']['requests']} requests.")
    L.append("- Bare and bwrap rows: `subprocess.run` with `env={PATH: /usr/bin:/bin}` (what `env -i "
             "PATH=/usr/bin:/bin` gives, without the extra `env` exec), stdio on /dev/null, timed with "
             "`time.perf_counter`; the bare `/bin/true` row is the harness's own spawn floor.")
    L.append("- `bwrap` = `bwrap " + " ".join(BWRAP[1:]) + " CMD`.")
    L.append("- p50/p99 are percentiles over all samples (linear interpolation); ratios are p50 / p99 of the row "
             "divided by the same percentile of the reference. Treat differences under ~1 ms as noise on 2 cores.")
    L.append("")

    if "latency" in out:
        L.append("### 1. One trivial execution (`1+1`) per request")
        L.append("")
        L.append("| language | row | n | p50 ms | p99 ms | × bare (p50 / p99) |")
        L.append("| --- | --- | ---: | ---: | ---: | ---: |")
        for lang, _, _, bare, matched in LANGS:
            r = out["latency"][lang]
            st = r["stats"]
            ref = st["bare-default"]
            for key in ROW_ORDER:
                if key not in st:
                    continue
                if key.startswith("sandboxd"):
                    what = f"{DAEMON_ROWS[key]} `POST /execute/{lang}`"
                else:
                    argv = r["commands"][key]
                    what = ("bwrap " if key.startswith("bwrap") else "bare ") + "`" + " ".join(
                        a.replace("/usr/bin/", "") for a in argv[len(BWRAP) if key.startswith("bwrap") else 0:]) + "`"
                    if key.endswith(matched):
                        what += " *"
                s = st[key]
                L.append(f"| {lang} | {what} | {s['n']} | {fmt_ms(s['p50'])} | {fmt_ms(s['p99'])} | "
                         f"{ratio_cells(s, ref)} |")
        L.append("")
        L.append("\\* the bare command line that matches how the daemon's kernel starts the interpreter "
                 "(`python3 -I` imports `site`; `ruby --disable-gems`).")
        L.append("")
        L.append("Daemon ÷ baselines (p50 / p99):")
        L.append("")
        L.append("| language | daemon row | p50 ms | ÷ bare | ÷ bare fast | ÷ bwrap | ÷ bwrap fast |")
        L.append("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for lang, _, _, bare, matched in LANGS:
            st = out["latency"][lang]["stats"]
            for dk in ("sandboxd", "sandboxd-paced", "sandboxd-nopool"):
                if dk not in st:
                    continue
                d = st[dk]

                def cell(key):
                    c = ratio_cells(d, st[key]) if key in st else "–"
                    return f"**{c}**" if key in st and key.endswith(matched) else c
                L.append(f"| {lang} | {DAEMON_ROWS[dk]} | {fmt_ms(d['p50'])} | {cell('bare-default')} | "
                         f"{cell('bare-fast')} | {cell('bwrap-default')} | {cell('bwrap-fast')} |")
        L.append("")
        L.append("Bold: against the matched command line.")
        L.append("")

    if "throughput" in out:
        t = out["throughput"]
        ref = t["bare-fast"]["rate"]
        L.append(f"### 2. Throughput, {CONCURRENCY} concurrent clients")
        L.append("")
        L.append("| row | per second (median of rounds) | rounds | p50 ms | p99 ms | errors | × bare `python3 -S` |")
        L.append("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
        names = {"sandboxd": f"sandboxd `POST /execute/python` `1+1`, {CONCURRENCY} keep-alive clients",
                 "bare-fast": f"bare `python3 -S -c pass`, {CONCURRENCY}-thread pool of `subprocess.run`",
                 "bare-default": f"bare `python3 -c pass`, {CONCURRENCY}-thread pool of `subprocess.run`"}
        for k in ("bare-fast", "bare-default", "sandboxd"):
            v = t[k]
            rounds = ", ".join(f"{x:.0f}" for x in v["rates"])
            L.append(f"| {names[k]} | {v['rate']:.1f} | {rounds} | {fmt_ms(v['p50'])} | {fmt_ms(v['p99'])} | "
                     f"{v['errors']} | {fmt_x(ratio(v['rate'], ref))} |")
        L.append("")

    if "minimal" in out:
        s = out["minimal"]
        L.append("### 3. Cheapest jailed execution")
        L.append("")
        L.append("A jailed `/bin/true` over HTTP is `POST /execute/shell` of `/bin/true` (`bash -c` in a fresh jail per "
                 "request, same limits as every language); `POST /execute/perl` of `1` is the cheapest interpreter.")
        L.append("")
        L.append("| row | n | p50 ms | p99 ms | × bare `/bin/true` (p50 / p99) | × bwrap `/bin/true` |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        rows = [("bare", "bare `/bin/true`"), ("bwrap", "bwrap `/bin/true`"),
                (SHELL_ROW, "jailed `/bin/true` via `POST /execute/shell` over HTTP")]
        rows += [(k, f"{DAEMON_ROWS[k]} `POST /execute/perl` `1`") for k in ROW_ORDER if k.startswith("sandboxd")]
        for k, what in rows:
            if k not in s:
                continue
            L.append(f"| {what} | {s[k]['n']} | {fmt_ms(s[k]['p50'])} | {fmt_ms(s[k]['p99'])} | "
                     f"{ratio_cells(s[k], s['bare'])} | {ratio_cells(s[k], s['bwrap'])} |")
        L.append("")
        if "jail_true" in out:
            j = out["jail_true"]
            L.append("The jail alone (`bench/jail_true.c`: `jail_spawn` + reap of `/bin/true` through the daemon's "
                     "own jail code — namespaces, cgroup, mounts, Landlock, seccomp — interleaved with the baselines):")
            L.append("")
            L.append("| row | n | p50 ms | p99 ms | × bwrap `/bin/true` (p50 / p99) |")
            L.append("| --- | ---: | ---: | ---: | ---: |")
            for k, what in (("bare_true", "bare `/bin/true`"), ("bwrap_true", "bwrap `/bin/true`"),
                            ("jail_true", "sandboxd jail `/bin/true`")):
                L.append(f"| {what} | {j[k]['n']} | {fmt_ms(j[k]['p50'])} | {fmt_ms(j[k]['p99'])} | "
                         f"{ratio_cells(j[k], j['bwrap_true'])} |")
            L.append("")

    if any(k in out for k in ("ctx_warm", "ctx_new", "restore", "idle")):
        L.append("### 4. Sandboxes and code contexts (python)")
        L.append("")
        ref = out.get("latency", {}).get("python", {}).get("stats", {}).get("bare-default")
        L.append("The reference is bare `python3 -c 1+1` from section 1 of this run.")
        L.append("")
        L.append("| row | n | p50 ms | p99 ms | × bare python (p50 / p99) |")
        L.append("| --- | ---: | ---: | ---: | ---: |")

        def row(what, s):
            rc = ratio_cells(s, ref) if ref else "–"
            L.append(f"| {what} | {s['n']} | {fmt_ms(s['p50'])} | {fmt_ms(s['p99'])} | {rc} |")
        if "latency" in out:
            row("(1) stateless `POST /execute/python` `1+1`, for comparison", out["latency"]["python"]["stats"]["sandboxd"])
        if "ctx_warm" in out:
            row("(a) warm context: `x + 1` after `x = 1`", out["ctx_warm"])
        if "ctx_new" in out:
            row("(b) first call in a new sandbox (`x = 1`)", out["ctx_new"])
        if "restore" in out:
            for k, s in out["restore"]["cells"].items():
                row(f"(c) first call after SIGKILL + restart, journal of {k} cell{'s' if k != '1' else ''}", s)
            row("(c) daemon restart: exec → `GET /health` 200", out["restore"]["ready"])
            row("(c) daemon restart: exec → idle (warm pools filled)", out["restore"]["idle"])
        L.append("")
        if "restore" in out:
            cs = out["restore"]["cells"]
            ks = sorted(int(k) for k in cs)
            if len(ks) >= 2 and ks[-1] > ks[0]:
                per = (cs[str(ks[-1])]["p50"] - cs[str(ks[0])]["p50"]) / (ks[-1] - ks[0])
                L.append(f"Replay cost, from the p50s: ≈ {per:.2f} ms per extra journal cell "
                         f"(({ks[-1]} cells − {ks[0]} cell) ÷ {ks[-1] - ks[0]}).")
                L.append("")
        if "idle" in out:
            i = out["idle"]
            r0, r1 = i["rss0_kb"].get("VmRSS", 0), i["rss1_kb"].get("VmRSS", 0)
            per_kb = (r1 - r0) / i["created"] if i["created"] else float("nan")
            L.append("| (d) idle sandboxes | value |")
            L.append("| --- | ---: |")
            L.append(f"| sandboxes created (`GET /languages/python/sandboxes/<id>`, sequential) | {i['created']} of {i['target']} |")
            L.append(f"| time to create them | {i['total_s']:.2f} s ({i['created'] / i['total_s']:.0f}/s) |")
            L.append(f"| one create, p50 / p99 | {fmt_ms(i['create']['p50'])} / {fmt_ms(i['create']['p99'])} ms |")
            L.append(f"| daemon VmRSS, 0 sandboxes | {r0 / 1024:.1f} MiB |")
            L.append(f"| daemon VmRSS, {i['created']} idle sandboxes | {r1 / 1024:.1f} MiB "
                     f"(VmHWM {i['rss1_kb'].get('VmHWM', 0) / 1024:.1f} MiB) |")
            L.append(f"| RSS per idle sandbox | {per_kb:.2f} KiB |")
            j0, j1 = i["jails0"], i["jails1"]
            L.append(f"| the daemon's child processes (warm pools: jail inits + kernels), 0 → {i['created']} sandboxes | "
                     f"{j0['n']} → {j1['n']} processes, PSS {j0['pss_kb'] / 1024:.1f} → {j1['pss_kb'] / 1024:.1f} MiB "
                     f"(sum of RSS {j0['rss_kb'] / 1024:.1f} → {j1['rss_kb'] / 1024:.1f} MiB) |")
            L.append(f"| data directory on disk, 0 → {i['created']} sandboxes | {i['disk0'] / 1048576:.1f} → "
                     f"{i['disk1'] / 1048576:.1f} MiB |")
            L.append("")
    return "\n".join(L).rstrip() + "\n"


def profile_desc(p):
    return (f"{p['lat_n']} samples per row ({p['paced_n']} for the idle-daemon rows, {p['nopool_n']} for "
            f"no warm pool) in {p['lat_rounds']} interleaved rounds (the order of the rows rotates each round), "
            f"after {p['lat_warm']} warm-ups each; throughput {p['tp_rounds']} round(s) × {p['tp_secs']:.0f} s "
            f"per row, interleaved; /bin/true rows {p['min_n']} samples; warm context {p['ctx_n']} calls; "
            f"{p['new_n']} fresh sandboxes; restore: {p['restore_restarts']} restart(s) × {p['restore_reps']} "
            f"sandbox(es) per journal length; {p['idle_n']} idle sandboxes.")


def compact(out):
    """A short plain-text table for stdout."""
    L = ["", f"{'row':<48} {'p50 ms':>9} {'p99 ms':>9} {'ratio p50':>10}"]

    def line(name, s, ref=None, extra=""):
        r = fmt_x(ratio(s["p50"], ref["p50"])) if ref else ""
        L.append(f"{name:<48} {fmt_ms(s['p50']):>9} {fmt_ms(s['p99']):>9} {r:>10} {extra}")
    for lang, _, _, _, _ in LANGS:
        st = out.get("latency", {}).get(lang, {}).get("stats")
        if not st:
            continue
        for key in ROW_ORDER:
            if key in st:
                line(f"{lang} {key}", st[key], st["bare-default"], "(÷ bare)")
        L.append(f"{'':<48} back-to-back daemon ÷ bwrap {fmt_x(ratio(st['sandboxd']['p50'], st['bwrap-default']['p50']))}")
    if "minimal" in out:
        s = out["minimal"]
        for k in ("bare", "bwrap", SHELL_ROW, "sandboxd", "sandboxd-paced", "sandboxd-nopool"):
            if k in s:
                what = "perl 1" if k.startswith("sandboxd") and k != SHELL_ROW else "/bin/true"
                line(f"minimal {k} ({what})", s[k], s["bare"], "(÷ /bin/true)")
    if "throughput" in out:
        t = out["throughput"]
        for k in ("bare-fast", "bare-default", "sandboxd"):
            L.append(f"{'throughput ' + k:<48} {t[k]['rate']:>9.1f}/s {fmt_x(ratio(t[k]['rate'], t['bare-fast']['rate'])):>10}"
                     f" (÷ bare -S)  errors {t[k]['errors']}")
    ref = out.get("latency", {}).get("python", {}).get("stats", {}).get("bare-default")
    if "ctx_warm" in out:
        line("context warm x + 1", out["ctx_warm"], ref, "(÷ bare python)")
    if "ctx_new" in out:
        line("context first call, new sandbox", out["ctx_new"], ref, "(÷ bare python)")
    if "restore" in out:
        for k, s in out["restore"]["cells"].items():
            line(f"restore after restart, {k} cells", s, ref, "(÷ bare python)")
        line("restart → /health", out["restore"]["ready"])
        line("restart → idle (pools filled)", out["restore"]["idle"])
    if "idle" in out:
        i = out["idle"]
        L.append(f"idle: {i['created']} sandboxes in {i['total_s']:.1f} s, VmRSS "
                 f"{i['rss0_kb'].get('VmRSS', 0) / 1024:.1f} → {i['rss1_kb'].get('VmRSS', 0) / 1024:.1f} MiB")
    return "\n".join(L)


def write_doc(path, generated):
    block = f"{BEGIN}\n{generated}{END}"
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = "# Benchmarks\n\nRun `make bench` to regenerate the figures below.\n\n"
    b, e = text.find(BEGIN), text.find(END)
    if b >= 0 and e > b:
        text = text[:b] + block + text[e + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


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
    ap.add_argument("--sections", default="1,2,3,4", help="comma-separated subset of 1,2,3,4 (partial runs never write the doc)")
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
        if sections != {"1", "2", "3", "4"}:
            print("bench: partial run (--sections), docs not written", file=sys.stderr)
        else:
            write_doc(args.doc, report(out, profile, binary, elapsed))
            print(f"wrote {os.path.relpath(args.doc, os.getcwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
