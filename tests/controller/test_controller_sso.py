"""Single sign-on (issue 15 item 9): the seed's /auth/workos/* routes over a
generic OpenID Connect provider. The provider is a small http.server this
module runs on loopback (discovery, /authorize that consents at once for the
test's user, /token that checks the client secret and the PKCE verifier and
signs an RS256 ID token with a key made here, /jwks). The "browser" is
http.client with a cookie jar, following redirects by hand."""
import base64
import hashlib
import hmac
import http.client
import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from controller_common import (CTL_SETS, V1, Daemon, account, apikey, api, cookie, header, raw, set_cookies,
                               unique_email)

CLIENT_ID = "client_sandboxd_test"
CLIENT_SECRET = "test-client-secret-0123456789abcdef"


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64u_int(n):
    return b64u(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def make_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def sign_jwt(claims, key=None, kid="k1", alg="RS256", hs_key=None):
    head = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        head["kid"] = kid
    signing_input = (b64u(json.dumps(head).encode()) + "." + b64u(json.dumps(claims).encode())).encode()
    if alg == "RS256":
        sig = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    elif alg == "HS256":
        sig = hmac.new(hs_key.encode(), signing_input, hashlib.sha256).digest()
    else:
        sig = b""
    return signing_input.decode() + "." + b64u(sig)


class Provider:
    """The test's OpenID Connect provider. `user` is who consents next;
    `token_hook(claims) -> token or None` lets a test spoil the ID token."""

    def __init__(self):
        self.key = make_key()
        self.other_key = make_key()
        self.codes = {}
        self.authorize_requests = []
        self.token_requests = []
        self.user = None
        self.token_hook = None
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body=None, headers=()):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                if url.path == "/.well-known/openid-configuration":
                    self.reply(200, provider.discovery())
                elif url.path == "/jwks":
                    self.reply(200, provider.jwks())
                elif url.path == "/authorize":
                    provider.authorize_requests.append(q)
                    self.reply(302, headers=[("Location", provider.authorize(q))])
                else:
                    self.reply(404, {"error": "not_found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
                provider.token_requests.append(form)
                status, body = provider.token(form, self.headers.get("Authorization"))
                self.reply(status, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def discovery(self):
        return {"issuer": self.issuer, "authorization_endpoint": self.issuer + "/authorize",
                "token_endpoint": self.issuer + "/token", "jwks_uri": self.issuer + "/jwks",
                "response_types_supported": ["code"], "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post"],
                "code_challenge_methods_supported": ["S256"]}

    def jwks(self):
        pub = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
                          "n": b64u_int(pub.n), "e": b64u_int(pub.e)}]}

    def authorize(self, q):
        """Consents at once for self.user; the redirect carries code and state."""
        code = secrets.token_urlsafe(24)
        self.codes[code] = {"challenge": q.get("code_challenge"), "method": q.get("code_challenge_method"),
                            "nonce": q.get("nonce"), "redirect_uri": q.get("redirect_uri"),
                            "client_id": q.get("client_id"), "user": dict(self.user or {})}
        sep = "&" if "?" in q["redirect_uri"] else "?"
        return q["redirect_uri"] + sep + urllib.parse.urlencode({"code": code, "state": q.get("state", "")})

    def token(self, form, authz):
        grant = self.codes.pop(form.get("code"), None)
        if form.get("grant_type") != "authorization_code" or grant is None:
            return 400, {"error": "invalid_grant"}
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return 401, {"error": "invalid_client"}
        if form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        verifier = form.get("code_verifier", "")
        if grant["method"] != "S256" or b64u(hashlib.sha256(verifier.encode()).digest()) != grant["challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": CLIENT_ID, "iat": now, "exp": now + 300, "nonce": grant["nonce"]}
        claims.update(grant["user"])
        token = self.token_hook(claims) if self.token_hook else None
        return 200, {"access_token": "at_" + secrets.token_hex(8), "token_type": "Bearer",
                     "id_token": token or sign_jwt(claims, self.key)}


@pytest.fixture(scope="module")
def idp():
    p = Provider()
    yield p
    p.close()


@pytest.fixture(scope="module")
def sso(idp):
    """A daemon configured for the test provider. Its port is chosen first:
    the redirect URI registered at the provider names it."""
    port = api.free_port()
    real_free_port = api.free_port
    api.free_port = lambda: port
    try:
        d = Daemon(sets=CTL_SETS + [f"controller.oidc_issuer={idp.issuer}"],
                   env={"WORKOS_CLIENT_ID": CLIENT_ID, "WORKOS_API_KEY": CLIENT_SECRET,
                        "WORKOS_REDIRECT_URI": f"http://127.0.0.1:{port}{V1}/auth/workos/callback"})
    finally:
        api.free_port = real_free_port
    yield d
    d.cleanup()


@pytest.fixture(autouse=True)
def fresh_provider(idp):
    idp.token_hook = None
    idp.user = None
    yield


class Browser:
    """Cookies by name (with their Path), redirects followed by hand."""

    def __init__(self):
        self.jar = {}

    def cookie_header(self, path):
        pairs = [f"{k}={v}" for k, (v, p) in self.jar.items() if path.startswith(p)]
        return "; ".join(pairs)

    def get(self, url):
        u = urllib.parse.urlsplit(url)
        path = u.path + ("?" + u.query if u.query else "")
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        hdrs = {}
        if self.cookie_header(u.path):
            hdrs["Cookie"] = self.cookie_header(u.path)
        conn.request("GET", path, headers=hdrs)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        hlist = [(k.lower(), v) for k, v in resp.getheaders()]
        for name, (value, attrs) in set_cookies(hlist).items():
            attr = dict((a.strip().split("=", 1) + [""])[:2] for a in attrs.split(";") if a.strip())
            if attr.get("Max-Age") == "0":
                self.jar.pop(name, None)
            else:
                self.jar[name] = (value, attr.get("Path", "/"))
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body
        return resp.status, parsed, hlist

    def session(self):
        return self.jar.get("stateset_session", (None,))[0]


def start(d, browser, query=""):
    status, body, hdrs = browser.get(f"http://127.0.0.1:{d.port}{V1}/auth/workos/authorize{query}")
    assert status == 302, body
    return header(hdrs, "location")


def login(d, idp, browser=None, user=None, query="", change_callback=None):
    """The whole flow; returns (status, body, headers) of the callback."""
    browser = browser or Browser()
    idp.user = user if user is not None else {"sub": "sub-" + secrets.token_hex(6), "email": unique_email("sso"),
                                              "email_verified": True, "given_name": "Grace"}
    location = start(d, browser, query)
    status, _, hdrs = browser.get(location)
    assert status == 302
    callback = header(hdrs, "location")
    if change_callback:
        callback = change_callback(callback)
    return browser.get(callback)


def whoami(d, browser):
    status, res, _ = raw(d, "GET", V1 + "/auth/session", headers=cookie(browser.session()))
    assert status == 200, res
    return res


def test_providers_report_the_provider(sso, idp):
    status, res, _ = raw(sso, "GET", V1 + "/auth/providers")
    assert status == 200
    assert res["workos"] == {"enabled": True,
                             "redirect_uri": f"http://127.0.0.1:{sso.port}{V1}/auth/workos/callback"}
    assert res["oidc"] == {"enabled": True, "issuer": idp.issuer}


def test_authorize_redirects_with_state_nonce_and_pkce(sso, idp):
    b = Browser()
    location = start(sso, b, "?login_hint=ada%40corp.example&domain_hint=corp.example&screen_hint=sign-up")
    u = urllib.parse.urlsplit(location)
    assert f"{u.scheme}://{u.netloc}{u.path}" == idp.issuer + "/authorize"
    q = dict(urllib.parse.parse_qsl(u.query))
    assert q["response_type"] == "code" and q["client_id"] == CLIENT_ID
    assert q["redirect_uri"].endswith(V1 + "/auth/workos/callback")
    assert "openid" in q["scope"].split() and "email" in q["scope"].split()
    assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
    assert len(q["state"]) >= 43 and len(q["nonce"]) >= 43 and q["state"] != q["nonce"]
    assert q["login_hint"] == "ada@corp.example" and q["hd"] == "corp.example" and q["prompt"] == "create"
    # The pending login lives in one short-lived, HttpOnly, SameSite=Lax cookie.
    _, _, hdrs = raw(sso, "GET", V1 + "/auth/workos/authorize")
    value, attrs = set_cookies(hdrs)["stateset_sso"]
    assert "HttpOnly" in attrs and "SameSite=Lax" in attrs and "Max-Age=600" in attrs
    # The challenge is S256 of a verifier that never leaves the server-set cookie.
    verifier = value.split(".")[2]
    state2 = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(header(hdrs, "location")).query))
    assert b64u(hashlib.sha256(verifier.encode()).digest()) == state2["code_challenge"]
    # Two starts, two different states.
    assert state2["state"] != q["state"]


@pytest.mark.parametrize("bad", ["//evil.com", "//evil.com/x", "/\\evil.com", "https://evil.com/", "evil",
                                 "/a\r\nSet-Cookie: x=1"])
def test_return_to_must_be_a_local_path(sso, bad):
    status, res, hdrs = raw(sso, "GET", V1 + "/auth/workos/authorize?return_to=" + urllib.parse.quote(bad, safe=""))
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", bad
    assert header(hdrs, "location") is None


def test_full_flow_ends_with_a_working_session(sso, idp):
    b = Browser()
    user = {"sub": "sub-full-" + secrets.token_hex(4), "email": unique_email("Full").upper(),
            "email_verified": True, "given_name": "Grace", "family_name": "Hopper"}
    status, body, hdrs = login(sso, idp, b, user, "?return_to=" + urllib.parse.quote("/dashboard?tab=1"))
    assert status == 302, body
    assert header(hdrs, "location") == "/dashboard?tab=1"
    assert "stateset_sso" not in b.jar            # one use
    cookies = set_cookies(hdrs)
    assert "HttpOnly" in cookies["stateset_session"][1] and header(hdrs, "x-csrf-token")
    me = whoami(sso, b)
    assert me["user"]["email"] == user["email"].lower() and me["user"]["firstName"] == "Grace"
    assert me["user"]["role"] == "owner" and me["organization"]["name"] == "Grace's organization"
    # Signing in again is the same user; the default return_to is "/".
    b2 = Browser()
    status, _, hdrs = login(sso, idp, b2, user)
    assert status == 302 and header(hdrs, "location") == "/"
    assert whoami(sso, b2)["user"]["id"] == me["user"]["id"]
    # The session is a real one: it can read its org's keys.
    assert raw(sso, "GET", V1 + "/api-keys", headers=cookie(b2.session()))[0] == 200
    token_req = idp.token_requests[-1]
    assert token_req["client_secret"] == CLIENT_SECRET and len(token_req["code_verifier"]) >= 43


def test_state_must_match(sso, idp):
    def tamper(url):
        return url.replace("state=", "state=x")
    status, res, _ = login(sso, idp, change_callback=tamper)
    assert status == 400 and res["error"]["code"] == "SSO_STATE_INVALID"
    # A callback in a browser that never started the login.
    b = Browser()
    idp.user = {"sub": "s1", "email": unique_email(), "email_verified": True}
    location = start(sso, b)
    _, _, hdrs = b.get(location)
    status, res, _ = Browser().get(header(hdrs, "location"))
    assert status == 400 and res["error"]["code"] == "SSO_STATE_INVALID"
    # ... and the real one still works once; a replay afterwards does not.
    status, _, _ = b.get(header(hdrs, "location"))
    assert status == 302 and b.session()
    status, res, _ = b.get(header(hdrs, "location"))
    assert status == 400 and res["error"]["code"] == "SSO_STATE_INVALID"


def test_pkce_verifier_mismatch_is_refused_by_the_provider(sso, idp):
    b = Browser()
    idp.user = {"sub": "pkce", "email": unique_email(), "email_verified": True}
    location = start(sso, b)
    # An attacker's challenge in place of ours: our verifier no longer fits.
    forged = b64u(hashlib.sha256(b"attacker-verifier").digest())
    location = location.replace("code_challenge=", "code_challenge=" + forged + "&x=")
    _, _, hdrs = b.get(location)
    status, res, _ = b.get(header(hdrs, "location"))
    assert status == 401 and res["error"]["code"] == "SSO_EXCHANGE_FAILED", res
    assert "invalid_grant" in res["error"]["message"] and not b.session()


@pytest.mark.parametrize("case", ["nonce", "expired", "audience", "issuer", "signature", "unknown_kid",
                                  "alg_none", "hs256_wrong_secret", "future_iat"])
def test_bad_id_tokens_are_refused(sso, idp, case):
    now = int(time.time())

    def hook(claims):
        if case == "nonce":
            claims["nonce"] = "another-nonce"
        elif case == "expired":
            claims.update(iat=now - 900, exp=now - 600)
        elif case == "audience":
            claims["aud"] = "someone-else"
        elif case == "issuer":
            claims["iss"] = "http://127.0.0.1:1"
        elif case == "future_iat":
            claims.update(iat=now + 3600, exp=now + 7200)
        if case == "signature":
            return sign_jwt(claims, idp.other_key)          # same kid, another key
        if case == "unknown_kid":
            return sign_jwt(claims, idp.other_key, kid="k2")
        if case == "alg_none":
            return sign_jwt(claims, alg="none")
        if case == "hs256_wrong_secret":
            return sign_jwt(claims, alg="HS256", hs_key="not-the-secret")
        return sign_jwt(claims, idp.key)
    idp.token_hook = hook
    b = Browser()
    status, res, hdrs = login(sso, idp, b)
    assert status == 401 and res["error"]["code"] == "SSO_TOKEN_INVALID", (case, res)
    assert not b.session() and header(hdrs, "location") is None
    assert "stateset_sso" not in b.jar       # a failed login is over too


def test_hs256_with_the_client_secret_is_accepted(sso, idp):
    idp.token_hook = lambda claims: sign_jwt(claims, alg="HS256", hs_key=CLIENT_SECRET, kid=None)
    b = Browser()
    status, body, _ = login(sso, idp, b)
    assert status == 302, body
    assert whoami(sso, b)["user"]["role"] == "owner"


def test_provider_error_and_missing_email(sso, idp):
    status, res, _ = Browser().get(f"http://127.0.0.1:{sso.port}{V1}/auth/workos/callback?error=access_denied")
    assert status == 400 and res["error"]["code"] == "SSO_PROVIDER_ERROR"
    status, res, _ = login(sso, idp, user={"sub": "no-email"})
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR"


def test_existing_password_account_is_not_taken_over(sso, idp):
    owner = account(sso)
    email = owner["user"]["email"]
    status, res, _ = login(sso, idp, user={"sub": "takeover", "email": email, "email_verified": True})
    assert status == 409 and res["error"]["code"] == "EMAIL_ALREADY_EXISTS"


def session_of(acct):
    """Cookie-session headers of a registered account (with its CSRF token)."""
    return cookie(acct["token"], header(acct["_headers"], "x-csrf-token"))


def test_link_and_unlink_by_owner_only(sso, idp):
    owner = account(sso)
    creds = session_of(owner)
    status, res, _ = raw(sso, "GET", V1 + "/auth/workos/link", headers=creds)
    assert status == 200 and res["linked"] is False and res["workos_organization_id"] is None
    provider_org = "idp_org_" + secrets.token_hex(4)
    status, res, _ = raw(sso, "POST", V1 + "/auth/workos/link", {"workos_organization_id": provider_org}, creds)
    assert status == 200 and res["linked"] is True and res["workos_organization_id"] == provider_org
    assert res["organization_id"] == owner["organization"]["id"]
    assert raw(sso, "GET", V1 + "/auth/workos/link", headers=creds)[1]["workos_organization_id"] == provider_org
    # An API key is not a session; a cookie write needs the CSRF token.
    status, res, _ = raw(sso, "POST", V1 + "/auth/workos/link", {"workos_organization_id": "x"},
                         apikey(owner["api_key"]["key"]))
    assert status == 401
    status, _, _ = raw(sso, "POST", V1 + "/auth/workos/link", {"workos_organization_id": "x"},
                       cookie(owner["token"]))
    assert status == 403
    # A member who came in by SSO may neither read nor change the link.
    b = Browser()
    status, _, _ = login(sso, idp, b, {"sub": "m-" + provider_org, "email": unique_email("member"),
                                       "email_verified": True, "org_id": provider_org})
    assert status == 302
    member = whoami(sso, b)
    assert member["user"]["role"] == "member"
    mcreds = cookie(b.session(), header_csrf(b))
    for method, body in (("GET", None), ("POST", {"workos_organization_id": "mine"}), ("DELETE", None)):
        status, res, _ = raw(sso, method, V1 + "/auth/workos/link", body, mcreds)
        assert status == 403 and res["error"]["code"] == "FORBIDDEN", method
    # Another org cannot take the same provider organization.
    other = account(sso)
    status, res, _ = raw(sso, "POST", V1 + "/auth/workos/link", {"workos_organization_id": provider_org},
                         session_of(other))
    assert status == 409
    for bad in ({}, {"domain": "not a domain"}, {"workos_organization_id": "has space"}):
        assert raw(sso, "POST", V1 + "/auth/workos/link", bad, creds)[0] == 400, bad
    # Unlink: then the provider organization no longer routes logins to the org.
    status, res, _ = raw(sso, "DELETE", V1 + "/auth/workos/link", headers=creds)
    assert status == 200 and res == {"success": True}
    assert raw(sso, "GET", V1 + "/auth/workos/link", headers=creds)[1]["linked"] is False
    assert raw(sso, "DELETE", V1 + "/auth/workos/link", headers=creds)[0] == 404
    # The audit log names them as the seed does.
    status, res, _ = raw(sso, "GET", V1 + "/audit?limit=1000", headers=creds)
    actions = [r["action"] for r in res["data"] if r["status"] == 200]
    assert "auth.sso.link" in actions and "auth.sso.unlink" in actions, actions
    status, _, _ = login(sso, idp, b2 := Browser(), {"sub": "after-unlink-" + provider_org,
                                                     "email": unique_email("late"), "email_verified": True,
                                                     "org_id": provider_org})
    assert status == 302
    assert whoami(sso, b2)["organization"]["id"] != owner["organization"]["id"]


def header_csrf(browser):
    return browser.jar.get("__stateset_csrf", (None,))[0]


def test_sso_users_land_in_the_linked_org_and_see_only_it(sso, idp):
    a, b = account(sso, org="Org A"), account(sso, org="Org B")
    provider_org = "idp_org_a_" + secrets.token_hex(4)
    domain = f"corp-{secrets.token_hex(3)}.example"
    assert raw(sso, "POST", V1 + "/auth/workos/link", {"workos_organization_id": provider_org, "domain": domain},
               session_of(a))[0] == 200
    assert raw(sso, "POST", V1 + "/secrets", {"name": "B_ONLY", "value": "b"}, apikey(b["api_key"]["key"]))[0] == 201
    assert raw(sso, "POST", V1 + "/secrets", {"name": "A_ONLY", "value": "a"}, apikey(a["api_key"]["key"]))[0] == 201
    # By the provider organization claim.
    by_claim = Browser()
    assert login(sso, idp, by_claim, {"sub": "claim-" + provider_org, "email": unique_email("c"),
                                      "email_verified": False, "org_id": provider_org})[0] == 302
    # By the verified email domain.
    by_domain = Browser()
    assert login(sso, idp, by_domain, {"sub": "dom-" + domain, "email": f"dee@{domain}",
                                       "email_verified": True})[0] == 302
    for br in (by_claim, by_domain):
        me = whoami(sso, br)
        assert me["organization"]["id"] == a["organization"]["id"] and me["user"]["role"] == "member"
        status, page, _ = raw(sso, "GET", V1 + "/secrets", headers=cookie(br.session()))
        assert status == 200 and [s["name"] for s in page["data"]] == ["A_ONLY"]
        status, res, _ = raw(sso, "DELETE", V1 + "/secrets/B_ONLY", headers=cookie(br.session(), header_csrf(br)))
        assert status == 404
    # An unverified email at the domain does not join the org: a new org of its own.
    unverified = Browser()
    assert login(sso, idp, unverified, {"sub": "unv-" + domain, "email": f"eve@{domain}",
                                        "email_verified": False})[0] == 302
    me = whoami(sso, unverified)
    assert me["organization"]["id"] not in (a["organization"]["id"], b["organization"]["id"])
    assert me["user"]["role"] == "owner"


def test_not_configured_is_404():
    d = Daemon(sets=CTL_SETS)
    try:
        for path in ("/auth/workos/authorize", "/auth/workos/callback?code=a&state=b"):
            status, res, _ = raw(d, "GET", V1 + path)
            assert status == 404 and res["error"]["code"] == "SSO_NOT_CONFIGURED", path
        assert raw(d, "GET", V1 + "/auth/providers")[1] == {"workos": {"enabled": False, "redirect_uri": None}}
    finally:
        d.cleanup()


def test_provider_down_is_502():
    port = api.free_port()
    d = Daemon(sets=CTL_SETS + [f"controller.oidc_issuer=http://127.0.0.1:{port}",
                                f"controller.oidc_client_id={CLIENT_ID}",
                                "controller.oidc_redirect_uri=http://127.0.0.1/cb"])
    try:
        status, res, _ = raw(d, "GET", V1 + "/auth/workos/authorize")
        assert status == 502 and res["error"]["code"] == "SSO_PROVIDER_UNAVAILABLE"
    finally:
        d.cleanup()
