"""Controller API keys (issue 12, item 2): list (paginated, never the
secret), create (shown once), revoke and regenerate (the old secret dead at
once), and org isolation: another org's key is a 404 whatever the route,
guessed ids included."""
import uuid

from controller_common import V1, account, apikey, bearer, raw


def keys_of(d, creds, query=""):
    status, res, _ = raw(d, "GET", V1 + "/api-keys" + query, headers=creds)
    assert status == 200, res
    return res


def test_create_list_never_shows_the_secret(ctl):
    acct = account(ctl)
    creds = apikey(acct["api_key"]["key"])
    status, new, _ = raw(ctl, "POST", V1 + "/api-keys", {"name": "ci"}, headers=creds)
    assert status == 201, new
    assert set(new) == {"id", "name", "key_prefix", "created_at", "key"}
    assert new["name"] == "ci" and new["key"].startswith(new["key_prefix"])
    listing = keys_of(ctl, creds)
    assert [k["id"] for k in listing["data"]] == [acct["api_key"]["id"], new["id"]]
    for k in listing["data"]:
        assert set(k) == {"id", "name", "key_prefix", "created_at"}
    assert new["key"] not in str(listing)
    status, _, _ = raw(ctl, "GET", V1 + "/api-keys", headers=apikey(new["key"]))
    assert status == 200
    # A key made by a session belongs to the same org.
    status, viasess, _ = raw(ctl, "POST", V1 + "/api-keys", {"name": "s"}, headers=bearer(acct["token"]))
    assert status == 201 and keys_of(ctl, apikey(viasess["key"]))["total"] == 3


def test_create_validates_the_name(ctl):
    creds = apikey(account(ctl)["api_key"]["key"])
    for body in ({"name": 5}, {"name": ""}, {"name": "n" * 200}):
        status, res, _ = raw(ctl, "POST", V1 + "/api-keys", body, headers=creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", body
    status, res, _ = raw(ctl, "POST", V1 + "/api-keys", {}, headers=creds)
    assert status == 201 and res["name"] == "API Key"


def test_revoked_key_stops_at_once(ctl):
    acct = account(ctl)
    owner = apikey(acct["api_key"]["key"])
    _, k2, _ = raw(ctl, "POST", V1 + "/api-keys", {"name": "doomed"}, headers=owner)
    assert raw(ctl, "GET", V1 + "/api-keys", headers=apikey(k2["key"]))[0] == 200
    status, res, _ = raw(ctl, "DELETE", V1 + f"/api-keys/{k2['id']}", headers=owner)
    assert status == 200 and res == {"id": k2["id"], "revoked": True}
    for creds in (apikey(k2["key"]), bearer(k2["key"])):
        status, res, _ = raw(ctl, "GET", V1 + "/api-keys", headers=creds)
        assert status == 401 and res["error"]["code"] == "INVALID_CREDENTIALS"
    status, res, _ = raw(ctl, "DELETE", V1 + f"/api-keys/{k2['id']}", headers=owner)
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"
    assert [k["id"] for k in keys_of(ctl, owner)["data"]] == [acct["api_key"]["id"]]
    # A key may revoke itself; the next call with it fails.
    status, _, _ = raw(ctl, "DELETE", V1 + f"/api-keys/{acct['api_key']['id']}", headers=owner)
    assert status == 200
    assert raw(ctl, "GET", V1 + "/api-keys", headers=owner)[0] == 401


def test_regenerate_kills_the_old_secret(ctl):
    acct = account(ctl)
    old = acct["api_key"]
    status, new, _ = raw(ctl, "POST", V1 + f"/api-keys/{old['id']}/regenerate", headers=apikey(old["key"]))
    assert status == 200, new
    assert new["id"] == old["id"] and new["name"] == old["name"] and new["key"] != old["key"]
    assert new["key"].startswith(new["key_prefix"])
    assert raw(ctl, "GET", V1 + "/api-keys", headers=apikey(old["key"]))[0] == 401
    listing = keys_of(ctl, apikey(new["key"]))
    assert listing["data"][0]["key_prefix"] == new["key_prefix"] and listing["total"] == 1


def test_org_isolation_for_keys(ctl):
    a, b = account(ctl), account(ctl)
    a_creds, b_creds = apikey(a["api_key"]["key"]), apikey(b["api_key"]["key"])
    a_key = a["api_key"]["id"]
    # B's listing shows only B's key.
    assert [k["id"] for k in keys_of(ctl, b_creds)["data"]] == [b["api_key"]["id"]]
    for creds in (b_creds, bearer(b["token"])):
        for method, path in (("DELETE", f"/api-keys/{a_key}"), ("POST", f"/api-keys/{a_key}/regenerate")):
            status, res, _ = raw(ctl, method, V1 + path, headers=creds)
            assert status == 404 and res["error"]["code"] == "NOT_FOUND", (method, path)
    # Guessed ids answer exactly as another org's real one does.
    for guess in ("key_" + uuid.uuid4().hex, "key_" + "0" * 32, "x" * 300, "%00"):
        for method, path in (("DELETE", f"/api-keys/{guess}"), ("POST", f"/api-keys/{guess}/regenerate")):
            status, res, _ = raw(ctl, method, V1 + path, headers=b_creds)
            assert status == 404 and res["error"]["code"] == "NOT_FOUND", guess
    # A's key is untouched and still works.
    assert raw(ctl, "GET", V1 + "/api-keys", headers=a_creds)[0] == 200
    assert [k["id"] for k in keys_of(ctl, a_creds)["data"]] == [a_key]


def test_pagination_bounds(ctl):
    acct = account(ctl)
    creds = apikey(acct["api_key"]["key"])
    for i in range(4):
        assert raw(ctl, "POST", V1 + "/api-keys", {"name": f"k{i}"}, headers=creds)[0] == 201
    everything = keys_of(ctl, creds)
    assert everything["total"] == 5 and everything["limit"] == 100 and everything["offset"] == 0
    assert everything["has_more"] is False and len(everything["data"]) == 5
    ids = [k["id"] for k in everything["data"]]
    page = keys_of(ctl, creds, "?limit=2&offset=1")
    assert [k["id"] for k in page["data"]] == ids[1:3]
    assert (page["total"], page["limit"], page["offset"], page["has_more"]) == (5, 2, 1, True)
    last = keys_of(ctl, creds, "?limit=2&offset=3")
    assert [k["id"] for k in last["data"]] == ids[3:] and last["has_more"] is False
    beyond = keys_of(ctl, creds, "?offset=99")
    assert beyond["data"] == [] and beyond["has_more"] is False and beyond["total"] == 5
    assert keys_of(ctl, creds, "?limit=5000")["limit"] == 1000
    assert keys_of(ctl, creds, "?limit=1000")["limit"] == 1000
    for q in ("?limit=0", "?limit=-1", "?limit=abc", "?limit=", "?offset=-5", "?offset=1.5", "?limit=1e3",
              "?limit=99999999999999999999"):
        status, res, _ = raw(ctl, "GET", V1 + "/api-keys" + q, headers=creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", q
