"""The bridge's warm pool (issue 11 item 10, reference §8): /v1/pool/stats,
/shutdown-prewarmed and /prime; POST /v1/sandbox takes a prepared sandbox
(its workspace image existed before the request) and the pool refills off
the request path; warm sandboxes are invisible to tenants, outside the
tenant caps, and survive a restart without leaking workspace images.
No timings are asserted here (bench/ measures them)."""
import os
import shutil
import signal
import tempfile
import time

import pytest

from bridge_common import FAST_LIMITS, Daemon, api, exec_sse, new_sandbox

# The runtime API's warm sandboxes (a warm class, sandbox.warm_runtime) off:
# they would take room under the caps and images these tests count.
NO_RT = FAST_LIMITS + ["sandbox.warm_runtime=0"]

KEY = "p00l-k3y"
AUTH = {"Authorization": f"Bearer {KEY}"}
REFRESH_MS = 200


def pool_env(target=2, **extra):
    env = {"WARM_POOL_TARGET": str(target), "WARM_POOL_REFRESH_INTERVAL": str(REFRESH_MS)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def stats(d, headers=AUTH):
    status, body, _ = d.get("/v1/pool/stats", headers=headers)
    assert status == 200, body
    return body


def wait_stats(d, pred, headers=AUTH, timeout=20):
    """Polls /v1/pool/stats until pred(stats) holds; returns the stats."""
    deadline = time.time() + timeout
    while True:
        st = stats(d, headers)
        if pred(st):
            return st
        assert time.time() < deadline, f"pool never reached the state: {st}"
        time.sleep(0.05)


def images(d):
    """Ids of the sandboxes with a workspace directory in the data dir."""
    root = os.path.join(d.data_dir, "sandboxes")
    return set(os.listdir(root)) if os.path.isdir(root) else set()


def wait_images(d, pred, timeout=20):
    deadline = time.time() + timeout
    while not pred(images(d)):
        assert time.time() < deadline, images(d)
        time.sleep(0.05)


def still(d, pred, seconds, headers=AUTH):
    """pred(stats) holds for the whole period (a few refresh intervals)."""
    end = time.time() + seconds
    while time.time() < end:
        st = stats(d, headers)
        assert pred(st), st
        time.sleep(0.05)


@pytest.fixture(scope="module")
def pooled():
    d = Daemon(sets=NO_RT, env=pool_env(2, SANDBOX_API_KEY=KEY))
    yield d
    d.cleanup()


def test_stats_shape_and_disabled_by_default(bridge):
    st = stats(bridge, headers=None)
    assert set(st) == {"warm", "assigned", "total", "config", "maxInstances"}
    assert st["config"] == {"warmTarget": 0, "refreshInterval": 10000, "maxInstances": 0, "scaleBatchSize": 5}
    assert isinstance(st["maxInstances"], int) and st["maxInstances"] >= 1
    assert st["warm"] == 0 and st["total"] == st["warm"] + st["assigned"]
    # Disabled: a sandbox is still created (cold), and nothing is prepared.
    before = st["assigned"]
    sid = new_sandbox(bridge)
    still(bridge, lambda s: s["warm"] == 0, 0.5, headers=None)
    assert stats(bridge, headers=None)["assigned"] == before + 1
    status, _, _, out, _, code = exec_sse(bridge, sid, ["echo", "cold"])
    assert (status, out, code) == (200, b"cold\n", 0)


def test_pool_routes_need_the_key_in_any_case(pooled):
    for method, path in (("GET", "/v1/pool/stats"), ("POST", "/v1/pool/prime"),
                         ("POST", "/v1/pool/shutdown-prewarmed")):
        status, body, _ = pooled.request(method, path)
        assert status == 401 and body["code"] == "unauthorized", (path, body)
        status, body, _ = pooled.request(method, path, headers={"Authorization": "Bearer nope"})
        assert status == 401, (path, body)
    # The anchor wants exactly "Bearer" here; the scheme is case-insensitive.
    status, body, _ = pooled.get("/v1/pool/stats", headers={"Authorization": f"bEaReR {KEY}"})
    assert status == 200, body
    wait_stats(pooled, lambda s: s["warm"] == 2)


def test_the_pool_fills_to_its_target(pooled):
    st = wait_stats(pooled, lambda s: s["warm"] == 2)
    assert st["config"] == {"warmTarget": 2, "refreshInterval": REFRESH_MS, "maxInstances": 0, "scaleBatchSize": 5}
    assert st["total"] == st["warm"] + st["assigned"]
    # Prepared means made: each warm sandbox has its workspace image.
    assert len(images(pooled)) >= 2
    still(pooled, lambda s: s["warm"] == 2, 3 * REFRESH_MS / 1000)


def test_create_takes_a_prepared_sandbox_and_the_pool_refills(pooled):
    wait_stats(pooled, lambda s: s["warm"] == 2)
    before, made = stats(pooled), images(pooled)
    sid = new_sandbox(pooled, headers=AUTH)
    # Its workspace existed before the request: it was a warm one.
    assert sid in made
    st = stats(pooled)
    assert st["assigned"] == before["assigned"] + 1
    wait_stats(pooled, lambda s: s["warm"] == 2 and s["assigned"] == before["assigned"] + 1)
    assert len(images(pooled)) == len(made) + 1


def test_a_taken_sandbox_is_an_ordinary_sandbox(pooled):
    wait_stats(pooled, lambda s: s["warm"] == 2)
    sid = new_sandbox(pooled, headers=AUTH)
    status, _, _, out, err, code = exec_sse(pooled, sid, ["sh", "-c", "id -un; pwd; echo kept > f.txt"],
                                            headers=AUTH)
    assert (status, code) == (200, 0), err
    assert out == b"sandbox\n/workspace\n"
    status, _, _, out, _, code = exec_sse(pooled, sid, ["cat", "/workspace/f.txt"], headers=AUTH)
    assert (status, out, code) == (200, b"kept\n", 0)
    # The default org's, visible to the runtime API, with an idle expiry.
    status, body, _ = pooled.get(f"/languages/python/sandboxes/{sid}", headers=AUTH)
    assert status == 200, body
    assert body["orgId"] == "default" and body["expiresAt"]
    assert body["workspace"]["files"] == 1
    status, _, _ = pooled.request("DELETE", f"/v1/sandbox/{sid}", headers=AUTH)
    assert status == 204
    assert sid not in images(pooled)


def test_warm_sandboxes_are_invisible_to_tenants(pooled):
    wait_stats(pooled, lambda s: s["warm"] == 2)
    assigned = stats(pooled)["assigned"]
    # Take nothing; find the warm ones on disk (tenants' are never deleted here).
    tenant = new_sandbox(pooled, headers=AUTH)
    wait_stats(pooled, lambda s: s["warm"] == 2)
    warm = images(pooled) - {tenant}
    status, body, _ = pooled.get(f"/languages/python/sandboxes/{tenant}", headers=AUTH)
    assert status == 200
    visible = set()
    for wid in warm:
        status, body, _ = pooled.get(f"/languages/python/sandboxes/{wid}", headers=AUTH)
        if status == 200:
            visible.add(wid)  # a tenant's sandbox from an earlier test
    warm -= visible
    assert len(warm) == 2, (warm, visible)
    for wid in warm:
        status, _, body = exec_sse(pooled, wid, ["sh", "-c", "echo x > /workspace/owned"], headers=AUTH)[:3]
        assert status == 404, body
        status, _, _ = pooled.request("DELETE", f"/v1/sandbox/{wid}", headers=AUTH)
        assert status == 204  # nothing of the tenant's to delete: the same answer
        status, body, _ = pooled.get(f"/v1/sandbox/{wid}/running", headers=AUTH)
        assert body == {"running": False}
    # Untouched by all of that: still warm, still on disk, still empty.
    st = stats(pooled)
    assert st["warm"] == 2 and st["assigned"] == assigned + 1
    assert warm <= images(pooled)
    for wid in warm:
        assert not os.path.exists(os.path.join(pooled.data_dir, "mnt", wid, "owned"))


def test_shutdown_prewarmed_empties_and_prime_refills(pooled):
    wait_stats(pooled, lambda s: s["warm"] == 2)
    assigned = stats(pooled)["assigned"]
    with_warm = images(pooled)
    status, body, _ = pooled.post("/v1/pool/shutdown-prewarmed", headers=AUTH)
    assert (status, body) == (200, {"ok": True})
    st = stats(pooled)
    assert st["warm"] == 0 and st["assigned"] == assigned
    assert len(images(pooled)) == len(with_warm) - 2
    # Paused: it stays empty over several refresh intervals, and a create
    # still works (cold).
    still(pooled, lambda s: s["warm"] == 0, 3 * REFRESH_MS / 1000)
    sid = new_sandbox(pooled, headers=AUTH)
    assert sid not in with_warm
    status, body, _ = pooled.post("/v1/pool/prime", headers=AUTH)
    assert (status, body) == (200, {"ok": True})
    wait_stats(pooled, lambda s: s["warm"] == 2)


def test_max_instances_bounds_warm_plus_assigned():
    d = Daemon(sets=NO_RT, env=pool_env(2, WARM_POOL_MAX_INSTANCES=2, WARM_POOL_SCALE_BATCH_SIZE=99))
    try:
        st = wait_stats(d, lambda s: s["warm"] == 2, headers=None)
        assert st["maxInstances"] == 2
        assert st["config"]["maxInstances"] == 2 and st["config"]["scaleBatchSize"] == 20  # clamped
        a = new_sandbox(d)
        # One taken: warm + assigned is at the limit, so no refill.
        still(d, lambda s: (s["warm"], s["assigned"]) == (1, 1), 3 * REFRESH_MS / 1000, headers=None)
        new_sandbox(d)
        st = stats(d, headers=None)
        assert (st["warm"], st["assigned"], st["total"]) == (0, 2, 2)
        # The limit is the pool's, not the tenants': a third create is cold.
        c = new_sandbox(d)
        assert stats(d, headers=None)["assigned"] == 3
        assert exec_sse(d, c, ["true"])[5] == 0 and exec_sse(d, a, ["true"])[5] == 0
        # Room again: the pool refills up to the limit only.
        for sid in (a, c):
            d.request("DELETE", f"/v1/sandbox/{sid}")
        wait_stats(d, lambda s: (s["warm"], s["assigned"]) == (1, 1), headers=None)
    finally:
        d.cleanup()


def test_warm_sandboxes_never_take_a_tenants_place():
    # Two sandboxes at most: the pool fills both slots, yet two tenants fit.
    d = Daemon(sets=NO_RT + ["sandbox.max_sandboxes=2"], env=pool_env(2))
    try:
        wait_stats(d, lambda s: s["warm"] == 2, headers=None)
        for name in ("tenant-one", "tenant-two"):
            status, body, _ = d.get(f"/languages/python/sandboxes/{name}")
            assert status == 200, body
        st = wait_stats(d, lambda s: s["assigned"] == 2 and s["warm"] == 0, headers=None)
        assert st["total"] == 2
        # The warm ones given back are destroyed, images included.
        wait_images(d, lambda ids: ids <= {"tenant-one", "tenant-two"})
        status, body, _ = d.get("/languages/python/sandboxes/tenant-three")
        assert status == 429, body
        status, body, _ = d.post("/v1/sandbox")
        assert status == 503 and body["code"] == "capacity_exceeded", body
    finally:
        d.cleanup()


def test_a_restart_adopts_warm_sandboxes_or_removes_them():
    tmp = tempfile.mkdtemp(prefix="sandboxd-pool-")
    d = None
    try:
        d = Daemon(sets=NO_RT, data_dir=tmp, env=pool_env(2))
        wait_stats(d, lambda s: s["warm"] == 2, headers=None)
        tenant = new_sandbox(d)
        assert exec_sse(d, tenant, ["sh", "-c", "echo mine > f"])[5] == 0
        wait_stats(d, lambda s: s["warm"] == 2, headers=None)
        warm = images(d) - {tenant}
        assert len(warm) == 2
        # A crash (no clean shutdown): the next run adopts the same warm
        # sandboxes, it does not make new ones.
        d.stop(sig=signal.SIGKILL)
        d = Daemon(sets=NO_RT, data_dir=tmp, env=pool_env(2))
        st = wait_stats(d, lambda s: s["warm"] == 2, headers=None)
        assert st["assigned"] == 1
        assert images(d) == warm | {tenant}
        taken = new_sandbox(d)
        assert taken in warm
        status, _, _, out, _, code = exec_sse(d, taken, ["sh", "-c", "ls -A /workspace; id -un"])
        assert (status, out, code) == (200, b"sandbox\n", 0)
        assert exec_sse(d, tenant, ["cat", "f"])[3] == b"mine\n"
        wait_stats(d, lambda s: s["warm"] == 2, headers=None)
        warm = images(d) - {tenant, taken}
        d.stop()
        # The pool disabled: the warm ones left behind are destroyed (rows
        # and images); the tenants' stay.
        d = Daemon(sets=NO_RT, data_dir=tmp)
        wait_images(d, lambda ids: ids == {tenant, taken})
        st = stats(d, headers=None)
        assert (st["warm"], st["assigned"]) == (0, 2)
        for wid in warm:
            assert not os.path.exists(os.path.join(tmp, "mnt", wid))
        assert exec_sse(d, tenant, ["cat", "f"])[3] == b"mine\n"
    finally:
        if d:
            d.stop()
        api.unmount_under(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def test_warm_sandboxes_never_expire_but_taken_ones_do():
    d = Daemon(sets=NO_RT + ["sandbox.idle_ttl_ms=600"], env=pool_env(2))
    try:
        wait_stats(d, lambda s: s["warm"] == 2, headers=None)
        warm = images(d)
        assert len(warm) == 2
        # Several idle TTLs (the reaper runs every 100 ms here): still warm.
        still(d, lambda s: s["warm"] == 2, 2.0, headers=None)
        assert warm <= images(d)
        # Taken, it is an ordinary sandbox: idle, it expires.
        sid = new_sandbox(d)
        assert sid in warm
        assert exec_sse(d, sid, ["true"])[5] == 0
        wait_images(d, lambda ids: sid not in ids)
        assert stats(d, headers=None)["assigned"] == 0
    finally:
        d.cleanup()


def test_bad_pool_variables_refuse_to_start():
    with pytest.raises(RuntimeError, match="daemon exited"):
        Daemon(env={"WARM_POOL_TARGET": "many"})
    with pytest.raises(RuntimeError, match="daemon exited"):
        Daemon(env={"WARM_POOL_REFRESH_INTERVAL": "5"})  # below 100 ms
