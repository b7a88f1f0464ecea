"""Starts a language kernel directly (no jail) the way the daemon does."""
import fcntl
import json
import os
import selectors
import socket
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL_DIR = os.path.join(ROOT, "src", "runtimes", "kernels")

COMMANDS = {
    "python": ["/usr/bin/python3", "-I", os.path.join(KERNEL_DIR, "python_kernel.py")],
    "javascript": ["/usr/bin/node", "--max-old-space-size=256",
                   os.path.join(KERNEL_DIR, "node_kernel.js")],
    "perl": ["/usr/bin/perl", os.path.join(KERNEL_DIR, "perl_kernel.pl")],
    "ruby": ["/usr/bin/ruby", "--disable-gems", os.path.join(KERNEL_DIR, "ruby_kernel.rb")],
}

TIMEOUT = 15.0


def _split_lines(data):
    text = data.decode("utf-8", "replace")
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


class Kernel:
    def __init__(self, lang, mode, workspace, extra_env=None):
        self.lang = lang
        self.mode = mode
        self.workspace = str(workspace)
        parent, child = socket.socketpair()
        self.sock = parent
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
               "SANDBOX_WORKSPACE_ROOT": self.workspace}
        if extra_env:
            env.update(extra_env)
        child_fd = child.fileno()

        def setup_fd3():
            os.dup2(child_fd, 3)  # dup2 clears close-on-exec on fd 3

        self.proc = subprocess.Popen(
            COMMANDS[lang] + [mode], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, cwd="/", close_fds=False,
            preexec_fn=setup_fd3)
        child.close()
        for pipe in (self.proc.stdout, self.proc.stderr):
            fl = fcntl.fcntl(pipe.fileno(), fcntl.F_GETFL)
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETFL, fl | os.O_NONBLOCK)
        self.buf = b""
        self.out = {"stdout": b"", "stderr": b""}
        self.ready = self._read_line()

    def _drain(self):
        for name, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            while True:
                try:
                    chunk = os.read(pipe.fileno(), 65536)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                self.out[name] += chunk

    def _read_line(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ, "sock")
        sel.register(self.proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(self.proc.stderr, selectors.EVENT_READ, "stderr")
        try:
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("kernel did not answer; stderr=%r" % self.out["stderr"])
                for key, _ in sel.select(left):
                    if key.data == "sock":
                        chunk = self.sock.recv(65536)
                        if not chunk:
                            self._drain()
                            raise EOFError("kernel closed fd 3; stderr=%r" % self.out["stderr"])
                        self.buf += chunk
                    else:
                        try:
                            chunk = os.read(key.fileobj.fileno(), 65536)
                        except BlockingIOError:
                            continue
                        if chunk:
                            self.out[key.data] += chunk
                        else:
                            sel.unregister(key.fileobj)
        finally:
            sel.close()
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def run(self, code, env=None, cwd=None, result_limit=65536, typescript=False,
            replay=False, timeout=TIMEOUT, **extra):
        req = {"code": code, "env": env or {}, "cwd": cwd or self.workspace,
               "resultLimit": result_limit, "typescript": typescript, "replay": replay}
        req.update(extra)
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        resp = self._read_line(timeout)
        self._drain()
        resp["stdout"] = _split_lines(self.out["stdout"])
        resp["stderr"] = _split_lines(self.out["stderr"])
        self.out = {"stdout": b"", "stderr": b""}
        return resp

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self._drain()
        self.sock.close()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc


def run_once(lang, code, workspace, **kw):
    """Starts a kernel in once mode, runs one request, checks it exits 0."""
    k = Kernel(lang, "once", workspace)
    try:
        assert k.ready == {"ready": True}
        resp = k.run(code, **kw)
    finally:
        rc = k.close()
    resp["exit"] = rc
    return resp
