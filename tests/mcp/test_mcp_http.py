"""The daemon's own MCP server over Streamable HTTP (POST/DELETE /mcp,
docs/mcp.md): a real MCP client no one here wrote (the official TypeScript
SDK's StreamableHTTPClientTransport, tests/node/mcp-http-client.mjs) runs
the issue's scenario; raw HTTP requests check the transport's rules
(sessions, protocol version header, Origin, 202, parse errors, batches) and
that tool calls beyond exec.workers cannot deadlock the daemon."""
import base64
import concurrent.futures
import http.client
import json
import os
import re
import subprocess
import time

import pytest

from conftest import FAST_LIMITS, ROOMY_LIMITS, NODE_DIR, Daemon

WORKERS = 2
PROTOCOL = "2025-11-25"
KEY = "mcp-s3cret-key"


@pytest.fixture(scope="module")
def daemon():
    """Keyless, with few execution workers (the deadlock test calls more)."""
    d = Daemon(sets=ROOMY_LIMITS + [f"exec.workers={WORKERS}"])
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def keyed():
    d = Daemon(sets=ROOMY_LIMITS + [f"api_key={KEY}"])
    yield d
    d.cleanup()


# ---- the SDK client ----

def sdk(d, steps, key=None, timeout=120):
    """Runs the SDK client's steps against d's /mcp; its JSON summary."""
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "@modelcontextprotocol")):
        pytest.fail("tests/node/node_modules lacks @modelcontextprotocol/sdk: run `make node-deps`")
    args = ["node", os.path.join(NODE_DIR, "mcp-http-client.mjs"), f"http://127.0.0.1:{d.port}/mcp"]
    if key:
        args.append(key)
    r = subprocess.run(args, input=json.dumps(steps).encode(), capture_output=True, timeout=timeout, cwd=NODE_DIR)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def text(result):
    return "\n".join(c["text"] for c in result["value"]["content"] if c["type"] == "text")


def call(name, **args):
    return {"op": "call", "name": name, "args": args}


def test_sdk_scenario(daemon):
    out = sdk(daemon, [
        {"op": "list"},
        call("run_code", language="python", code="6*7"),
        dict(call("create_sandbox"), save={"name": "sbx", "pattern": r"sandbox ([a-z0-9]+)"}),
        call("run_code", language="python", code="x = 21", sandbox="${sbx}"),
        call("run_code", language="python", code="x * 2", sandbox="${sbx}"),
        call("write_file", sandbox="${sbx}", path="notes/hello.txt", content="hello from mcp\n"),
        dict(call("run_command", sandbox="${sbx}", command="cat notes/hello.txt && wc -c < notes/hello.txt"),
             progress=True),
        call("run_code", language="python", sandbox="${sbx}",
             code="import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                  "plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"),
        call("run_code", language="cobol", code="DISPLAY 'HI'"),
        call("run_code", language="python"),
        call("delete_sandbox", sandbox="${sbx}"),
    ])
    assert out["protocol"] == PROTOCOL and re.fullmatch(r"[0-9a-f]{32}", out["sessionId"]), out
    res = out["results"]
    assert all(r["ok"] for r in res), res
    names = {t["name"] for t in res[0]["value"]["tools"]}
    assert {"run_code", "run_command", "read_file", "write_file", "create_sandbox"} <= names
    assert "42" in text(res[1]) and not res[1]["value"].get("isError")
    assert not res[2]["value"].get("isError"), res[2]
    assert "42" in text(res[4]) and not res[4]["value"].get("isError"), res[4]
    assert not res[5]["value"].get("isError"), res[5]
    shell = text(res[6])
    assert "hello from mcp" in shell and "15" in shell and not res[6]["value"].get("isError"), res[6]
    images = [c for c in res[7]["value"]["content"] if c["type"] == "image"]
    assert images and images[0]["mimeType"] == "image/png", res[7]
    assert base64.b64decode(images[0]["data"])[:8] == b"\x89PNG\r\n\x1a\n"
    # Bad input: a tool error the model can read, the session intact.
    for bad in (res[8], res[9]):
        assert bad["value"].get("isError") is True and text(bad).strip(), bad
    assert "cobol" in text(res[8]).lower()
    assert not res[10]["value"].get("isError"), res[10]


def test_sdk_long_command_streams_progress(daemon):
    """A tools/call whose client accepts SSE gets its progress
    notifications before the result."""
    out = sdk(daemon, [
        dict(call("create_sandbox"), save={"name": "sbx", "pattern": r"sandbox ([a-z0-9]+)"}),
        dict(call("run_command", sandbox="${sbx}", command="for i in 1 2 3; do echo tick $i; sleep 0.3; done"),
             progress=True),
        call("delete_sandbox", sandbox="${sbx}"),
    ])
    res = out["results"]
    assert res[1]["ok"] and "tick 3" in text(res[1]), res
    assert res[1]["progress"] >= 1, res[1]


def test_sdk_needs_the_key(keyed):
    refused = sdk(keyed, [])
    assert refused.get("code") == 401 and "Unauthorized" in refused["connectError"], refused
    out = sdk(keyed, [call("run_code", language="python", code="6*7")], key=KEY)
    # The tool's own call back into the daemon carries the caller's key
    # (without it that call would get 401 and the tool an error).
    assert out["results"][0]["ok"] and "42" in text(out["results"][0]), out
    assert not out["results"][0]["value"].get("isError"), out


def test_sdk_terminate(daemon):
    out = sdk(daemon, [{"op": "terminate"}])
    assert out["results"][0]["ok"], out
    status, body, _ = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, sid=out["sessionId"])
    assert status == 404 and body["error"]["code"] == -32001


# ---- raw HTTP ----

def post(d, body, sid=None, headers=None, raw=None, accept="application/json, text/event-stream"):
    h = {"Content-Type": "application/json", "Accept": accept}
    if sid:
        h["Mcp-Session-Id"] = sid
    h.update(headers or {})
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    conn.request("POST", "/mcp", body=raw if raw is not None else json.dumps(body).encode(), headers=h)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    hdrs = {k.lower(): v for k, v in resp.getheaders()}
    if hdrs.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:]) for line in payload.decode().splitlines() if line.startswith("data:")]
        return resp.status, events, hdrs
    return resp.status, json.loads(payload) if payload else None, hdrs


def initialize(d, version=PROTOCOL, headers=None):
    status, body, hdrs = post(d, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
        headers=headers)
    assert status == 200, body
    sid = hdrs["mcp-session-id"]
    status, _, _ = post(d, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid=sid,
                        headers={**(headers or {}), "MCP-Protocol-Version": body["result"]["protocolVersion"]})
    assert status == 202
    return sid, body["result"]["protocolVersion"]


def tools_list(d, sid, **kw):
    return post(d, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, sid=sid, **kw)


def test_initialize_issues_an_unguessable_session(daemon):
    a, version = initialize(daemon)
    b, _ = initialize(daemon)
    assert version == PROTOCOL
    assert re.fullmatch(r"[0-9a-f]{32}", a) and a != b
    status, body, hdrs = tools_list(daemon, a, headers={"MCP-Protocol-Version": PROTOCOL})
    assert status == 200 and hdrs["content-type"].startswith("application/json")
    assert body["id"] == 7 and any(t["name"] == "run_code" for t in body["result"]["tools"])


def test_session_id_required_and_unknown_is_404(daemon):
    status, body, _ = tools_list(daemon, None)
    assert status == 400 and "Mcp-Session-Id" in body["error"]["message"]
    status, body, _ = tools_list(daemon, "0" * 32)
    assert status == 404 and body["error"]["code"] == -32001 and body["id"] is None


def test_delete_ends_the_session(daemon):
    sid, _ = initialize(daemon)
    assert tools_list(daemon, sid)[0] == 200
    assert daemon.request("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})[0] == 204
    assert tools_list(daemon, sid)[0] == 404
    assert daemon.request("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})[0] == 404
    assert daemon.request("DELETE", "/mcp")[0] == 400


def test_protocol_version_header(daemon):
    sid, version = initialize(daemon)
    status, body, _ = tools_list(daemon, sid, headers={"MCP-Protocol-Version": "1999-01-01"})
    assert status == 400 and "MCP-Protocol-Version" in body["error"]["message"]
    assert tools_list(daemon, sid, headers={"MCP-Protocol-Version": version})[0] == 200
    assert tools_list(daemon, sid)[0] == 200  # absent: allowed (the 2025-03-26 default)


def test_notification_and_response_get_202(daemon):
    sid, _ = initialize(daemon)
    status, body, _ = post(daemon, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": 99}}, sid=sid)
    assert status == 202 and body is None
    status, body, _ = post(daemon, {"jsonrpc": "2.0", "id": "srv-1", "result": {}}, sid=sid)
    assert status == 202 and body is None


def test_invalid_json_is_a_parse_error(daemon):
    sid, _ = initialize(daemon)
    status, body, _ = post(daemon, None, sid=sid, raw=b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert status == 400 and body["error"]["code"] == -32700 and body["id"] is None
    status, body, _ = post(daemon, 42, sid=sid)
    assert status == 400 and body["error"]["code"] == -32600
    status, body, _ = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "no/such"}, sid=sid)
    assert status == 200 and body["error"]["code"] == -32601


def test_get_is_405(daemon):
    status, body, hdrs = daemon.request("GET", "/mcp", headers={"Accept": "text/event-stream"})
    assert status == 405 and "POST" in hdrs["allow"] and "error" in body


def test_origin_and_host_refused_when_keyless(daemon):
    status, body, _ = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                           headers={"Origin": "http://evil.example"})
    assert status == 403 and "Origin" in body["error"]["message"]
    # A rebinding page: its name resolves to 127.0.0.1 but it is no loopback literal.
    status, _, _ = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={"Origin": f"http://rebind.example:{daemon.port}", "Host": f"rebind.example:{daemon.port}"})
    assert status == 403
    status, _, _ = post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Origin": "null"})
    assert status == 403
    sid, _ = initialize(daemon, headers={"Origin": f"http://localhost:{daemon.port}"})
    assert tools_list(daemon, sid, headers={"Origin": f"http://127.0.0.1:{daemon.port}"})[0] == 200


def test_key_required_and_origin_checked_with_key(keyed):
    status, body, hdrs = post(keyed, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert status == 401 and "Bearer" in hdrs.get("www-authenticate", "") and body["error"]
    status, _, _ = post(keyed, {}, headers={"Authorization": "Bearer wrong"})
    assert status == 401
    auth = {"Authorization": f"Bearer {KEY}"}
    sid, _ = initialize(keyed, headers=auth)
    assert tools_list(keyed, sid, headers=auth)[0] == 200
    assert tools_list(keyed, sid)[0] == 401
    assert tools_list(keyed, sid, headers={**auth, "Origin": "https://evil.example"})[0] == 403
    # The daemon's own pages (same origin) may use it.
    same = {**auth, "Origin": "http://my-sandboxd.example:8787", "Host": "my-sandboxd.example:8787"}
    assert tools_list(keyed, sid, headers=same)[0] == 200


def test_tools_call_streams_sse_when_accepted(daemon):
    sid, _ = initialize(daemon)
    req = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
           "params": {"name": "run_code", "arguments": {"language": "python", "code": "6*7"}}}
    status, events, hdrs = post(daemon, req, sid=sid)
    assert status == 200 and hdrs["content-type"].startswith("text/event-stream")
    assert events[-1]["id"] == 5 and "42" in json.dumps(events[-1]["result"])
    status, body, hdrs = post(daemon, req, sid=sid, accept="application/json")
    assert status == 200 and hdrs["content-type"].startswith("application/json")
    assert body["id"] == 5 and "42" in json.dumps(body["result"])


def raw_call(d, sid, rid, name, **args):
    return post(d, {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                    "params": {"name": name, "arguments": args}}, sid=sid, accept="application/json")


def test_cancelled_call_gets_no_answer(daemon):
    """notifications/cancelled (its own POST, answered 202) stops a running
    tools/call, whose SSE stream then ends without a response (had the
    cancel not reached it, the command's own 60 s timeout would answer)."""
    sid, _ = initialize(daemon)
    status, body, _ = raw_call(daemon, sid, 1, "create_sandbox")
    sbx = re.search(r"sandbox ([a-z0-9]+)", json.dumps(body["result"])).group(1)
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=90)
    conn.request("POST", "/mcp", body=json.dumps({
        "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"sandbox": sbx, "command": "echo started; sleep 1000"},
                   "_meta": {"progressToken": "t9"}}}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 "Mcp-Session-Id": sid})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    events = []
    while not events:  # the first progress notification: the command runs
        line = resp.readline()
        assert line, "the stream ended before any progress"
        if line.startswith(b"data:"):
            events.append(json.loads(line[5:]))
    assert events[0]["method"] == "notifications/progress"
    status, body, _ = post(daemon, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": 9, "reason": "test"}}, sid=sid)
    assert status == 202
    rest = [json.loads(line[5:]) for line in resp.read().splitlines() if line.startswith(b"data:")]
    conn.close()
    assert not [e for e in rest if "id" in e], rest  # no response for the cancelled call
    assert raw_call(daemon, sid, 10, "delete_sandbox", sandbox=sbx)[0] == 200


def test_batches_follow_the_revision(daemon):
    ping = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    sid, _ = initialize(daemon)
    status, body, _ = post(daemon, ping, sid=sid)
    assert status == 400 and body["error"]["code"] == -32600  # no batches since 2025-06-18
    old, version = initialize(daemon, version="2025-03-26")
    assert version == "2025-03-26"
    status, body, _ = post(daemon, ping, sid=old)
    assert status == 200 and [r["id"] for r in body] == [1, 2]
    status, body, _ = post(daemon, [{"jsonrpc": "2.0", "method": "notifications/initialized"}], sid=old)
    assert status == 202
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}
    assert post(daemon, [init])[0] == 400


def test_parallel_tool_calls_beyond_the_workers_complete(daemon):
    """Every tool call is an HTTP call back into the daemon. Outer calls
    holding the execution workers their inner calls wait for would hang
    forever; these are three times exec.workers, all at once."""
    sid, _ = initialize(daemon)
    code = "import time\ntime.sleep(0.5)\n6*7"

    def one(i):
        req = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
               "params": {"name": "run_code", "arguments": {"language": "python", "code": code}}}
        return post(daemon, req, sid=sid, accept="application/json")

    n = 3 * WORKERS
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        replies = list(pool.map(one, range(n)))
    for i, (status, body, _) in enumerate(replies):
        assert status == 200 and body["id"] == i, body
        assert "42" in json.dumps(body["result"]) and not body["result"].get("isError"), body


def test_idle_sessions_expire_and_the_oldest_makes_room():
    d = Daemon(sets=FAST_LIMITS + ["mcp.session_idle_s=2", "mcp.max_sessions=2"])
    try:
        a, _ = initialize(d)
        b, _ = initialize(d)
        assert tools_list(d, a)[0] == 200  # a is now the most recently used
        c, _ = initialize(d)  # the table is full: b, the least recently used, ends
        assert tools_list(d, b)[0] == 404
        assert tools_list(d, a)[0] == 200 and tools_list(d, c)[0] == 200
        time.sleep(3)
        assert tools_list(d, a)[0] == 404 and tools_list(d, c)[0] == 404
    finally:
        d.cleanup()
