"""Forwarding, the second round (issue 16, item 2): the routes that reach a
sandbox other than by /…/sandbox/:id run on its owner too. Three real
daemons on one PostgreSQL store: a controller REPL session created through
one node is used through the others (one interpreter: its variables
persist); an MCP tool call through a non-owner (plain JSON-RPC POSTs to
/mcp) acts on the owner's workspace; a checkpoint restored and cloned
through a non-owner is restored on the owner (where its tar is); the
owner's audit row shows the client's own address, not the forwarding
node's; and a signed request whose body was changed on the way is
refused (the receiver's auth hook checks the signature over the body's
digest before the body arrives, its intercept hook the body itself); in
queue mode a queued execution is started by the owner's runner, not by
whichever node's runner sees it first."""
import glob
import hashlib
import http.client
import json
import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward_common import (KEY, SECRET, Nodes, auth, identity, new_bridge_sandbox,  # noqa: E402
                            request, signature)
from cluster_common import PG_HOST, Cluster  # noqa: E402

pytestmark = pytest.mark.skipif(not PG_HOST, reason="needs the PostgreSQL cluster of tests/pg/pg_plugin.py "
                                                    "(make cluster)")

V1 = "/api/v1"
CLIENT_ADDR = "127.0.0.77"  # a loopback address of its own: the nodes talk to each other from 127.0.0.1


@pytest.fixture(scope="module")
def cl():
    c = Nodes()
    yield c
    c.close()


def call(d, method, path, body=None, headers=None, source=None):
    """(status, parsed JSON body) of one request to d, from source's address."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120,
                                      source_address=(source, 0) if source else None)
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, json.loads(payload) if payload else None


def new_org(d):
    email = f"more-{time.time_ns()}@example.com"
    status, reg = call(d, "POST", V1 + "/register", {
        "first_name": "Ada", "last_name": "L", "organization_name": "More", "email": email,
        "password": "SecurePassword123!", "use_case": "tests"})
    assert status == 201, reg
    return {"Authorization": f"ApiKey {reg['api_key']['key']}"}


def ctl_sandbox(cl, creds):
    """A controller sandbox: (id, owner's Daemon, [the other two])."""
    status, sb = call(cl.nodes["a"], "POST", V1 + "/sandbox/create", {}, creds)
    assert status == 201, sb
    sid = sb["sandbox_id"]
    owner, others = cl.others(sid)
    return sid, cl.nodes[owner], others


def sh(d, creds, sid, command, source=None):
    status, res = call(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": command}, creds, source)
    assert status == 200, res
    return res


def loaded_here(d, sid):
    """Whether d holds a workspace of sid (a local copy)."""
    return os.path.exists(os.path.join(d.data_dir, "sandboxes", sid))


def test_a_repl_session_created_through_one_node_is_used_through_the_others(cl):
    creds = new_org(cl.nodes["a"])
    sid, owner, (x, y) = ctl_sandbox(cl, creds)
    base = V1 + f"/sandbox/{sid}/repl/sessions"
    status, res = call(x, "POST", base, {"language": "python"}, creds)
    assert status == 201, res
    rid = res["session"]["id"]
    status, res = call(y, "POST", f"{base}/{rid}/execute", {"code": "x = 21"}, creds)
    assert status == 200, res
    status, res = call(x, "POST", f"{base}/{rid}/execute", {"code": "print(x * 2)"}, creds)
    assert status == 200 and "42" in json.dumps(res["outputs"]), res
    status, res = call(y, "GET", base, headers=creds)
    assert status == 200 and rid in json.dumps(res), res
    assert not loaded_here(x, sid) and not loaded_here(y, sid)


def mcp(d, body, session=None):
    """One JSON-RPC POST to d's /mcp: (status, the JSON-RPC answer, headers)."""
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "Authorization": f"Bearer {KEY}"}
    if session:
        h["Mcp-Session-Id"] = session
    status, data, hdrs = request(d, "POST", "/mcp", json.dumps(body).encode(), h)
    if hdrs.get("content-type", "").startswith("text/event-stream"):
        answers = [json.loads(line[5:]) for line in data.decode().splitlines() if line.startswith("data:")]
        return status, answers[-1], hdrs
    return status, json.loads(data) if data else None, hdrs


def mcp_session(d):
    status, body, hdrs = mcp(d, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    assert status == 200, body
    session = hdrs["mcp-session-id"]
    status, _, _ = mcp(d, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert status == 202
    return session


def mcp_tool(d, session, name, **args):
    status, body, _ = mcp(d, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": name, "arguments": args}}, session)
    assert status == 200 and "result" in body, body
    return body["result"]


def tool_text(result):
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


def test_an_mcp_tool_call_through_a_non_owner_acts_on_the_owners_sandbox(cl):
    sid = new_bridge_sandbox(cl.nodes["a"])
    owner_id, (x, y) = cl.others(sid)
    owner = cl.nodes[owner_id]
    status, body, _ = request(owner, "PUT", f"/v1/sandbox/{sid}/file/workspace/from-owner.txt", b"owner-bytes",
                              auth())
    assert status in (200, 201, 204), body
    session = mcp_session(x)
    out = mcp_tool(x, session, "run_command", sandbox=sid, command="cat from-owner.txt")
    assert not out.get("isError") and "owner-bytes" in tool_text(out), out
    out = mcp_tool(x, session, "write_file", sandbox=sid, path="from-mcp.txt", content="mcp-bytes")
    assert not out.get("isError"), out
    status, body, _ = request(y, "GET", f"/v1/sandbox/{sid}/file/workspace/from-mcp.txt", headers=auth())
    assert status == 200 and body == b"mcp-bytes", body
    assert not loaded_here(x, sid)
    assert cl.owner_of(sid) == owner_id


def tars(d, cp_id):
    """The checkpoint's tar files in d's data dir."""
    return glob.glob(os.path.join(d.data_dir, "checkpoints", "*", cp_id + ".tar"))


def test_a_checkpoint_restored_and_cloned_through_a_non_owner_runs_on_the_owner(cl):
    creds = new_org(cl.nodes["a"])
    sid, owner, (x, y) = ctl_sandbox(cl, creds)
    sh(owner, creds, sid, "echo v1 > state.txt")
    status, cp = call(x, "POST", V1 + f"/sandbox/{sid}/checkpoints", {"name": "cp"}, creds)
    assert status == 201, cp
    sh(y, creds, sid, "echo v2 > state.txt")
    status, res = call(y, "POST", V1 + f"/checkpoints/{cp['id']}/restore", {}, creds)
    assert status == 200 and res["restored"] is True, res
    assert "v1" in json.dumps(sh(x, creds, sid, "cat state.txt")), "the restore did not reach the owner"
    # The clone is made where the checkpoint's tar is: on the owner.
    status, clone = call(x, "POST", V1 + f"/checkpoints/{cp['id']}/clone", {}, creds)
    assert status == 201, clone
    assert cl.owner_of(clone["sandbox_id"]) == cl.owner_of(sid)
    assert "v1" in json.dumps(sh(y, creds, clone["sandbox_id"], "cat state.txt"))
    status, diff = call(y, "GET", V1 + f"/checkpoints/{cp['id']}/compare/{cp['id']}", headers=creds)
    assert status == 200, diff
    assert tars(owner, cp["id"]) and not tars(x, cp["id"]) and not tars(y, cp["id"])
    assert not loaded_here(x, sid) and not loaded_here(y, sid)


def test_the_owners_audit_row_shows_the_clients_address(cl):
    creds = new_org(cl.nodes["a"])
    sid, owner, (x, _) = ctl_sandbox(cl, creds)
    sh(x, creds, sid, "true", source=CLIENT_ADDR)
    rows = cl.sql(f"SELECT ip FROM audit WHERE path = '{V1}/sandbox/{sid}/execute'")
    assert rows == [CLIENT_ADDR], rows


def test_a_signed_request_whose_body_changed_is_refused(cl):
    sid = new_bridge_sandbox(cl.nodes["a"])
    owner = cl.nodes[cl.owner_of(sid)]
    target = f"/v1/sandbox/{sid}/file/workspace/signed.txt"
    t = str(int(time.time() * 1000))
    ident = identity("bridge", addr="198.51.100.9")
    hdrs = {"X-Sandboxd-Node": "x", "X-Sandboxd-Identity": ident, "X-Sandboxd-Cluster-Time": t,
            "X-Sandboxd-Body-SHA256": hashlib.sha256(b"signed-bytes").hexdigest(),
            "X-Sandboxd-Cluster-Sig": signature(SECRET, t, "PUT", target, ident, b"signed-bytes")}
    # Another body under the signed digest; the digest changed to match it.
    status, body, _ = request(owner, "PUT", target, b"forged-bytes", hdrs)
    assert status == 401, body
    forged = dict(hdrs, **{"X-Sandboxd-Body-SHA256": hashlib.sha256(b"forged-bytes").hexdigest()})
    status, body, _ = request(owner, "PUT", target, b"forged-bytes", forged)
    assert status == 401, body
    status, body, _ = request(owner, "PUT", target, b"signed-bytes", hdrs)
    assert status in (200, 201, 204), body
    status, body, _ = request(owner, "GET", target, headers=auth())
    assert status == 200 and body == b"signed-bytes", body


def wait_done(d, creds, rid, timeout=60):
    deadline = time.time() + timeout
    while True:
        status, body = call(d, "GET", V1 + f"/requests/{rid}", headers=creds)
        assert status == 200, body
        if body["status"] not in ("queued", "processing"):
            return body
        assert time.time() < deadline, f"request {rid} still {body['status']}"
        time.sleep(0.1)


def test_a_queued_execution_runs_on_the_owner(cl):
    # Three nodes whose runners all read one queue (the store's); one
    # execution at a time per org per node.
    q = Cluster()
    try:
        for nid in ("a", "b", "c"):
            q.node(nid, extra_sets=["controller.queue_mode=1", "controller.budget_executes=1"])
        creds = new_org(q.nodes["a"])
        status, sb = call(q.nodes["a"], "POST", V1 + "/sandbox/create", {}, creds)
        assert status == 201, sb
        sid = sb["sandbox_id"]
        owner = q.nodes[q.owner(sid)[0]]
        x = next(d for d in q.nodes.values() if d is not owner)
        # The owner's slot is held longer than the other runners' idle poll
        # (5 s): they see the queued request first, and must leave it.
        slow = threading.Thread(target=sh, args=(owner, creds, sid, "sleep 7; echo slow > q.txt"))
        slow.start()
        time.sleep(0.5)
        status, body = call(x, "POST", V1 + f"/sandbox/{sid}/execute", {"command": "echo queued >> q.txt; cat q.txt"},
                            creds)
        assert status == 202 and body["status"] == "queued", body
        done = wait_done(x, creds, body["requestId"])
        slow.join()
        assert done["status"] == "completed" and done["response_status"] == 200, done
        assert done["response_body"]["stdout"] == "slow\nqueued\n", done
    finally:
        q.close()
