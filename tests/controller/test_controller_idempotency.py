"""Idempotency-Key on the controller's POSTs (issue 12, item 8), through the
generic wrapper (api/controller/idempotency.c) on POST /auth/logout, the
one POST of part 1 whose reply carries no secret: stored, replayed,
409 on another body, scoped by org and route, ignored on GET."""
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
