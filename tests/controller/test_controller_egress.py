"""Controller egress policies (issue 15, item 3): /egress/policies,
/egress/audit, /internal/egress/*, and the data path: a sandbox reaches
the network only through the daemon's DNS stub and HTTP proxy on its own
loopback, which check names, the HTTP Host and the TLS SNI against the
org's policies.

The "internet" is built here, on this machine (root): two network
namespaces, each with a veth to the host and an HTTP (80) and TLS (443)
server: "allowed" and "denied". The daemon resolves the test names
through controller.egress_hosts, so no real outside address is used."""
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, api, apikey, raw

if os.geteuid() != 0 or not shutil.which("ip"):
    pytest.skip("the test internet needs root and ip(8)", allow_module_level=True)

N = os.getpid() % 200 + 20
NET = {"allowed": f"10.201.{N}", "denied": f"10.202.{N}"}
HOST_ADDR = NET["allowed"] + ".1"   # the host's own end of the veth
ALLOWED_IP = NET["allowed"] + ".2"
DENIED_IP = NET["denied"] + ".2"
HOSTS = ",".join([f"allowed.test={ALLOWED_IP}", f"api.wild.test={ALLOWED_IP}", f"wild.test={ALLOWED_IP}",
                  f"other.test={ALLOWED_IP}", f"denied.test={DENIED_IP}", "rebind.test=169.254.169.254",
                  f"self.test={HOST_ADDR}"])

SERVER = r"""
import http.server, ssl, sys, threading
name, cert = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{name} host={self.headers.get('Host')} path={self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
def serve(port, tls):
    s = http.server.ThreadingHTTPServer(("0.0.0.0", port), H)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.serve_forever()
for port, tls in ((80, False), (443, True), (8443, True)):
    threading.Thread(target=serve, args=(port, tls), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


class Internet:
    """Two namespaces with servers, torn down in cleanup()."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="egress-net-")
        self.procs, self.links, self.netns = [], [], []
        try:
            for name, net in NET.items():
                self._host(name, net)
        except BaseException:
            self.cleanup()
            raise

    def _host(self, name, net):
        ns, hside, nside = f"egt{N}{name[0]}", f"egt{N}{name[0]}h", f"egt{N}{name[0]}n"
        sh("ip", "netns", "add", ns)
        self.netns.append(ns)
        sh("ip", "link", "add", hside, "type", "veth", "peer", "name", nside)
        self.links.append(hside)
        sh("ip", "link", "set", nside, "netns", ns)
        sh("ip", "addr", "add", f"{net}.1/24", "dev", hside)
        sh("ip", "link", "set", hside, "up")
        for cmd in (["ip", "addr", "add", f"{net}.2/24", "dev", nside], ["ip", "link", "set", nside, "up"],
                    ["ip", "link", "set", "lo", "up"]):
            sh("ip", "netns", "exec", ns, *cmd)
        cert = os.path.join(self.tmp, f"{name}.pem")
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}.test",
           "-keyout", cert, "-out", cert + ".crt")
        with open(cert, "a") as f, open(cert + ".crt") as c:
            f.write(c.read())
        p = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", SERVER, name, cert],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(p)
        assert p.stdout.readline().strip() == "ready"

    def cleanup(self):
        for p in self.procs:
            p.kill()
            p.wait()
        for link in self.links:
            sh("ip", "link", "del", link, check=False)
        for ns in self.netns:
            sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def internet():
    net = Internet()
    yield net
    net.cleanup()


def egress_daemon(mode, enabled=True):
    sets = list(CTL_SETS) + [f"controller.egress_enabled={'true' if enabled else 'false'}",
                             f"controller.egress_mode={mode}", f"controller.egress_hosts={HOSTS}",
                             "controller.internal_token=egress-internal-token",
                             "controller.egress_connect_timeout_ms=2000"]
    return Daemon(sets=sets)


@pytest.fixture(scope="module")
def sd(internet):
    d = egress_daemon("enforce")
    yield d
    d.cleanup()


def creds_of(d):
    return apikey(account(d)["api_key"]["key"])


def policy(d, creds, **doc):
    status, res, _ = raw(d, "POST", V1 + "/egress/policies", doc, creds)
    assert status == 201, res
    return res


def new_sandbox(d, creds):
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, creds)
    assert status == 201, sb
    return sb["sandbox_id"]


def run(d, creds, sid, command):
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": command, "timeout": 30000}, creds)
    assert status == 200, res
    return res


def curl(d, creds, sid, url, *extra):
    """(HTTP status as curl saw it: the server's, else the proxy's answer to
    CONNECT; 0: no answer), the body, the execute reply."""
    res = run(d, creds, sid, ["curl", "-sS", "-k", "-m", "10", "-w", "\n%{http_code}/%{http_connect}", *extra, url])
    body, _, codes = res["stdout"].rpartition("\n")
    code, _, connect = codes.partition("/")
    return int(code or 0) or int(connect or 0), body, res


def audit(d, creds):
    status, res, _ = raw(d, "GET", V1 + "/egress/audit?limit=1000", headers=creds)
    assert status == 200, res
    return res["data"]


def org_with_sandbox(d, **doc):
    creds = creds_of(d)
    pol = policy(d, creds, **doc) if doc else None
    return creds, new_sandbox(d, creds), pol


# ---- routes ---------------------------------------------------------------

def test_policy_crud_and_validation(sd):
    creds = creds_of(sd)
    p = policy(sd, creds, policyName="default", allowedDomains=["API.GitHub.com", "*.npmjs.org"],
               deniedDomains=["evil.example.com"], allowedPorts=[80, 443], logAllRequests=True, extra="dropped")
    assert p["id"].startswith("pol_") and p["organizationId"].startswith("org_")
    assert p["allowedDomains"] == ["api.github.com", "*.npmjs.org"] and p["allowAll"] is False
    assert p["allowedPorts"] == [80, 443] and p["logAllRequests"] is True and "extra" not in p
    status, got, _ = raw(sd, "GET", V1 + f"/egress/policies/{p['id']}", headers=creds)
    assert status == 200 and got == p
    status, up, _ = raw(sd, "PUT", V1 + f"/egress/policies/{p['id']}", {"allowAll": True}, creds)
    assert status == 200 and up["allowAll"] is True and up["allowedDomains"] == p["allowedDomains"]
    status, page, _ = raw(sd, "GET", V1 + "/egress/policies?limit=1", headers=creds)
    assert status == 200 and page["total"] == 1 and page["data"][0]["id"] == p["id"] and not page["has_more"]
    for bad in ({"allowedDomains": ["bad domain"]}, {"allowedDomains": "x.com"}, {"allowedPorts": [0]},
                {"allowedPorts": [70000]}, {"allowAll": "yes"}, {"policyName": ""}, {"deniedDomains": ["*."]}):
        status, res, _ = raw(sd, "POST", V1 + "/egress/policies", bad, creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", (bad, res)
    status, _, _ = raw(sd, "DELETE", V1 + f"/egress/policies/{p['id']}", headers=creds)
    assert status == 200
    assert raw(sd, "GET", V1 + f"/egress/policies/{p['id']}", headers=creds)[0] == 404
    assert raw(sd, "GET", V1 + "/egress/policies", headers={})[0] == 401


def test_org_isolation_of_policies_and_audit(sd, internet):
    a, sid_a, pa = org_with_sandbox(sd, allowedDomains=["allowed.test"], logAllRequests=True)
    b = creds_of(sd)
    assert curl(sd, a, sid_a, "http://allowed.test/")[0] == 200
    # B sees none of A's policies (404 by id too) nor A's audit.
    assert raw(sd, "GET", V1 + "/egress/policies", headers=b)[1]["total"] == 0
    for method in ("GET", "DELETE"):
        assert raw(sd, method, V1 + f"/egress/policies/{pa['id']}", headers=b)[0] == 404
    assert raw(sd, "PUT", V1 + f"/egress/policies/{pa['id']}", {"allowAll": True}, b)[0] == 404
    assert audit(sd, b) == []
    assert any(r["host"] == "allowed.test" and r["sandboxId"] == sid_a for r in audit(sd, a))
    # And B's sandbox does not get A's policy: nothing is allowed for B.
    sid_b = new_sandbox(sd, b)
    assert curl(sd, b, sid_b, "http://allowed.test/")[0] == 403


def test_internal_routes_need_the_token(sd):
    creds, _, pol = org_with_sandbox(sd, allowedDomains=["*.wild.test"], allowedPorts=[443])
    org = pol["organizationId"]
    tok = {"X-Internal-Token": "egress-internal-token"}
    body = {"organizationId": org, "host": "api.wild.test", "port": 443}
    assert raw(sd, "POST", V1 + "/internal/egress/authorize", body, creds)[0] == 401
    status, res, _ = raw(sd, "POST", V1 + "/internal/egress/authorize", body, tok)
    assert status == 200 and res["allowed"] is True and res["mode"] == "enforce"
    status, res, _ = raw(sd, "POST", V1 + "/internal/egress/authorize", dict(body, port=80), tok)
    assert status == 200 and res["allowed"] is False and res["violation"] is True
    status, res, _ = raw(sd, "POST", V1 + "/internal/egress/authorize", dict(body, host="wild.test"), tok)
    assert res["allowed"] is False  # "*.wild.test" is not wild.test itself
    rec = {"organizationId": org, "sandboxId": "ext", "host": "x.test", "port": 443, "decision": "denied",
           "violation": True, "reason": "external proxy"}
    assert raw(sd, "POST", V1 + "/internal/egress/audit", rec, creds)[0] == 401
    assert raw(sd, "POST", V1 + "/internal/egress/audit", rec, tok)[0] == 201
    got = audit(sd, creds)
    assert got[0]["host"] == "x.test" and got[0]["reason"] == "external proxy" and got[0]["decision"] == "denied"
    status, snap, _ = raw(sd, "GET", V1 + f"/internal/egress/policies?organizationId={org}", headers=tok)
    assert status == 200 and [p["id"] for p in snap["policies"]] == [pol["id"]] and snap["mode"] == "enforce"
    assert raw(sd, "GET", V1 + "/internal/egress/policies", headers=creds)[0] == 401


# ---- the data path ----------------------------------------------------------

def test_http_and_https_to_an_allowed_host(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowedDomains=["allowed.test"], logAllRequests=True)
    env = run(sd, creds, sid, "echo $HTTP_PROXY $https_proxy; cat /etc/resolv.conf")["stdout"]
    assert "http://127.0.0.1:3128 http://127.0.0.1:3128" in env and "nameserver 127.0.0.1" in env
    code, body, _ = curl(sd, creds, sid, "http://allowed.test/hello")
    assert code == 200 and body == "allowed host=allowed.test path=/hello\n"
    code, body, _ = curl(sd, creds, sid, "https://allowed.test/tls")
    assert code == 200 and body == "allowed host=allowed.test path=/tls\n"
    # Python's urllib honours the same variables.
    py = ("import urllib.request; print(urllib.request.urlopen('http://allowed.test/py', timeout=10).read()"
          ".decode(), end='')")
    assert run(sd, creds, sid, ["python3", "-c", py])["stdout"] == "allowed host=allowed.test path=/py\n"
    recs = audit(sd, creds)
    protos = {(r["protocol"], r["decision"]) for r in recs if r["host"] == "allowed.test"}
    assert {("http", "allowed"), ("connect", "allowed")} <= protos
    assert all(r["sandboxId"] == sid and r["mode"] == "enforce" for r in recs)
    assert any(r["protocol"] == "connect" and r["bytesIn"] > 0 and r["bytesOut"] > 0 for r in recs)


def test_denied_host_gets_egress_denied(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowedDomains=["allowed.test"], deniedDomains=["denied.test"])
    code, body, _ = curl(sd, creds, sid, "http://denied.test/")
    assert code == 403 and json.loads(body)["error"]["code"] == "EGRESS_DENIED"
    # CONNECT refused: curl sees the 403 of the proxy and no tunnel.
    code, _, res = curl(sd, creds, sid, "https://denied.test/")
    assert code == 403 and res["exit_code"] != 0
    # A host in neither list is not allowed either.
    assert curl(sd, creds, sid, "http://other.test/")[0] == 403
    recs = [r for r in audit(sd, creds) if r["decision"] == "denied"]
    assert {("denied.test", "http"), ("denied.test", "connect"), ("other.test", "http")} <= {
        (r["host"], r["protocol"]) for r in recs}
    assert all(r["violation"] for r in recs)
    ev = first_event(sd, creds, "security.violation")
    assert ev["sandboxId"] == sid and ev["kind"] == "egress" and ev["decision"] == "denied"


def first_event(d, creds, name, timeout=10):
    """The org's first event called name, replayed from its event log."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout)
    conn.request("GET", V1 + "/events/stream?lastEventId=0", headers=creds)
    resp = conn.getresponse()
    assert resp.status == 200
    event = None
    try:
        while True:
            line = resp.readline().decode().rstrip("\n")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == name:
                return json.loads(line[5:])
    finally:
        conn.close()


def test_dns_answers_only_allowed_names(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowedDomains=["allowed.test", "*.wild.test"])
    out = run(sd, creds, sid, ["getent", "hosts", "allowed.test"])
    assert out["exit_code"] == 0 and ALLOWED_IP in out["stdout"], out
    assert run(sd, creds, sid, ["getent", "hosts", "denied.test"])["exit_code"] != 0
    py = "import socket,sys; print(socket.getaddrinfo(sys.argv[1], 80, socket.AF_INET)[0][4][0])"
    assert run(sd, creds, sid, ["python3", "-c", py, "api.wild.test"])["stdout"] == ALLOWED_IP + "\n"
    assert run(sd, creds, sid, ["python3", "-c", py, "wild.test"])["exit_code"] != 0
    # DNS over TCP answers as UDP does.
    tcp = ("import socket,struct; q=b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00'"
           "+b''.join(bytes([len(l)])+l.encode() for l in 'allowed.test'.split('.'))+b'\\x00\\x00\\x01\\x00\\x01';"
           "s=socket.create_connection(('127.0.0.1',53)); s.sendall(struct.pack('>H',len(q))+q);"
           "r=s.recv(4096)[2:]; print(r[3]&15, struct.unpack('>H',r[6:8])[0], socket.inet_ntoa(r[-4:]))")
    assert run(sd, creds, sid, ["python3", "-c", tcp])["stdout"] == f"0 1 {ALLOWED_IP}\n"


def test_wildcard_and_ports(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowedDomains=["*.wild.test"], allowedPorts=[443])
    assert curl(sd, creds, sid, "https://api.wild.test/")[0] == 200
    # Port 80 is not in allowedPorts; wild.test itself is not *.wild.test.
    assert curl(sd, creds, sid, "http://api.wild.test/")[0] == 403
    assert curl(sd, creds, sid, "https://wild.test/")[0] == 403
    assert curl(sd, creds, sid, "https://api.wild.test:8443/")[0] == 403


def test_sni_must_match_the_connect_host(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowedDomains=["allowed.test"])
    # A tunnel to allowed.test whose TLS names denied.test: cut.
    py = ("import socket,ssl; s=socket.create_connection(('127.0.0.1',3128));"
          "s.sendall(b'CONNECT allowed.test:443 HTTP/1.1\\r\\nHost: allowed.test:443\\r\\n\\r\\n');"
          "print(s.recv(100).split(b'\\r\\n')[0].decode());"
          "c=ssl.create_default_context(); c.check_hostname=False; c.verify_mode=ssl.CERT_NONE;"
          "t=c.wrap_socket(s, server_hostname=SNI); t.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print(t.recv(100))")
    ok = run(sd, creds, sid, ["python3", "-c", py.replace("SNI", "'allowed.test'")])
    assert ok["exit_code"] == 0 and "200" in ok["stdout"], ok
    bad = run(sd, creds, sid, ["python3", "-c", py.replace("SNI", "'denied.test'")])
    assert bad["exit_code"] != 0 and "HTTP/1.1 200" in bad["stdout"]
    # Bytes that are no TLS at all do not pass a tunnel either.
    raw_py = ("import socket; s=socket.create_connection(('127.0.0.1',3128));"
              "s.sendall(b'CONNECT allowed.test:80 HTTP/1.1\\r\\n\\r\\n'); s.recv(100);"
              "s.sendall(b'GET / HTTP/1.0\\r\\nHost: allowed.test\\r\\n\\r\\n'); print(repr(s.recv(100)))")
    assert run(sd, creds, sid, ["python3", "-c", raw_py])["stdout"] == "b''\n"
    reasons = [r["reason"] for r in audit(sd, creds) if r["decision"] == "denied"]
    assert any("SNI" in r for r in reasons) and any("ClientHello" in r for r in reasons)


def test_host_header_must_name_the_target(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowedDomains=["allowed.test"])
    code, _, _ = curl(sd, creds, sid, "http://allowed.test/", "-H", "Host: denied.test")
    assert code == 400


def test_forbidden_addresses_even_with_allow_all(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowAll=True)
    assert curl(sd, creds, sid, "http://allowed.test/")[0] == 200
    for url in ("http://169.254.169.254/latest/meta-data/", f"http://{HOST_ADDR}/", "http://127.0.0.1:9/",
                "http://rebind.test/", "http://self.test/", "https://rebind.test/", "http://[::1]/"):
        code, body, _ = curl(sd, creds, sid, url, "--noproxy", "")
        assert code == 403 and (url.startswith("https") or "EGRESS_DENIED" in body), (url, body)
    # DNS rebinding: a name resolving to the metadata address has no answer.
    assert run(sd, creds, sid, ["getent", "hosts", "rebind.test"])["exit_code"] != 0
    recs = [r for r in audit(sd, creds) if r["host"] == "169.254.169.254"]
    assert recs and recs[0]["decision"] == "denied" and recs[0]["violation"]


def test_no_route_without_the_proxy(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowAll=True)
    py = ("import socket,sys\ntry:\n    socket.create_connection((sys.argv[1], 80), timeout=5)\n    print('connected')\n"
          "except OSError as e:\n    print(type(e).__name__, e.errno)")
    out = run(sd, creds, sid, ["python3", "-c", py, ALLOWED_IP])["stdout"]
    assert out.startswith("OSError 101") or "Unreachable" in out, out
    code, _, _ = curl(sd, creds, sid, f"http://{ALLOWED_IP}/", "--noproxy", "*")
    assert code == 0
    udp = ("import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', (%r, 53))\n"
           "    print('sent')\nexcept OSError as e:\n    print(e.errno)" % ALLOWED_IP)
    assert run(sd, creds, sid, ["python3", "-c", udp])["stdout"] == "101\n"
    # The namespace is the host's, not the jail's: no interface or route can be added.
    for cmd in (["ip", "link", "add", "d0", "type", "dummy"], ["ip", "route", "add", "default", "dev", "lo"]):
        assert run(sd, creds, sid, cmd)["exit_code"] != 0


def test_monitor_mode_allows_and_logs_violations(internet):
    d = egress_daemon("monitor")
    try:
        creds, sid, _ = org_with_sandbox(d, allowedDomains=["allowed.test"], deniedDomains=["denied.test"])
        code, body, _ = curl(d, creds, sid, "http://denied.test/m")
        assert code == 200 and body == "denied host=denied.test path=/m\n"
        assert run(d, creds, sid, ["getent", "hosts", "denied.test"])["exit_code"] == 0
        assert curl(d, creds, sid, "http://allowed.test/")[0] == 200
        recs = audit(d, creds)
        bad = [r for r in recs if r["host"] == "denied.test"]
        assert bad and all(r["violation"] and r["decision"] == "allowed" and r["mode"] == "monitor" for r in bad)
        # Without logAllRequests an allowed request is not recorded.
        assert not [r for r in recs if r["host"] == "allowed.test"]
        # The address checks hold in monitor mode too.
        code, body, _ = curl(d, creds, sid, "http://169.254.169.254/")
        assert code == 403 and json.loads(body)["error"]["code"] == "EGRESS_DENIED"
    finally:
        d.cleanup()


@pytest.mark.parametrize("mode,enabled", [("off", True), ("enforce", False)])
def test_off_means_no_network(internet, mode, enabled):
    d = egress_daemon(mode, enabled)
    try:
        creds = creds_of(d)
        status, _, _ = raw(d, "POST", V1 + "/egress/policies", {"allowAll": True}, creds)
        assert status == (201 if enabled else 404)
        sid = new_sandbox(d, creds)
        out = run(d, creds, sid, "echo proxy=$HTTP_PROXY; cat /etc/resolv.conf")["stdout"]
        assert out == "proxy=\n"
        assert curl(d, creds, sid, "http://allowed.test/")[0] == 0
        assert curl(d, creds, sid, "http://allowed.test/", "-x", "http://127.0.0.1:3128")[0] == 0
        assert curl(d, creds, sid, f"http://{ALLOWED_IP}/")[0] == 0
    finally:
        d.cleanup()


def test_proxy_ends_with_its_sandbox(sd, internet):
    creds, sid, _ = org_with_sandbox(sd, allowAll=True)
    assert curl(sd, creds, sid, "http://allowed.test/")[0] == 200
    assert raw(sd, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)[0] == 200
    # Its proxy went with it; the next sandbox of the org gets its own.
    assert curl(sd, creds, new_sandbox(sd, creds), "http://allowed.test/")[0] == 200


def test_seed_environment_names():
    d = Daemon(sets=list(CTL_SETS) + ["controller.internal_token=t"],
               env={"EGRESS_POLICIES_ENABLED": "true", "EGRESS_PROXY_MODE": "monitor"})
    try:
        status, res, _ = raw(d, "GET", V1 + "/internal/egress/policies", headers={"X-Internal-Token": "t"})
        assert status == 200 and res["enabled"] is True and res["mode"] == "monitor"
    finally:
        d.cleanup()
    proc = subprocess.run([api.BIN, "--print-config"],
                          env={"PATH": "/usr/bin:/bin", "EGRESS_PROXY_MODE": "block"},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "EGRESS_PROXY_MODE" in proc.stderr, proc.stderr


def test_daemon_stops_with_a_tunnel_open(internet):
    d = egress_daemon("enforce")
    try:
        creds, sid, _ = org_with_sandbox(d, allowedDomains=["allowed.test"])
        hold = ("import socket,time; s=socket.create_connection(('127.0.0.1',3128));"
                "s.sendall(b'CONNECT allowed.test:443 HTTP/1.1\\r\\n\\r\\n'); s.recv(100); print('open', flush=True);"
                "time.sleep(60)")
        # Stop the daemon while a command holds a tunnel through the proxy
        # (its request then ends without an answer: that is expected).
        def held():
            try:
                raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": ["python3", "-c", hold], "timeout": 60000},
                    creds)
            except (OSError, http.client.HTTPException):
                pass
        t = threading.Thread(target=held)
        t.start()
        time.sleep(2)
        start = time.time()
        d.stop(timeout=30)
        assert d.proc.returncode == 0 and time.time() - start < 25, d.read_log()[-2000:]
        t.join(timeout=30)
    finally:
        d.cleanup()
