"""Issue 10, tenant isolation in rootless mode (row 3 for a daemon that is
not root): with a subordinate uid range for the daemon's user (/etc/subuid,
mapped by the setuid newuidmap), every sandbox's jail user is its own host
uid from that range, never the daemon's; without one the daemon still runs
(one mapping to its own uid) and says so in its log.

The daemon runs as nobody inside a private mount namespace where a temporary
/etc/subuid is bind-mounted over the real one: the host's files are never
edited."""
import os
import shutil
import subprocess
import tempfile
import uuid

import pytest

from attack_helpers import Daemon, api

BIN = api.BIN
NOBODY = 65534
SUB_BASE, SUB_COUNT = 200000, 65536

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare")
    or not os.path.exists("/usr/bin/newuidmap") or not os.path.exists("/etc/subuid"),
    reason="needs root, setpriv, unshare, an /etc/subuid to bind over and newuidmap (package uidmap)")

AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
# Who the jail user is on the host, and a file it writes.
WHO = "print([l.split() for l in open('/proc/self/uid_map') if l.split()[0] == '65534'][0])\n"
PROBE = ("import os\n" + WHO +
         "open('/workspace/{name}', 'w').write('secret of {sid}')\nos.chmod('/workspace/{name}', 0o644)\n")


def reachable_by_nobody(path):
    return subprocess.run(AS_NOBODY + ["test", "-x", path]).returncode == 0


def start(tmp, subuid_text):
    """A rootless daemon whose /etc/subuid (in its own mount namespace) is
    subuid_text."""
    sub = os.path.join(tmp, "subuid")
    with open(sub, "w") as f:
        f.write(subuid_text)
    os.chmod(sub, 0o644)
    bind = 'mount --bind "$1" /etc/subuid && shift && exec "$@"'
    wrapper = ["unshare", "-m", "--propagation", "private", "sh", "-c", bind, "sh", sub] + AS_NOBODY
    data = api.nosuid_data_dir(NOBODY)
    try:
        return Daemon(data_dir=data, wrapper=wrapper, sets=["limits.memory_bytes=128M", "limits.wall_ms=5000"]), data
    except Exception:
        api.release_data_dir(data)
        raise


def probe(d, sid):
    name = "f-" + sid
    status, res, _ = d.post(f"/languages/python/sandboxes/{sid}/execute",
                            {"code": PROBE.format(name=name, sid=sid)})
    assert status == 200 and "error" not in res, res
    inner, outer, count = eval("\n".join(res["logs"]["stdout"]))
    assert (inner, count) == ("65534", "1"), res
    return int(outer), name


def host_path(data, name):
    for root, _, files in os.walk(data):
        if name in files:
            return os.path.join(root, name)
    raise AssertionError(f"{name} not found under {data}")


def can_read_as(uid, path):
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "cat", path],
                          capture_output=True).returncode == 0


@pytest.fixture
def scratch():
    if not reachable_by_nobody(BIN):
        pytest.skip("the build is not reachable by an unprivileged user here")
    tmp = tempfile.mkdtemp(prefix="sandboxd-subuid-")
    os.chmod(tmp, 0o755)
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


def test_row_03_rootless_sandboxes_get_own_subordinate_uids(scratch):
    d, data = start(scratch, f"nobody:{SUB_BASE}:{SUB_COUNT}\n")
    try:
        a, b = "rla-" + uuid.uuid4().hex[:8], "rlb-" + uuid.uuid4().hex[:8]
        uid_a, file_a = probe(d, a)
        uid_b, file_b = probe(d, b)
        for uid in (uid_a, uid_b):
            assert SUB_BASE <= uid < SUB_BASE + SUB_COUNT and uid != NOBODY, (uid_a, uid_b)
        assert uid_a != uid_b
        # The same sandbox keeps its id; a stateless run gets another one.
        assert probe(d, a)[0] == uid_a
        status, res, _ = d.post("/execute/python", {"code": WHO})
        assert status == 200, res
        stateless = int(eval(res["logs"]["stdout"][0])[1])
        assert SUB_BASE <= stateless < SUB_BASE + SUB_COUNT and stateless not in (uid_a, uid_b), stateless
        # On the host, the guest's files belong to the sandbox's id...
        path_a, path_b = host_path(data, file_a), host_path(data, file_b)
        assert os.stat(path_a).st_uid == uid_a and os.stat(path_b).st_uid == uid_b
        # ...and the other sandbox's uid cannot read them (nor any other).
        assert not can_read_as(uid_b, path_a) and not can_read_as(uid_a, path_b)
        # Positive control: the daemon's own identity (the files API) can.
        assert can_read_as(NOBODY, path_a)
        files = f"/languages/python/sandboxes/{a}/files"
        status, body, _ = d.post(files, {"op": "read", "path": file_a})
        assert status == 200 and body["content"] == "secret of " + a, body
        # Files written through the API are readable by the guest, and the
        # API can delete what the guest made.
        assert d.post(files, {"op": "write", "path": "api.txt", "content": "from api"})[0] == 200
        status, res, _ = d.post(f"/languages/python/sandboxes/{a}/execute",
                                {"code": "import os\nos.makedirs('/workspace/g/h')\nopen('/workspace/g/h/x', 'w')\n"
                                         "print(open('/workspace/api.txt').read())"})
        assert status == 200 and res["logs"]["stdout"] == ["from api"], res
        assert d.post(files, {"op": "delete", "path": "g", "recursive": True})[0] == 200
        # The daemon still ends what a sandbox's id runs (wall clock), and
        # the sandbox goes on.
        status, res, _ = d.post(f"/languages/python/sandboxes/{b}/execute", {"code": "import time\ntime.sleep(100)"})
        assert status == 200 and res["error"]["name"] == "ExecutionLimitError", res
        assert probe(d, b)[0] == uid_b
        assert "every sandbox runs as the daemon's own uid" not in d.read_log()
    finally:
        d.stop()
        d.cleanup()
        api.release_data_dir(data)


@pytest.mark.parametrize("subuid", ["someoneelse:300000:65536\n", "nobody:300000:10\n"])
def test_row_03_rootless_without_subuid_entry_warns_and_works(scratch, subuid):
    d, data = start(scratch, subuid)
    try:
        uid, name = probe(d, "rlc-" + uuid.uuid4().hex[:8])
        assert uid == NOBODY
        assert os.stat(host_path(data, name)).st_uid == NOBODY
        assert "every sandbox runs as the daemon's own uid" in d.read_log()
    finally:
        d.stop()
        d.cleanup()
        api.release_data_dir(data)
