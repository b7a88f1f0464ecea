"""`sandboxd shell`: the interactive terminal over the bridge's PTY
WebSocket, driven black-box through a real pseudo-terminal (os.openpty: the
CLI's controlling terminal, so a TIOCSWINSZ on it sends the CLI SIGWINCH)."""
import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

from conftest import SANDBOXD_BIN
from term_util import env, no_sanitizer_report, run, sandbox  # noqa: F401 (env, sandbox: fixtures)

def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    """The CLI on the slave side of a pty; we hold the master."""

    def __init__(self, env, *args):
        self.master, self.slave = os.openpty()
        set_size(self.slave, 30, 100)
        self.before = termios.tcgetattr(self.slave)

        def make_controlling():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([SANDBOXD_BIN, *args], stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     env=env, start_new_session=True, preexec_fn=make_controlling)
        self.out = b""

    def read_until(self, needle, timeout=30, poke=None):
        """Reads until needle shows; poke (bytes) is typed again every
        second meanwhile (for what races with a signal)."""
        deadline = time.monotonic() + timeout
        next_poke = 0
        while needle not in self.out:
            now = time.monotonic()
            assert now < deadline, f"{needle!r} not seen; output so far: {self.out[-2000:]!r}"
            if poke and now >= next_poke:
                self.type(poke)
                next_poke = now + 1
            r, _, _ = select.select([self.master], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    assert needle in self.out, f"{needle!r} not seen before EOF: {self.out[-2000:]!r}"
                self.out += chunk
        return self.out

    def type(self, data):
        os.write(self.master, data)

    def wait(self, timeout=30):
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, "the CLI did not exit"
            if select.select([self.master], [], [], 0.1)[0]:
                try:
                    self.out += os.read(self.master, 65536)
                except OSError:
                    pass
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)
        no_sanitizer_report(self.out)


@pytest.fixture
def term_factory(env):
    terms = []

    def make(*args):
        t = Term(env, *args)
        terms.append(t)
        return t

    yield make
    for t in terms:
        t.close()


def test_interactive_shell_echo_resize_exit_status(term_factory, sandbox):
    t = term_factory("shell", sandbox)
    t.read_until(b"$ ")
    # Raw mode while it runs: no canonical input, no local echo.
    mode = termios.tcgetattr(t.slave)
    assert not mode[3] & termios.ICANON and not mode[3] & termios.ECHO
    t.type(b"echo hi-$((6*7))\r")
    t.read_until(b"hi-42")
    # The initial size went with the request.
    t.type(b"stty size\r")
    t.read_until(b"30 100")
    # A resize of the local terminal: SIGWINCH → a resize message.
    set_size(t.master, 33, 111)
    t.read_until(b"33 111", poke=b"stty size\r")
    t.type(b"exit 3\r")
    assert t.wait() == 3
    # The local terminal is back as it was.
    assert termios.tcgetattr(t.slave) == t.before


def test_sigterm_restores_the_terminal(term_factory, sandbox):
    t = term_factory("shell", sandbox)
    t.read_until(b"$ ")
    assert termios.tcgetattr(t.slave) != t.before
    t.proc.send_signal(signal.SIGTERM)
    assert t.wait() == 128 + signal.SIGTERM
    assert termios.tcgetattr(t.slave) == t.before


def test_each_run_has_a_terminal_of_its_own(term_factory, sandbox, env):
    # A variable set in one run is not in the next one's shell.
    t = term_factory("shell", sandbox)
    t.read_until(b"$ ")
    t.type(b"export MARK=one-$((1+1)); exit 0\r")
    assert t.wait() == 0
    p = run(env, "shell", sandbox, stdin=b'echo "mark=[$MARK]"\nexit\n')
    assert p.returncode == 0, p.stderr
    assert b"mark=[]" in p.stdout


def test_named_session_is_kept(env, sandbox, server):
    p = run(env, "shell", sandbox, "--session", "keep1", stdin=b"cd /tmp; export K=v1\n")
    # End of input is ^D: the shell exits, status 0.
    assert p.returncode == 0, p.stderr
    # The named session outlives the run (creating it again: it exists).
    status, body, _ = server.post(f"/v1/sandbox/{sandbox}/session", {"id": "keep1"})
    assert status == 502 and "exists" in str(body), body


def test_piped_stdin_no_tty(env, sandbox):
    p = run(env, "shell", sandbox, stdin=b"echo hi-$((6*7))\nexit 4\n")
    assert p.returncode == 4, p.stderr
    assert b"hi-42" in p.stdout


def test_cmd_runs_a_command_and_its_status(env, sandbox):
    p = run(env, "shell", sandbox, "--cmd", "sh", "-c", "echo \"a b\"; exit 5", stdin=b"")
    assert p.returncode == 5, p.stderr
    # Only the command's output (the typed `exec` line's echo is hidden).
    assert p.stdout.replace(b"\r\n", b"\n") == b"a b\n"


def test_killed_by_a_signal_is_128_plus(env, sandbox):
    p = run(env, "shell", sandbox, "--cmd", "sh", "-c", "kill -9 $$", stdin=b"")
    assert p.returncode == 128 + 9, p.stderr


def test_missing_sandbox_and_usage(env, server):
    p = run(env, "shell", "nosuchsandbox")
    assert p.returncode == 1
    assert b"no sandbox 'nosuchsandbox'" in p.stderr
    status, body, _ = server.get("/sandboxes")
    assert all(s["id"] != "nosuchsandbox" for s in body["sandboxes"]), "a typo must not create a sandbox"
    assert run(env, "shell").returncode == 2
    p = run(env, "shell", "--help")
    assert p.returncode == 0 and b"Usage: sandboxd shell" in p.stdout


def test_api_key_goes_with_the_websocket(tmp_path):
    from conftest import Daemon
    d = Daemon(env={"SANDBOXD_API_KEY": "right-key"})
    try:
        status, body, _ = d.post("/v1/sandbox", {}, headers={"Authorization": "Bearer right-key"})
        assert status == 200
        e = dict(os.environ, HOME=str(tmp_path), SANDBOXD_URL=f"http://127.0.0.1:{d.port}")
        e.pop("SANDBOXD_API_KEY", None)
        # The right key passes the WebSocket's auth too (the handshake
        # carries it); a wrong one gets the server's 401 message.
        ok = run(dict(e, SANDBOXD_API_KEY="right-key"), "shell", body["id"], stdin=b"exit 6\n")
        assert ok.returncode == 6, ok.stderr
        bad = run(dict(e, SANDBOXD_API_KEY="wrong"), "shell", body["id"], stdin=b"exit 6\n")
        assert bad.returncode == 1
        assert b"401" in bad.stderr
    finally:
        d.cleanup()
