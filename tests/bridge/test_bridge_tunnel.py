"""Bridge tunnels (/v1/sandbox/:id/tunnel/:port) and their preview URLs
(/preview/<token>/…): HTTP and WebSocket proxied to a server listening on
the sandbox's own loopback; and the network model under it (a sandbox's
commands have TCP/UDP on a loopback of their own, with no route out, and
see neither the host's nor another sandbox's servers or abstract unix
sockets)."""
import base64
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse

import pytest
import websocket  # Debian python3-websocket

from bridge_common import Daemon, exec_sse, new_sandbox

# A small server run inside the sandbox (stdlib only): GET serves files of
# the cwd, POST /echo returns the body, /big streams N bytes without a
# length, /slow answers after a pause, /who names the server, /hdrs returns
# the request's headers and path, and a WebSocket on any path echoes.
SERVER = r'''
import base64, hashlib, http.server, json, os, socketserver, struct, sys, time
PORT, WHO = int(sys.argv[1]), sys.argv[2]
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
    def _send(self, body, ctype="text/plain", length=True):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.ws()
        if self.path == "/who":
            return self._send(WHO.encode())
        if self.path.startswith("/hdrs"):
            return self._send(json.dumps({"path": self.path, "headers": dict(self.headers)}).encode(), "application/json")
        if self.path.startswith("/big"):
            n = int(self.path.split("=")[1])
            self.send_response(200); self.send_header("Content-Type", "application/octet-stream"); self.end_headers()
            block = bytes(range(256)) * 256
            while n > 0:
                self.wfile.write(block[:min(n, len(block))]); n -= len(block)
            return
        if self.path == "/slow":
            time.sleep(1.5)
            return self._send(b"late")
        return super().do_GET()
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(hashlib.sha256(body).hexdigest().encode() + b" " + str(len(body)).encode())
    def ws(self):
        key = self.headers["Sec-WebSocket-Key"]
        acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101); self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", acc); self.end_headers(); self.wfile.flush()
        r, w = self.rfile, self.wfile
        while True:
            h = r.read(2)
            if len(h) < 2: return
            op, ln = h[0] & 15, h[1] & 127
            if ln == 126: ln = struct.unpack(">H", r.read(2))[0]
            elif ln == 127: ln = struct.unpack(">Q", r.read(8))[0]
            mask = r.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(ln)))
            if op == 8:
                w.write(b"\x88\x00"); w.flush(); return
            if op in (1, 2):
                out = (WHO + ":").encode() + data if op == 1 else data
                hdr = bytes([0x80 | op])
                hdr += bytes([len(out)]) if len(out) < 126 else (b"\x7e" + struct.pack(">H", len(out)) if len(out) < 65536 else b"\x7f" + struct.pack(">Q", len(out)))
                w.write(hdr + out); w.flush()
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
os.chdir("/workspace")
S(("127.0.0.1", PORT), H).serve_forever()
'''


class Server:
    """A server in an /exec whose SSE stream stays open (each /exec is its
    own jailed process tree, alive while its command runs)."""

    def __init__(self, d, sid, port, who="srv", argv=None):
        self.result = None
        argv = argv or ["timeout", "60", "python3", "-c", SERVER, str(port), who]
        self.t = threading.Thread(target=self._run, args=(d, sid, argv), daemon=True)
        self.t.start()

    def _run(self, d, sid, argv):
        try:
            self.result = exec_sse(d, sid, argv, timeout=90)
        except (OSError, http.client.HTTPException) as e:
            self.result = e  # the sandbox was deleted under it


def preview_get(url, path="", method="GET", body=None, headers=None, timeout=30):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    conn.request(method, u.path + path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def open_tunnel(d, sid, port, body=None):
    status, res, _ = d.request("POST", f"/v1/sandbox/{sid}/tunnel/{port}", body=body)
    assert status == 200, res
    return res


def wait_up(url, path="/who", timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status, _, data = preview_get(url, path)
        if status == 200:
            return data
        time.sleep(0.2)
    raise AssertionError("the server in the sandbox never answered")


@pytest.fixture(scope="module")
def served(bridge):
    """One sandbox with the test server on 8080, a file, and its tunnel."""
    sid = new_sandbox(bridge)
    st, *_ , code = exec_sse(bridge, sid, ["bash", "-c", "printf 'hello tunnel\\n' > /workspace/hello.txt"])
    assert code == 0
    tun = open_tunnel(bridge, sid, 8080)
    srv = Server(bridge, sid, 8080, "alpha")
    wait_up(tun["url"])
    yield sid, tun
    bridge.request("DELETE", f"/v1/sandbox/{sid}")


# ---- the tunnel routes ----

def test_open_answers_the_tunnel_fields(served, bridge):
    sid, tun = served
    assert set(tun) == {"id", "port", "url", "hostname", "createdAt"}
    assert tun["port"] == 8080
    assert tun["hostname"] == f"127.0.0.1:{bridge.port}"
    token = tun["url"].split("/preview/")[1].rstrip("/")
    assert tun["url"] == f"http://127.0.0.1:{bridge.port}/preview/{token}/"
    assert len(token) == 48 and all(c in "0123456789abcdef" for c in token)
    assert tun["createdAt"].endswith("Z")


def test_open_is_idempotent_and_keeps_a_name(served, bridge):
    sid, tun = served
    again = open_tunnel(bridge, sid, 8080)
    assert again["url"] == tun["url"] and again["id"] == tun["id"]
    named = open_tunnel(bridge, sid, 8080, body={"name": "my-app-1"})
    assert named["name"] == "my-app-1" and named["url"] == tun["url"]


@pytest.mark.parametrize("port", ["80", "1023", "65536", "3000", "abc", "8080x", "-1", "1e4", "99999999"])
def test_bad_ports_are_400(bridge, port):
    sid = new_sandbox(bridge)
    for method in ("POST", "DELETE"):
        status, res, _ = bridge.request(method, f"/v1/sandbox/{sid}/tunnel/{port}")
        assert status == 400, (method, res)
        assert res == {"error": "Invalid port", "code": "invalid_request"}


@pytest.mark.parametrize("body", [{"name": "Bad"}, {"name": "-x"}, {"name": "x-"}, {"name": "a" * 64},
                                  {"name": "a_b"}, {"name": 5}, [1]])
def test_bad_names_are_400(bridge, body):
    sid = new_sandbox(bridge)
    status, res, _ = bridge.request("POST", f"/v1/sandbox/{sid}/tunnel/8080", body=body)
    assert status == 400 and res["code"] == "invalid_request", res


def test_bad_json_is_400(bridge):
    sid = new_sandbox(bridge)
    conn = http.client.HTTPConnection("127.0.0.1", bridge.port, timeout=10)
    conn.request("POST", f"/v1/sandbox/{sid}/tunnel/8080", body=b"{nope",
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    res = json.loads(resp.read())
    assert resp.status == 400 and res["code"] == "invalid_request", res


def test_longest_name_is_accepted(bridge):
    sid = new_sandbox(bridge)
    res = open_tunnel(bridge, sid, 9000, body={"name": "a" + "-" * 61 + "z"})
    assert res["name"] == "a" + "-" * 61 + "z"


# ---- proxying HTTP ----

def test_get_a_file(served):
    _, tun = served
    status, hdrs, data = preview_get(tun["url"], "hello.txt")
    assert status == 200 and data == b"hello tunnel\n"
    assert hdrs["content-length"] == str(len(data))


def test_missing_file_keeps_the_servers_status(served):
    _, tun = served
    status, _, _ = preview_get(tun["url"], "nope.txt")
    assert status == 404


def test_post_a_body(served):
    import hashlib
    _, tun = served
    body = os.urandom(300_000)
    status, _, data = preview_get(tun["url"], "echo", method="POST", body=body,
                                  headers={"Content-Type": "application/octet-stream"})
    assert status == 200
    assert data == hashlib.sha256(body).hexdigest().encode() + b" " + str(len(body)).encode()


def test_path_query_and_forwarded_headers(served):
    _, tun = served
    status, _, data = preview_get(tun["url"], "hdrs/a%20b?x=1&y=%2F", headers={"X-Custom": "v1"})
    assert status == 200
    got = json.loads(data)
    assert got["path"] == "/hdrs/a%20b?x=1&y=%2F"
    h = {k.lower(): v for k, v in got["headers"].items()}
    assert h["x-custom"] == "v1"
    assert h["x-forwarded-for"] == "127.0.0.1"
    assert h["x-forwarded-proto"] == "http"
    assert h["host"].startswith("127.0.0.1:")


def test_a_large_streamed_response(served):
    _, tun = served
    n = 5 * 1024 * 1024 + 17
    status, hdrs, data = preview_get(tun["url"], f"big?n={n}", timeout=60)
    assert status == 200
    assert len(data) == n
    block = bytes(range(256)) * 256
    assert data == (block * (n // len(block) + 1))[:n]


def test_a_slow_server(served):
    _, tun = served
    t0 = time.time()
    status, _, data = preview_get(tun["url"], "slow")
    assert status == 200 and data == b"late" and time.time() - t0 >= 1.4


def test_a_wrong_token_is_404(served, bridge):
    _, tun = served
    token = tun["url"].split("/preview/")[1].rstrip("/")
    wrong = token[:-1] + ("0" if token[-1] != "0" else "1")
    status, _, data = preview_get(f"http://127.0.0.1:{bridge.port}/preview/{wrong}/", "who")
    assert status == 404
    assert json.loads(data)["code"] == "tunnel_error"


def test_websocket_echo_through_the_tunnel(served):
    _, tun = served
    ws_url = tun["url"].replace("http://", "ws://") + "chat"
    ws = websocket.create_connection(ws_url, timeout=10)
    try:
        ws.send("hi there")
        assert ws.recv() == "alpha:hi there"
        blob = os.urandom(70000)
        ws.send_binary(blob)
        assert ws.recv() == blob
    finally:
        ws.close()


def test_nothing_listening_is_502(bridge):
    sid = new_sandbox(bridge)
    tun = open_tunnel(bridge, sid, 8099)
    status, _, data = preview_get(tun["url"], "x")
    assert status == 502
    res = json.loads(data)
    assert res["code"] == "tunnel_error" and "8099" in res["error"], res


def test_delete_then_404_and_delete_is_idempotent(bridge):
    sid = new_sandbox(bridge)
    tun = open_tunnel(bridge, sid, 8090)
    for _ in range(2):
        status, _, _ = bridge.request("DELETE", f"/v1/sandbox/{sid}/tunnel/8090")
        assert status == 204
    status, _, _ = preview_get(tun["url"], "x")
    assert status == 404


def test_tunnels_die_with_their_sandbox(bridge):
    sid = new_sandbox(bridge)
    tun = open_tunnel(bridge, sid, 8091)
    status, _, _ = preview_get(tun["url"], "x")
    assert status == 502
    assert bridge.request("DELETE", f"/v1/sandbox/{sid}")[0] == 204
    status, _, _ = preview_get(tun["url"], "x")
    assert status == 404


def test_head_and_a_bare_token_path(served):
    _, tun = served
    status, hdrs, data = preview_get(tun["url"], "hello.txt", method="HEAD")
    assert status == 200 and data == b""
    status, _, data = preview_get(tun["url"].rstrip("/"))  # /preview/<token>: the server's "/"
    assert status == 200 and b"hello.txt" in data  # http.server's directory listing


def test_tunnel_routes_need_the_key_but_preview_urls_do_not():
    d = Daemon(sets=["api_key=s3cret"])
    try:
        auth = {"Authorization": "Bearer s3cret"}
        sid = new_sandbox(d, headers=auth)
        status, res, _ = d.request("POST", f"/v1/sandbox/{sid}/tunnel/8080")
        assert status == 401 and res["code"] == "unauthorized"
        status, res, _ = d.request("DELETE", f"/v1/sandbox/{sid}/tunnel/8080")
        assert status == 401
        status, tun, _ = d.request("POST", f"/v1/sandbox/{sid}/tunnel/8080", headers=auth)
        assert status == 200, tun
        # No key: the token is the credential (502: it got past auth to the sandbox).
        status, _, data = preview_get(tun["url"], "x")
        assert status == 502 and json.loads(data)["code"] == "tunnel_error"
        status, _, _ = preview_get(f"http://127.0.0.1:{d.port}/preview/{'0' * 48}/", "x")
        assert status == 404
    finally:
        d.cleanup()


def test_slow_servers_hold_at_most_half_the_workers():
    d = Daemon(sets=["exec.workers=2"])  # one preview may wait at a time
    try:
        sid = new_sandbox(d)
        tun = open_tunnel(d, sid, 8080)
        Server(d, sid, 8080, "slowpoke")
        wait_up(tun["url"])
        first = {}
        t = threading.Thread(target=lambda: first.update(r=preview_get(tun["url"], "slow")))
        t.start()
        time.sleep(0.5)
        status, hdrs, data = preview_get(tun["url"], "who")
        assert status == 503, data
        assert json.loads(data)["code"] == "capacity_exceeded" and hdrs["retry-after"] == "1"
        t.join()
        assert first["r"][0] == 200 and first["r"][2] == b"late"
        assert preview_get(tun["url"], "who")[0] == 200  # the slot is back
        d.request("DELETE", f"/v1/sandbox/{sid}")
    finally:
        d.cleanup()


# ---- the network model ----

PROBE = r'''
import socket, sys
port = int(sys.argv[1])
r = {}
for name, addr in [("daemon", ("127.0.0.1", port)), ("outside", ("10.1.2.3", 80)), ("v6out", ("2001:db8::1", 80))]:
    try:
        fam = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(2); s.connect(addr); r[name] = "connected"
    except OSError as e:
        r[name] = e.errno
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.sendto(b"ping", u.getsockname())
r["udp"] = u.recv(10).decode()
r["ifaces"] = sorted(n for _, n in socket.if_nameindex())
print(json.dumps(r) if False else r)
'''


def test_commands_have_loopback_but_no_route_out(bridge):
    import ast
    import errno
    sid = new_sandbox(bridge)
    *_, out, err, code = exec_sse(bridge, sid, ["python3", "-c", PROBE, str(bridge.port)])
    assert code == 0, err
    r = ast.literal_eval(out.decode())
    # Inside, 127.0.0.1 is the sandbox's own loopback: the host daemon is not there.
    assert r["daemon"] == errno.ECONNREFUSED
    assert r["outside"] == errno.ENETUNREACH
    assert r["v6out"] in (errno.ENETUNREACH, errno.EADDRNOTAVAIL)
    assert r["udp"] == "ping"
    assert r["ifaces"] == ["lo"]


def test_stateless_executions_still_have_no_inet(bridge):
    res = bridge.execute("python", "import socket\ntry:\n    socket.socket(socket.AF_INET)\n    r='open'\n"
                                   "except OSError as e:\n    r=e.errno\nr")
    out = res["results"][0]
    assert "open" not in json.dumps(out), res


def test_two_sandboxes_on_one_port_see_only_their_own(bridge):
    a, b = new_sandbox(bridge), new_sandbox(bridge)
    ta, tb = open_tunnel(bridge, a, 8181), open_tunnel(bridge, b, 8181)
    Server(bridge, a, 8181, "aaa")
    Server(bridge, b, 8181, "bbb")
    assert wait_up(ta["url"]) == b"aaa"
    assert wait_up(tb["url"]) == b"bbb"
    # From inside each sandbox, its loopback holds only its own server.
    for sid, who in ((a, b"aaa"), (b, b"bbb")):
        *_, out, err, code = exec_sse(bridge, sid, ["python3", "-c",
                                                    "import urllib.request;print(urllib.request.urlopen("
                                                    "'http://127.0.0.1:8181/who').read().decode())"])
        assert code == 0, err
        assert out.strip() == who
    for sid in (a, b):
        bridge.request("DELETE", f"/v1/sandbox/{sid}")


ABSTRACT = r'''
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
if sys.argv[1] == "hold":
    s.bind(b"\0sandboxd-tunnel-test"); s.listen(); print("bound", flush=True); time.sleep(20)
else:
    try:
        s.connect(b"\0sandboxd-tunnel-test"); print("connected")
    except OSError as e:
        print("refused", e.errno)
    t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    t.bind(b"\0sandboxd-tunnel-test"); print("bound too")
'''


def test_abstract_unix_sockets_do_not_cross_sandboxes(bridge):
    import errno
    a, b = new_sandbox(bridge), new_sandbox(bridge)
    Server(bridge, a, 0, argv=["python3", "-c", ABSTRACT, "hold"])
    time.sleep(1.5)  # the holder binds within its first second
    *_, out, err, code = exec_sse(bridge, a, ["python3", "-c", ABSTRACT, "probe"])
    # Within sandbox a the name is taken (the holder is up; connecting
    # across jails is refused by Landlock's abstract-socket scope anyway).
    assert code != 0 and b"Address already in use" in err, (out, err)
    # In sandbox b the name is free: another namespace.
    *_, out, err, code = exec_sse(bridge, b, ["python3", "-c", ABSTRACT, "probe"])
    assert code == 0, err
    assert out.decode().split("\n")[:2] == [f"refused {errno.ECONNREFUSED}", "bound too"]
    for sid in (a, b):
        bridge.request("DELETE", f"/v1/sandbox/{sid}")
