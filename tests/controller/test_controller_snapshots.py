"""The internal snapshot API (issue 15 item 7; seed 003 "Internal Snapshot
API"): /api/v1/internal/snapshots… behind the internal token. A profile is
a class of warm sandboxes with its own CPUs and memory: warm prepares them,
restore hands one (or a new one when none is warm) to the default org,
status counts them, cleanup removes profiles by age and keep-limit (dry run
first), delete removes a profile and its warm sandboxes. The restored
sandbox runs code under the profile's limits (read from its cgroup)."""
import os
import threading
import time
import uuid

import pytest

from controller_common import CTL_SETS, V1, Daemon, all_addresses_daemon
from test_controller_metrics import get_from, non_loopback_address

SNAP = V1 + "/internal/snapshots"
TOKEN = "tok-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def snap():
    """No internal token: loopback clients only. Listens on every address
    so the non-loopback refusal can be tried."""
    d = all_addresses_daemon()
    yield d
    d.cleanup()


def create(d, key, vcpu=1, mib=64, **extra):
    body = {"profile": key, "vcpu_count": vcpu, "mem_size_mib": mib}
    body.update(extra)
    return d.post(SNAP, body)


def made(d, key, **kw):
    status, body, _ = create(d, key, **kw)
    assert status == 201, body
    return body


def status_of(d, headers=None):
    status, body, _ = d.get(SNAP + "/status", headers=headers)
    assert status == 200, body
    return body


def drop_all(d):
    status, body, _ = d.get(SNAP)
    assert status == 200, body
    for p in body["snapshots"]:
        assert d.request("DELETE", f"{SNAP}/{p['profileKey']}")[0] == 200


def workspace_images(d):
    root = os.path.join(d.data_dir, "sandboxes")
    return set(os.listdir(root)) if os.path.isdir(root) else set()


# ---- profiles ----

def test_create_list_get_delete(snap):
    drop_all(snap)
    p = made(snap, "2vcpu-2048mb", vcpu=2 if os.cpu_count() >= 2 else 1, mib=2048,
             kernel_path="/var/lib/firecracker/kernel/vmlinux", rootfs_path="/var/lib/firecracker/rootfs/r.ext4")
    assert p["profileKey"] == "2vcpu-2048mb" and p["memSizeMib"] == 2048 and p["version"] == 1
    assert p["memoryPath"] is None and p["statePath"] is None
    assert p["snapshotType"] == "warm-pool" and p["memoryBackend"] == "none"
    assert p["kernelPath"] == "/var/lib/firecracker/kernel/vmlinux" and p["warmCount"] == 0
    assert p["createdAt"].endswith("Z")
    # createdAt has millisecond resolution: two profiles made within one millisecond tie, and
    # a tie lists by key (descending). Let the clock move on so "newest first" is well defined.
    time.sleep(0.005)
    made(snap, "1vcpu-512mb", mib=512)

    status, body, _ = snap.get(SNAP)
    assert status == 200, body
    assert body["enabled"] is True and body["total"] == 2
    assert [s["profileKey"] for s in body["snapshots"]] == ["1vcpu-512mb", "2vcpu-2048mb"]  # newest first
    status, got, _ = snap.get(SNAP + "/2vcpu-2048mb")
    assert status == 200 and got == p

    st = status_of(snap)
    assert st["enabled"] is True and st["snapshotCount"] == 2
    assert st["snapshotDir"] == os.path.join(snap.data_dir, "sandboxes")
    assert st["memoryBackend"] == "none" and st["snapshotType"] == "warm-pool"

    status, body, _ = snap.request("DELETE", SNAP + "/2vcpu-2048mb")
    assert status == 200 and body["deleted"] is True and body["profileKey"] == "2vcpu-2048mb", body
    assert snap.get(SNAP + "/2vcpu-2048mb")[0] == 404
    assert snap.request("DELETE", SNAP + "/2vcpu-2048mb")[0] == 404
    assert snap.get(SNAP)[1]["total"] == 1


def test_validation(snap):
    bad = [{}, {"profile": "Upper", "vcpu_count": 1, "mem_size_mib": 64},
           {"profile": "-dash", "vcpu_count": 1, "mem_size_mib": 64},
           {"profile": "a" * 65, "vcpu_count": 1, "mem_size_mib": 64},
           {"profile": "status", "vcpu_count": 1, "mem_size_mib": 64},
           {"profile": "has/slash", "vcpu_count": 1, "mem_size_mib": 64},
           {"profile": 7, "vcpu_count": 1, "mem_size_mib": 64},
           {"profile": "ok", "mem_size_mib": 64}, {"profile": "ok", "vcpu_count": 1},
           {"profile": "ok", "vcpu_count": 0, "mem_size_mib": 64},
           {"profile": "ok", "vcpu_count": "1", "mem_size_mib": 64},
           {"profile": "ok", "vcpu_count": 1.5, "mem_size_mib": 64},
           {"profile": "ok", "vcpu_count": (os.cpu_count() or 1) + 1, "mem_size_mib": 64},
           {"profile": "ok", "vcpu_count": 1, "mem_size_mib": 8},
           {"profile": "ok", "vcpu_count": 1, "mem_size_mib": 1 << 30},
           {"profile": "ok", "vcpu_count": 1, "mem_size_mib": 64, "kernel_path": 3},
           {"profile": "ok", "vcpu_count": 1, "mem_size_mib": 64, "rootfs_path": "x" * 2000}]
    for body in bad:
        status, res, _ = snap.post(SNAP, body)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", (body, res)
    status, res, _ = snap.request("POST", SNAP, raw=b"not json", headers={"Content-Type": "application/json"})
    assert status == 400, res
    assert snap.get(SNAP + "/ok")[0] == 404
    # The longest and shortest keys are fine.
    for key in ("a", "a" * 64, "0.x_y-z"):
        made(snap, key)
        assert snap.request("DELETE", f"{SNAP}/{key}")[0] == 200

    made(snap, "val-p")
    for body in ({"count": 0}, {"count": 5}, {"count": "2"}, {"count": 1, "profile": 3}):
        status, res, _ = snap.post(SNAP + "/warm", body)
        assert status == 400, (body, res)
    status, res, _ = snap.post(SNAP + "/warm", {"profile": "nope"})
    assert status == 404 and res["error"]["code"] == "NOT_FOUND", res
    for body in ({}, {"dry_run": True}, {"keep_most_recent": -1}, {"max_age_seconds": "1"},
                 {"keep_most_recent": 1, "dry_run": "yes"}):
        status, res, _ = snap.post(SNAP + "/cleanup", body)
        assert status == 400, (body, res)
    assert snap.post(SNAP + "/nope/restore")[0] == 404
    assert snap.request("DELETE", SNAP + "/val-p")[0] == 200


def test_put_again_is_a_new_version_and_drops_its_warm_sandboxes(snap):
    made(snap, "again", mib=64)
    status, res, _ = snap.post(SNAP + "/warm", {"profile": "again", "count": 1})
    assert status == 200 and res["profiles"][0]["warm"] == 1, res
    status, p, _ = create(snap, "again", mib=96)
    assert status == 200, p
    assert p["version"] == 2 and p["memSizeMib"] == 96 and p["warmCount"] == 0
    assert snap.request("DELETE", SNAP + "/again")[0] == 200


# ---- warm, restore ----

def cgroup_limits(daemon_pid, run):
    """While run() executes code in a sandbox, the memory limit and CPU
    quota (fraction of a CPU) of the sandbox's cgroup, read on the host:
    the parent group of a jail process of this daemon that run() started
    (processes older than run() — the warm sandboxes' idle kernels, pool
    members — are someone else's)."""
    found = {}
    older = set(filter(str.isdigit, os.listdir("/proc")))
    t = threading.Thread(target=run)
    t.start()
    marker = f"/sandboxd-{daemon_pid}-"
    deadline = time.time() + 15
    while not found and time.time() < deadline and t.is_alive():
        for pid in set(filter(str.isdigit, os.listdir("/proc"))) - older:
            try:
                with open(f"/proc/{pid}/cgroup") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                _, ctrl, path = line.split(":", 2)
                # <daemon group>/s<N>/x<M>: a jail in a sandbox's group
                # (others sit right under the daemon's group).
                if marker not in path or len(path.split(marker, 1)[1].split("/")) < 3:
                    continue
                parent = os.path.dirname(path)
                if ctrl == "memory":
                    found["memory"] = int(open(f"/sys/fs/cgroup/memory{parent}/memory.limit_in_bytes").read())
                elif ctrl in ("cpu", "cpu,cpuacct"):
                    d = f"/sys/fs/cgroup/{ctrl}{parent}"
                    quota = int(open(f"{d}/cpu.cfs_quota_us").read())
                    found["cpus"] = quota / int(open(f"{d}/cpu.cfs_period_us").read())
                elif ctrl == "" and os.path.exists(f"/sys/fs/cgroup{parent}/memory.max"):
                    found["memory"] = int(open(f"/sys/fs/cgroup{parent}/memory.max").read())
                    q, period = open(f"/sys/fs/cgroup{parent}/cpu.max").read().split()
                    found["cpus"] = int(q) / int(period)
        time.sleep(0.1)
    t.join()
    return found


def run_in(d, sid, seconds=0.0):
    code = f"import time\ntime.sleep({seconds})\nprint('ran in', {sid!r})"
    status, res, _ = d.post(f"/languages/python/sandboxes/{sid}/execute", {"code": code})
    assert status == 200, res
    assert res["logs"]["stdout"][0] == f"ran in {sid}", res
    return res


def test_warm_status_and_restore_with_the_profiles_limits(snap):
    key, mib = "1vcpu-200mb", 200
    made(snap, key, vcpu=1, mib=mib)
    before = workspace_images(snap)
    status, res, _ = snap.post(SNAP + "/warm", {"profile": key, "count": 2})
    assert status == 200, res
    assert res["prepared"] == 2 and res["profiles"] == [
        {"profileKey": key, "prepared": 2, "warm": 2, "complete": True}]
    assert status_of(snap)["warm"][key] == 2
    assert len(workspace_images(snap) - before) == 2  # their images exist now
    # Topping up to a count that is there already makes none.
    status, res, _ = snap.post(SNAP + "/warm", {"profile": key, "count": 2})
    assert status == 200 and res["prepared"] == 0, res
    assert snap.get(f"{SNAP}/{key}")[1]["warmCount"] == 2

    ids = []
    for expect_warm in (True, True, False):
        status, r, _ = snap.post(f"{SNAP}/{key}/restore")
        assert status == 200, r
        assert r["warm"] is expect_warm and r["restored"] is True and r["orgId"] == "default", r
        assert r["cpus"] == 1.0 and r["memory_bytes"] == mib << 20, r
        assert r["restoreMs"] >= 0
        ids.append(r["sandboxId"])
    assert len(set(ids)) == 3
    assert status_of(snap)["warm"][key] == 0
    assert set(ids[:2]) <= workspace_images(snap) - before  # the warm ones were handed over

    # A taken sandbox is an ordinary one of the default org: it runs code,
    # under the profile's limits (its cgroup on the host).
    for sid in (ids[0], ids[2]):
        limits = cgroup_limits(snap.proc.pid, lambda: run_in(snap, sid, 1.5))
        if not limits:
            pytest.skip("no cgroup of the sandbox found on this host")
        assert limits.get("memory") == mib << 20, limits
        assert limits.get("cpus") == 1.0, limits
    status, res, _ = snap.get(f"/languages/python/sandboxes/{ids[0]}")
    assert status == 200, res
    assert snap.request("DELETE", f"{SNAP}/{key}")[0] == 200


def test_warm_every_profile_and_delete_removes_its_warm_sandboxes(snap):
    drop_all(snap)
    made(snap, "wa")
    made(snap, "wb")
    images = workspace_images(snap)
    status, res, _ = snap.post(SNAP + "/warm")  # no body: count 1, every profile
    assert status == 200, res
    assert res["count"] == 1 and res["prepared"] == 2
    assert sorted(p["profileKey"] for p in res["profiles"]) == ["wa", "wb"]
    st = status_of(snap)
    assert st["warm"] == {"wa": 1, "wb": 1} and st["warmTotal"] == 2
    new = workspace_images(snap) - images
    assert len(new) == 2
    status, res, _ = snap.request("DELETE", SNAP + "/wa")
    assert status == 200 and res["warmRemoved"] == 1, res
    assert len(new & workspace_images(snap)) == 1  # wa's image is gone, wb's stays
    assert status_of(snap)["warm"] == {"wb": 1}
    drop_all(snap)
    assert not new & workspace_images(snap)


def test_warm_sandboxes_survive_a_restart(tmp_path):
    d = Daemon(sets=CTL_SETS, data_dir=str(tmp_path))
    try:
        made(d, "durable")
        assert d.post(SNAP + "/warm", {"count": 2})[1]["prepared"] == 2
    finally:
        d.cleanup()
    d = Daemon(sets=CTL_SETS, data_dir=str(tmp_path))
    try:
        assert status_of(d)["warm"] == {"durable": 2}
        status, r, _ = d.post(SNAP + "/durable/restore")
        assert status == 200 and r["warm"] is True, r
        run_in(d, r["sandboxId"])
        assert status_of(d)["warm"] == {"durable": 1}
    finally:
        d.cleanup()


# ---- cleanup ----

def test_cleanup_dry_run_then_for_real(snap):
    drop_all(snap)
    made(snap, "c-old")
    assert snap.post(SNAP + "/warm", {"profile": "c-old"})[0] == 200
    time.sleep(2.5)
    for key in ("c-1", "c-2", "c-3"):
        made(snap, key)
        time.sleep(0.01)
    images = workspace_images(snap)
    plan = {"keep_most_recent": 2, "max_age_seconds": 2, "dry_run": True}
    status, res, _ = snap.post(SNAP + "/cleanup", plan)
    assert status == 200, res
    assert res == {"message": "Snapshot cleanup completed", "dry_run": True, "profiles_removed": 2,
                   "removed_profiles": ["c-1", "c-old"], "profiles_removed_by_age": 1,
                   "profiles_removed_by_keep_limit": 1, "total_found": 4, "total_remaining": 2}
    assert snap.get(SNAP)[1]["total"] == 4  # nothing removed
    assert status_of(snap)["warm"]["c-old"] == 1 and workspace_images(snap) == images

    plan["dry_run"] = False
    status, res, _ = snap.post(SNAP + "/cleanup", plan)
    assert status == 200 and res["dry_run"] is False and res["profiles_removed"] == 2, res
    left = [p["profileKey"] for p in snap.get(SNAP)[1]["snapshots"]]
    assert left == ["c-3", "c-2"]
    assert len(images - workspace_images(snap)) == 1  # c-old's warm sandbox went with it
    assert snap.get(SNAP + "/c-old")[0] == 404

    # keep only: the newest one stays.
    status, res, _ = snap.post(SNAP + "/cleanup", {"keep_most_recent": 1})
    assert status == 200, res
    assert res["removed_profiles"] == ["c-2"] and res["profiles_removed_by_keep_limit"] == 1
    assert res["profiles_removed_by_age"] == 0 and res["total_remaining"] == 1
    drop_all(snap)


# ---- auth ----

def test_no_token_means_loopback_only(snap):
    assert snap.get(SNAP)[0] == 200  # loopback
    addr = non_loopback_address()
    if not addr:
        pytest.skip("no non-loopback address on this host")
    for path in (SNAP, SNAP + "/status", SNAP + "/any"):
        status, body = get_from(addr, snap.port, path)
        assert status == 401 and b"AUTH_REQUIRED" in body, body


@pytest.fixture(scope="module")
def token_daemon():
    d = Daemon(sets=CTL_SETS + [f"controller.internal_token={TOKEN}"])
    yield d
    d.cleanup()


ROUTES = [("GET", SNAP), ("GET", SNAP + "/status"), ("POST", SNAP), ("POST", SNAP + "/warm"),
          ("POST", SNAP + "/cleanup"), ("GET", SNAP + "/p"), ("DELETE", SNAP + "/p"),
          ("POST", SNAP + "/p/restore")]


@pytest.mark.parametrize("headers", [None, {"X-Internal-Token": "wrong"}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": f"ApiKey {TOKEN}"}, {"X-Internal-Token": TOKEN[:-1]}])
def test_token_required_when_configured(token_daemon, headers):
    for method, path in ROUTES:
        status, body, _ = token_daemon.request(method, path, body={"profile": "p"}, headers=headers)
        assert status == 401 and body["error"]["code"] == "AUTH_REQUIRED", (method, path, body)


@pytest.mark.parametrize("headers", [{"X-Internal-Token": TOKEN}, {"Authorization": f"Bearer {TOKEN}"}])
def test_token_accepted(token_daemon, headers):
    status, body, _ = token_daemon.request("POST", SNAP, body={"profile": "tok", "vcpu_count": 1,
                                                                "mem_size_mib": 32}, headers=headers)
    assert status in (200, 201), body
    assert token_daemon.get(SNAP + "/tok", headers=headers)[0] == 200
    assert status_of(token_daemon, headers)["snapshotCount"] == 1
    assert token_daemon.request("DELETE", SNAP + "/tok", headers=headers)[0] == 200
