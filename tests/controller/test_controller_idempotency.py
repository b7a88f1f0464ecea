"""Idempotency-Key on the controller's POSTs (issue 12, item 8), through the
generic wrapper (api/controller/idempotency.c) on every authenticated POST:
stored, replayed, 409 on another body, scoped by org and route, ignored on
GET; a replayed execute does not run again; a stored reply (a new API key)
is sealed at rest."""
import glob
import os

from controller_common import V1, account, apikey, header, raw


def post(d, path, creds, key, body=None):
    h = dict(creds)
    if key is not None:
        h["Idempotency-Key"] = key
    return raw(d, "POST", V1 + path, body, headers=h)


def test_stored_then_replayed_then_mismatch(ctl):
    acct = account(ctl)
    creds = apikey(acct["api_key"]["key"])
    status, first, hdrs = post(ctl, "/auth/logout", creds, "retry-1", {"n": 1})
    assert status == 200 and header(hdrs, "idempotency-status") == "stored"
    status, again, hdrs = post(ctl, "/auth/logout", creds, "retry-1", {"n": 1})
    assert status == 200 and again == first and header(hdrs, "idempotency-status") == "replayed"
    status, res, hdrs = post(ctl, "/auth/logout", creds, "retry-1", {"n": 2})
    assert status == 409 and res["error"]["code"] == "IDEMPOTENCY_KEY_REUSE_MISMATCH"
    assert header(hdrs, "idempotency-status") is None
    # Without the header, nothing is stored or replayed.
    status, _, hdrs = post(ctl, "/auth/logout", creds, None, {"n": 2})
    assert status == 200 and header(hdrs, "idempotency-status") is None


def test_scoped_by_org(ctl):
    a, b = account(ctl), account(ctl)
    status, _, hdrs = post(ctl, "/auth/logout", apikey(a["api_key"]["key"]), "shared-key", {"x": 1})
    assert header(hdrs, "idempotency-status") == "stored"
    # Another org with the same key and another body: its own record.
    status, _, hdrs = post(ctl, "/auth/logout", apikey(b["api_key"]["key"]), "shared-key", {"x": 2})
    assert status == 200 and header(hdrs, "idempotency-status") == "stored"


def test_bad_keys_are_400(ctl):
    creds = apikey(account(ctl)["api_key"]["key"])
    for key in ("a" * 256, "has space", "tab\there"):
        status, res, _ = post(ctl, "/auth/logout", creds, key, {})
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", key
    status, _, hdrs = post(ctl, "/auth/logout", creds, "a" * 255, {})
    assert status == 200 and header(hdrs, "idempotency-status") == "stored"


def test_ignored_on_get(ctl):
    creds = apikey(account(ctl)["api_key"]["key"])
    status, _, hdrs = raw(ctl, "GET", V1 + "/api-keys", headers=dict(creds, **{"Idempotency-Key": "g"}))
    assert status == 200 and header(hdrs, "idempotency-status") is None


def test_a_replayed_execute_does_not_run_again(ctl):
    creds = apikey(account(ctl)["api_key"]["key"])
    status, sb, _ = raw(ctl, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status in (200, 201), sb
    path = f"/sandbox/{sb['sandbox_id']}/execute"
    body = {"command": "echo x >> /workspace/log; wc -l < /workspace/log"}
    status, first, hdrs = post(ctl, path, creds, "exec-1", body)
    assert status == 200 and first["stdout"] == "1\n" and header(hdrs, "idempotency-status") == "stored"
    status, again, hdrs = post(ctl, path, creds, "exec-1", body)
    assert again == first and header(hdrs, "idempotency-status") == "replayed"
    status, fresh, _ = post(ctl, path, creds, None, body)
    assert fresh["stdout"] == "2\n", fresh   # the replay did not append


def test_a_replayed_key_create_gives_the_same_key_sealed_at_rest(ctl):
    creds = apikey(account(ctl)["api_key"]["key"])
    status, first, hdrs = post(ctl, "/api-keys", creds, "key-1", {"name": "ci"})
    assert status in (200, 201) and header(hdrs, "idempotency-status") == "stored", first
    status, again, hdrs = post(ctl, "/api-keys", creds, "key-1", {"name": "ci"})
    assert again == first and header(hdrs, "idempotency-status") == "replayed"
    secret = first["key"] if "key" in first else first["api_key"]["key"]
    assert secret.startswith("sk_")
    # The database keeps the stored reply sealed: the key is nowhere in it.
    for f in glob.glob(os.path.join(ctl.data_dir, "sandboxd.db*")):
        with open(f, "rb") as fh:
            assert secret.encode() not in fh.read(), f
