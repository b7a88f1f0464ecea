"""Forwarding between the nodes of a cluster (issue 16, item 2), black-box:
three real daemons A, B, C on one PostgreSQL store. A request that names a
sandbox is served by the node that owns it whichever node it reaches: files
written through one node are seen by commands run through another; a bridge
exec SSE stream through a non-owner arrives event by event; a PTY WebSocket
through a non-owner runs a command; controller and runtime routes are
forwarded too. Between nodes the caller's key never travels (a fake owner
records what reaches it, and checks the signature independently); a
forged, stale or wrongly keyed signature is refused with 401."""
import base64
import http.client
import json
import os
import sys
import threading
import time

import pytest
import websocket

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_common import (KEY, SECRET, FakeNode, Nodes, auth, keep_alive, poll,  # noqa: E402
                            new_bridge_sandbox, request, signed_headers, signature)
from cluster_common import PG_HOST  # noqa: E402

pytestmark = pytest.mark.skipif(not PG_HOST, reason="needs the PostgreSQL cluster of tests/pg/pg_plugin.py "
                                                    "(make cluster)")

V1 = "/api/v1"


@pytest.fixture(scope="module")
def cl():
    c = Nodes()
    yield c
    c.close()


def put_file(d, sid, path, data):
    status, body, _ = request(d, "PUT", f"/v1/sandbox/{sid}/file/{path}", data, auth())
    assert status in (200, 201, 204), body


def exec_stream(d, sid, argv):
    """Starts POST /v1/sandbox/:id/exec; the open response (status checked)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    hdrs = dict(auth(), **{"Content-Type": "application/json"})
    conn.request("POST", f"/v1/sandbox/{sid}/exec", body=json.dumps({"argv": argv}).encode(), headers=hdrs)
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    return conn, resp


def next_event(resp):
    """The next SSE event (name, data) read off resp as it arrives."""
    name, data = "message", []
    while True:
        line = resp.readline()
        assert line, "stream ended"
        line = line.decode().rstrip("\n")
        if line == "":
            if data or name != "message":
                return name, "\n".join(data)
            continue
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))


def stdout_until(resp, needle):
    out = b""
    while needle not in out:
        name, data = next_event(resp)
        assert name != "exit", f"exited before {needle!r}: {out!r}"
        if name == "stdout":
            out += base64.b64decode(data)
    return out


def test_a_sandbox_created_on_a_is_served_by_its_owner_through_every_node(cl):
    sid = new_bridge_sandbox(cl.nodes["a"])
    owner, (x, y) = cl.others(sid)
    put_file(x, sid, "workspace/hello.txt", b"written via a non-owner\n")
    for d in (x, y, cl.nodes[owner]):
        status, body, _ = request(d, "GET", f"/v1/sandbox/{sid}/file/workspace/hello.txt", headers=auth())
        assert status == 200 and body == b"written via a non-owner\n", (status, body)
    # A command run through the other non-owner sees it: it runs where the file is.
    conn, resp = exec_stream(y, sid, ["cat", "/workspace/hello.txt"])
    assert stdout_until(resp, b"non-owner") == b"written via a non-owner\n"
    conn.close()


def test_exec_sse_through_a_non_owner_arrives_event_by_event(cl):
    sid = new_bridge_sandbox(cl.nodes["b"])
    owner, (x, y) = cl.others(sid)
    script = "echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo second"
    conn, resp = exec_stream(x, sid, ["sh", "-c", script])
    # "first" crosses before the command can go on: it waits for a file
    # this test writes only once it has read "first" (through the third node).
    assert b"first" in stdout_until(resp, b"first")
    put_file(y, sid, "workspace/go", b"")
    assert b"second" in stdout_until(resp, b"second")
    while True:
        name, data = next_event(resp)
        if name == "exit":
            assert json.loads(data)["exit_code"] == 0
            break
    conn.close()


def test_pty_websocket_through_a_non_owner_runs_a_command(cl):
    sid = new_bridge_sandbox(cl.nodes["c"])
    owner, (x, _) = cl.others(sid)
    ws = websocket.create_connection(f"ws://127.0.0.1:{x.port}/v1/sandbox/{sid}/pty",
                                     header=[f"Authorization: Bearer {KEY}"], timeout=20)
    while True:  # replay frames, then {"type": "ready"}
        op, data = ws.recv_data()
        if op == websocket.ABNF.OPCODE_TEXT and json.loads(data) == {"type": "ready"}:
            break
    ws.send_binary(b"echo pty-$((40+2))\n")
    out, deadline = b"", time.time() + 15
    while b"pty-42" not in out:
        assert time.time() < deadline, out
        op, data = ws.recv_data()
        if op == websocket.ABNF.OPCODE_BINARY:
            out += data
    ws.close()


def test_controller_routes_are_forwarded_as_the_caller(cl):
    a, b = cl.nodes["a"], cl.nodes["b"]
    email = f"fwd-{time.time_ns()}@example.com"
    status, reg, _ = a.request("POST", V1 + "/register", {
        "first_name": "Ada", "last_name": "L", "organization_name": "Fwd", "email": email,
        "password": "SecurePassword123!", "use_case": "tests"})
    assert status == 201, reg
    creds = {"Authorization": f"ApiKey {reg['api_key']['key']}"}
    status, sb, _ = a.request("POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status == 201, sb
    sid = sb["sandbox_id"]
    owner, (x, y) = cl.others(sid)
    # Written through one non-owner, read through the other: one workspace.
    status, res, _ = x.request("POST", V1 + f"/sandbox/{sid}/execute", {"command": "echo ctl-$((6*7)) > ctl.txt"},
                               headers=creds)
    assert status == 200, res
    status, res, _ = y.request("POST", V1 + f"/sandbox/{sid}/execute", {"command": "cat ctl.txt"}, headers=creds)
    assert status == 200 and "ctl-42" in json.dumps(res), res
    # One audit row per forwarded write (the owner's), not one per node it crossed.
    rows = cl.sql(f"SELECT count(*) FROM audit WHERE path = '{V1}/sandbox/{sid}/execute'")
    assert rows == ["2"], rows
    for d in (x, y):
        status, res, _ = d.request("GET", V1 + f"/sandbox/{sid}", headers=creds)
        assert status == 200 and res["sandbox_id"] == sid, res
    # Another org's key gets the same 404 through every node.
    status, reg2, _ = b.request("POST", V1 + "/register", {
        "first_name": "Bob", "last_name": "M", "organization_name": "Other", "email": "o" + email,
        "password": "SecurePassword123!", "use_case": "tests"})
    assert status == 201, reg2
    other = {"Authorization": f"ApiKey {reg2['api_key']['key']}"}
    for d in cl.nodes.values():
        status, res, _ = d.request("GET", V1 + f"/sandbox/{sid}", headers=other)
        assert status == 404, res


def test_forged_stale_or_foreign_signatures_are_refused(cl):
    sid = new_bridge_sandbox(cl.nodes["a"])
    owner = cl.owner_of(sid)
    d = cl.nodes[owner]
    target = f"/v1/sandbox/{sid}/running"
    # The same request signed right is served (the Python signature agrees).
    status, body, _ = request(d, "GET", target, headers=signed_headers("GET", target))
    assert status == 200, body
    # Signed but sent to a node that does not own it: never forwarded again,
    # never served twice — a 503 to retry.
    other = next(n for nid, n in cl.nodes.items() if nid != owner)
    status, body, h = request(other, "GET", target, headers=signed_headers("GET", target))
    assert status == 503 and h["retry-after"] == "1", (status, body)
    bad = [
        signed_headers("GET", target, t=int(time.time() * 1000) - 120_000),          # stale
        signed_headers("GET", target, t=int(time.time() * 1000) + 120_000),          # future
        signed_headers("GET", target, secret="not-the-secret"),                      # foreign
        signed_headers("GET", f"/v1/sandbox/{sid}/other"),                           # another request
        signed_headers("GET", target, facade="controller"),                          # another facade
        dict(signed_headers("GET", target), **{"X-Sandboxd-Cluster-Sig": "0" * 64}),  # forged
    ]
    for h in bad:
        # With the user's key too: a signature that is there must be right.
        status, body, _ = request(d, "GET", target, headers=dict(h, **auth()))
        assert status == 401, (h, body)


def test_the_callers_key_never_reaches_the_owner(cl):
    sid = new_bridge_sandbox(cl.nodes["a"])
    fake = FakeNode()
    stop = threading.Event()
    beat = threading.Thread(target=keep_alive, args=(cl, "fake", fake.url, stop), daemon=True)
    beat.start()
    try:
        time.sleep(0.3)  # one heartbeat row written before the move (not an assert)
        cl.sql(f"UPDATE sandboxes SET node_id = 'fake', lease_epoch = lease_epoch + 1 WHERE id = '{sid}'")
        via = cl.nodes["b"]
        target = f"/v1/sandbox/{sid}/running"
        deadline = time.time() + 10
        while not fake.seen:
            assert time.time() < deadline, "nothing was forwarded to the fake owner"
            status, body, _ = request(via, "GET", target + "?token=" + KEY + "&x=1",
                                      headers=dict(auth(), **{"X-API-Key": KEY, "Cookie": "s=" + KEY}))
            if not fake.seen:
                time.sleep(0.2)
        assert status == 200 and json.loads(body) == {"fake": True}, body
        method, path, headers, _ = fake.seen[-1]
        assert method == "GET" and path == target + "?x=1", path
        assert KEY not in json.dumps(headers) and KEY not in path
        for h in ("authorization", "x-api-key", "cookie"):
            assert h not in headers, headers
        assert headers["x-sandboxd-node"] == "b"
        assert headers["x-sandboxd-cluster-sig"] == signature(
            SECRET, headers["x-sandboxd-cluster-time"], "GET", path, headers["x-sandboxd-identity"])
        ident = json.loads(base64.urlsafe_b64decode(headers["x-sandboxd-identity"] + "=="))
        assert ident["facade"] == "bridge"
        # An owner that is alive in the store but does not answer: a 502 in
        # the facade's envelope, not a hang and not a local copy.
        fake.stop()
        status, body, _ = request(via, "GET", target, headers=auth())
        assert status == 502, body
        assert json.loads(body)["code"] == "internal_error", body
    finally:
        stop.set()
        beat.join()
        # Gone for good: no later placement may pick it (once every node
        # has read the store again).
        cl.sql("UPDATE cluster_nodes SET state = 'down', heartbeat_at = 0 WHERE id = 'fake'")
        fake.stop()
        for nid in cl.nodes:
            poll(lambda nid=nid: not cl.view(nid).get("fake", {}).get("live"), timeout=10, what=f"{nid} to see fake down")


def test_runtime_sandbox_routes_are_forwarded(cl):
    sid = f"fwd-{time.time_ns() % 10**9}"
    base = f"/languages/python/sandboxes/{sid}"
    a = cl.nodes["a"]
    status, res, _ = a.request("POST", base + "/execute", {"code": "open('/workspace/rt.txt', 'w').write('rt-42')"},
                               headers=auth())
    assert status == 200, res
    owner, others = cl.others(sid)
    for d in others:
        status, res, _ = d.request("POST", base + "/execute", {"code": "open('/workspace/rt.txt').read()"},
                                   headers=auth())
        assert status == 200 and "rt-42" in json.dumps(res), res
