"""The daemon process itself: flags, listen policy, API key, graceful drain,
and executions that never share state through the warm pool."""
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import BIN, Daemon, free_port


def jail_processes(daemon_pid):
    """Host pids of processes still in a cgroup of that daemon's jails."""
    marker = f"/sandboxd-{daemon_pid}/"
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
