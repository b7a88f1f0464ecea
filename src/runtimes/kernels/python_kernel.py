"""sandboxd Python kernel (see docs/kernel-protocol.md).

Run as: /usr/bin/python3 -I python_kernel.py once|repl
fd 3 is the control socket (newline-delimited JSON); fd 1/2 carry guest output.
Only the standard library; keep the imports before "ready" minimal.
"""
import ast
import json
import os
import sys

CTL_FD = 3
SANDBOX_FILE = "<sandbox>"
DEFAULT_RESULT_LIMIT = 65536
WORKSPACE_ROOT = os.environ.get("SANDBOX_WORKSPACE_ROOT") or "/workspace"
if len(WORKSPACE_ROOT) > 1:
    WORKSPACE_ROOT = WORKSPACE_ROOT.rstrip("/")


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _send(obj):
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    # Lone surrogates (from surrogateescape'd data) cannot be encoded: replace them.
    _write_all(CTL_FD, line.encode("utf-8", "replace") + b"\n")


def _flush_guest_streams():
    for name in ("stdout", "stderr"):
        for stream in (getattr(sys, name, None), getattr(sys, "__%s__" % name, None)):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass


def _utf8_len(s):
    return len(s.encode("utf-8", "surrogatepass"))


def _limit_text(limit):
    if limit % 1024 == 0:
        return "%d KiB" % (limit // 1024)
    return "%d bytes" % limit


def _confined_cwd():
    try:
        cwd = os.getcwd()
    except OSError:
        return WORKSPACE_ROOT
    if cwd == WORKSPACE_ROOT or cwd.startswith(WORKSPACE_ROOT.rstrip("/") + "/"):
        return cwd
    return WORKSPACE_ROOT


def _map_result(value):
    """Returns ((kind, encoded), utf8_size), or (None, 0) for no result."""
    if value is None:
        return None, 0
    if isinstance(value, (dict, list)):
        try:
            payload = json.dumps(value, allow_nan=False, ensure_ascii=False,
                                 separators=(",", ":"))
        except Exception:
            payload = None
        if payload is not None:
            return ("json", payload), _utf8_len(payload)
    text = repr(value)
    return ("text", text), _utf8_len(text)


def _format_error(exc):
    # Drop the kernel's own frames (and stdlib frames it called, e.g. ast.parse):
    # the traceback starts at the first guest frame.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != SANDBOX_FILE:
        tb = tb.tb_next
    try:
        import traceback
        te = traceback.TracebackException(type(exc), exc, tb)
        lines = "".join(te.format()).rstrip("\n").split("\n")
    except Exception:
        lines = ["%s: %s" % (type(exc).__name__, exc)]
    if not lines or lines[0] != "Traceback (most recent call last):":
        lines.insert(0, "Traceback (most recent call last):")
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable %s object>" % type(exc).__name__
    return {"name": type(exc).__name__, "message": message, "traceback": lines}


class Kernel:
    def __init__(self, mode):
        self.mode = mode
        # The guest gets its own __main__ module; the kernel's globals stay out of it.
        self.kernel_module = sys.modules.get("__main__")
        self.guest_module = type(sys)("__main__")
        self.guest_module.__dict__.update({
            "__builtins__": __builtins__, "__doc__": None,
            "__package__": None, "__spec__": None,
        })
        self.ns = self.guest_module.__dict__
        sys.modules["__main__"] = self.guest_module
        sys.path.insert(0, WORKSPACE_ROOT)
        self.pid = os.getpid()

    def _register_source(self, code):
        try:
            import linecache
            linecache.cache[SANDBOX_FILE] = (len(code), None,
                                             code.splitlines(True), SANDBOX_FILE)
        except Exception:
            pass

    def _run_code(self, code):
        """Executes code in the guest namespace; returns the last expression's value."""
        self._register_source(code)
        tree = ast.parse(code, SANDBOX_FILE, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        if tree.body:
            exec(compile(tree, SANDBOX_FILE, "exec"), self.ns)
        if last is not None:
            return eval(compile(last, SANDBOX_FILE, "eval"), self.ns)
        return None

    def handle(self, req):
        if req.get("reseed"):
            rnd = sys.modules.get("random")
            if rnd is not None:
                rnd.seed()
        env = req.get("env") or {}
        os.environ.clear()
        for key, val in env.items():
            try:
                os.environ[str(key)] = str(val)
            except Exception:
                pass
        limit = req.get("resultLimit")
        if not isinstance(limit, int) or limit <= 0:
            limit = DEFAULT_RESULT_LIMIT
        results = []
        error = None
        child_status = 0
        try:
            cwd = req.get("cwd")
            if cwd:
                os.chdir(cwd)
            try:
                import importlib
                importlib.invalidate_caches()
            except Exception:
                pass
            value = self._run_code(req.get("code") or "")
            entry, size = _map_result(value)
            if entry is not None:
                if size > limit:
                    error = {"name": "ExecutionLimitError",
                             "message": "Result limit exceeded (%s)" % _limit_text(limit),
                             "traceback": []}
                elif entry[0] == "json":
                    results = [{"json": json.loads(entry[1])}]
                else:
                    results = [{"text": entry[1]}]
            value = entry = None
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            child_status = 1
            if isinstance(exc, SystemExit):
                child_status = exc.code if isinstance(exc.code, int) else (exc.code is not None)
            if os.getpid() == self.pid:
                error = _format_error(exc)
            exc = None
        _flush_guest_streams()
        if os.getpid() != self.pid:  # a forked guest child must never answer on fd 3
            os._exit(int(child_status) & 0xFF)
        return {"results": results, "error": error, "cwd": _confined_cwd()}


# ---- zygote mode: a fork server that never runs guest code itself ----------
#
# The template process is uid 0 of its own user namespace (capabilities
# there, none on the host), already booted and warmed up. For each request
# the daemon sends one byte with three fds (stdout, stderr, control socket)
# over fd 3. The template forks; the child unshares mount, pid, ipc and uts
# namespaces, forks a pid-1 reaper that mounts a private /tmp, /workspace and
# /proc, and forks the executor, which reports its pid to the daemon with
# SCM_CREDENTIALS (the daemon moves it into a fresh cgroup), then drops to the
# jail uid, applies rlimits, Landlock scoping and the daemon's seccomp filter,
# and only then serves the request like a once-mode kernel.

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC, _CLONE_NEWPID = 0x20000, 0x4000000, 0x8000000, 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_RDONLY = 2, 4, 8, 1
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PROC_MASKS = ("kcore", "kallsyms", "keys", "timer_list", "sched_debug", "sysrq-trigger", "kmsg",
               "latency_stats", "config.gz", "modules", "vmallocinfo", "slabinfo", "pagetypeinfo",
               "buddyinfo", "zoneinfo", "iomem", "ioports", "kpagecount", "kpageflags", "kpagecgroup")


class _Zygote:
    def __init__(self, cfg):
        import base64
        import ctypes
        import socket
        import struct
        self.ctypes, self.socket, self.struct = ctypes, socket, struct
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.bpf = base64.b64decode(cfg["seccomp"])
        self.tmp_opts = cfg["tmpOpts"].encode()
        self.ws_opts = cfg["wsOpts"].encode()
        self.rlimits = cfg.get("rlimits") or []
        self.uid = int(cfg.get("uid", 65534))

    def _check(self, ret, what):
        if ret < 0:
            err = self.ctypes.get_errno()
            raise OSError(err, "%s: %s" % (what, os.strerror(err)))

    def _mount(self, src, target, fstype, flags, data=None):
        self._check(self.libc.mount(src, target, fstype, self.ctypes.c_ulong(flags), data), "mount " + target.decode())

    def _private_mounts(self):
        self._mount(None, b"/", None, _MS_REC | _MS_PRIVATE)
        self._mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, self.tmp_opts)
        self._mount(b"tmpfs", b"/workspace", b"tmpfs", _MS_NOSUID | _MS_NODEV, self.ws_opts)
        self._mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        for name in _PROC_MASKS:
            path = b"/proc/" + name.encode()
            if os.path.exists(path):
                self._mount(b"/dev/null", path, None, _MS_BIND)
        self._mount(b"/proc/sys", b"/proc/sys", None, _MS_BIND | _MS_REC)
        self._mount(None, b"/proc/sys", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)

    def _report_pid_and_wait(self):
        sock = self.socket.socket(self.socket.AF_UNIX, self.socket.SOCK_STREAM, fileno=os.dup(CTL_FD))
        creds = self.struct.pack("iII", os.getpid(), os.getuid(), os.getgid())
        sock.sendmsg([b"P"], [(self.socket.SOL_SOCKET, self.socket.SCM_CREDENTIALS, creds)])
        go = sock.recv(1)
        sock.close()
        if go != b"G":
            os._exit(1)

    def _confine(self):
        import resource
        for res, soft, hard in self.rlimits:
            resource.setrlimit(res, (soft, hard))
        for cap in range(64):  # empty bounding set (needs CAP_SETPCAP, so before setuid)
            if self.libc.prctl(24, cap, 0, 0, 0) < 0 and self.ctypes.get_errno() != 22:
                self._check(-1, "capbset_drop")
        self.libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
        os.setgroups([])
        os.setresgid(self.uid, self.uid, self.uid)
        os.setresuid(self.uid, self.uid, self.uid)  # leaves every capability behind
        ct = self.ctypes
        # Landlock: scope abstract unix sockets and signals to this execution.
        attr = self.struct.pack("QQQ", 0, 0, 3)
        buf = ct.create_string_buffer(attr, len(attr))
        fd = self.libc.syscall(444, buf, ct.c_size_t(len(attr)), ct.c_uint(0))
        if fd >= 0:
            self._check(self.libc.syscall(446, ct.c_int(fd), ct.c_uint(0)), "landlock_restrict_self")
            os.close(fd)
        # seccomp: the daemon's compiled policy (struct sock_fprog).
        filt = ct.create_string_buffer(self.bpf, len(self.bpf))
        prog = self.struct.pack("HxxxxxxQ", len(self.bpf) // 8, ct.addressof(filt))
        pbuf = ct.create_string_buffer(prog, len(prog))
        self._check(self.libc.prctl(22, 2, pbuf, 0, 0), "seccomp")  # PR_SET_SECCOMP, MODE_FILTER

    def _executor(self):
        os.closerange(4, 65536)
        self._private_mounts()  # still namespace root here, in pid 1's mount namespace
        self._report_pid_and_wait()
        self._confine()
        rnd = sys.modules.get("random")
        if rnd is not None:
            rnd.seed()
        _serve("once", Kernel("once"), announce=True)

    def _child(self, fds):
        """Runs as pid 1 of the execution's new namespaces: forks the
        executor, then only reaps (touching as little memory as possible,
        since every page it writes is a copy-on-write fault)."""
        import signal
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Own session and process group: kill(0, …) from the guest must not
        # reach the template or other executions.
        os.setsid()
        for i, fd in enumerate(fds):
            os.dup2(fd, i + 1)
            os.close(fd)
        executor = os.fork()
        if executor == 0:
            self._executor()
            os._exit(0)
        os.closerange(0, 65536)
        while True:
            try:
                done, status = os.wait()
            except ChildProcessError:
                os._exit(0)
            if done == executor:
                os._exit(0)  # tears the namespace down, escapees included

    def serve(self):
        import gc
        import signal
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        # Everything allocated so far is shared with every child; keep the
        # collector from walking (and so copying) those pages.
        gc.collect()
        gc.freeze()
        sock = self.socket.socket(self.socket.AF_UNIX, self.socket.SOCK_STREAM, fileno=os.dup(CTL_FD))
        _send({"ready": True})
        while True:
            msg, fds, _flags, _addr = self.socket.recv_fds(sock, 1, 3)
            if not msg:
                os._exit(0)
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                continue
            # One raw clone() creates the child directly in new mount, pid,
            # ipc and uts namespaces (pid 1 there), instead of fork +
            # unshare + fork. The template is single-threaded, so skipping
            # os.fork()'s interpreter bookkeeping is safe.
            pid = self.libc.syscall(56, self.ctypes.c_ulong(_CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC |
                                                            _CLONE_NEWUTS | 17), 0, 0, 0, 0)
            if pid == 0:
                sock.close()
                try:
                    self._child(fds)
                finally:
                    os._exit(1)
            for fd in fds:
                os.close(fd)


def _zygote_main():
    os.set_inheritable(CTL_FD, False)
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except Exception:
        pass
    kernel = Kernel("once")
    kernel.handle({"code": "1+1", "env": dict(os.environ)})
    ctl = open(CTL_FD, "rb", buffering=0, closefd=False)
    line = ctl.readline()  # {"zygote": {...}} from the daemon
    cfg = json.loads(line)["zygote"]
    # Nobody drains the template's own stdout/stderr pipes (each executor
    # gets fresh ones): a stray warning must not be able to block it.
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    _Zygote(cfg).serve()


def _serve(mode, kernel, announce):
    ctl = open(CTL_FD, "rb", buffering=65536, closefd=False)
    if announce:
        _send({"ready": True})
    while True:
        line = ctl.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("request must be an object")
        except Exception as exc:
            _send({"results": [], "cwd": _confined_cwd(),
                   "error": {"name": "EngineError", "message": "bad request: %s" % exc,
                             "traceback": []}})
            if mode == "once":
                break
            continue
        resp = kernel.handle(req)
        _send(resp)
        if mode == "once":
            break
    _flush_guest_streams()
    os._exit(0)


def _main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "once"
    if mode == "zygote":
        _zygote_main()
    if mode not in ("once", "repl"):
        sys.stderr.write("usage: python_kernel.py once|repl|zygote\n")
        os._exit(2)
    os.set_inheritable(CTL_FD, False)
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except Exception:
        pass
    kernel = Kernel(mode)
    # Warm up: one trivial cell through the real path loads the lazily
    # imported machinery, so the first real request pays none of it.
    kernel.handle({"code": "1+1", "env": dict(os.environ)})
    _serve(mode, kernel, announce=True)


if __name__ == "__main__":
    _main()
