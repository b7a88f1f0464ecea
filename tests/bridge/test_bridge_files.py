"""Bridge /file/* GET and PUT: raw bytes with Content-Length, a real 404,
the path rules of resolveWorkspacePath (and how %-escapes, "//" and ".."
arrive through the HTTP layer), the 32 MiB cap, parents, atomic replace,
the sandbox user, the workspace quota and Session-Id."""
import hashlib
import http.client
import json
import os
import socket

import pytest

from bridge_common import FAST_LIMITS, Daemon, exec_sse, new_sandbox

MiB = 1024 * 1024
# A bridge sandbox's own limits (bridge.workspace_bytes, bridge.file_bytes)
# made small, for the quota and per-file limit tests.
SMALL_LIMITS = FAST_LIMITS + ["bridge.workspace_bytes=4M", "bridge.file_bytes=3M"]


def raw(d, method, path, body=None, headers=None):
    """One request with the path sent exactly as given (no client-side
    normalisation) → (status, body bytes, lower-case headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data, {k.lower(): v for k, v in resp.getheaders()}


def put(d, sid, path, data, headers=None):
    return raw(d, "PUT", f"/v1/sandbox/{sid}/file/{path}", data, headers)


def get(d, sid, path, headers=None):
    return raw(d, "GET", f"/v1/sandbox/{sid}/file/{path}", None, headers)


def sh(d, sid, script):
    status, _, _, out, err, code = exec_sse(d, sid, ["bash", "-c", script])
    assert status == 200 and code == 0, (out, err)
    return out.decode()


def error_of(data):
    return json.loads(data)


def test_put_then_get_raw_bytes_with_content_length(bridge):
    sid = new_sandbox(bridge)
    payload = bytes(range(256)) * 3 + b"\x00\xff\r\n"
    status, body, _ = put(bridge, sid, "workspace/a.bin", payload, {"Content-Type": "image/png"})
    assert status == 200 and error_of(body) == {"ok": True}
    status, body, h = get(bridge, sid, "workspace/a.bin")
    assert status == 200 and body == payload
    assert h["content-type"] == "application/octet-stream"
    assert h["content-length"] == str(len(payload))
    # The guest sees the same bytes.
    assert sh(bridge, sid, "sha256sum a.bin").split()[0] == hashlib.sha256(payload).hexdigest()


def test_ten_megabyte_binary_round_trip(bridge):
    sid = new_sandbox(bridge)
    payload = os.urandom(10 * 1000 * 1000)
    assert put(bridge, sid, "workspace/bridge/ten.bin", payload)[0] == 200
    status, body, h = get(bridge, sid, "workspace/bridge/ten.bin")
    assert status == 200 and h["content-length"] == str(len(payload))
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(payload).hexdigest()


def test_32_mib_is_accepted_and_one_byte_more_is_413(bridge):
    sid = new_sandbox(bridge)
    payload = b"z" * (32 * MiB)
    status, body, _ = put(bridge, sid, "workspace/max.bin", payload)
    assert status == 200, body
    assert sh(bridge, sid, "stat -c %s max.bin").strip() == str(32 * MiB)
    # One byte more: refused from Content-Length, before the body is read.
    s = socket.create_connection(("127.0.0.1", bridge.port), timeout=30)
    s.sendall(f"PUT /v1/sandbox/{sid}/file/workspace/over.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              f"Content-Length: {32 * MiB + 1}\r\n\r\n".encode())
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b'"code":"payload_too_large"' in reply
    # Chunked (no Content-Length): refused once past the cap.
    conn = http.client.HTTPConnection("127.0.0.1", bridge.port, timeout=120)
    conn.request("PUT", f"/v1/sandbox/{sid}/file/workspace/over.bin",
                 body=(b"y" * MiB for _ in range(33)), encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 413 and b"payload_too_large" in resp.read()
    assert get(bridge, sid, "workspace/over.bin")[0] == 404


def test_empty_path_is_400(bridge):
    sid = new_sandbox(bridge)
    for path in (f"/v1/sandbox/{sid}/file/", f"/v1/sandbox/{sid}/file"):
        for method in ("GET", "PUT"):
            status, body, _ = raw(bridge, method, path, b"x" if method == "PUT" else None)
            assert status == 400, (method, path, body)
            assert error_of(body) == {"error": "file path must not be empty", "code": "invalid_request"}


ESCAPES = [
    "main.py",                                  # relative to "/": /main.py
    "etc/passwd",
    "tmp/x",
    "workspacefoo/x",
    "workspace/..",
    "workspace/../etc/passwd",
    "workspace/a/../../etc/passwd",
    "workspace/%2e%2e/etc/passwd",              # decoded by the HTTP layer, then resolved
    "workspace/%2E%2E/%2E%2E/etc/passwd",
    "workspace%2F..%2Fetc%2Fpasswd",
    "%2Fetc%2Fpasswd",
    "/etc/passwd",                              # file//etc/passwd
    "//workspace/../etc/passwd",
    "workspace/./../tmp/x",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_escapes_are_403(bridge, path):
    sid = new_sandbox(bridge)
    with open("/etc/passwd", "rb") as f:
        passwd = f.read()
    status, body, _ = get(bridge, sid, path)
    assert status == 403, (path, body)
    assert error_of(body) == {"error": "path must resolve to a location within /workspace",
                              "code": "invalid_request"}
    status, body, _ = put(bridge, sid, path, b"pwned")
    assert status == 403, (path, body)
    with open("/etc/passwd", "rb") as f:
        assert f.read() == passwd
    assert not os.path.exists("/main.py") and not os.path.exists("/tmp/x")


def test_dot_slash_and_escaped_forms_resolve_inside(bridge):
    sid = new_sandbox(bridge)
    assert put(bridge, sid, "workspace/d/e.txt", b"same")[0] == 200
    for path in ("workspace//d//e.txt", "workspace/./d/./e.txt", "workspace/x/../d/e.txt",
                 "workspace%2Fd%2Fe.txt", "workspace/%64/e.txt", "workspace/d/e.txt/"):
        status, body, _ = get(bridge, sid, path)
        assert (status, body) == (200, b"same"), path
    # A name with a literal "%": only one decoding happens.
    assert put(bridge, sid, "workspace/p%2525", b"pct")[0] == 200
    assert sh(bridge, sid, "cat p%25") == "pct"


def test_not_valid_utf8_is_400(bridge):
    sid = new_sandbox(bridge)
    status, body, _ = get(bridge, sid, "workspace/%ff%fe")
    assert status == 400 and error_of(body)["code"] == "invalid_request"


def test_missing_is_a_real_404_and_a_directory_is_400(bridge):
    sid = new_sandbox(bridge)
    status, body, h = get(bridge, sid, "workspace/nope.txt")
    assert status == 404 and error_of(body)["code"] == "workspace_read_not_found"
    assert h["content-type"].startswith("application/json")
    assert put(bridge, sid, "workspace/dir/f", b"1")[0] == 200
    for path in ("workspace/dir", "workspace", "workspace/"):
        status, body, _ = get(bridge, sid, path)
        assert status == 400 and error_of(body)["code"] == "invalid_request", path
    for path in ("workspace/dir", "workspace"):
        status, body, _ = put(bridge, sid, path, b"x")
        assert status == 400, path
    assert sh(bridge, sid, "cat dir/f") == "1"


def test_put_creates_parents_replaces_atomically_as_the_sandbox_user(bridge):
    sid = new_sandbox(bridge)
    assert put(bridge, sid, "workspace/p/q/r/s.txt", b"one")[0] == 200
    assert put(bridge, sid, "workspace/p/q/r/s.txt", b"two!")[0] == 200
    assert get(bridge, sid, "workspace/p/q/r/s.txt")[1] == b"two!"
    out = sh(bridge, sid, "stat -c '%u %g %a %n' p p/q p/q/r p/q/r/s.txt; ls -A p/q/r")
    lines = out.splitlines()
    assert lines[:4] == ["65534 65534 755 p", "65534 65534 755 p/q", "65534 65534 755 p/q/r",
                         "65534 65534 644 p/q/r/s.txt"], out
    assert lines[4:] == ["s.txt"], out  # no temp file left beside it
    # The guest can replace and delete what the API wrote.
    sh(bridge, sid, "echo guest > p/q/r/s.txt && rm -r p")


def test_empty_body_makes_an_empty_file(bridge):
    sid = new_sandbox(bridge)
    assert put(bridge, sid, "workspace/e", b"")[0] == 200
    status, body, h = get(bridge, sid, "workspace/e")
    assert status == 200 and body == b"" and h["content-length"] == "0"


def test_guest_symlinks_are_never_followed(bridge):
    sid = new_sandbox(bridge)
    with open("/etc/passwd", "rb") as f:
        passwd = f.read()
    sh(bridge, sid, "ln -s /etc/passwd lp; ln -s /etc le; mkdir real; echo in > real/f; ln -s real li")
    for path in ("workspace/lp", "workspace/le/passwd", "workspace/li/f"):
        status, body, _ = get(bridge, sid, path)
        assert status == 403 and b"root:" not in body, (path, body)
        status, body, _ = put(bridge, sid, path, b"pwned")
        assert status == 403, (path, body)
    status, body, _ = put(bridge, sid, "workspace/le/new/x", b"pwned")
    assert status == 403 and not os.path.exists("/etc/new")
    with open("/etc/passwd", "rb") as f:
        assert f.read() == passwd
    assert sh(bridge, sid, "readlink lp; cat real/f") == "/etc/passwd\nin\n"


def test_the_file_limit_and_a_full_workspace():
    d = Daemon(sets=SMALL_LIMITS)
    try:
        sid = new_sandbox(d)
        # The sandbox's per-file limit (bridge.file_bytes), as in the files API: 413.
        status, body, _ = put(d, sid, "workspace/f", b"x" * (3 * MiB + 1))
        assert status == 413 and error_of(body)["code"] == "payload_too_large"
        assert get(d, sid, "workspace/f")[0] == 404
        # A full workspace: a clear error, and no half-written file.
        assert put(d, sid, "workspace/a", b"a" * (3 * MiB))[0] == 200
        status, body, _ = put(d, sid, "workspace/b/c", b"b" * (3 * MiB))
        err = error_of(body)
        assert status == 502 and err["code"] == "workspace_archive_write_error", body
        assert "exceeds" in err["error"]
        assert get(d, sid, "workspace/b/c")[0] == 404
        # Nothing was made for the refused write: no parent, no temp file.
        assert sh(d, sid, "ls -A") == "a\n"
    finally:
        d.cleanup()


@pytest.mark.parametrize("bad", ["a..b", "bad id", "x" * 129, "semi;colon", "slash/x", ""])
def test_bad_session_id_is_400(bridge, bad):
    sid = new_sandbox(bridge)
    for method in ("GET", "PUT"):
        status, body, _ = raw(bridge, method, f"/v1/sandbox/{sid}/file/workspace/s",
                              b"x" if method == "PUT" else None, {"Session-Id": bad})
        assert status == 400, (bad, method, body)
        assert error_of(body) == {"error": "Invalid session ID format", "code": "invalid_request"}


def test_a_valid_session_id_is_accepted(bridge):
    sid = new_sandbox(bridge)
    h = {"Session-Id": "sess-1.A_b"}
    assert put(bridge, sid, "workspace/s", b"v", h)[0] == 200
    assert get(bridge, sid, "workspace/s", h)[:2] == (200, b"v")


def test_auth_applies(tmp_path):
    d = Daemon(sets=FAST_LIMITS + ["api_key=k3y"])
    try:
        sid = new_sandbox(d, headers={"Authorization": "Bearer k3y"})
        assert put(d, sid, "workspace/a", b"1")[0] == 401
        assert get(d, sid, "workspace/a")[0] == 401
        assert put(d, sid, "workspace/a", b"1", {"Authorization": "bearer k3y"})[0] == 200
        assert get(d, sid, "workspace/a", {"Authorization": "Bearer k3y"})[:2] == (200, b"1")
    finally:
        d.cleanup()
