"""Controller API identity (issue 12, items 1 and 8): register, login,
logout, sessions (Bearer and cookie + CSRF), login rate limits, password
rules, JWT forgeries, the error envelope, X-Request-Id, health routes,
and secrets at rest."""
import base64
import glob
import hashlib
import hmac
import json
import os
import re
import time

from controller_common import (CTL_SETS, PASSWORD, V1, Daemon, account, apikey, bearer, cookie, header,
                               raw, register, set_cookies, unique_email)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def forge(header_obj, payload_obj, key=None, sig=None):
    h = b64url(json.dumps(header_obj).encode())
    p = b64url(json.dumps(payload_obj).encode())
    if sig is None:
        sig = b64url(hmac.new(key or os.urandom(32), f"{h}.{p}".encode(), hashlib.sha256).digest()) if key != b"" else ""
    return f"{h}.{p}.{sig}"


def claims_of(token):
    return json.loads(unb64url(token.split(".")[1]))


# ---- registration ----

def test_register_shape_cookie_and_every_credential_works(ctl):
    email = unique_email("Shape").replace("shape", "Shape")
    status, body, hdrs = register(ctl, email=email, org="Example Co")
    assert status == 201, body
    org, user, key = body["organization"], body["user"], body["api_key"]
    assert org["id"].startswith("org_") and org["name"] == "Example Co"
    assert re.fullmatch(r"example-co(-[0-9a-f]{6})?", org["slug"]) and org["plan"] == "hobby"
    assert user["id"].startswith("usr_") and user["email"] == email.lower() and user["role"] == "owner"
    assert key["key"].startswith("sk_") and len(key["key"]) >= 3 + 43 and "." not in key["key"]
    assert key["key"].startswith(key["key_prefix"]) and key["key_prefix"] != key["key"]
    assert key["name"] == "Default API Key"
    assert body["token"].count(".") == 2
    cookies = set_cookies(hdrs)
    value, attrs = cookies["stateset_session"]
    assert value == body["token"]
    assert "HttpOnly" in attrs and "SameSite=Lax" in attrs and "Secure" not in attrs
    for creds in (apikey(key["key"]), bearer(key["key"]), bearer(body["token"]), cookie(body["token"]),
                  dict(apikey(key["key"]), **{"X-Org-Id": org["id"]})):
        status, res, _ = raw(ctl, "GET", V1 + "/api-keys", headers=creds)
        assert status == 200, (creds, res)
        assert [k["id"] for k in res["data"]] == [key["id"]]


def test_x_org_id_must_be_the_credentials_org(ctl):
    a, b = account(ctl), account(ctl)
    for creds in (apikey(a["api_key"]["key"]), bearer(a["token"])):
        creds["X-Org-Id"] = b["organization"]["id"]
        status, res, _ = raw(ctl, "GET", V1 + "/api-keys", headers=creds)
        assert status == 401 and res["error"]["code"] == "INVALID_CREDENTIALS"


def test_taken_email_is_409_whatever_its_case(ctl):
    email = unique_email("taken")
    account(ctl, email=email)
    status, res, _ = register(ctl, email=email.upper())
    assert status == 409 and res["error"]["code"] == "EMAIL_ALREADY_EXISTS"


def test_password_and_field_rules(ctl):
    cases = [
        dict(password="Short1"),                 # < 12
        dict(password="nodigitsatallhere"),      # no digit
        dict(password="123456789012345"),        # no letter
        dict(password="x1" * 200),               # > 256
        dict(email="not-an-email"),
        dict(email="two@@example.com"),
        dict(email="sp ace@example.com"),
        dict(org=""),
    ]
    for kw in cases:
        status, res, _ = register(ctl, **kw)
        assert status == 400, (kw, res)
        assert res["error"]["code"] == "VALIDATION_ERROR" and res["error"]["message"]
    status, res, _ = raw(ctl, "POST", V1 + "/register", {"email": 5})
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR"
    # The minimum passes: 12 characters, a letter and a digit.
    status, _, _ = register(ctl, password="abcdefghijk1")
    assert status == 201


def test_same_org_name_gets_a_distinct_slug(ctl):
    a = account(ctl, org="Twin Org")["organization"]
    b = account(ctl, org="Twin Org")["organization"]
    assert a["slug"] != b["slug"] and b["slug"].startswith("twin-org")


# ---- login, logout, session ----

def test_login_session_shape_and_logout(ctl):
    email = unique_email("login")
    acct = account(ctl, email=email)
    status, res, hdrs = raw(ctl, "POST", V1 + "/auth/login", {"email": email.upper(), "password": PASSWORD})
    assert status == 200, res
    assert res["user"] == {"id": acct["user"]["id"], "email": email, "firstName": "Ada", "lastName": "Lovelace",
                           "role": "owner", "emailVerified": False}
    assert res["organization"] == acct["organization"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", res["expiresAt"])
    assert set_cookies(hdrs)["stateset_session"][0] == res["token"]
    token = res["token"]
    status, sess, _ = raw(ctl, "GET", V1 + "/auth/session", headers=bearer(token))
    assert status == 200 and sess["token"] == token and sess["user"]["id"] == acct["user"]["id"]
    assert sess["organization"]["id"] == acct["organization"]["id"]
    # An API key is not a session.
    status, res, _ = raw(ctl, "GET", V1 + "/auth/session", headers=apikey(acct["api_key"]["key"]))
    assert status == 401 and res["error"]["code"] == "AUTH_REQUIRED"
    status, res, hdrs = raw(ctl, "POST", V1 + "/auth/logout", headers=bearer(token))
    assert status == 200, res
    value, attrs = set_cookies(hdrs)["stateset_session"]
    assert value == "" and "Max-Age=0" in attrs
    for creds in (bearer(token), cookie(token)):
        status, res, _ = raw(ctl, "GET", V1 + "/auth/session", headers=creds)
        assert status == 401 and res["error"]["code"] == "INVALID_CREDENTIALS"
    # The registration's own session is another session: still alive.
    status, _, _ = raw(ctl, "GET", V1 + "/auth/session", headers=bearer(acct["token"]))
    assert status == 200


def test_wrong_password_and_unknown_email_look_the_same(ctl):
    email = unique_email("wrong")
    account(ctl, email=email)
    for body in ({"email": email, "password": "WrongPassword123"},
                 {"email": unique_email("nobody"), "password": PASSWORD},
                 {"email": "garbage", "password": PASSWORD}, {"email": email}):
        status, res, _ = raw(ctl, "POST", V1 + "/auth/login", body)
        assert status == 401 and res == {"error": {"code": "INVALID_CREDENTIALS",
                                                   "message": "Invalid email or password"}}


def test_login_rate_limited_per_account():
    d = Daemon(sets=CTL_SETS + ["controller.login_account_failures=3", "controller.login_addr_failures=100"])
    try:
        victim, other = unique_email("victim"), unique_email("other")
        account(d, email=victim)
        account(d, email=other)
        for _ in range(3):
            status, _, _ = raw(d, "POST", V1 + "/auth/login", {"email": victim, "password": "WrongPassword123"})
            assert status == 401
        # Now even the right password is refused, with a Retry-After.
        status, res, hdrs = raw(d, "POST", V1 + "/auth/login", {"email": victim, "password": PASSWORD})
        assert status == 429 and res["error"]["code"] == "RATE_LIMITED"
        assert 1 <= int(header(hdrs, "retry-after")) <= 900
        # Another account from the same address is not affected.
        status, _, _ = raw(d, "POST", V1 + "/auth/login", {"email": other, "password": PASSWORD})
        assert status == 200
    finally:
        d.cleanup()


def test_login_rate_limited_per_address_and_window_ends():
    d = Daemon(sets=CTL_SETS + ["controller.login_account_failures=100", "controller.login_addr_failures=4",
                                "controller.login_window_s=2"])
    try:
        email = unique_email("addr")
        account(d, email=email)
        for i in range(4):
            status, _, _ = raw(d, "POST", V1 + "/auth/login",
                               {"email": unique_email(f"spray{i}"), "password": "WrongPassword123"})
            assert status == 401
        status, res, hdrs = raw(d, "POST", V1 + "/auth/login", {"email": email, "password": PASSWORD})
        assert status == 429 and res["error"]["code"] == "RATE_LIMITED"
        assert int(header(hdrs, "retry-after")) <= 2
        time.sleep(2.2)
        status, _, _ = raw(d, "POST", V1 + "/auth/login", {"email": email, "password": PASSWORD})
        assert status == 200
    finally:
        d.cleanup()


# ---- cookies and CSRF ----

def test_cookie_writes_need_the_csrf_token(ctl):
    acct = account(ctl)
    token = acct["token"]
    status, res, hdrs = raw(ctl, "GET", V1 + "/api-keys", headers=cookie(token))
    assert status == 200, res
    csrf = header(hdrs, "x-csrf-token")
    assert csrf and set_cookies(hdrs)["__stateset_csrf"][0] == csrf
    assert "HttpOnly" not in set_cookies(hdrs)["__stateset_csrf"][1]
    for bad in (None, "", "x" * 43, csrf[:-1] + ("A" if csrf[-1] != "A" else "B")):
        status, res, _ = raw(ctl, "POST", V1 + "/api-keys", {"name": "csrf"}, headers=cookie(token, bad))
        assert status == 403 and res["error"]["code"] == "CSRF_TOKEN_INVALID", bad
        status, res, _ = raw(ctl, "DELETE", V1 + f"/api-keys/{acct['api_key']['id']}", headers=cookie(token, bad))
        assert status == 403, bad
    status, res, _ = raw(ctl, "POST", V1 + "/api-keys", {"name": "csrf"}, headers=cookie(token, csrf))
    assert status == 201, res
    # Another session's token does not fit this one.
    other = account(ctl)
    _, _, h2 = raw(ctl, "GET", V1 + "/api-keys", headers=cookie(other["token"]))
    status, _, _ = raw(ctl, "POST", V1 + "/api-keys", {"name": "x"},
                       headers=cookie(token, header(h2, "x-csrf-token")))
    assert status == 403
    # Header-authenticated writes need none, even with a cookie beside them.
    for creds in (apikey(acct["api_key"]["key"]), bearer(token)):
        creds.update(cookie(token))
        status, res, hdrs = raw(ctl, "POST", V1 + "/api-keys", {"name": "hdr"}, headers=creds)
        assert status == 201, res
        status, _, hdrs = raw(ctl, "GET", V1 + "/api-keys", headers=creds)
        assert header(hdrs, "x-csrf-token") is None


def test_cookie_parsing_is_strict_about_the_name(ctl):
    acct = account(ctl)
    t = acct["token"]
    ok = [f"a=b; stateset_session={t}", f"stateset_session=\"{t}\"", f"  stateset_session = {t} ;x=y"]
    for c in ok:
        status, _, _ = raw(ctl, "GET", V1 + "/api-keys", headers={"Cookie": c})
        assert status == 200, c
    for c in [f"xstateset_session={t}", f"stateset_sessionx={t}", "stateset_session=", "other=1"]:
        status, res, _ = raw(ctl, "GET", V1 + "/api-keys", headers={"Cookie": c})
        assert status == 401, c


# ---- JWT forgeries ----

def test_forged_tokens_are_refused(ctl):
    a, b = account(ctl), account(ctl)
    good = a["token"]
    h, p, s = good.split(".")
    claims = claims_of(good)
    other = dict(claims, org=b["organization"]["id"], sub=b["user"]["id"])
    forgeries = {
        "alg none": forge({"alg": "none", "typ": "JWT"}, claims, sig=""),
        "alg none with sig": forge({"alg": "none", "typ": "JWT"}, claims, sig=s),
        "alg HS512": forge({"alg": "HS512", "typ": "JWT"}, claims),
        "alg RS256": forge({"alg": "RS256", "typ": "JWT"}, claims, sig=s),
        "tampered payload": f"{h}.{b64url(json.dumps(other).encode())}.{s}",
        "wrong key": forge({"alg": "HS256", "typ": "JWT"}, claims, key=os.urandom(32)),
        "padded sig": f"{h}.{p}.{s}=",
        "bad base64": f"{h}.{p}.{s[:-2]}!!",
        "four parts": f"{good}.{s}",
        "two parts": f"{h}.{p}",
        "empty": "..",
        "long": "a." * 3000 + "b",
    }
    for name, tok in forgeries.items():
        for creds in (bearer(tok), cookie(tok)):
            status, res, _ = raw(ctl, "GET", V1 + "/api-keys", headers=creds)
            assert status == 401, (name, res)
            assert res["error"]["code"] in ("INVALID_CREDENTIALS", "SESSION_EXPIRED"), name


def test_expired_tokens_are_refused():
    d = Daemon(sets=CTL_SETS + ["controller.session_ttl_s=1"])
    try:
        acct = account(d)
        assert claims_of(acct["token"])["exp"] - claims_of(acct["token"])["iat"] <= 1
        time.sleep(2.1)
        for creds in (bearer(acct["token"]), cookie(acct["token"])):
            status, res, _ = raw(d, "GET", V1 + "/api-keys", headers=creds)
            assert status == 401 and res["error"]["code"] == "SESSION_EXPIRED", res
        status, _, _ = raw(d, "GET", V1 + "/api-keys", headers=apikey(acct["api_key"]["key"]))
        assert status == 200
    finally:
        d.cleanup()


def test_rotating_the_session_key_ends_sessions_not_keys():
    d = Daemon(sets=CTL_SETS)
    data_dir = d.data_dir
    try:
        acct = account(d)
        key_file = os.path.join(data_dir, "session.key")
        assert os.stat(key_file).st_mode & 0o777 == 0o600 and os.path.getsize(key_file) == 32
        before = open(key_file, "rb").read()
        d.stop()
        # A restart keeps the key: sessions survive it.
        d2 = Daemon(sets=CTL_SETS, data_dir=data_dir)
        status, _, _ = raw(d2, "GET", V1 + "/api-keys", headers=bearer(acct["token"]))
        assert status == 200
        d2.stop()
        d3 = Daemon(sets=CTL_SETS, data_dir=data_dir, extra_args=["--rotate-session-key"])
        try:
            assert open(key_file, "rb").read() != before
            status, res, _ = raw(d3, "GET", V1 + "/api-keys", headers=bearer(acct["token"]))
            assert status == 401 and res["error"]["code"] == "INVALID_CREDENTIALS"
            status, _, _ = raw(d3, "GET", V1 + "/api-keys", headers=apikey(acct["api_key"]["key"]))
            assert status == 200
        finally:
            d3.stop()
    finally:
        d.cleanup()


# ---- auth hook, envelope, request ids ----

def test_auth_errors_use_the_envelope(ctl):
    status, res, _ = raw(ctl, "GET", V1 + "/api-keys")
    assert status == 401 and res == {"error": {"code": "AUTH_REQUIRED", "message": "Authentication required"}}
    for value in ("ApiKey sk_nope", "Bearer sk_nope", "Basic dXNlcjpwYXNz", "ApiKey ", "Bearer", "sk_x"):
        status, res, _ = raw(ctl, "GET", V1 + "/api-keys", headers={"Authorization": value})
        assert status == 401 and res["error"]["code"] == "INVALID_CREDENTIALS", value


def test_http_layer_errors_use_the_envelope(ctl):
    acct = account(ctl)
    status, res, _ = raw(ctl, "GET", V1 + "/no/such/route", headers=apikey(acct["api_key"]["key"]))
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"
    status, res, hdrs = raw(ctl, "PUT", V1 + "/api-keys", headers=apikey(acct["api_key"]["key"]))
    assert status == 405 and res["error"]["code"] == "METHOD_NOT_ALLOWED" and "GET" in header(hdrs, "allow")
    status, res, _ = raw(ctl, "POST", V1 + "/auth/login", headers={"Content-Type": "text/plain"})
    assert status == 415 and res["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    status, res, _ = raw(ctl, "POST", V1 + "/auth/login", {"email": "x" * 200000, "password": "p"})
    assert status == 413 and res["error"]["code"] == "PAYLOAD_TOO_LARGE"
    conn_body = b"{not json"
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", ctl.port, timeout=30)
    c.request("POST", V1 + "/auth/login", body=conn_body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 400 and json.loads(r.read())["error"]["code"] == "VALIDATION_ERROR"
    c.close()


def test_request_id_is_echoed_or_made(ctl):
    acct = account(ctl)
    cases = [("GET", V1 + "/api-keys", apikey(acct["api_key"]["key"])), ("GET", V1 + "/api-keys", {}),
             ("GET", V1 + "/auth/providers", {}), ("GET", V1 + "/nope", {}), ("GET", V1 + "/health", {})]
    for method, path, creds in cases:
        _, _, hdrs = raw(ctl, method, path, headers=dict(creds, **{"X-Request-Id": "trace-42:a.b_c"}))
        assert header(hdrs, "x-request-id") == "trace-42:a.b_c", path
        _, _, hdrs = raw(ctl, method, path, headers=creds)
        assert re.fullmatch(r"req_[0-9a-f]{32}", header(hdrs, "x-request-id")), path
    _, _, hdrs = raw(ctl, "GET", V1 + "/health", headers={"X-Request-Id": "bad id<script>"})
    assert re.fullmatch(r"req_[0-9a-f]{32}", header(hdrs, "x-request-id"))
    _, _, hdrs = raw(ctl, "GET", V1 + "/health", headers={"X-Request-Id": "a" * 129})
    assert header(hdrs, "x-request-id").startswith("req_")


def test_providers_and_health_routes(ctl):
    status, res, _ = raw(ctl, "GET", V1 + "/auth/providers")
    assert status == 200 and res == {"workos": {"enabled": False, "redirect_uri": None}}
    assert raw(ctl, "GET", V1 + "/health")[:2] == (200, {"status": "ok"})
    assert raw(ctl, "GET", V1 + "/ready")[:2] == (200, {"status": "ready"})
    status, res, _ = raw(ctl, "GET", V1 + "/health/detailed")
    assert status == 200 and res["status"] == "ok" and res["store"]["backend"] == "sqlite"


def test_no_secret_is_stored_in_the_clear():
    d = Daemon(sets=CTL_SETS)
    try:
        password = "VeryDistinctivePassw0rd"
        acct = account(d, password=password)
        status, extra, _ = raw(d, "POST", V1 + "/api-keys", {"name": "second"}, headers=apikey(acct["api_key"]["key"]))
        assert status == 201
        blob = b""
        for path in glob.glob(os.path.join(d.data_dir, "sandboxd.db*")):
            with open(path, "rb") as f:
                blob += f.read()
        assert acct["api_key"]["id"].encode() in blob          # the row is there…
        for secret in (acct["api_key"]["key"], extra["key"], password):
            assert secret.encode() not in blob                   # …its secret is not
        assert hashlib.sha256(extra["key"].encode()).hexdigest().encode() in blob
        assert b"$argon2id$v=19$m=19456,t=2,p=1$" in blob
        assert acct["api_key"]["key"].encode() not in open(d.log_path, "rb").read()
    finally:
        d.cleanup()


def test_the_operator_key_and_org_keys_open_different_apis():
    d = Daemon(sets=CTL_SETS + ["api_key=operator-key-123"])
    try:
        acct = account(d)
        org_key = acct["api_key"]["key"]
        status, _, _ = d.get("/languages", headers={"Authorization": f"Bearer {org_key}"})
        assert status == 401
        status, _, _ = d.get("/languages", headers={"Authorization": "Bearer operator-key-123"})
        assert status == 200
        for creds in (bearer("operator-key-123"), apikey("operator-key-123")):
            status, _, _ = raw(d, "GET", V1 + "/api-keys", headers=creds)
            assert status == 401
        status, _, _ = raw(d, "GET", V1 + "/api-keys", headers=apikey(org_key))
        assert status == 200
    finally:
        d.cleanup()
