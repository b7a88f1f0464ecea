"""Bridge API basics: /health, sandbox ids, create and delete, /running,
the error envelope, auth with a key (Bearer in any case, constant-time
compare) and without one (loopback Host only)."""
import re

import pytest

from bridge_common import Daemon, new_sandbox

ID_RE = re.compile(r"^[a-z2-7]{26}$")


def test_health_is_ok_for_both_facades(bridge):
    status, body, _ = bridge.get("/health")
    assert status == 200
    assert body["ok"] is True and body["status"] == "ok"


def test_create_gives_a_26_char_base32_id(bridge):
    ids = {new_sandbox(bridge) for _ in range(3)}
    assert len(ids) == 3
    assert all(ID_RE.match(i) for i in ids)


def test_a_bridge_sandbox_is_the_runtime_api_sandbox(bridge):
    sid = new_sandbox(bridge)
    status, body, _ = bridge.get(f"/languages/python/sandboxes/{sid}")
    assert status == 200, body


@pytest.mark.parametrize("bad", ["ABC", "a1", "a_b", "a" * 129, "%2e%2e"])
def test_bad_ids_are_400_before_auth(bad):
    d = Daemon(sets=["api_key=k3y"])
    try:
        status, body, _ = d.get(f"/v1/sandbox/{bad}/running")
        assert status == 400
        assert body == {"error": "Invalid sandbox ID format", "code": "invalid_request"}
    finally:
        d.cleanup()


def test_delete_is_204_with_an_empty_body(bridge):
    sid = new_sandbox(bridge)
    status, body, _ = bridge.request("DELETE", f"/v1/sandbox/{sid}")
    assert status == 204 and body is None
    # An id never used: the same answer.
    status, body, _ = bridge.request("DELETE", "/v1/sandbox/" + "b" * 26)
    assert status == 204 and body is None


def test_running(bridge):
    sid = new_sandbox(bridge)
    status, body, _ = bridge.get(f"/v1/sandbox/{sid}/running")
    assert status == 200 and body == {"running": True}


def test_unversioned_paths_are_404(bridge):
    status, _, _ = bridge.post("/sandbox")
    assert status == 404


def test_unknown_v1_route_uses_the_bridge_envelope(bridge):
    status, body, _ = bridge.get("/v1/nothing-here")
    assert status == 404
    assert set(body) == {"error", "code"}


def test_auth_with_a_key():
    d = Daemon(sets=["api_key=s3cret"])
    try:
        status, body, _ = d.post("/v1/sandbox")
        assert status == 401 and body["code"] == "unauthorized"
        status, _, _ = d.post("/v1/sandbox", headers={"Authorization": "Bearer wrong"})
        assert status == 401
        for scheme in ("Bearer", "bearer", "BEARER"):
            status, body, _ = d.post("/v1/sandbox", headers={"Authorization": f"{scheme} s3cret"})
            assert status == 200, (scheme, body)
        # /health stays open.
        assert d.get("/health")[0] == 200
    finally:
        d.cleanup()


def test_auth_from_the_sandbox_api_key_env():
    d = Daemon(env={"SANDBOX_API_KEY": "envkey"})
    try:
        assert d.post("/v1/sandbox")[0] == 401
        assert d.post("/v1/sandbox", headers={"Authorization": "Bearer envkey"})[0] == 200
    finally:
        d.cleanup()


def test_without_a_key_only_loopback_hosts(bridge):
    status, body, _ = bridge.post("/v1/sandbox", headers={"Host": "evil.example:8787"})
    assert status == 403 and set(body) == {"error", "code"}


def test_a_bridge_sandbox_has_a_containers_disk(bridge):
    """bridge.workspace_bytes (256 MiB) and bridge.file_bytes, not the runtime
    API's 16 MiB / 1 MiB: a 20 MiB file fits; a runtime API sandbox keeps its
    own small quota."""
    from bridge_common import exec_sse
    sid = new_sandbox(bridge)
    status, _, _, out, err, code = exec_sse(
        bridge, sid, ["bash", "-c", "head -c 20971520 /dev/zero > big && stat -c %s big && df -k --output=size . | tail -1"])
    assert status == 200 and code == 0, err
    size, quota_kb = out.split()
    assert int(size) == 20971520
    assert int(quota_kb) > 200 * 1024
    # The same id reached through the runtime API is the same sandbox, quota included.
    status, body, _ = bridge.post(f"/languages/python/sandboxes/{sid}/execute",
                                  {"code": "import os; os.path.getsize('/workspace/big')"})
    assert status == 200 and body["results"][0]["text"] == "20971520", body


def test_a_runtime_api_sandbox_keeps_its_quota_under_the_bridge(bridge):
    from bridge_common import exec_sse
    sid = "runtimeapi" + "a" * 16
    status, body, _ = bridge.post(f"/languages/python/sandboxes/{sid}/execute", {"code": "1"})
    assert status == 200, body
    status, _, _, out, err, code = exec_sse(bridge, sid, ["bash", "-c", "df -k --output=size . | tail -1"])
    assert code == 0, err
    assert int(out) < 20 * 1024


def test_delete_kills_what_runs_in_the_sandbox(bridge):
    """A sessionless /exec still running when its sandbox is deleted ends
    at once (killed), rather than running on a copy of a deleted workspace."""
    import threading
    import time
    from bridge_common import exec_sse
    sid = new_sandbox(bridge)
    res = {}

    def run():
        res["r"] = exec_sse(bridge, sid, ["bash", "-c", "sleep 30; echo survived"], timeout=60)
    t = threading.Thread(target=run)
    t.start()
    time.sleep(1)
    assert bridge.request("DELETE", f"/v1/sandbox/{sid}")[0] == 204
    t.join(15)
    assert not t.is_alive(), "the command outlived its sandbox"
    status, _, events, out, _, code = res["r"]
    assert b"survived" not in out and code == 137, events
