"""Controller secrets (issue 12, item 7): POST/GET /secrets, PUT/DELETE
/secrets/:name. Codes and shapes, env-var names, org isolation (another
org's secret is a 404), values never in any reply (lists, errors,
idempotent replays) nor in the daemon's log (run at debug level), and the
values encrypted at rest (the SQLite file read directly: no plaintext, a
fresh ciphertext per write). The key: <data_dir>/secrets.key (0600) or
SANDBOXD_SECRETS_KEY."""
import base64
import hashlib
import os
import sqlite3
import stat
import uuid

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, apikey, header, raw

KEY_HEX = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


@pytest.fixture(scope="module")
def sd():
    d = Daemon(sets=CTL_SETS, extra_args=["--log-level", "debug"])
    yield d
    d.cleanup()


def creds_of(d):
    return apikey(account(d)["api_key"]["key"])


def marker():
    """A value no other text in the test run contains."""
    return "val-" + uuid.uuid4().hex


class Seen:
    """Every reply's status line, headers and body, to search for values."""

    def __init__(self, d):
        self.d = d
        self.text = []

    def __call__(self, method, path, body=None, headers=None):
        status, res, hdrs = raw(self.d, method, path, body, headers)
        self.text.append(f"{status} {hdrs} {res}")
        return status, res, hdrs

    def holds(self, value):
        return any(value in t for t in self.text)


def test_crud_and_codes(sd):
    creds = creds_of(sd)
    status, res, _ = raw(sd, "POST", V1 + "/secrets", {"name": "API_TOKEN", "value": "v1"}, creds)
    assert status == 201, res
    assert set(res) == {"name", "created_at", "updated_at"} and res["name"] == "API_TOKEN"
    assert res["created_at"] == res["updated_at"] and res["created_at"].endswith("Z")
    status, res, _ = raw(sd, "POST", V1 + "/secrets", {"name": "API_TOKEN", "value": "v2"}, creds)
    assert status == 409 and res["error"]["code"] == "CONFLICT"
    assert raw(sd, "POST", V1 + "/secrets", {"name": "B_SECRET", "value": ""}, creds)[0] == 201

    status, page, _ = raw(sd, "GET", V1 + "/secrets", headers=creds)
    assert status == 200
    assert [s["name"] for s in page["data"]] == ["API_TOKEN", "B_SECRET"]
    assert page["total"] == 2 and page["limit"] == 100 and page["offset"] == 0 and page["has_more"] is False
    status, page, _ = raw(sd, "GET", V1 + "/secrets?limit=1&offset=1", headers=creds)
    assert [s["name"] for s in page["data"]] == ["B_SECRET"] and page["has_more"] is False
    status, page, _ = raw(sd, "GET", V1 + "/secrets?limit=1", headers=creds)
    assert page["has_more"] is True
    assert raw(sd, "GET", V1 + "/secrets?limit=-1", headers=creds)[0] == 400

    status, res, _ = raw(sd, "PUT", V1 + "/secrets/API_TOKEN", {"value": "v3"}, creds)
    assert status == 200 and res["name"] == "API_TOKEN" and res["updated_at"] >= res["created_at"]
    status, res, _ = raw(sd, "PUT", V1 + "/secrets/NOPE", {"value": "x"}, creds)
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"
    status, res, _ = raw(sd, "DELETE", V1 + "/secrets/API_TOKEN", headers=creds)
    assert status == 200 and res == {"name": "API_TOKEN", "deleted": True}
    assert raw(sd, "DELETE", V1 + "/secrets/API_TOKEN", headers=creds)[0] == 404
    assert raw(sd, "DELETE", V1 + "/secrets/not-a-name", headers=creds)[0] == 404
    # No credentials: 401, as every /api/v1 route.
    assert raw(sd, "GET", V1 + "/secrets")[0] == 401


@pytest.mark.parametrize("name", ["lower", "1ABC", "A-B", "A B", "", "N" * 129, 5, None])
def test_names_are_env_var_names(sd, name):
    status, res, _ = raw(sd, "POST", V1 + "/secrets", {"name": name, "value": "v"}, creds_of(sd))
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", (name, res)


def test_values(sd):
    creds = creds_of(sd)
    ok = {"UNICODE": "héllo ☃ \U0001F600", "LONGEST": "x" * 65536, "N" * 128: "128 characters of name"}
    for name, value in ok.items():
        status, res, _ = raw(sd, "POST", V1 + "/secrets", {"name": name, "value": value}, creds)
        assert status == 201, (name, res)
    status, res, _ = raw(sd, "POST", V1 + "/secrets", {"name": "TOO_LONG", "value": "x" * 65537}, creds)
    assert status == 413 and res["error"]["code"] == "PAYLOAD_TOO_LARGE"
    # As \u escapes a 64 KiB value is 6 times longer: still accepted.
    body = ('{"name": "ESCAPED", "value": "' + "\\u0041" * 65536 + '"}').encode()
    status, _, _ = sd.request("POST", V1 + "/secrets", raw=body,
                              headers=dict(creds, **{"Content-Type": "application/json"}))
    assert status == 201
    for bad in ({"name": "NUL", "value": "a\u0000b"}, {"name": "NUM", "value": 5}, {"name": "MISSING"},
                {"name": "NULL", "value": None}):
        status, res, _ = raw(sd, "POST", V1 + "/secrets", bad, creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", bad
    assert raw(sd, "PUT", V1 + "/secrets/UNICODE", {"nope": 1}, creds)[0] == 400


def test_org_isolation(sd):
    a, b = creds_of(sd), creds_of(sd)
    assert raw(sd, "POST", V1 + "/secrets", {"name": "SHARED_NAME", "value": "a-value"}, a)[0] == 201
    assert raw(sd, "POST", V1 + "/secrets", {"name": "ONLY_A", "value": "a-only"}, a)[0] == 201
    status, page, _ = raw(sd, "GET", V1 + "/secrets", headers=b)
    assert status == 200 and page["data"] == [] and page["total"] == 0
    # By name guessing: 404, never 403.
    for method, body in (("PUT", {"value": "hijack"}), ("DELETE", None)):
        status, res, _ = raw(sd, method, V1 + "/secrets/ONLY_A", body, b)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND", method
    # The same name in org B is B's own.
    assert raw(sd, "POST", V1 + "/secrets", {"name": "SHARED_NAME", "value": "b-value"}, b)[0] == 201
    assert raw(sd, "DELETE", V1 + "/secrets/SHARED_NAME", headers=b)[0] == 200
    names = [s["name"] for s in raw(sd, "GET", V1 + "/secrets", headers=a)[1]["data"]]
    assert names == ["ONLY_A", "SHARED_NAME"]


def test_values_never_in_replies_or_the_log(sd):
    creds = creds_of(sd)
    seen = Seen(sd)
    v1, v2, v3 = marker(), marker(), marker()
    idem = dict(creds, **{"Idempotency-Key": "k-" + uuid.uuid4().hex})
    status, res, hdrs = seen("POST", V1 + "/secrets", {"name": "TOKEN", "value": v1}, idem)
    assert status == 201 and header(hdrs, "idempotency-status") == "stored"
    status, res, hdrs = seen("POST", V1 + "/secrets", {"name": "TOKEN", "value": v1}, idem)
    assert status == 201 and header(hdrs, "idempotency-status") == "replayed"
    # Another body under the same key: 409, and not the old or new value.
    assert seen("POST", V1 + "/secrets", {"name": "TOKEN", "value": v2}, idem)[0] == 409
    assert seen("POST", V1 + "/secrets", {"name": "TOKEN", "value": v2}, creds)[0] == 409
    assert seen("POST", V1 + "/secrets", {"name": "bad name", "value": v2}, creds)[0] == 400
    assert seen("POST", V1 + "/secrets", {"name": "UTF", "value": v2 + "\udcff"}, creds)[0] in (400, 201)
    assert seen("PUT", V1 + "/secrets/TOKEN", {"value": v3}, creds)[0] == 200
    assert seen("PUT", V1 + "/secrets/ABSENT", {"value": v3}, creds)[0] == 404
    assert seen("GET", V1 + "/secrets", headers=creds)[0] == 200
    assert seen("GET", V1 + "/secrets/TOKEN", headers=creds)[0] in (404, 405)
    for v in (v1, v2, v3):
        assert not seen.holds(v), v
    log = sd.read_log()
    assert "/api/v1/secrets" in log  # the access log is on: it was looked at
    for v in (v1, v2, v3):
        assert v not in log, v


def db_bytes(d):
    """The whole SQLite database as it is on disk (main file and WAL)."""
    out = b""
    for suffix in ("", "-wal"):
        path = os.path.join(d.data_dir, "sandboxd.db" + suffix)
        if os.path.exists(path):
            with open(path, "rb") as f:
                out += f.read()
    return out


def sealed_rows(d):
    db = sqlite3.connect(f"file:{os.path.join(d.data_dir, 'sandboxd.db')}?mode=ro", uri=True)
    try:
        return db.execute("SELECT org_id, name, sealed, key_id FROM secrets").fetchall()
    finally:
        db.close()


def test_encrypted_at_rest(sd):
    creds = creds_of(sd)
    value = marker()
    assert raw(sd, "POST", V1 + "/secrets", {"name": "AT_REST_1", "value": value}, creds)[0] == 201
    assert raw(sd, "POST", V1 + "/secrets", {"name": "AT_REST_2", "value": value}, creds)[0] == 201
    rows = {name: sealed for _, name, sealed, _ in sealed_rows(sd) if name.startswith("AT_REST")}
    first = rows["AT_REST_1"]
    assert rows["AT_REST_1"] != rows["AT_REST_2"]  # the same value, two ciphertexts
    assert raw(sd, "PUT", V1 + "/secrets/AT_REST_1", {"value": value}, creds)[0] == 200
    again = {name: sealed for _, name, sealed, _ in sealed_rows(sd)}["AT_REST_1"]
    assert again != first  # rewritten with a fresh nonce
    disk = db_bytes(sd)
    assert value.encode() not in disk
    assert value.encode().hex().encode() not in disk
    key = os.path.join(sd.data_dir, "secrets.key")
    st = os.stat(key)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32


def test_key_from_the_environment():
    bad = "not-a-key-" + uuid.uuid4().hex
    with pytest.raises(RuntimeError) as exc:
        Daemon(sets=CTL_SETS, env={"SANDBOXD_SECRETS_KEY": bad})
    assert "SANDBOXD_SECRETS_KEY" in str(exc.value) and bad not in str(exc.value)

    d = Daemon(sets=CTL_SETS, env={"SANDBOXD_SECRETS_KEY": KEY_HEX})
    try:
        creds = creds_of(d)
        assert raw(d, "POST", V1 + "/secrets", {"name": "K", "value": "v"}, creds)[0] == 201
        assert not os.path.exists(os.path.join(d.data_dir, "secrets.key"))
        (_, _, _, key_id), = sealed_rows(d)
        assert key_id and key_id not in KEY_HEX  # a fingerprint, not the key
    finally:
        d.cleanup()


def new_sandbox(d, creds, **body):
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", body, creds)
    assert status == 201, sb
    return sb["sandbox_id"]


def run(d, creds, sid, command, **body):
    body["command"] = command
    return raw(d, "POST", V1 + f"/sandbox/{sid}/execute", body, creds)[:2]


def test_injected_into_the_orgs_sandboxes(sd):
    a, b = creds_of(sd), creds_of(sd)
    value = marker()
    assert raw(sd, "POST", V1 + "/secrets", {"name": "MY_SECRET", "value": value}, a)[0] == 201
    assert raw(sd, "POST", V1 + "/secrets", {"name": "OVERRIDDEN", "value": "from-secret"}, a)[0] == 201
    sid = new_sandbox(sd, a, env={"OVERRIDDEN": "from-sandbox"})
    status, res = run(sd, a, sid, 'echo "$MY_SECRET|$OVERRIDDEN"')
    assert status == 200 and res["stdout"] == f"{value}|from-sandbox\n", res
    status, res = run(sd, a, sid, ["printenv", "OVERRIDDEN"], env={"OVERRIDDEN": "from-call"})
    assert res["stdout"] == "from-call\n"
    # A new value holds for the next command; a deleted one is gone.
    assert raw(sd, "PUT", V1 + "/secrets/MY_SECRET", {"value": "second"}, a)[0] == 200
    assert run(sd, a, sid, ["printenv", "MY_SECRET"])[1]["stdout"] == "second\n"
    assert raw(sd, "DELETE", V1 + "/secrets/MY_SECRET", headers=a)[0] == 200
    assert run(sd, a, sid, ["printenv", "MY_SECRET"])[1]["exit_code"] == 1
    # Another org's sandbox sees none of org A's secrets.
    sid_b = new_sandbox(sd, b)
    status, res = run(sd, b, sid_b, ["env"])
    assert status == 200 and "OVERRIDDEN" not in res["stdout"] and value not in res["stdout"]
    # Nor do the default org's (the runtime API, the bridge).
    out = sd.execute("python", "import os; print(sorted(os.environ))")
    assert "OVERRIDDEN" not in str(out)
    # The value was printed by the command only: the log never has it.
    assert value not in sd.read_log()


def org_with_secret(d, name):
    """A fresh org's credentials, the value of its secret name, a sandbox."""
    creds, value = creds_of(d), marker()
    assert raw(d, "POST", V1 + "/secrets", {"name": name, "value": value}, creds)[0] == 201
    return creds, value, new_sandbox(d, creds)


def test_tampered_ciphertext_fails_cleanly(sd):
    creds, value, sid = org_with_secret(sd, "TAMPERED")
    assert run(sd, creds, sid, ["printenv", "TAMPERED"])[1]["stdout"] == value + "\n"
    db = sqlite3.connect(os.path.join(sd.data_dir, "sandboxd.db"), timeout=10)
    try:
        (org, sealed), = db.execute("SELECT org_id, sealed FROM secrets WHERE name = 'TAMPERED'").fetchall()
        raw_bytes = bytearray(base64.b64decode(sealed))
        raw_bytes[len(raw_bytes) // 2] ^= 0x01
        db.execute("UPDATE secrets SET sealed = ? WHERE org_id = ? AND name = 'TAMPERED'",
                   (base64.b64encode(bytes(raw_bytes)).decode(), org))
        db.commit()
    finally:
        db.close()
    status, res = run(sd, creds, sid, ["printenv", "TAMPERED"])
    assert status == 500 and res["error"]["code"] == "INTERNAL_ERROR", res
    assert "TAMPERED" in res["error"]["message"] and "cannot be decrypted" in res["error"]["message"]
    assert value not in str(res)
    # The daemon lives on; writing the secret again heals it.
    assert raw(sd, "GET", V1 + "/secrets", headers=creds)[0] == 200
    assert raw(sd, "PUT", V1 + "/secrets/TAMPERED", {"value": "fresh"}, creds)[0] == 200
    assert run(sd, creds, sid, ["printenv", "TAMPERED"])[1]["stdout"] == "fresh\n"
    assert value not in sd.read_log()


def test_injected_into_repl_sessions(sd):
    creds, value, sid = org_with_secret(sd, "REPL_SECRET")
    status, res, _ = raw(sd, "POST", V1 + f"/sandbox/{sid}/repl/sessions", {}, creds)
    assert status == 201, res
    path = V1 + f"/sandbox/{sid}/repl/sessions/{res['session']['id']}/execute"
    # The code names the secret, not its value (cells are journaled).
    code = "import hashlib, os\nk = os.environ['REPL_SECRET']\nhashlib.sha256(k.encode()).hexdigest()"
    status, res, _ = raw(sd, "POST", path, {"code": code}, creds)
    assert status == 200, res
    want = repr(hashlib.sha256(value.encode()).hexdigest())
    assert {"type": "result", "data": {"text/plain": want}} in [
        {"type": o["type"], "data": o.get("data")} for o in res["outputs"]], res
    assert value not in str(res)
    # The journal of the session's cells holds the code, never the value.
    assert value.encode() not in db_bytes(sd)
