"""The benchmark harness's building blocks (stdlib only): constants and
profiles, statistics, process and cgroup probes, a keep-alive HTTP client,
daemons in temporary data dirs, and the interleaving samplers. bench/run.py
composes them into sections; bench/report.py renders the results."""

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

ROW_ORDER = ["bare-default", "bare-fast", "bwrap-default", "bwrap-fast", "bare-paced",
             "sandboxd", "sandboxd-paced", "health-paced", "canned-paced", "ideal-paced",
             "minimal-paced", "sandboxd-nopool"]
DAEMON_ROWS = {"sandboxd": "sandboxd, back-to-back",
               "sandboxd-paced": "sandboxd, idle daemon",
               "health-paced": "floor: `GET /health`, idle daemon",
               "canned-paced": "floor: a canned HTTP reply from another process, idle",
               "ideal-paced": "floor: HTTP + the same kernel, no daemon (`bench/ideal_server.c`), idle",
               "minimal-paced": "floor: HTTP + a minimal eval loop, no daemon (`bench/ideal_server.c`), idle",
               "bare-paced": "bare start (default command line) after the same idle pause",
               "sandboxd-nopool": "sandboxd, no warm pool"}

PROFILES = {
    "full": dict(
        lat_n=100, lat_rounds=5, lat_warm=5, lat_budget_s=75,      # section 1, per language
        paced_n=40, nopool_n=40,                                    # extra daemon rows, per language
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


def spawn_blocking(argv, timeout=60):
    """Runs argv with a clean env and returns its exit status, waiting for it
    with a blocking waitpid. subprocess.run(timeout=...) polls instead, with
    sleeps that double from 0.5 ms (0.5, 1, 2, 4 … ms), so a 1.3 ms `perl -e`
    read as 3.4 ms and every bare baseline came out rounded up to the next
    step; a watchdog timer enforces the timeout instead."""
    p = subprocess.Popen(argv, env=CLEAN_ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd="/")
    watchdog = threading.Timer(timeout, p.kill)
    watchdog.start()
    try:
        return p.wait()
    finally:
        watchdog.cancel()


def spawn_timer(argv):
    """A sampler: one spawn of argv with a clean env, timed around a blocking wait."""
    def fn():
        t0 = time.perf_counter()
        rc = spawn_blocking(argv)
        dt = time.perf_counter() - t0
        if rc != 0:
            again = subprocess.run(argv, env=CLEAN_ENV, stdin=subprocess.DEVNULL, capture_output=True,
                                   cwd="/", timeout=60)
            raise BenchError(f"{' '.join(argv)} exited {rc}: {again.stderr.decode(errors='replace')[-500:]}")
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


def health_timer(client):
    """GET /health: the HTTP round trip with no execution, the floor under
    every daemon row (after an idle pause too: the idle-daemon rows pay
    whatever waking the daemon costs, which the Echo row separates from
    what waking the machine costs)."""
    def fn():
        t0 = time.perf_counter()
        status, _ = client.request("GET", "/health")
        dt = time.perf_counter() - t0
        if status != 200:
            raise BenchError(f"GET /health: {status}")
        return dt
    return fn


CANNED_HTTP_SERVER = """
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
body = b'{"status":"ok"}'
reply = b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(body), body)
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while c.recv(65536):
    c.sendall(reply)
"""


class CannedHttp:
    """A 10-line HTTP server in another process that answers every request
    with the same bytes, asked through the same keep-alive client as the
    daemon: the floor of an HTTP round trip between two processes on this
    machine, with no daemon code in it. After an idle pause it shows what
    waking up costs the client and the machine (measured 2026-12-02: 0.49 ms
    idle vs 0.15 ms back to back, the same as the daemon's GET /health),
    which every idle-daemon row pays and no daemon change removes."""

    def __init__(self):
        self.proc = subprocess.Popen(["/usr/bin/python3", "-S", "-c", CANNED_HTTP_SERVER], stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=CLEAN_ENV)
        self.client = Client(int(self.proc.stdout.readline()))

    def timer(self):
        def fn():
            t0 = time.perf_counter()
            status, _ = self.client.request("GET", "/")
            dt = time.perf_counter() - t0
            if status != 200:
                raise BenchError(f"canned HTTP server: {status}")
            return dt
        return fn

    def close(self):
        self.client.close()
        self.proc.kill()
        self.proc.wait(timeout=10)


IDEAL_SERVER = os.path.join(ROOT, "build", "bench", "ideal_server")
KERNELS = os.path.join(ROOT, "src", "runtimes", "kernels")


def kernel_line(code, cwd, last=None):
    """The daemon's request line for a stateless execution (engine/stateless.c,
    exec_build_request; "reseed"/"warmup" as a template's fork and warm-up)."""
    req = {"code": code, "env": {}, "cwd": cwd, "resultLimit": 65536, "typescript": False, "replay": False}
    if last:
        req[last] = True
    return json.dumps(req, separators=(",", ":")) + "\n"


# The least an interpreter can answer a line of code in: a loop on fd 3
# that evaluates each line and writes its value in the kernels' answer shape,
# its path run 100 times at boot (as the kernels warm theirs up).
MINIMAL_REPL = {
    "perl": r'open(my $c, "+<&=", 3) or die; open(my $n, ">", "/dev/null") or die;'
            r' sub answer { my ($fh, $l) = @_; my $r = eval $l; syswrite($fh, qq({"results":[{"text":"$r"}]}\n)); }'
            r' answer($n, "1+1") for 1 .. 100; syswrite($c, qq({"ready":true}\n));'
            r' while (defined(my $l = <$c>)) { answer($c, $l); }',
    "javascript": "const fs = require('fs'); const b = Buffer.alloc(65536); const n = fs.openSync('/dev/null', 'w');"
                  " const answer = (fd, line) => { const v = (0, eval)(line);"
                  " fs.writeSync(fd, JSON.stringify({ results: [{ text: String(v) }] }) + '\\n'); };"
                  " for (let i = 0; i < 100; i++) answer(n, '1+1');"
                  " fs.writeSync(3, '{\"ready\":true}\\n');"
                  " for (;;) { const len = fs.readSync(3, b); if (!len) break; answer(3, b.toString('utf8', 0, len)); }",
}


class IdealServer(CannedHttp):
    """bench/ideal_server.c for one language: HTTP, the hand-off to a booted
    kernel of the daemon's and back, and nothing else of a daemon. Perl's
    kernel is started and warmed as a template's, javascript's as a pool
    member (it warms itself at boot). minimal=True: MINIMAL_REPL instead of
    the kernel (what the kernel's own protocol costs). None for other
    languages, or without the binary (make bench builds it)."""

    ARGV = {"perl": ["/usr/bin/perl", os.path.join(KERNELS, "perl_kernel.pl"), "zygote"],
            "javascript": ["/usr/bin/node", "--max-old-space-size=96", "--stack-size=984",
                           os.path.join(KERNELS, "node_kernel.js"), "once"]}
    INTERPRETER = {"perl": ["/usr/bin/perl", "-e"], "javascript": ["/usr/bin/node", "-e"]}

    @classmethod
    def start(cls, lang, minimal=False):
        if lang not in cls.ARGV or not os.path.exists(IDEAL_SERVER):
            return None
        return cls(lang, minimal)

    def __init__(self, lang, minimal=False):
        self.lang = lang
        self.cwd = tempfile.mkdtemp(prefix="sandboxd-ideal-")
        template = lang == "perl" and not minimal
        warm = kernel_line("1+1", self.cwd, "warmup") if template else ""
        req = kernel_line("1+1", self.cwd, "reseed" if template else None)
        argv = self.ARGV[lang]
        if minimal:
            req, argv = "1+1\n", self.INTERPRETER[lang] + [MINIMAL_REPL[lang]]
        # stderr: a kernel still booting when close() kills the server
        # complains of the closed socket; a failed answer raises in the timer.
        self.proc = subprocess.Popen([IDEAL_SERVER, self.cwd, warm, req, *argv], stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CLEAN_ENV)
        self.client = Client(int(self.proc.stdout.readline()))

    def paced_timer(self, daemon):
        """After the next kernel is up and both this server's process tree and
        the daemon's are idle (a refill of the daemon's pool must not land on
        the floor's sample), one execution: the idle row's pause."""
        def fn():
            self.client.request("GET", "/ready")
            daemon.settle()
            settle(self.proc.pid)
            t0 = time.perf_counter()
            status, res = self.client.request("POST", f"/execute/{self.lang}", {"code": "1+1"})
            dt = time.perf_counter() - t0
            check_exec(status, res, "2", f"ideal server ({self.lang})")
            return dt
        return fn

    def close(self):
        super().close()
        shutil.rmtree(self.cwd, ignore_errors=True)


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

    def start(self, timeout=30, port=None):
        """port: a fixed one (a cluster node's advertise URL names it); else a free one."""
        self.port = port or free_port()
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
                # The data dir (and its log) goes at the end of the run: keep
                # the log's last lines, which say why (a signal leaves no trace).
                try:
                    with open(self.log_path, errors="replace") as f:
                        tail = " | ".join(line.strip() for line in f.readlines()[-5:])
                except OSError:
                    tail = "(no log)"
                self.notes.append(f"daemon pid {self.proc.pid} (--set {' '.join(self.sets) or '-'}) exited "
                                  f"{self.proc.returncode} on SIGTERM; its log ends: {tail}")

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


def write_marked(path, text, begin, end):
    """Replaces what lies between the begin and end markers of the file at
    path (markers included; text carries its own) with text, or appends it."""
    with open(path) as f:
        doc = f.read()
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + text + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    with open(path, "w") as f:
        f.write(doc)


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


# Section 3's row for `POST /execute/shell` of `/bin/true`: bash -c in a fresh jail.
SHELL_ROW = "sandboxd-shell"
