"""Rootless mode: the daemon as an unprivileged user runs every jail in a
user namespace (no cgroups without delegation: memory falls back to
RLIMIT_DATA; workspaces are plain directories)."""
import os
import shutil
import subprocess
import time

import pytest

from conftest import BIN, Daemon, nosuid_data_dir, release_data_dir

NOBODY = 65534


def nobody_can_reach(path):
    out = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                          "test", "-r", path], capture_output=True)
    return out.returncode == 0


pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root to start the daemon as another user")


def test_rootless_daemon_runs_jails_and_contexts():
    if not nobody_can_reach(BIN) or not nobody_can_reach(os.path.join(os.path.dirname(BIN), "..", "src",
                                                                        "runtimes", "kernels", "python_kernel.py")):
        pytest.skip("the checkout is not readable by an unprivileged user here")
    # Rootless mode needs a data dir on a nosuid file system.
    tmp = nosuid_data_dir(NOBODY)
    d = None
    try:
        d = Daemon(data_dir=tmp, wrapper=["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"],
                   sets=["limits.memory_bytes=128M", "limits.wall_ms=5000"])
        status, ready, _ = d.get("/ready")
        assert ready["cgroup"] == "none"
        # The shell's pre-spawned jails work rootless too: a pooled command.
        deadline = time.monotonic() + 20
        while d.get("/ready")[1]["pools"]["shell"]["ready"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        res = d.execute("shell", "id -u; pwd; echo $X", envVars={"X": "y"})
        assert res["logs"]["stdout"][1:] == ["/workspace", "y"], res
        assert d.get("/ready")[1]["pools"]["shell"]["hits"] == 1
        res = d.execute("python", "import os\n[os.getuid() != 0, sorted(int(p) for p in os.listdir('/proc') if p.isdigit())]")
        not_root, pids = res["results"][0]["json"]
        assert not_root and max(pids) < 10
        res = d.execute("python", "x = bytearray(512 * 1024 * 1024)")
        assert res["error"]["name"] in ("MemoryError", "ExecutionLimitError")
        res = d.execute("python", "import time\ntime.sleep(100)")
        assert res["error"]["name"] == "ExecutionLimitError"
        base = "/languages/ruby/sandboxes/rootless1"
        assert d.post(base + "/execute", {"code": "x = 41"})[0] == 200
        status, body, _ = d.post(base + "/execute", {"code": "x + 1"})
        assert body["results"] == [{"text": "42"}]
    finally:
        if d:
            d.stop()
        release_data_dir(tmp)


def test_rootless_destroy_removes_a_deep_guest_tree():
    """A rootless workspace is a plain directory the guest filled: deleting
    the sandbox removes a tree thousands of levels deep with the bounded,
    non-recursive walk, and the daemon keeps serving."""
    if not nobody_can_reach(BIN):
        pytest.skip("the checkout is not readable by an unprivileged user here")
    tmp = nosuid_data_dir(NOBODY)
    d = None
    try:
        d = Daemon(data_dir=tmp, wrapper=["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"],
                   sets=["limits.memory_bytes=128M", "limits.wall_ms=20000", "limits.workspace_inodes=100000"])
        base = "/languages/python/sandboxes/deeptree"
        code = ("import os\nos.chdir('/workspace')\nfor i in range(3000):\n"
                "    os.mkdir('d')\n    os.chdir('d')\n    open('f', 'w').close()\nos.symlink('/', 'up')\n3000")
        status, body, _ = d.post(base + "/execute", {"code": code})
        assert status == 200 and body["results"] == [{"text": "3000"}], body
        mnt = os.path.join(tmp, "mnt", "deeptree")
        assert os.path.isdir(os.path.join(mnt, "d", "d", "d"))
        status, body, _ = d.request("DELETE", "/languages/python/sandboxes/deeptree")
        assert status == 200, body
        assert not os.path.exists(mnt)
        assert os.path.isdir("/usr/bin")  # the symlink to / was removed, never followed
        assert d.get("/health")[0] == 200
    finally:
        if d:
            d.stop()
        release_data_dir(tmp)
