"""Controller GitHub integration (issue 15, item 8; seed 003 "GitHub
Integrations"): the public webhook receiver (X-Hub-Signature-256, replays),
installations (pending → connected to one org; other orgs get 404),
settings, the PR automation (a sandbox per PR, a comment posted through a
fake GitHub API on loopback with an App JWT and an installation token, the
sandbox stopped when the PR closes), events and health."""
import base64
import hashlib
import hmac
import json
import os
import random
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from controller_common import CTL_SETS, V1, Daemon, account, apikey, raw

SECRET = "whsec-" + uuid.uuid4().hex
APP_ID = "424242"
TOKEN = "ghs_" + uuid.uuid4().hex


class FakeGitHub:
    """GitHub's REST API as far as the daemon uses it: installation tokens
    for a valid App JWT, and issue comments for that token."""

    def __init__(self, public_key):
        self.public_key = public_key
        self.calls = []
        self.fail_comments = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.calls.append({"path": self.path, "headers": dict(self.headers),
                                   "body": json.loads(body) if body else None})
                status, reply = fake.answer(self.path, self.headers)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def jwt_ok(self, auth):
        if not auth or not auth.startswith("Bearer "):
            return False
        parts = auth[len("Bearer "):].split(".")
        if len(parts) != 3:
            return False
        dec = [base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)) for p in parts]
        header, claims = json.loads(dec[0]), json.loads(dec[1])
        try:
            self.public_key.verify(dec[2], f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except Exception:
            return False
        return (header.get("alg") == "RS256" and claims.get("iss") == APP_ID
                and claims["iat"] < claims["exp"] and claims["exp"] - claims["iat"] <= 600)

    def answer(self, path, headers):
        if path.startswith("/app/installations/") and path.endswith("/access_tokens"):
            if not self.jwt_ok(headers.get("Authorization")):
                return 401, {"message": "A JSON web token could not be decoded"}
            return 201, {"token": TOKEN, "expires_at": "2099-01-01T00:00:00Z"}
        if "/issues/" in path and path.endswith("/comments"):
            if headers.get("Authorization") != f"token {TOKEN}":
                return 401, {"message": "Bad credentials"}
            return (500, {"message": "boom"}) if self.fail_comments else (201, {"id": 1})
        return 404, {"message": "Not Found"}

    def comments(self):
        return [c for c in self.calls if c["path"].endswith("/comments")]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def gh(tmp_path_factory):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path_factory.mktemp("gh") / "app.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption()))
    fake = FakeGitHub(key.public_key())
    d = Daemon(sets=CTL_SETS + [f"controller.github_webhook_secret={SECRET}",
                                f"controller.github_api_url={fake.url}",
                                f"controller.github_app_id={APP_ID}",
                                f"controller.github_private_key={pem}",
                                "controller.github_dashboard_url=https://dash.example"])
    d.fake = fake
    yield d
    d.cleanup()
    fake.close()


def creds_of(d):
    return apikey(account(d)["api_key"]["key"])


def deliver(d, event, payload, secret=SECRET, delivery=None, sig=None):
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": event,
               "X-GitHub-Delivery": delivery or str(uuid.uuid4())}
    if sig is None and secret is not None:
        sig = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if sig is not None:
        headers["X-Hub-Signature-256"] = sig
    status, res, _ = d.request("POST", V1 + "/github/webhook", raw=body, headers=headers)
    return status, res


def new_install_id():
    return random.randrange(10**7, 10**9)


def install_payload(iid, action="created", login="octo-org", repos=("octo-org/app",)):
    return {"action": action,
            "installation": {"id": iid, "account": {"login": login, "type": "Organization"}},
            "repositories": [{"full_name": r} for r in repos]}


def installed(d, login="octo-org", repos=("octo-org/app",)):
    iid = new_install_id()
    status, res = deliver(d, "installation", install_payload(iid, login=login, repos=repos))
    assert status == 200 and res["status"] == "processed", res
    return iid


def connected(d, creds, **kw):
    iid = installed(d, **kw)
    status, res, _ = raw(d, "POST", V1 + f"/github/installations/{iid}/connect", headers=creds)
    assert status == 200 and res["state"] == "linked", res
    return iid


def listed(d, creds):
    status, page, _ = raw(d, "GET", V1 + "/github/installations?limit=1000", headers=creds)
    assert status == 200, page
    return {i["id"]: i for i in page["data"]}


def events(d, creds, **q):
    qs = "&".join(f"{k}={v}" for k, v in q.items())
    status, page, _ = raw(d, "GET", V1 + "/github/events" + (f"?{qs}" if qs else ""), headers=creds)
    assert status == 200, page
    return page


# ---- the receiver ----------------------------------------------------------

def test_signed_delivery_accepted_and_bad_or_missing_signature_refused(gh):
    status, res = deliver(gh, "ping", {"zen": "Keep it logically awesome."})
    assert status == 200 and res["status"] == "processed" and res["detail"] == "pong"
    for kw in ({"secret": None}, {"secret": "wrong"}, {"sig": "sha256=" + "0" * 64}, {"sig": "sha1=abc"},
               {"sig": "sha256=zz" + "0" * 62}):
        status, res = deliver(gh, "ping", {"zen": "x"}, **kw)
        assert status == 401 and res["error"]["code"] == "INVALID_SIGNATURE", (kw, res)
    # A valid signature over other bytes does not carry over.
    body = json.dumps({"zen": "a"}).encode()
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    status, _, _ = gh.request("POST", V1 + "/github/webhook", raw=b'{"zen": "b"}',
                              headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d1",
                                       "X-Hub-Signature-256": sig})
    assert status == 401


def test_replay_is_an_idempotent_no_op(gh):
    creds = creds_of(gh)
    iid = connected(gh, creds)
    delivery = str(uuid.uuid4())
    payload = {"action": "added", "installation": {"id": iid, "account": {"login": "octo-org", "type": "Organization"}},
               "repositories_added": [{"full_name": "octo-org/second"}], "repositories_removed": []}
    status, first = deliver(gh, "installation_repositories", payload, delivery=delivery)
    assert status == 200 and first["status"] == "processed"
    status, again = deliver(gh, "installation_repositories", payload, delivery=delivery)
    assert status == 200 and again == {"status": "duplicate", "delivery_id": delivery}
    assert listed(gh, creds)[str(iid)]["repositories"] == ["octo-org/app", "octo-org/second"]
    # Only one event for that delivery.
    assert [e["delivery_id"] for e in events(gh, creds)["data"]].count(delivery) == 1
    # A forged delivery (bad signature) does not take a delivery id either.
    fresh = str(uuid.uuid4())
    assert deliver(gh, "ping", {}, secret="wrong", delivery=fresh)[0] == 401
    assert deliver(gh, "ping", {}, delivery=fresh)[1]["status"] == "processed"


def test_headers_and_payload_validated(gh):
    assert deliver(gh, "ping", {}, delivery="bad id with spaces")[0] == 400
    body = b"not json"
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    status, res, _ = gh.request("POST", V1 + "/github/webhook", raw=body,
                                headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": "x1",
                                         "X-Hub-Signature-256": sig})
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR"


def test_unconfigured_secret_is_503():
    d = Daemon(sets=CTL_SETS)
    try:
        assert deliver(d, "ping", {})[0] == 503
        creds = creds_of(d)
        status, h, _ = raw(d, "GET", V1 + "/github/health", headers=creds)
        assert status == 200 and h["status"] == "not_configured" and h["webhook_configured"] is False
    finally:
        d.cleanup()


def test_seed_environment_names():
    d = Daemon(sets=CTL_SETS, env={"GITHUB_WEBHOOK_SECRET": "from-env", "GITHUB_INTEGRATION_ENABLED": "true"})
    try:
        assert deliver(d, "ping", {}, secret="from-env")[0] == 200
        assert deliver(d, "ping", {})[0] == 401
    finally:
        d.cleanup()
    d = Daemon(sets=CTL_SETS, env={"GITHUB_INTEGRATION_ENABLED": "false"})
    try:
        assert deliver(d, "ping", {})[0] == 404
    finally:
        d.cleanup()


def test_disabled_integration_has_no_routes():
    d = Daemon(sets=CTL_SETS + ["controller.github_enabled=false", f"controller.github_webhook_secret={SECRET}"])
    try:
        assert deliver(d, "ping", {})[0] == 404
        assert raw(d, "GET", V1 + "/github/settings", headers=creds_of(d))[0] == 404
    finally:
        d.cleanup()


# ---- installations ------------------------------------------------------------

def test_installation_pending_connect_list_and_org_isolation(gh):
    a, b = creds_of(gh), creds_of(gh)
    iid = installed(gh, login="acme", repos=("acme/api", "acme/web"))
    # Pending: every org sees it, with the account only.
    for creds in (a, b):
        pend = listed(gh, creds)[str(iid)]
        assert pend["state"] == "pending" and pend["account_login"] == "acme"
        assert "repositories" not in pend and "org_id" not in pend
    status, res, _ = raw(gh, "POST", V1 + f"/github/installations/{iid}/connect", headers=a)
    assert status == 200 and res["state"] == "linked" and res["repositories"] == ["acme/api", "acme/web"]
    assert res["status"] == "active" and res["connected_at"]
    # Connecting again is the same answer; for org B it is gone.
    assert raw(gh, "POST", V1 + f"/github/installations/{iid}/connect", headers=a)[0] == 200
    assert str(iid) in listed(gh, a) and str(iid) not in listed(gh, b)
    assert raw(gh, "POST", V1 + f"/github/installations/{iid}/connect", headers=b)[0] == 404
    assert raw(gh, "DELETE", V1 + f"/github/installations/{iid}", headers=b)[0] == 404
    for bad in ("999999999999", "abc", "0", "-1"):
        assert raw(gh, "POST", V1 + f"/github/installations/{bad}/connect", headers=a)[0] == 404, bad
    # Its "created" delivery became org A's history, not B's.
    assert any(e["installation_id"] == str(iid) and e["event"] == "installation" for e in events(gh, a)["data"])
    assert not any(e["installation_id"] == str(iid) for e in events(gh, b)["data"])
    # Unlinked: pending again (B may take it now).
    status, res, _ = raw(gh, "DELETE", V1 + f"/github/installations/{iid}", headers=a)
    assert status == 200 and res == {"id": str(iid), "state": "disconnected"}
    assert raw(gh, "DELETE", V1 + f"/github/installations/{iid}", headers=a)[0] == 404
    assert listed(gh, a)[str(iid)]["state"] == "pending"
    assert raw(gh, "POST", V1 + f"/github/installations/{iid}/connect", headers=b)[0] == 200


def test_installation_suspend_and_delete(gh):
    creds = creds_of(gh)
    iid = connected(gh, creds)
    assert deliver(gh, "installation", install_payload(iid, action="suspend"))[0] == 200
    assert listed(gh, creds)[str(iid)]["status"] == "suspended"
    assert listed(gh, creds)[str(iid)]["repositories"] == ["octo-org/app"]
    assert deliver(gh, "installation", install_payload(iid, action="deleted"))[0] == 200
    assert str(iid) not in listed(gh, creds)


def test_routes_need_auth(gh):
    for method, path in (("GET", "/github/installations"), ("GET", "/github/settings"),
                         ("GET", "/github/events"), ("GET", "/github/health"),
                         ("POST", "/github/installations/1/connect")):
        assert raw(gh, method, V1 + path)[0] == 401, path


# ---- settings -------------------------------------------------------------------

def test_settings_round_trip_and_validation(gh):
    a, b = creds_of(gh), creds_of(gh)
    status, s, _ = raw(gh, "GET", V1 + "/github/settings", headers=a)
    assert status == 200 and s == {"auto_create_sandbox_on_pr": False, "auto_pr_comment_on_sandbox": True,
                                   "auto_stop_sandbox_on_pr_close": True, "updated_at": None}
    status, s, _ = raw(gh, "PUT", V1 + "/github/settings", {"auto_stop_sandbox_on_pr_close": False}, headers=a)
    assert status == 200 and s["auto_stop_sandbox_on_pr_close"] is False and s["auto_pr_comment_on_sandbox"] is True
    assert s["updated_at"]
    assert raw(gh, "GET", V1 + "/github/settings", headers=a)[1] == s
    assert raw(gh, "GET", V1 + "/github/settings", headers=b)[1]["auto_stop_sandbox_on_pr_close"] is True
    for bad in ({}, {"auto_stop_sandbox_on_pr_close": "yes"}, {"auto_stop_sandbox_on_pr_close": 1},
                {"nope": True}, [True]):
        status, res, _ = raw(gh, "PUT", V1 + "/github/settings", bad, headers=a)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", bad
    assert raw(gh, "GET", V1 + "/github/settings", headers=a)[1] == s


# ---- pull request automation -------------------------------------------------------

def pr_payload(iid, action, number, repo="octo-org/app", sha="0123456789abcdef"):
    return {"action": action, "number": number, "installation": {"id": iid},
            "repository": {"full_name": repo},
            "pull_request": {"number": number, "head": {"ref": "feature", "sha": sha}, "base": {"ref": "main"}}}


def sandbox_status(d, creds, sid):
    return raw(d, "GET", V1 + f"/sandbox/{sid}", headers=creds)[0]


def test_pr_opened_makes_a_sandbox_and_comments_closed_stops_it(gh):
    creds = creds_of(gh)
    iid = connected(gh, creds)
    # Off by default: nothing is made.
    status, res = deliver(gh, "pull_request", pr_payload(iid, "opened", 7))
    assert status == 200 and "sandbox_id" not in res and "auto_create_sandbox_on_pr is off" in res["detail"]
    assert raw(gh, "PUT", V1 + "/github/settings", {"auto_create_sandbox_on_pr": True}, headers=creds)[0] == 200
    before = len(gh.fake.comments())
    status, res = deliver(gh, "pull_request", pr_payload(iid, "opened", 7))
    assert status == 200 and res["status"] == "processed", res
    sid = res["sandbox_id"]
    assert sandbox_status(gh, creds, sid) == 200
    # The sandbox knows its PR.
    status, out, _ = raw(gh, "POST", V1 + f"/sandbox/{sid}/execute",
                         {"command": "echo $GITHUB_REPOSITORY#$GITHUB_PR_NUMBER@$GITHUB_HEAD_SHA"}, headers=creds)
    assert status == 200 and out["stdout"].strip() == "octo-org/app#7@0123456789abcdef", out
    # The comment went to the fake GitHub with the installation token.
    comments = gh.fake.comments()[before:]
    assert len(comments) == 1
    c = comments[0]
    assert c["path"] == "/repos/octo-org/app/issues/7/comments"
    assert c["headers"]["Authorization"] == f"token {TOKEN}"
    assert sid in c["body"]["body"] and f"https://dash.example/sandboxes/{sid}" in c["body"]["body"]
    tokens = [t for t in gh.fake.calls if t["path"] == f"/app/installations/{iid}/access_tokens"]
    assert tokens and gh.fake.jwt_ok(tokens[-1]["headers"]["Authorization"])
    # A synchronize while it runs makes no second one.
    status, res = deliver(gh, "pull_request", pr_payload(iid, "synchronize", 7, sha="fedcba9876543210"))
    assert status == 200 and "sandbox_id" not in res and sid in res["detail"]
    # Another org's PR of the same number is not touched by closing this one.
    status, res = deliver(gh, "pull_request", pr_payload(iid, "closed", 7))
    assert status == 200 and res["detail"] == "stopped 1 sandbox(es)", res
    assert sandbox_status(gh, creds, sid) == 404
    evs = [e for e in events(gh, creds)["data"] if e["event"] == "pull_request"]
    assert evs[0]["action"] == "closed" and evs[0]["pull_request_number"] == 7
    assert any(e["sandbox_id"] == sid and e["status"] == "success" for e in evs)


def test_pr_close_keeps_sandbox_when_setting_off_and_comment_failure_is_recorded(gh):
    creds = creds_of(gh)
    iid = connected(gh, creds, repos=("octo-org/lib",))
    assert raw(gh, "PUT", V1 + "/github/settings",
               {"auto_create_sandbox_on_pr": True, "auto_stop_sandbox_on_pr_close": False}, headers=creds)[0] == 200
    gh.fake.fail_comments = True
    try:
        status, res = deliver(gh, "pull_request", pr_payload(iid, "opened", 3, repo="octo-org/lib"))
    finally:
        gh.fake.fail_comments = False
    assert status == 200 and res["status"] == "failed" and "comment failed" in res["error"], res
    sid = res["sandbox_id"]
    status, res = deliver(gh, "pull_request", pr_payload(iid, "closed", 3, repo="octo-org/lib"))
    assert status == 200 and "auto_stop_sandbox_on_pr_close is off" in res["detail"]
    assert sandbox_status(gh, creds, sid) == 200
    status, h, _ = raw(gh, "GET", V1 + "/github/health", headers=creds)
    assert status == 200 and h["status"] == "degraded" and h["webhooks"]["failure"] == 1
    assert h["latest_failure"]["sandbox_id"] == sid and "comment failed" in h["latest_failure"]["error"]
    assert raw(gh, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)[0] == 200


def test_pr_of_pending_installation_is_ignored(gh):
    creds = creds_of(gh)
    iid = installed(gh)
    status, res = deliver(gh, "pull_request", pr_payload(iid, "opened", 9))
    assert status == 200 and res["status"] == "processed" and "sandbox_id" not in res
    assert "no active installation" in res["detail"]
    assert all(e["installation_id"] != str(iid) for e in events(gh, creds)["data"])


# ---- events and health --------------------------------------------------------------

def test_events_paginated_newest_first(gh):
    creds = creds_of(gh)
    iid = connected(gh, creds)
    for n in range(3):
        deliver(gh, "pull_request", pr_payload(iid, "labeled", 100 + n))
    page = events(gh, creds, limit=2, offset=0)
    assert page["total"] == 4 and page["limit"] == 2 and page["has_more"] is True
    assert [e["pull_request_number"] for e in page["data"]] == [102, 101]
    e = page["data"][0]
    assert e["event"] == "pull_request" and e["action"] == "labeled" and e["status"] == "success"
    assert e["repository"] == "octo-org/app" and e["installation_id"] == str(iid) and e["received_at"]
    page2 = events(gh, creds, limit=2, offset=2)
    assert [x["event"] for x in page2["data"]] == ["pull_request", "installation"] and page2["has_more"] is False
    assert raw(gh, "GET", V1 + "/github/events?limit=-1", headers=creds)[0] == 400


def test_health_window_validation_and_counts(gh):
    creds = creds_of(gh)
    status, h, _ = raw(gh, "GET", V1 + "/github/health", headers=creds)
    assert status == 200 and h["status"] == "not_connected" and h["window_hours"] == 24
    assert h["installations"]["total"] == 0 and h["latest_event"] is None and h["latest_failure"] is None
    iid = connected(gh, creds)
    deliver(gh, "pull_request", pr_payload(iid, "edited", 1))
    for q in ("1", "168", "24"):
        status, h, _ = raw(gh, "GET", V1 + f"/github/health?window_hours={q}", headers=creds)
        assert status == 200 and h["window_hours"] == int(q)
        assert h["status"] == "healthy" and h["installations"] == {"total": 1, "active": 1}
        assert h["webhooks"] == {"success": 2, "failure": 0, "total": 2}
        assert h["latest_event"]["action"] == "edited" and h["latest_failure"] is None
    for bad in ("0", "169", "-1", "abc", "1.5", "", "24h", "0001"):
        status, res, _ = raw(gh, "GET", V1 + f"/github/health?window_hours={bad}", headers=creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", bad


def test_concurrent_deliveries_of_one_pr_make_one_sandbox(gh):
    creds = creds_of(gh)
    iid = connected(gh, creds, repos=("octo-org/race",))
    assert raw(gh, "PUT", V1 + "/github/settings",
               {"auto_create_sandbox_on_pr": True, "auto_pr_comment_on_sandbox": False}, headers=creds)[0] == 200
    results = []

    def send():
        results.append(deliver(gh, "pull_request", pr_payload(iid, "synchronize", 11, repo="octo-org/race")))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(status == 200 and res["status"] == "processed" for status, res in results), results
    made = {res["sandbox_id"] for _, res in results if "sandbox_id" in res}
    assert len(made) == 1, results
    status, page, _ = raw(gh, "GET", V1 + "/sandboxes", headers=creds)
    assert status == 200 and [s["sandbox_id"] for s in page["data"]] == list(made)


def test_signature_hex_case_does_not_matter(gh):
    body = json.dumps({"zen": "upper"}).encode()
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest().upper()
    status, res, _ = gh.request("POST", V1 + "/github/webhook", raw=body,
                                headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": str(uuid.uuid4()),
                                         "X-Hub-Signature-256": sig})
    assert status == 200 and res["status"] == "processed"
