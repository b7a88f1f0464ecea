"""Shared by the attack suite's files (test_attacks_*.py): constants, the
raw-syscall guest prelude, request helpers, process checks and the host
sentinel fixture.

Every test performs the attack against a real daemon over HTTP and asserts the
SAFE OUTCOME (the limit fires and is reported, the syscall gets EPERM, the
host file is untouched, the daemon still answers), not merely "no crash".
Rows for features sandboxd does not have (archives, network-enabled mode)
are skipped with the reason. docs/security.md ("## Attack suite") maps each
row to its test and outcome.

Syscall numbers are x86_64; the rows that use raw numbers skip elsewhere."""
import concurrent.futures
import http.client
import json
import os
import platform
import socket
import stat
import tempfile
import threading
import time
import uuid

import pytest

from attack_helpers import ATTACK_LIMITS, DAEMON_SECRET, DAEMON_SECRET_NAME, ROOT, Daemon

IS_ROOT = os.geteuid() == 0
X86_64 = platform.machine() == "x86_64"
# Root: the jail user is uid 65534 on the host (rootless jails map it to the
# invoking user), workspaces are ext4 images, and the sentinel needs chown.
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (host uid 65534, cgroup files, chown)")
needs_x86_64 = pytest.mark.skipif(not X86_64, reason="raw syscall numbers are x86_64")

JAIL_UID = "65534"
# Host uids of jails (issue 10): jail.id_base/jail.id_count's defaults.
JAIL_HOST_IDS = range(1000000000, 1000000000 + 65536)
EPERM, ENOENT, ESRCH, EACCES, EXDEV, ENOSPC, EFBIG, EROFS, EMFILE, ENOSYS = 1, 2, 3, 13, 18, 28, 27, 30, 24, 38
EAFNOSUPPORT = 97

# Guest prelude: raw syscalls through ctypes, returning [ret, errno].
SYSCALLS = r'''
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    conv = []
    for a in args:
        if isinstance(a, int):
            conv.append(ctypes.c_long(a))
        elif isinstance(a, bytes):
            conv.append(ctypes.c_char_p(a))
        else:
            conv.append(a)
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    return [r, ctypes.get_errno()]
'''


# ---- helpers -------------------------------------------------------------


def sid():
    return "atk-" + uuid.uuid4().hex[:12]


def run(d, code, lang="python", **extra):
    """Stateless execution; HTTP 200 is part of the contract."""
    body = {"code": code}
    body.update(extra)
    status, res, _ = d.post(f"/execute/{lang}", body)
    assert status == 200, res
    return res


def sbx(d, s, code, lang="python", **extra):
    body = {"code": code}
    body.update(extra)
    status, res, _ = d.post(f"/languages/{lang}/sandboxes/{s}/execute", body)
    assert status == 200, res
    return res


def files(d, s, **body):
    status, res, _ = d.post(f"/languages/python/sandboxes/{s}/files", body)
    return status, res


def delete_sandbox(d, s):
    d.request("DELETE", f"/languages/python/sandboxes/{s}")


def value(res):
    """The single result of a successful execution (json or text)."""
    assert "error" not in res, res.get("error")
    assert res["results"], res
    r = res["results"][0]
    return r["json"] if "json" in r else r["text"]


def limit_error(res, *words):
    err = res.get("error")
    assert err and err["name"] == "ExecutionLimitError", res
    assert any(w in err["message"] for w in words), err["message"]
    return err["message"]


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)


def assert_alive(d):
    """The daemon process is alive and serves both kinds of route."""
    assert d.proc.poll() is None, d.read_log()
    os.kill(d.proc.pid, 0)
    status, body, _ = d.get("/health")
    assert status == 200 and body == {"status": "ok", "ok": True}
    assert value(run(d, "6 * 7")) == "42"


def jail_procs(marker):
    """Host view: processes running as a jail's host uid whose cmdline has marker."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            uid = proc_status(pid)["Uid"].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, KeyError):
            continue
        if int(uid) in JAIL_HOST_IDS and marker.encode() in cmd:
            out.append((int(pid), cmd))
    return out


def assert_no_jail_procs(marker, timeout=3.0):
    deadline = time.time() + timeout
    while jail_procs(marker) and time.time() < deadline:
        time.sleep(0.05)
    assert not jail_procs(marker), jail_procs(marker)


def wait_jail_procs(marker, timeout=3.0):
    deadline = time.time() + timeout
    while not jail_procs(marker) and time.time() < deadline:
        time.sleep(0.05)
    return jail_procs(marker)


def daemon_fds(d):
    return len(os.listdir(f"/proc/{d.proc.pid}/fd"))


def daemon_rss_kib(d):
    return int(proc_status(d.proc.pid)["VmRSS"].split()[0])


def raw_http(port, data, read_timeout=5.0, shutdown=False):
    """Sends raw bytes, returns whatever the server answers before closing
    (or before read_timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        try:
            s.sendall(data)
            if shutdown:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close early (that is a valid answer)
        chunks = []
        try:
            while True:
                c = s.recv(65536)
                if not c:
                    break
                chunks.append(c)
        except (socket.timeout, ConnectionResetError):
            pass
        return b"".join(chunks)
    finally:
        s.close()


def status_of(raw):
    if not raw.startswith(b"HTTP/1."):
        return None
    return int(raw.split(b" ", 2)[1])


@pytest.fixture
def sentinel():
    """A host directory outside the data dir with a world-writable file: if
    the files API ever followed a guest symlink here, fsuid 65534 could read
    and write it, so only non-following protects it."""
    base = tempfile.mkdtemp(prefix="sbx-attack-sentinel-")
    os.chmod(base, 0o777)
    secret = os.path.join(base, "secret")
    with open(secret, "w") as f:
        f.write("HOST-SENTINEL-CONTENT")
    os.chmod(secret, 0o666)
    if IS_ROOT:
        os.chown(base, 4321, 4321)
        os.chown(secret, 4321, 4321)
    before = snapshot_tree(base)
    yield base, secret, before
    for name in os.listdir(base):
        p = os.path.join(base, name)
        if os.path.isdir(p) and not os.path.islink(p):
            os.rmdir(p)
        else:
            os.unlink(p)
    os.rmdir(base)


def snapshot_tree(base):
    snap = {}
    for name in sorted(os.listdir(base)):
        p = os.path.join(base, name)
        st = os.lstat(p)
        content = None
        if stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                content = f.read()
        snap[name] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ino, content)
    st = os.lstat(base)
    snap["."] = (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
    return snap
