"""Helpers of the forwarding tests (tests/cluster/test_forward.py), on
cluster_common's Cluster (one PostgreSQL database of tests/pg/pg_plugin.py,
real daemons on it): three nodes a, b, c with the same user API key; who
owns a sandbox; the inter-node signature computed independently in Python;
a fake node (an HTTP server that records what reaches it) made the owner
of a sandbox in the store."""
import base64
import hashlib
import hmac
import http.client
import http.server
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_common  # noqa: E402
from cluster_common import SECRET, poll, psql  # noqa: E402,F401

KEY = "user-k3y"


class Nodes(cluster_common.Cluster):
    """Three nodes a, b, c; .nodes maps node id → Daemon."""

    def __init__(self):
        super().__init__()
        for nid in ("a", "b", "c"):
            self.node(nid, extra_sets=[f"api_key={KEY}"])

    def sql(self, query):
        return ["|".join(row) for row in psql(self.db, query)]

    def owner_of(self, sid):
        """The node id the store names as sid's owner (waits for one)."""
        return poll(lambda: (self.owner(sid) or ("", 0))[0], timeout=10, what=f"an owner of {sid}")

    def view(self, name):
        """{node id: node} as name's /health/detailed shows them."""
        return {n["id"]: n for n in self.health(name)["cluster"]["nodes"]}

    def others(self, sid):
        """(owner id, [the two other nodes' Daemons])."""
        o = self.owner_of(sid)
        return o, [d for nid, d in sorted(self.nodes.items()) if nid != o]


def auth(key=KEY):
    return {"Authorization": f"Bearer {key}"}


def request(d, method, path, body=None, headers=None, timeout=120):
    """(status, body bytes, lower-case headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data, {k.lower(): v for k, v in resp.getheaders()}


def new_bridge_sandbox(d):
    status, body, _ = request(d, "POST", "/v1/sandbox", headers=auth())
    assert status == 200, body
    return json.loads(body)["id"]


def identity(facade, org="", user="", key="", session="", exp=0, addr=""):
    j = json.dumps({"addr": addr, "exp": exp, "facade": facade, "key": key, "org": org, "session": session,
                    "user": user},
                   separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(j.encode()).decode().rstrip("=")


def signature(secret, t, method, target, ident, body=b""):
    msg = f"{t}\n{method}\n{target}\n{ident}\n{hashlib.sha256(body).hexdigest()}".encode()
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def signed_headers(method, target, facade="bridge", t=None, secret=SECRET, node="x"):
    t = str(int(time.time() * 1000) if t is None else t)
    ident = identity(facade)
    return {"X-Sandboxd-Node": node, "X-Sandboxd-Identity": ident, "X-Sandboxd-Cluster-Time": t,
            "X-Sandboxd-Cluster-Sig": signature(secret, t, method, target, ident)}


class FakeNode:
    """An HTTP server that answers 200 {"fake": true} and records each
    request's (method, target, headers)."""

    def __init__(self):
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                out = b'{"fake":true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        """Stops answering (idempotent): connections are then refused."""
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def keep_alive(cl, node_id, url, stop):
    """Heartbeats node_id in the store (as a live node would) until stop is set."""
    while not stop.is_set():
        now = int(time.time() * 1000)
        cl.sql("INSERT INTO cluster_nodes(id, url, epoch, started_at, heartbeat_at, state) "
               f"VALUES ('{node_id}', '{url}', 1, {now}, {now}, 'up') "
               f"ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, heartbeat_at = {now}, state = 'up'")
        stop.wait(0.2)
