"""Ready workspace images (pool.workspace_images, issue 13): a new sandbox
takes a formatted image from <data>/wspool instead of running mkfs, never
one another sandbox had, the pool refills, a killed daemon's leftover
images are deleted (not handed out) at the next start, and the images
never make a sandbox fail the disk cap. Black box: the daemon and the files
of its data dir. Needs root (rootless daemons keep no images)."""
import os
import signal
import time
import uuid

import pytest

from conftest import FAST_LIMITS, Daemon, unmount_under

# New sandboxes made cold: a warm runtime sandbox (test_warm_runtime.py)
# took its image earlier, and would hide which image a new one takes.
COLD = FAST_LIMITS + ["sandbox.warm_runtime=0"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="workspace images need root")

MIB = 1024 * 1024


def sid():
    return "wp-" + uuid.uuid4().hex[:12]


def run(d, s, code):
    status, res, _ = d.post(f"/languages/python/sandboxes/{s}/execute", {"code": code})
    return status, res


def stdout(res):
    assert "error" not in res, res.get("error")
    return "".join(res["logs"]["stdout"])


def pool_dir(d):
    return os.path.join(d.data_dir, "wspool")


def ready(d, shape="0"):
    """Ready images of one shape (0: limits.workspace_*, 1: the bridge's) → {name: inode}."""
    try:
        names = os.listdir(pool_dir(d))
    except FileNotFoundError:
        return {}
    return {n: os.stat(os.path.join(pool_dir(d), n)).st_ino for n in names
            if n.startswith(shape + "-") and n.endswith(".img")}


def wait_for(pred, what, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def image_of(d, s):
    return os.path.join(d.data_dir, "sandboxes", s, "workspace.img")


def test_new_sandboxes_take_fresh_ready_images_and_the_pool_refills():
    d = Daemon(sets=COLD)
    try:
        before = wait_for(lambda: (r := ready(d)) and len(r) == 4 and r, "4 ready images")
        a, b = sid(), sid()
        status, res = run(d, a, "open('/workspace/mine.txt', 'w').write('a'); print(sorted(__import__('os').listdir('/workspace')))")
        assert status == 200 and stdout(res) == "['mine.txt']", res
        ino_a = os.stat(image_of(d, a)).st_ino
        assert ino_a in before.values()            # it was one of the ready images…
        assert ino_a not in ready(d).values()      # …and it left the pool
        status, res = run(d, b, "print(sorted(__import__('os').listdir('/workspace')))")
        assert status == 200 and stdout(res) == "[]", res
        ino_b = os.stat(image_of(d, b)).st_ino
        assert ino_b in before.values() and ino_b != ino_a
        # A deleted sandbox's image goes with it; the next sandbox (even
        # under the same id) starts from a never-used image.
        status, _, _ = d.request("DELETE", f"/languages/python/sandboxes/{a}")
        assert status in (200, 204)
        assert not os.path.exists(image_of(d, a))
        status, res = run(d, a, "print(sorted(__import__('os').listdir('/workspace')))")
        assert status == 200 and stdout(res) == "[]", res
        wait_for(lambda: len(ready(d)) == 4, "the pool refilled")
    finally:
        d.stop()


def test_leftover_images_of_a_killed_daemon_are_deleted_not_reused():
    d = Daemon(sets=COLD)
    data, keep = d.data_dir, d.tmp
    try:
        wait_for(lambda: len(ready(d)) == 4, "4 ready images")
        d.tmp = None
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        d.log.close()
        # Mark what it left, and leave a half-made image as a crash mid-mkfs would.
        old = 946684800  # 2000-01-01
        for n in os.listdir(os.path.join(data, "wspool")):
            os.utime(os.path.join(data, "wspool", n), (old, old))
        with open(os.path.join(data, "wspool", "0-999.img.tmp"), "wb") as f:
            f.write(b"half made")
        os.utime(os.path.join(data, "wspool", "0-999.img.tmp"), (old, old))
        d2 = Daemon(sets=COLD, data_dir=data)
        try:
            wait_for(lambda: len(ready(d2)) == 4, "4 new ready images")
            names = os.listdir(os.path.join(data, "wspool"))
            assert not [n for n in names if n.endswith(".tmp") and n.startswith("0-999")]
            assert all(os.stat(os.path.join(data, "wspool", n)).st_mtime > old + 1 for n in names), names
            s = sid()
            status, res = run(d2, s, "print(1)")
            assert status == 200 and stdout(res) == "1", res
            assert os.stat(image_of(d2, s)).st_mtime > old + 1
        finally:
            d2.stop()
    finally:
        unmount_under(data)
        keep.cleanup()


def test_images_stay_within_the_disk_cap_and_never_refuse_a_sandbox():
    # Room for two default workspaces (16 MiB) and no bridge one (256 MiB).
    d = Daemon(sets=COLD + [f"sandbox.max_disk_bytes={40 * MIB}"])
    try:
        wait_for(lambda: len(ready(d)) == 2, "2 ready images")
        time.sleep(1.5)  # the filler re-checks its room every second
        assert len(ready(d)) == 2 and not ready(d, "1")
        # Tenants take their quota; the pool gives back what they need.
        s1, s2 = sid(), sid()
        for s in (s1, s2):
            status, res = run(d, s, "print(1)")
            assert status == 200 and stdout(res) == "1", res
        wait_for(lambda: len(ready(d)) == 0, "the pool trimmed to the room left")
        status, res = run(d, sid(), "print(1)")
        assert status == 507, res   # the tenants' own cap, as without images
        status, _, _ = d.request("DELETE", f"/languages/python/sandboxes/{s1}")
        assert status in (200, 204)
        wait_for(lambda: len(ready(d)) == 1, "one image again once a sandbox went")
    finally:
        d.stop()


def test_pool_off_formats_on_the_request_path():
    d = Daemon(sets=COLD + ["pool.workspace_images=0"])
    try:
        s = sid()
        status, res = run(d, s, "print(1)")
        assert status == 200 and stdout(res) == "1", res
        assert os.path.exists(image_of(d, s))
        assert not os.path.exists(pool_dir(d))
    finally:
        d.stop()
