"""Controller audit log (issue 15, item 5; seed 003 "Audit",
AUDIT_LOGS_ENABLED): a row per authenticated write with who (key or user),
what (action, method, path, status), which sandbox, from where and when;
GET /audit with filters and pagination; GET /sandbox/:id/audit/summary;
never a body or a secret; org isolation; off when disabled."""
import pytest

from controller_common import CTL_SETS, V1, Daemon, account, apikey, bearer, raw


@pytest.fixture(scope="module")
def d(ctl):
    return ctl  # conftest.py's daemon of this module


def org(d):
    acc = account(d)
    return acc, apikey(acc["api_key"]["key"])


def audit(d, creds, query=""):
    status, body, _ = raw(d, "GET", V1 + "/audit" + query, headers=creds)
    assert status == 200, body
    return body


def life(d, creds):
    """create → execute → delete one sandbox; its id."""
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status == 201, sb
    sid = sb["sandbox_id"]
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": "echo hi"}, headers=creds)
    assert status == 200, res
    status, res, _ = raw(d, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)
    assert status == 200, res
    return sid


def test_rows_for_create_execute_delete_with_the_key(d):
    acc, creds = org(d)
    sid = life(d, creds)
    body = audit(d, creds, f"?sandbox_id={sid}")
    rows = body["data"]
    assert body["total"] == 3 and not body["has_more"]
    # Newest first.
    assert [r["action"] for r in rows] == ["sandbox.delete", "sandbox.execute", "sandbox.create"]
    assert [r["method"] for r in rows] == ["DELETE", "POST", "POST"]
    assert [r["status"] for r in rows] == [200, 200, 201]
    key_id = acc["api_key"]["id"]
    for r in rows:
        assert r["api_key_id"] == key_id
        assert r["actor"] == {"type": "api_key", "id": key_id}
        assert r["org_id"] == acc["organization"]["id"]
        assert r["sandbox_id"] == sid
        assert r["ip_address"] == "127.0.0.1"
        assert r["created_at"].endswith("Z")
        assert r["request_id"] and r["id"].startswith("aud_")
    assert rows[1]["path"] == V1 + f"/sandbox/{sid}/execute"


def test_reads_are_not_audited_and_sessions_are_by_user(d):
    acc, creds = org(d)
    raw(d, "GET", V1 + "/sandboxes", headers=creds)
    assert audit(d, creds)["total"] == 0
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=bearer(acc["token"]))
    assert status == 201
    row = audit(d, creds)["data"][0]
    assert row["user_id"] == acc["user"]["id"] and row["api_key_id"] is None
    assert row["actor"] == {"type": "user", "id": acc["user"]["id"]}


def test_failed_writes_are_audited_too(d):
    _, creds = org(d)
    status, _, _ = raw(d, "POST", V1 + "/sandbox/create", {"cpus": "lots"}, headers=creds)
    assert status == 400
    row = audit(d, creds, "?action=sandbox.create")["data"][0]
    assert row["status"] == 400 and row["sandbox_id"] is None


def test_no_secret_is_ever_recorded(d):
    _, creds = org(d)
    value = "hunter2-very-secret-value"
    status, res, _ = raw(d, "POST", V1 + "/secrets", {"name": "DB_PASSWORD", "value": value}, headers=creds)
    assert status in (200, 201), res
    body = audit(d, creds)
    assert body["data"][0]["action"] == "secrets.create"
    text = str(body)
    assert value not in text
    with open(d.data_dir + "/sandboxd.db", "rb") as f:
        assert value.encode() not in f.read()


def test_filters_and_pagination(d):
    _, creds = org(d)
    a = life(d, creds)
    b = life(d, creds)
    assert audit(d, creds)["total"] == 6
    body = audit(d, creds, "?action=sandbox.execute")
    assert body["total"] == 2 and {r["sandbox_id"] for r in body["data"]} == {a, b}
    assert audit(d, creds, f"?sandboxId={b}&action=sandbox.delete")["total"] == 1
    page = audit(d, creds, "?limit=2&offset=1")
    assert len(page["data"]) == 2 and page["has_more"] and page["total"] == 6
    # A time window: everything is after 2020 and before 2100.
    assert audit(d, creds, "?from=2020-01-01T00:00:00Z&to=2100-01-01T00:00:00.000Z")["total"] == 6
    assert audit(d, creds, "?to=2020-01-01T00:00:00Z")["total"] == 0
    newest = audit(d, creds)["data"][0]["created_at"]
    assert audit(d, creds, f"?from={newest}")["total"] >= 1


@pytest.mark.parametrize("query", ["?from=yesterday", "?to=2026-13-01T00:00:00Z", "?from=2026-01-01T00:00:00",
                                   "?from=2030-01-01T00:00:00Z&to=2020-01-01T00:00:00Z", "?action=",
                                   "?action=a%20b", "?sandbox_id=" + "x" * 200, "?limit=-1", "?offset=x"])
def test_bad_filters_are_400(d, query):
    _, creds = org(d)
    status, body, _ = raw(d, "GET", V1 + "/audit" + query, headers=creds)
    assert status == 400, (query, body)
    assert body["error"]["code"] == "VALIDATION_ERROR" and body["error"]["message"]


def test_summary_counts(d):
    _, creds = org(d)
    sid = life(d, creds)
    for _ in range(2):
        raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": "true"}, headers=creds)  # 404 now: still audited
    status, s, _ = raw(d, "GET", V1 + f"/sandbox/{sid}/audit/summary", headers=creds)
    assert status == 200, s
    assert s["sandbox_id"] == sid and s["total"] == 5
    counts = {a["action"]: a["count"] for a in s["actions"]}
    assert counts == {"sandbox.create": 1, "sandbox.execute": 3, "sandbox.delete": 1}
    assert s["first_at"] <= s["last_at"]
    status, body, _ = raw(d, "GET", V1 + "/sandbox/not-a-sandbox/audit/summary", headers=creds)
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"


def test_org_isolation(d):
    _, a = org(d)
    _, b = org(d)
    sid = life(d, a)
    assert audit(d, b)["total"] == 0
    assert audit(d, b, f"?sandbox_id={sid}")["total"] == 0
    status, body, _ = raw(d, "GET", V1 + f"/sandbox/{sid}/audit/summary", headers=b)
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"


def test_unauthenticated_is_401(d):
    status, body, _ = raw(d, "GET", V1 + "/audit")
    assert status == 401 and body["error"]["code"] == "AUTH_REQUIRED"


def test_disabled_by_audit_logs_enabled_false():
    d = Daemon(sets=CTL_SETS, env={"AUDIT_LOGS_ENABLED": "false"})
    try:
        _, creds = org(d)
        life(d, creds)
        assert audit(d, creds)["total"] == 0
    finally:
        d.cleanup()
