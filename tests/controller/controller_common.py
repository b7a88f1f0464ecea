"""Shared helpers of the controller API tests (tests/controller): the
black-box Daemon of tests/api/conftest.py (loaded through
tests/api_loader.py) and small helpers for /api/v1: registration, raw
requests that keep every Set-Cookie, and auth headers."""
import http.client
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402

api = load_api()
Daemon = api.Daemon
ROOT = api.ROOT
# No warm pools: these tests run no code, and the machine is shared.
CTL_SETS = list(api.FAST_LIMITS) + ["pool.size=0"]
PASSWORD = "SecurePassword123!"
V1 = "/api/v1"


def unique_email(tag="ada"):
    return f"{tag}-{uuid.uuid4().hex[:10]}@example.com"


def raw(d, method, path, body=None, headers=None):
    """(status, parsed body, headers as a list of (lower name, value))."""
    status, parsed, _ = d.request(method, path, body=body, headers=headers)
    return status, parsed, d.last_headers


def get_bytes(d, path, headers=None):
    """GET path as raw bytes: (status, {lower header: value}, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    hdrs = {k.lower(): v for k, v in resp.getheaders()}
    conn.close()
    return resp.status, hdrs, body


def execute(d, creds, sid, command):
    """POST /sandbox/:id/execute that must succeed: its result."""
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": command}, headers=creds)
    assert status == 200, res
    return res


def header(hlist, name):
    for k, v in hlist:
        if k == name.lower():
            return v
    return None


def set_cookies(hlist):
    """{name: (value, attributes string)} of every Set-Cookie."""
    out = {}
    for k, v in hlist:
        if k == "set-cookie":
            pair, _, attrs = v.partition(";")
            name, _, value = pair.partition("=")
            out[name.strip()] = (value.strip(), attrs)
    return out


def register(d, email=None, password=PASSWORD, org="Example Co", **extra):
    body = {"first_name": "Ada", "last_name": "Lovelace", "organization_name": org,
            "email": email or unique_email(), "password": password, "use_case": "tests"}
    body.update(extra)
    return raw(d, "POST", V1 + "/register", body)


def account(d, **kw):
    """A registered account: the register reply body plus its headers."""
    status, body, hdrs = register(d, **kw)
    assert status == 201, body
    body["_headers"] = hdrs
    return body


def apikey(key):
    return {"Authorization": f"ApiKey {key}"}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def cookie(token, csrf=None):
    h = {"Cookie": f"stateset_session={token}"}
    if csrf is not None:
        h["X-CSRF-Token"] = csrf
    return h


def all_addresses_daemon(sets=CTL_SETS):
    """A daemon listening on 0.0.0.0 (so a non-loopback client can be
    tried), found ready through loopback."""
    port = api.free_port()
    saved = api.free_port
    api.free_port = lambda: port  # the Daemon's own port, so it finds the daemon ready
    try:
        return Daemon(sets=sets, extra_args=["--listen", f"0.0.0.0:{port}", "--insecure"])
    finally:
        api.free_port = saved
