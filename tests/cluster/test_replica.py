"""The workspace replica (issue 16 item 3; src/sandbox/replica.c) on one
real daemon: `--set cluster.replica=dir:<tmp>` makes every written
workspace appear in the shared directory as <id>.tar (a whole tar, read here
with Python's tarfile) with its manifest <id>.json; a burst of writes makes
far fewer persists than writes (the manifest's generation counts them);
stopping the daemon leaves the replica up to date; deleting the sandbox
deletes its replica; without the setting nothing is written. The restore
path (sbx_replica_restore, called by the cluster module when a node adopts a
dead node's sandbox) has no HTTP trigger of its own: it is covered by
tests/unit/sandbox/test_replica.c (persist, drift, restore round trip).
The s3:// target is tested against s3rver when s3fs, FUSE and root are
there."""
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from api_loader import load_api  # noqa: E402
from s3rver_common import KEY, S3, s3fs_missing  # noqa: E402

api = load_api()
Daemon = api.Daemon
DELAY_MS = 200


def sid():
    return "r-" + uuid.uuid4().hex[:12]


def write(d, s, path, content):
    status, res, _ = d.post(f"/languages/python/sandboxes/{s}/files", {"op": "write", "path": path, "content": content})
    assert status == 200, res


def tar_files(data):
    """{relative path: bytes} of the regular files of a tar."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            if m.isfile():
                out[m.name.removeprefix("./")] = t.extractfile(m).read()
    return out


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def poll(fn, timeout=15):
    """fn() until it returns something truthy (then that), or fail."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out")


class Replica:
    """The replica directory as another node would read it."""

    def __init__(self, path):
        self.path = path

    def tar(self, s):
        return read(os.path.join(self.path, f"{s}.tar"))

    def manifest(self, s):
        data = read(os.path.join(self.path, f"{s}.json"))
        return json.loads(data) if data else None

    def files(self, s):
        data = self.tar(s)
        return tar_files(data) if data else {}

    def settled(self, s):
        """The manifest once it names the tar beside it (the tar is renamed
        into place first, its manifest right after)."""
        mf, tar = self.manifest(s), self.tar(s)
        return mf if mf and tar and mf["sha256"] == hashlib.sha256(tar).hexdigest() else None

    def has(self, s, want):
        """The tar when it holds every {path: bytes} of want."""
        got = self.files(s)
        return got if all(got.get(k) == v for k, v in want.items()) else None


@pytest.fixture
def setup():
    tmp = tempfile.mkdtemp(prefix="replica-")
    rdir = os.path.join(tmp, "shared")
    d = Daemon(sets=api.FAST_LIMITS + [f"cluster.replica=dir:{rdir}", f"cluster.replica_delay_ms={DELAY_MS}"])
    yield d, Replica(rdir)
    d.cleanup()
    shutil.rmtree(tmp, ignore_errors=True)


def test_written_files_reach_the_replica(setup):
    d, rep = setup
    s = sid()
    write(d, s, "/workspace/a.txt", "alpha")
    status, res, _ = d.post(f"/languages/python/sandboxes/{s}/files", {"op": "mkdir", "path": "/workspace/sub"})
    assert status == 200, res
    write(d, s, "/workspace/sub/b.txt", "beta")
    status, res, _ = d.post(f"/languages/python/sandboxes/{s}/execute",
                            {"code": "open('/workspace/from_code.txt','w').write('gamma')"})
    assert status == 200, res
    got = poll(lambda: rep.has(s, {"a.txt": b"alpha", "sub/b.txt": b"beta", "from_code.txt": b"gamma"}))
    assert set(got) >= {"a.txt", "sub/b.txt", "from_code.txt"}
    mf = poll(lambda: rep.settled(s))
    tar = rep.tar(s)
    assert mf["id"] == s and mf["bytes"] == len(tar) and mf["generation"] >= 1
    assert mf["sha256"] == hashlib.sha256(tar).hexdigest()
    assert abs(mf["persisted_at"] / 1000 - time.time()) < 60
    # Whole files only: once quiet, no temp file is left beside them.
    poll(lambda: sorted(os.listdir(rep.path)) == sorted([f"{s}.tar", f"{s}.json"]))


def test_a_burst_is_coalesced(setup):
    d, rep = setup
    s = sid()
    write(d, s, "/workspace/first.txt", "0")
    poll(lambda: rep.has(s, {"first.txt": b"0"}))
    before = poll(lambda: rep.settled(s))["generation"]
    for i in range(20):
        write(d, s, f"/workspace/f{i:02d}.txt", str(i))
    poll(lambda: rep.has(s, {f"f{i:02d}.txt": str(i).encode() for i in range(20)}))
    time.sleep(3 * DELAY_MS / 1000)  # any persist still due lands now
    persists = poll(lambda: rep.settled(s))["generation"] - before
    print(f"20 writes, {persists} persists")
    assert 1 <= persists <= 10, persists  # one per delay at most, never one per write


def test_stop_flushes_and_delete_removes(setup):
    d, rep = setup
    s, gone = sid(), sid()
    write(d, gone, "/workspace/x.txt", "x")
    poll(lambda: rep.has(gone, {"x.txt": b"x"}))
    status, res, _ = d.request("DELETE", f"/languages/python/sandboxes/{gone}")
    assert status in (200, 204), res
    poll(lambda: rep.tar(gone) is None and rep.manifest(gone) is None)
    # Written and stopped at once: the shutdown flush, not the thread, keeps it.
    write(d, s, "/workspace/last.txt", "last words")
    d.stop()
    assert rep.has(s, {"last.txt": b"last words"})


def test_no_replica_by_default(tmp_path):
    d = Daemon()
    try:
        s = sid()
        write(d, s, "/workspace/a.txt", "alpha")
        time.sleep(3 * DELAY_MS / 1000)
        found = [os.path.join(r, f) for r, _, fs in os.walk(d.data_dir) for f in fs if f.endswith(".tar")]
        assert not found, found
        assert "replica" not in d.read_log()
    finally:
        d.cleanup()


def test_bad_target_refuses_to_start(tmp_path):
    with pytest.raises(RuntimeError, match="daemon exited"):
        Daemon(sets=api.FAST_LIMITS + ["cluster.replica=ftp://nowhere"])


@pytest.mark.skipif(s3fs_missing() is not None, reason=str(s3fs_missing()))
def test_s3_target():
    s3 = S3()
    d = None
    try:
        d = Daemon(sets=api.FAST_LIMITS + ["cluster.replica=s3://bkt/replica", f"cluster.replica_delay_ms={DELAY_MS}",
                                           f"controller.artifact_s3_endpoint={s3.endpoint}"],
                   env={"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": KEY})
        s = sid()
        write(d, s, "/workspace/a.txt", "in a bucket")

        def in_bucket():
            data = s3.object("bkt", f"replica/{s}.tar")
            return data if data and tar_files(data).get("a.txt") == b"in a bucket" else None

        tar = poll(in_bucket, timeout=30)
        mf = json.loads(poll(lambda: s3.object("bkt", f"replica/{s}.json"), timeout=30))
        assert mf["sha256"] == hashlib.sha256(tar).hexdigest()
        d.stop()
        assert not [line for line in open("/proc/self/mountinfo") if d.data_dir in line and "fuse.s3fs" in line]
    finally:
        if d:
            d.cleanup()
        s3.stop()
