"""Controller sandboxes (issue 12, item 3): create (Idempotency-Key aware),
list (paginated, the caller's org only), get, status, stop and delete; the
isolation, size and timeout checks; the absolute expiry; and org isolation:
another org — and the single-key APIs of org "default" — get a 404 for a
sandbox, guessed ids included."""
import time
import uuid

from controller_common import V1, account, apikey, raw


def creds_of(d):
    return apikey(account(d)["api_key"]["key"])


def create(d, creds, body=None, headers=None):
    h = dict(creds)
    h.update(headers or {})
    return raw(d, "POST", V1 + "/sandbox/create", body if body is not None else {}, headers=h)


def new_sandbox(d, creds, **body):
    status, res, _ = create(d, creds, body)
    assert status == 201, res
    return res


def test_create_get_status_stop(ctl):
    creds = creds_of(ctl)
    sb = new_sandbox(ctl, creds, cpus="0.5", memory="256Mi", timeout_seconds=120, env={"EXAMPLE": "true"})
    sid = sb["sandbox_id"]
    assert uuid.UUID(sid).version == 4
    assert sb["status"] == "running" and sb["org_id"].startswith("org_")
    assert sb["cpus"] == 0.5 and sb["memory_bytes"] == 256 << 20
    assert isinstance(sb["startup_metrics"]["total_ms"], int)
    assert sb["created_at"] < sb["expires_at"]
    status, got, _ = raw(ctl, "GET", V1 + f"/sandbox/{sid}", headers=creds)
    assert status == 200 and got["sandbox_id"] == sid and got["expires_at"] == sb["expires_at"]
    status, st, _ = raw(ctl, "GET", V1 + f"/sandbox/{sid}/status", headers=creds)
    assert status == 200 and st == {"sandbox_id": sid, "status": "running", "expires_at": sb["expires_at"]}
    status, res, _ = raw(ctl, "POST", V1 + f"/sandbox/{sid}/stop", headers=creds)
    assert status == 200 and res == {"sandbox_id": sid, "status": "stopped"}
    for path in (f"/sandbox/{sid}", f"/sandbox/{sid}/status"):
        status, res, _ = raw(ctl, "GET", V1 + path, headers=creds)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND"
    assert raw(ctl, "POST", V1 + f"/sandbox/{sid}/stop", headers=creds)[0] == 404


def test_delete_alias_and_unknown_ids(ctl):
    creds = creds_of(ctl)
    sid = new_sandbox(ctl, creds)["sandbox_id"]
    status, res, _ = raw(ctl, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)
    assert status == 200 and res["status"] == "stopped"
    assert raw(ctl, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)[0] == 404
    for bad in (str(uuid.uuid4()), "..", "www", "a" * 200):
        assert raw(ctl, "GET", V1 + f"/sandbox/{bad}", headers=creds)[0] == 404, bad


def test_list_is_paginated_and_per_org(ctl):
    a, b = creds_of(ctl), creds_of(ctl)
    ids = [new_sandbox(ctl, a)["sandbox_id"] for _ in range(3)]
    status, page, _ = raw(ctl, "GET", V1 + "/sandboxes?limit=2&offset=0", headers=a)
    assert status == 200 and page["total"] == 3 and page["has_more"] is True
    assert [s["sandbox_id"] for s in page["data"]] == ids[:2]
    status, page, _ = raw(ctl, "GET", V1 + "/sandboxes?limit=2&offset=2", headers=a)
    assert [s["sandbox_id"] for s in page["data"]] == ids[2:] and page["has_more"] is False
    status, other, _ = raw(ctl, "GET", V1 + "/sandboxes", headers=b)
    assert status == 200 and other["total"] == 0 and other["data"] == []
    assert raw(ctl, "GET", V1 + "/sandboxes?limit=-1", headers=a)[0] == 400
    assert raw(ctl, "GET", V1 + "/sandboxes")[0] == 401


def test_other_org_gets_404_everywhere(ctl):
    a, b = creds_of(ctl), creds_of(ctl)
    sid = new_sandbox(ctl, a)["sandbox_id"]
    routes = [("GET", f"/sandbox/{sid}", None), ("GET", f"/sandbox/{sid}/status", None),
              ("POST", f"/sandbox/{sid}/execute", {"command": "true"}),
              ("GET", f"/sandbox/{sid}/files?path=x", None),
              ("GET", f"/sandbox/{sid}/files/download?path=x", None),
              ("POST", f"/sandbox/{sid}/files", {"files": [{"path": "x", "content": ""}]}),
              ("POST", f"/sandbox/{sid}/stop", None), ("DELETE", f"/sandbox/{sid}", None)]
    for method, path, body in routes:
        status, res, _ = raw(ctl, method, V1 + path, body, headers=b)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND", (method, path, status, res)
    # Still there for its owner after all that.
    assert raw(ctl, "GET", V1 + f"/sandbox/{sid}", headers=a)[0] == 200


def test_single_key_apis_cannot_reach_a_controller_sandbox(ctl):
    """The runtime API acts for org "default" by id: a controller
    sandbox's id is an unknown one there (the domain refuses it), never
    its files, env or contexts. (The bridge refuses a UUID id before that.)"""
    a = creds_of(ctl)
    sid = new_sandbox(ctl, a)["sandbox_id"]
    base = f"/languages/python/sandboxes/{sid}"
    status, res, _ = raw(ctl, "GET", base)
    assert status == 404, res
    status, res, _ = raw(ctl, "POST", base + "/execute", {"code": "print(1)"})
    assert status == 404, res
    status, res, _ = raw(ctl, "POST", base + "/files", {"operation": "write", "path": "x", "content": "y"})
    assert status == 404, res
    # A runtime-API DELETE does nothing to it (as for an unknown id).
    raw(ctl, "DELETE", base)
    assert raw(ctl, "GET", V1 + f"/sandbox/{sid}", headers=a)[0] == 200
    # And a default-org sandbox is not the controller's.
    status, made, _ = raw(ctl, "POST", "/v1/sandbox")
    assert status == 200
    assert raw(ctl, "GET", V1 + f"/sandbox/{made['id']}", headers=a)[0] == 404


def test_idempotent_create(ctl):
    creds = creds_of(ctl)
    key = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    status, first, h1 = create(ctl, creds, {"timeout_seconds": 60}, key)
    assert status == 201 and dict(h1)["idempotency-status"] == "stored"
    status, again, h2 = create(ctl, creds, {"timeout_seconds": 60}, key)
    assert status == 201 and dict(h2)["idempotency-status"] == "replayed"
    assert again["sandbox_id"] == first["sandbox_id"]
    status, res, _ = create(ctl, creds, {"timeout_seconds": 61}, key)
    assert status == 409 and res["error"]["code"] == "IDEMPOTENCY_KEY_REUSE_MISMATCH"
    status, page, _ = raw(ctl, "GET", V1 + "/sandboxes", headers=creds)
    assert page["total"] == 1


def test_validation(ctl):
    creds = creds_of(ctl)
    bad = [{"cpus": "0.01"}, {"cpus": "999"}, {"cpus": "abc"}, {"cpus": "5x"}, {"cpus": -1}, {"cpus": True},
           {"memory": "1Mi"}, {"memory": "100Ti"}, {"memory": "12XB"}, {"memory": []},
           {"timeout_seconds": 0}, {"timeout_seconds": 1.5}, {"timeout_seconds": "10"},
           {"timeout_seconds": 86401}, {"env": {"1BAD": "x"}}, {"env": {"A": 1}}, {"env": []},
           {"isolation": 5}, {"isolation": "docker"}, {"isolation": "container", "wasm_network": {"enabled": True}}]
    for body in bad:
        status, res, _ = create(ctl, creds, body)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", (body, status, res)
    for iso in ("gvisor", "microvm", "wasm"):
        status, res, _ = create(ctl, creds, {"isolation": iso})
        assert status == 400 and "supported: container" in res["error"]["message"], res
    status, res, _ = create(ctl, creds, {"isolation": "wasm", "wasm_network": {"enabled": True}})
    assert status == 400
    for ok in ({"cpus": 1, "memory": 64 << 20}, {"cpus": "500m", "memory": "100M"}, {"isolation": "container"}):
        status, res, _ = create(ctl, creds, ok)
        assert status == 201, (ok, res)
    status, page, _ = raw(ctl, "GET", V1 + "/sandboxes", headers=creds)
    assert page["total"] == 3


def test_timeout_is_an_absolute_expiry(ctl):
    creds = creds_of(ctl)
    sid = new_sandbox(ctl, creds, timeout_seconds=2)["sandbox_id"]
    deadline = time.time() + 15
    gone = False
    while time.time() < deadline:
        # Activity (a status read) does not renew the deadline.
        if raw(ctl, "GET", V1 + f"/sandbox/{sid}/status", headers=creds)[0] == 404:
            gone = True
            break
        time.sleep(0.3)
    assert gone
    status, page, _ = raw(ctl, "GET", V1 + "/sandboxes", headers=creds)
    time.sleep(1.5)  # the reaper has taken it from the store too
    status, page, _ = raw(ctl, "GET", V1 + "/sandboxes", headers=creds)
    assert page["total"] == 0


def test_every_route_needs_auth(ctl):
    sid = new_sandbox(ctl, creds_of(ctl))["sandbox_id"]
    routes = [("POST", "/sandbox/create", {}), ("GET", "/sandboxes", None), ("GET", f"/sandbox/{sid}", None),
              ("GET", f"/sandbox/{sid}/status", None), ("POST", f"/sandbox/{sid}/stop", None),
              ("DELETE", f"/sandbox/{sid}", None), ("POST", f"/sandbox/{sid}/execute", {"command": "true"}),
              ("POST", f"/sandbox/{sid}/files", {"files": []}), ("GET", f"/sandbox/{sid}/files?path=x", None),
              ("GET", f"/sandbox/{sid}/files/download?path=x", None)]
    for method, path, body in routes:
        for creds in ({}, apikey("sk_" + "0" * 40)):
            status, res, _ = raw(ctl, method, V1 + path, body, headers=creds)
            assert status == 401, (method, path, status, res)
