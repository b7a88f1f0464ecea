"""The daemon process itself: flags, listen policy, API key, graceful drain,
and executions that never share state through the warm pool."""
import contextlib
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import BIN, Daemon, free_port


def jail_processes(daemon_pid):
    """Host pids of processes still in a cgroup of that daemon's jails."""
    marker = f"/sandboxd-{daemon_pid}-"
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if marker in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_help_and_version():
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and "--listen" in out.stdout and "--data-dir" in out.stdout
    out = subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and out.stdout.startswith("sandboxd ")
    out = subprocess.run([BIN, "--bogus"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2


def test_bad_config_is_reported(tmp_path):
    cfg = tmp_path / "bad.conf"
    cfg.write_text("limits.cpu_ms = 5\n")  # below the lower bound
    out = subprocess.run([BIN, "--config", str(cfg), "--data-dir", str(tmp_path)], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 2 and "bad.conf:1" in out.stderr


def test_refuses_public_address_without_key(tmp_path):
    out = subprocess.run([BIN, "--listen", f"0.0.0.0:{free_port()}", "--data-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2
    assert "non-loopback" in out.stderr


def test_api_key_required_when_configured():
    d = Daemon(env={"SANDBOXD_API_KEY": "s3cret-key"})
    try:
        status, body, _ = d.get("/health")
        assert status == 200  # health stays public for probes
        status, body, _ = d.post("/execute/python", {"code": "1"})
        assert status == 401 and body["code"] == "UNAUTHORIZED"
        status, body, _ = d.post("/execute/python", {"code": "1"}, headers={"Authorization": "Bearer wrong"})
        assert status == 401
        status, body, _ = d.post("/execute/python", {"code": "1"}, headers={"Authorization": "Bearer s3cret-key"})
        assert status == 200 and body["results"] == [{"text": "1"}]
        # The key never reaches the guest.
        status, body, _ = d.post("/execute/python", {"code": "import os\nstr(dict(os.environ))"},
                                 headers={"Authorization": "Bearer s3cret-key"})
        assert "s3cret-key" not in str(body)
    finally:
        d.cleanup()


def test_sigterm_drains_in_flight_work_and_leaves_no_jail():
    d = Daemon()
    try:
        outcome = {}

        def slow():
            outcome["res"] = d.post("/execute/python", {"code": "import time\ntime.sleep(1.5)\n'done'"})

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.5)
        assert jail_processes(d.proc.pid) != []  # the check can see jails at all
        d.proc.send_signal(signal.SIGTERM)
        t.join(timeout=20)
        status, res, _ = outcome["res"]
        assert status == 200 and res["results"] == [{"text": "'done'"}], res
        assert d.proc.wait(timeout=20) == 0
        time.sleep(0.2)
        assert jail_processes(d.proc.pid) == []
    finally:
        d.cleanup()


def test_pool_executions_share_no_state(daemon):
    writes = "import json, os, sys\njson.MARK = 'leak'\nopen('/tmp/mark', 'w').write('x')\nos.environ['MARK'] = '1'\nsys.modules['leaky'] = json\n1"
    reads = "import json, os, sys\n[hasattr(json, 'MARK'), os.path.exists('/tmp/mark'), 'MARK' in os.environ, 'leaky' in sys.modules]"
    for _ in range(6):
        assert daemon.execute("python", writes)["results"] == [{"text": "1"}]
        assert daemon.execute("python", reads)["results"] == [{"json": [False, False, False, False]}]
    js_w = "globalThis.MARK = 1; require('fs').writeFileSync('/tmp/mark', 'x'); process.env.MARK = '1'; 1"
    js_r = "[typeof MARK, require('fs').existsSync('/tmp/mark'), 'MARK' in process.env]"
    for _ in range(4):
        daemon.execute("javascript", js_w)
        assert daemon.execute("javascript", js_r)["results"] == [{"json": ["undefined", False, False]}]


def test_ready_reports_pools(daemon):
    status, body, _ = daemon.get("/ready")
    assert status == 200
    pools = body["pools"]
    assert set(pools) >= {"python", "javascript", "perl", "ruby"}
    assert pools["python"]["template"]["alive"] is True
    assert all(p["target"] >= 0 for p in pools.values())


def _pools_when_settled(d, want, timeout=30.0):
    """GET /ready until want(pools) holds; returns the last pools seen."""
    deadline = time.monotonic() + timeout
    while True:
        status, body, _ = d.get("/ready")
        pools = body["pools"]
        if want(pools) or time.monotonic() > deadline:
            return pools
        time.sleep(0.2)


@contextlib.contextmanager
def _after_perl_burst(*sets, also=None):
    """A daemon with a perl pool of 1 (the others off) after six back-to-back
    perl executions (and as many of `also`): the first drains the pool, the
    rest find it empty."""
    d = Daemon(sets=["pool.size=0", "pool.perl=1", *sets])
    try:
        _pools_when_settled(d, lambda p: p["perl"]["ready"] == 1)
        for _ in range(6):
            for lang in ("perl", also) if also else ("perl",):
                assert d.execute(lang, "1+1")["results"] == [{"text": "2"}]
        yield d
    finally:
        d.cleanup()


def _perl_pool(d):
    return d.get("/ready")[1]["pools"]["perl"]


def test_pool_grows_with_demand_within_budget():
    """Back-to-back executions that drain a pool grow it (grown > target) and
    the filler fills it to the grown size; pool.memory_budget still caps
    the members kept; pool.<lang>=0 never grows."""
    with _after_perl_burst(also="ruby") as d:
        pools = _pools_when_settled(d, lambda p: p["perl"]["grown"] > 1 and p["perl"]["ready"] == p["perl"]["grown"])
        assert pools["perl"]["target"] == 1 and pools["perl"]["grown"] > 1, pools
        assert pools["perl"]["ready"] == pools["perl"]["grown"], pools
        assert pools["ruby"]["grown"] == 0 and pools["ruby"]["ready"] == 0, pools
    with _after_perl_burst("pool.memory_budget=1") as d:
        time.sleep(1.0)
        perl = _perl_pool(d)
        assert perl["grown"] > 1 and perl["ready"] <= 1, perl


def test_grown_pool_shrinks_when_idle_and_growth_can_be_off():
    """pool.grow_idle_s: a grown pool goes back to pool.<lang> (its surplus
    members killed) after that long without a request; 0 never grows."""
    with _after_perl_burst("pool.grow_idle_s=2") as d:
        assert _perl_pool(d)["grown"] > 1
        pools = _pools_when_settled(d, lambda p: p["perl"]["grown"] == 1 and p["perl"]["ready"] == 1, timeout=20)
        assert pools["perl"]["grown"] == 1 and pools["perl"]["ready"] == 1, pools
    with _after_perl_burst("pool.grow_idle_s=0") as d:
        time.sleep(0.5)
        assert _perl_pool(d)["grown"] == 1


def test_pool_sizes_per_language_and_memory_budget():
    """pool.size sets every language; pool.<lang> after it overrides one;
    pool.memory_budget stops refills (executions then spawn or fork)."""
    d = Daemon(sets=["pool.size=0", "pool.perl=3"])
    try:
        pools = _pools_when_settled(d, lambda p: p["perl"]["ready"] == 3)
        assert pools["perl"]["target"] == 3 and pools["perl"]["ready"] == 3, pools
        assert all(pools[l]["target"] == 0 and pools[l]["ready"] == 0 for l in ("python", "javascript", "ruby"))
        assert pools["perl"]["memberBytes"] > 0
    finally:
        d.cleanup()
    d = Daemon(sets=["pool.size=2", "pool.memory_budget=1"])
    try:
        # Members start until the first measured one tips the budget: never two per language.
        pools = _pools_when_settled(d, lambda p: all(p[l]["ready"] >= 1 for l in p), timeout=20)
        time.sleep(1.0)
        status, body, _ = d.get("/ready")
        assert sum(p["ready"] for p in body["pools"].values()) <= len(body["pools"]), body["pools"]
        for lang in ("python", "javascript", "perl", "ruby"):
            assert d.execute(lang, "1+1")["results"] == [{"text": "2"}]
    finally:
        d.cleanup()


def test_template_executions_are_jailed_and_isolated():
    """pool.size=0: every python execution is forked from the template."""
    d = Daemon(sets=["pool.size=0", "limits.wall_ms=4000", "limits.cpu_ms=2000", "limits.memory_bytes=128M"])
    try:
        probe = """
import os, socket, signal
st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    inet = 'open'
except OSError:
    inet = 'refused'
import ctypes
userns = ctypes.CDLL(None, use_errno=True).unshare(0x10000000)
[os.getuid(), int(st['CapEff'], 16), int(st['CapBnd'], 16), st['NoNewPrivs'].strip(), st['Seccomp'].strip(),
 sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), inet, userns, os.path.exists('/tmp/mark'),
 os.getpgid(0) == os.getpid() or os.getsid(0) != 1]
"""
        for _ in range(3):
            res = d.execute("python", probe)
            uid, capeff, capbnd, nnp, seccomp, pids, inet, userns, mark, _own = res["results"][0]["json"]
            assert uid == 65534 and capeff == 0 and capbnd == 0 and nnp == "1" and seccomp == "2"
            assert max(pids) < 10 and inet == "refused" and userns == -1 and mark is False
            d.execute("python", "open('/tmp/mark', 'w').write('x')\nimport json\njson.LEAK = 1")
        # Limits hold on this path too.
        assert d.execute("python", "while True: pass")["error"]["name"] == "ExecutionLimitError"
        assert d.execute("python", "b = bytearray(1024**3)\nb[::4096] = b'x' * (len(b) // 4096)")["error"]["name"] in (
            "ExecutionLimitError", "MemoryError")
        # A guest killing its own process group cannot reach the template.
        d.execute("python", "import os, signal\nos.kill(0, signal.SIGKILL)")
        assert d.execute("python", "6 * 7")["results"] == [{"text": "42"}]
        status, ready, _ = d.get("/ready")
        tmpl = ready["pools"]["python"]["template"]
        assert tmpl["alive"] is True and tmpl["forks"] >= 8
    finally:
        d.cleanup()


def test_perl_template_executions_are_jailed_and_isolated():
    """pool.size=0: every perl execution is forked from the perl template."""
    d = Daemon(sets=["pool.size=0", "limits.wall_ms=4000", "limits.cpu_ms=2000"])
    try:
        probe = r"""
open(my $fh, '<', '/proc/self/status'); my %st = map { /^(\w+):\s*(.*)$/ ? ($1, $2) : () } <$fh>;
opendir(my $d, '/proc'); my @pids = grep { /^\d+$/ } readdir($d);
my $mark = -e '/tmp/mark' ? 1 : 0;
open(my $w, '>', '/tmp/mark'); print $w 'x'; close $w;
join(',', $<, hex($st{CapEff}), $st{NoNewPrivs}, $st{Seccomp}, scalar(@pids) < 10 ? 'few' : 'many', $mark)
"""
        for _ in range(3):
            res = d.execute("perl", probe)
            assert res["results"] == [{"text": "65534,0,1,2,few,0"}], res
        status, ready, _ = d.get("/ready")
        assert ready["pools"]["perl"]["template"]["alive"] is True
        assert ready["pools"]["perl"]["template"]["forks"] >= 3
    finally:
        d.cleanup()


def test_warmed_pool_members_get_fresh_randomness():
    """Pool members forked from the perl template seed in their warm-up
    (after the fork) and skip the request's reseed: still one sequence each."""
    d = Daemon(sets=["pool.size=2", "limits.wall_ms=4000"])
    try:
        pl = []
        for _ in range(6):
            deadline = time.time() + 20
            while _perl_pool(d)["ready"] < 1 and time.time() < deadline:
                time.sleep(0.05)
            pl.append(d.execute("perl", "join ',', map { int(rand(2**31)) } 1..2")["results"][0]["text"])
        assert len(set(pl)) == 6, pl
    finally:
        d.cleanup()


def test_template_children_get_fresh_randomness_and_real_signals():
    """Executors are forked below the interpreter (the fork-server shim), so
    the kernels must reseed, and the executor must not be its namespace's
    pid 1 (which would ignore signals it sends itself)."""
    d = Daemon(sets=["pool.size=0", "limits.wall_ms=4000"])
    try:
        py = {d.execute("python", "import random\nrandom.getrandbits(64)")["results"][0]["text"] for _ in range(4)}
        pl = {d.execute("perl", "int(rand(2**31))")["results"][0]["text"] for _ in range(4)}
        assert len(py) == 4 and len(pl) == 4
        res = d.execute("python", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n'survived'")
        assert "error" in res and res.get("results") != [{"text": "'survived'"}], res
        assert d.execute("python", "import os\nos.getpid() != 1")["results"] == [{"text": "True"}]
    finally:
        d.cleanup()


def test_cold_jails_start_with_default_signals():
    """The daemon blocks SIGTERM/SIGINT and ignores SIGPIPE for itself; a
    jailed workload must not inherit either (both survive execve)."""
    d = Daemon(sets=["pool.size=0", "pool.zygote=0", "limits.wall_ms=4000"])
    try:
        res = d.execute("perl", "my @m = ($SIG{PIPE} // 'DEFAULT'); kill 'TERM', $$; sleep 1; 'survived'")
        assert "error" in res and res.get("results") != [{"text": "survived"}], res
        res = d.execute("python", "import signal\n[int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])]")
        assert res["results"] == [{"json": []}], res
    finally:
        d.cleanup()


# What a guest can see of the state its kernel left behind: the probes run in
# a pool member (forked from a template, warmed up with the daemon's warm-up
# request: docs/kernel-protocol.md) and in a cold kernel, and must agree.
_PERL_TRACE_PROBE = r"""
join '|', (defined $_ ? "[$_]" : 'undef'), "[$@]", (defined $. ? $. : 'undef'),
    join(',', sort keys %ENV), join(',', sort grep { !/::$/ } keys %main::),
    (defined $SandboxKernel::guest_code ? length $SandboxKernel::guest_code : 'undef'),
    "@ARGV", $0, $$, $main::x // 'no x', do { eval 'die "x"'; $@ }
"""
_PYTHON_TRACE_PROBE = """import os, sys
[sorted(globals()), '_' in vars(__builtins__) if isinstance(__builtins__, dict) else hasattr(__builtins__, '_'),
 hasattr(sys, 'last_value'), repr(sys.exc_info()), sorted(os.environ), os.getcwd(), sys.argv[1:]]"""


def _wait_pool(d, lang, ready):
    deadline = time.time() + 20
    while d.get("/ready")[1]["pools"][lang]["ready"] < ready and time.time() < deadline:
        time.sleep(0.05)


def _trace_probes(d, wait_pool):
    seen = []
    for lang, probe in (("perl", _PERL_TRACE_PROBE), ("python", _PYTHON_TRACE_PROBE)):
        for code in (probe, "_" if lang == "python" else "$_ // 'undef'"):
            if wait_pool:
                _wait_pool(d, lang, 1)
            res = d.execute(lang, code)
            seen.append((lang, res.get("results"), (res.get("error") or {}).get("name")))
    return seen


def test_pool_members_show_no_trace_of_their_warm_up():
    """A pooled member served the warm-up `1+1` before its
    request; the guest sees the same `$_`, `$@`, `$.`, environment, globals,
    eval numbering, argv and Python `_` as in a kernel forked from the
    template on demand (no warm-up) and in one started cold."""
    seen = []
    for sets in (["pool.size=2"], ["pool.size=0"], ["pool.size=0", "pool.zygote=0"]):
        d = Daemon(sets=sets + ["limits.wall_ms=4000"])
        try:
            seen.append(_trace_probes(d, wait_pool=sets == ["pool.size=2"]))
            tpl = d.get("/ready")[1]["pools"]["perl"].get("template")
            assert (tpl is not None and tpl["forks"] >= 2) == ("pool.zygote=0" not in sets), (sets, tpl)
        finally:
            d.cleanup()
    assert seen[0] == seen[1] == seen[2], seen
    assert seen[0][1][1] == [{"text": "undef"}] and seen[0][3][2] == "NameError", seen[0]
    assert "x at (eval " in seen[0][0][1][0]["text"], seen[0]


def test_warmed_python_pool_members_get_fresh_randomness():
    """Python members reseed on their request (after the fork): one sequence
    each even though every member was warmed up from the same template."""
    d = Daemon(sets=["pool.size=2", "limits.wall_ms=4000"])
    try:
        seen = []
        for _ in range(4):
            _wait_pool(d, "python", 1)
            seen.append(d.execute("python", "import random\nrandom.getrandbits(64)")["results"][0]["text"])
        assert len(set(seen)) == 4, seen
    finally:
        d.cleanup()
