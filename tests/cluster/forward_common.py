"""Fixtures of the forwarding tests (tests/cluster/test_forward.py): a
throwaway PostgreSQL (tests/pg/pg_cluster.sh) and three real daemons A, B
and C on it, one cluster (same store, same secret, node ids a, b, c), each
with the same API key; psql to read who owns a sandbox; the inter-node
signature computed independently in Python; a fake node (an HTTP server
that records what reaches it) made the owner of a sandbox in the store."""
import base64
import hashlib
import hmac
import http.client
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)
from api_loader import load_api  # noqa: E402

api = load_api()
PG_SCRIPT = os.path.join(TESTS, "pg", "pg_cluster.sh")
KEY = "user-k3y"
SECRET = "cluster-s3cret"
SETS = list(api.FAST_LIMITS) + ["pool.size=0", f"api_key={KEY}", f"cluster.secret={SECRET}",
                                "cluster.heartbeat_ms=200", "cluster.dead_after_ms=3000"]


def pg_bin():
    root = "/usr/lib/postgresql"
    versions = sorted((v for v in os.listdir(root) if v.isdigit()), key=int) if os.path.isdir(root) else []
    return f"{root}/{versions[-1]}/bin" if versions else ""


class Pg:
    def __init__(self):
        d = tempfile.mkdtemp(prefix="sbx-cl-pg-")
        os.rmdir(d)
        res = subprocess.run([PG_SCRIPT, "start", d], capture_output=True, text=True)
        if res.returncode != 0:
            subprocess.run([PG_SCRIPT, "stop", d], capture_output=True)
            pytest.skip(f"PostgreSQL cannot be started: {res.stderr.strip()[:300]}")
        self.dir = d
        self.url = res.stdout.strip()

    def sql(self, query):
        """Runs query with psql; its rows as a list of '|'-separated strings."""
        res = subprocess.run([os.path.join(pg_bin(), "psql"), "-h", self.dir, "-U", "sandboxd", "-d", "sandboxd",
                              "-At", "-c", query], capture_output=True, text=True, check=True)
        return [line for line in res.stdout.splitlines() if line]

    def stop(self):
        subprocess.run([PG_SCRIPT, "stop", self.dir], capture_output=True)


class Cluster:
    """Three nodes; .nodes maps node id → Daemon."""

    def __init__(self, pg):
        self.pg = pg
        self.nodes = {}
        for nid in ("a", "b", "c"):
            self.nodes[nid] = api.Daemon(sets=SETS + [f"cluster.node_id={nid}"], extra_args=["--store", pg.url])

    def owner(self, sid, timeout=10):
        """The node id the store names as sid's owner (waits for one)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            rows = self.pg.sql(f"SELECT node_id FROM sandboxes WHERE id = '{sid}'")
            if rows and rows[0]:
                return rows[0]
            time.sleep(0.1)
        raise AssertionError(f"no owner for {sid}: {self.pg.sql('SELECT id, node_id FROM sandboxes')}")

    def others(self, sid):
        """(owner id, [the two other nodes' Daemons])."""
        o = self.owner(sid)
        return o, [d for nid, d in sorted(self.nodes.items()) if nid != o]

    def cleanup(self):
        for d in self.nodes.values():
            d.cleanup()


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


def identity(facade, org="", user="", key="", session="", exp=0):
    j = json.dumps({"exp": exp, "facade": facade, "key": key, "org": org, "session": session, "user": user},
                   separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(j.encode()).decode().rstrip("=")


def signature(secret, t, method, target, ident):
    msg = f"{t}\n{method}\n{target}\n{ident}".encode()
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
        self.server.shutdown()


def keep_alive(pg, node_id, url, stop):
    """Heartbeats node_id in the store (as a live node would) until stop is set."""
    while not stop.is_set():
        now = int(time.time() * 1000)
        pg.sql("INSERT INTO cluster_nodes(id, url, epoch, started_at, heartbeat_at, state) "
               f"VALUES ('{node_id}', '{url}', 1, {now}, {now}, 'up') "
               f"ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, heartbeat_at = {now}, state = 'up'")
        stop.wait(0.2)
