"""Black-box fixtures: start a real sandboxd on a free loopback port with a
temporary data dir, and talk to it over real HTTP (http.client)."""
import hashlib
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SANDBOXD_BIN", os.path.join(ROOT, "build", "sandboxd"))
# Under these names too: test files of every directory import them "from
# conftest", which in one pytest session is whichever directory's came first.
SANDBOXD_BIN = BIN
NODE_DIR = os.path.join(ROOT, "tests", "node")

# Limits small enough that limit tests finish quickly.
FAST_LIMITS = [
    "limits.cpu_ms=2000",
    "limits.wall_ms=4000",
    "limits.memory_bytes=128M",
    "limits.pids=32",
    "exec.drain_timeout_ms=5000",
]
# For modules whose code imports heavy libraries (matplotlib: ~1 s of CPU,
# many seconds of wall clock on a loaded CI machine): the same limits with
# room on the wall clock, which no test there measures.
ROOMY_LIMITS = FAST_LIMITS + ["limits.wall_ms=20000"]


def unmount_under(path):
    """Detaches workspace mounts a SIGKILLed daemon left under path, so the
    temporary directory can be removed."""
    real = os.path.realpath(path) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f if line.split()[4].startswith(real)]
    for p in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_args(data_dir):
    """--store for a daemon when the suite runs on PostgreSQL (tests/pg/
    pg_plugin.py exports SANDBOXD_TEST_PG_HOST, the cluster's socket dir):
    one database per data dir, so a daemon restarted on the same data dir
    finds its store again, as it finds the SQLite file there."""
    host = os.environ.get("SANDBOXD_TEST_PG_HOST")
    if not host:
        return []
    name = "d" + hashlib.sha1(os.path.realpath(data_dir).encode()).hexdigest()[:16]
    createdb = os.path.join(os.environ["SANDBOXD_TEST_PG_BIN"], "createdb")
    # Fails when it exists already (a restart): that is the point.
    subprocess.run([createdb, "-h", host, "-U", "sandboxd", name], capture_output=True)
    return ["--store", f"postgresql:///{name}?host={host}&user=sandboxd"]


class Daemon:
    def __init__(self, extra_args=(), data_dir=None, sets=FAST_LIMITS, env=None, wrapper=()):
        self.port = free_port()
        self.tmp = None
        if data_dir is None:
            self.tmp = tempfile.TemporaryDirectory(prefix="sandboxd-test-")
            data_dir = self.tmp.name
        self.data_dir = data_dir
        args = list(wrapper) + [BIN, "--listen", f"127.0.0.1:{self.port}", "--data-dir", data_dir, "--log-level", "warn"]
        for s in sets:
            args += ["--set", s]
        args += store_args(data_dir) + list(extra_args)
        self.log_path = os.path.join(data_dir, "daemon.log")
        self.log = open(self.log_path, "ab")
        full_env = {"PATH": "/usr/bin:/bin"}
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, env=full_env)
        self.wait_ready()

    def wait_ready(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited: {self.proc.returncode}\n{self.read_log()}")
            try:
                status, _, _ = self.request("GET", "/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("daemon not ready\n" + self.read_log())

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-20000:]

    def request(self, method, path, body=None, headers=None, raw=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        hdrs = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        try:
            parsed = json.loads(payload) if payload else None
        except ValueError:
            parsed = payload
        # Every header as sent (a dict keeps one Set-Cookie of several).
        self.last_headers = [(k.lower(), v) for k, v in resp.getheaders()]
        return resp.status, parsed, {k.lower(): v for k, v in resp.getheaders()}

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def execute(self, lang, code, **extra):
        body = {"code": code}
        body.update(extra)
        status, res, _ = self.post(f"/execute/{lang}", body)
        assert status == 200, res
        return res

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
        self.check_sanitizers()

    def check_sanitizers(self):
        """A sanitizer report in the daemon's log fails the test that owns it
        (ASan/UBSan builds run the whole suite; LeakSanitizer reports at exit)."""
        text = self.read_log()
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            assert marker not in text, f"sanitizer report in daemon log:\n{text}"

    def cleanup(self):
        self.stop()
        unmount_under(self.data_dir)
        if self.tmp:
            self.tmp.cleanup()


@pytest.fixture(scope="session")
def daemon():
    d = Daemon()
    yield d
    d.cleanup()


def text_of(res):
    """The single text result, or None."""
    assert "error" not in res, res.get("error")
    if not res["results"]:
        return None
    return res["results"][0].get("text")


def nosuid_data_dir(owner=65534, mode=0o700):
    """A fresh data dir on its own tmpfs mounted nosuid,nodev (rootless mode
    refuses any other: guests write plain directories there). Needs root;
    release with release_data_dir()."""
    path = tempfile.mkdtemp(prefix="sandboxd-nosuid-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"nosuid,nodev,size=256m,mode={mode:o}", "tmpfs", path],
                   check=True)
    os.chown(path, owner, owner)
    return path


def release_data_dir(path):
    unmount_under(path)
    subprocess.run(["umount", "-l", path], check=False)
    os.rmdir(path)
