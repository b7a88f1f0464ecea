"""`sandboxd mcp`, the MCP server on stdio.

Two kinds of client: the official MCP TypeScript SDK (@modelcontextprotocol/sdk,
pinned in tests/node) driven by tests/mcp/mcp_stdio_client.mjs — a client no
one here wrote — and raw JSON-RPC lines over pipes for the protocol's corners
(parse errors, batches, version negotiation, notifications)."""
import base64
import json
import os
import queue
import shutil
import subprocess
import threading

import pytest

from conftest import ROOMY_LIMITS, NODE_DIR, SANDBOXD_BIN, Daemon

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.join(NODE_DIR, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
# What the pinned SDK lists (LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS).
LATEST = "2025-11-25"
OLDER = ["2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"]


def url_of(server):
    return f"http://127.0.0.1:{server.port}"


# ---- the SDK's client ----

@pytest.fixture(scope="module")
def sdk_run(server):
    if not shutil.which("node") or not os.path.exists(SDK):
        pytest.skip("node or @modelcontextprotocol/sdk missing (make node-deps)")
    env = dict(os.environ, SANDBOXD_BIN=SANDBOXD_BIN, SANDBOXD_URL=url_of(server), NODE_DIR=NODE_DIR)
    p = subprocess.run(["node", os.path.join(HERE, "mcp_stdio_client.mjs")], env=env, capture_output=True,
                       timeout=180)
    err = p.stderr.decode()
    assert p.returncode == 0, err[-3000:]
    for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
        assert marker not in err, err  # sandboxd mcp's stderr is inherited
    return json.loads(p.stdout)


def test_sdk_pin_matches_our_latest(sdk_run):
    assert sdk_run["sdkLatest"] == LATEST


def test_initialize_info(sdk_run):
    assert sdk_run["serverVersion"]["name"] == "sandboxd"
    assert "tools" in sdk_run["capabilities"] and "resources" in sdk_run["capabilities"]
    assert "create_sandbox" in sdk_run["instructions"]


def test_tools_listed_with_schemas(sdk_run):
    tools = {t["name"]: t for t in sdk_run["tools"]}
    assert set(tools) == {"run_code", "run_command", "read_file", "write_file", "list_files", "delete_file",
                          "create_sandbox", "list_sandboxes", "delete_sandbox", "create_context",
                          "list_contexts", "delete_context"}
    for t in tools.values():
        assert t["description"] and t["inputSchema"]["type"] == "object", t
        for name, prop in t["inputSchema"]["properties"].items():
            assert prop.get("description"), (t["name"], name)
    assert tools["run_code"]["inputSchema"]["required"] == ["language", "code"]
    assert tools["read_file"]["annotations"]["readOnlyHint"] is True
    assert tools["delete_sandbox"]["annotations"]["destructiveHint"] is True


def test_python_six_by_seven(sdk_run):
    assert sdk_run["sixBySeven"] == {"isError": False, "text": "42\n"}


def test_state_kept_in_a_sandbox_and_a_context(sdk_run):
    assert sdk_run["sandbox"], sdk_run["created"]
    assert not sdk_run["stateSet"]["isError"]
    assert sdk_run["stateGet"]["text"].startswith("42\n"), sdk_run["stateGet"]
    assert sdk_run["context"]["context"], sdk_run["context"]
    assert sdk_run["contextGet"]["text"].startswith("'kept'\n"), sdk_run["contextGet"]
    # the sandbox's other context never saw y
    assert sdk_run["otherContext"]["isError"] and "NameError" in sdk_run["otherContext"]["text"]
    assert sdk_run["context"]["context"] in sdk_run["contexts"]["text"]


def test_file_written_then_read_by_a_command(sdk_run):
    assert sdk_run["write"] == {"isError": False, "text": "Wrote /workspace/notes/hello.txt."}
    cat = sdk_run["catFile"]
    assert not cat["isError"], cat
    assert cat["text"] == "exit code: 3\n[stdout]\nhello from mcp\n[stderr]\nto-stderr\n"
    assert sdk_run["readBack"]["text"] == "hello from mcp\n"
    assert "notes/hello.txt  (15 bytes)" in sdk_run["list"]["text"]


def test_command_output_streams_as_progress(sdk_run):
    p = sdk_run["progress"]
    assert p["text"] == "exit code: 0\n[stdout]\nline1\nline2\nline3\n", p
    assert p["notifications"], p
    assert "".join(n["message"] for n in p["notifications"]) == "line1\nline2\nline3\n"
    progress = [n["progress"] for n in p["notifications"]]
    assert progress == sorted(set(progress)) and progress[-1] == 18


def test_matplotlib_figure_is_image_content(sdk_run):
    plot = sdk_run["plot"]
    assert not plot["isError"], plot
    assert len(plot["images"]) == 1
    img = plot["images"][0]
    assert img["mimeType"] == "image/png"
    assert base64.b64decode(img["data"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_bad_input_is_a_readable_tool_error(sdk_run):
    assert sdk_run["badLanguage"]["isError"] and "Unsupported language" in sdk_run["badLanguage"]["text"]
    assert sdk_run["missingSandbox"]["isError"]
    assert "no sandbox 'nosuchsandbox'" in sdk_run["missingSandbox"]["text"]
    assert sdk_run["missingArgument"]["isError"] and "'code'" in sdk_run["missingArgument"]["text"]
    err = sdk_run["pythonError"]
    assert err["isError"] and "ZeroDivisionError" in err["text"] and "Traceback" in err["text"]


def test_files_as_resources(sdk_run):
    sb = sdk_run["sandbox"]
    assert sdk_run["templates"][0]["uriTemplate"] == "sandbox://{sandbox}/{+path}"
    assert f"sandbox://{sb}/notes/hello.txt" in sdk_run["resources"]
    assert sdk_run["resource"] == [{"uri": f"sandbox://{sb}/notes/hello.txt", "mimeType": "text/plain",
                                    "text": "hello from mcp\n"}]
    assert "-32002" in sdk_run["missingResource"]["error"]


def test_sandbox_deleted(sdk_run):
    assert sdk_run["deleted"]["text"] == f"Deleted sandbox {sdk_run['sandbox']}."
    assert sdk_run["sandbox"] not in sdk_run["afterDelete"]["text"]


# ---- raw JSON-RPC over pipes ----

class Pipe:
    """`sandboxd mcp` with its stdout read line by line on a thread."""

    def __init__(self, url, key=None, args=()):
        env = {"PATH": "/usr/bin:/bin", "SANDBOXD_URL": url, "SANDBOXD_CLIENT_CONFIG": "/nonexistent"}
        if key:
            env["SANDBOXD_API_KEY"] = key
        self.proc = subprocess.Popen([SANDBOXD_BIN, "mcp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, obj):
        data = obj if isinstance(obj, (bytes, str)) else json.dumps(obj)
        data = data.encode() if isinstance(data, str) else data
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout=60):
        line = self.lines.get(timeout=timeout)
        assert line is not None, "stdout closed"
        return json.loads(line)  # every line on stdout is JSON

    def request(self, method, params=None, id=1):
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.recv()

    def initialize(self, version=LATEST):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "pytest", "version": "1"}}, id=0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=60)
        rest = self.proc.stdout.read() if not self.proc.stdout.closed else b""
        err = self.proc.stderr.read().decode()
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            assert marker not in err, err  # ASan/UBSan passes of make test
        return rc, rest, err


@pytest.fixture
def pipe(server):
    p = Pipe(url_of(server))
    yield p
    if p.proc.poll() is None:
        p.proc.kill()
        p.proc.wait()


def test_parse_error_keeps_the_session(pipe):
    pipe.send(b"{not json")
    r = pipe.recv()
    assert r == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: not JSON"}}
    assert pipe.request("ping", id=7) == {"jsonrpc": "2.0", "id": 7, "result": {}}


def test_requests_before_initialize(pipe):
    assert pipe.request("ping", id="p")["result"] == {}
    r = pipe.request("tools/list", id=2)
    assert r["error"]["code"] == -32600 and "initialize" in r["error"]["message"]


@pytest.mark.parametrize("asked,answered", [(LATEST, LATEST)] + [(v, v) for v in OLDER] +
                         [("1999-01-01", LATEST), ("2026-99-99", LATEST)])
def test_version_negotiation(pipe, asked, answered):
    r = pipe.initialize(asked)
    assert r["result"]["protocolVersion"] == answered
    assert r["result"]["serverInfo"]["name"] == "sandboxd"


def test_initialize_needs_a_version_and_happens_once(pipe):
    r = pipe.request("initialize", {"capabilities": {}})
    assert r["error"]["code"] == -32602
    pipe.initialize()
    r = pipe.request("initialize", {"protocolVersion": LATEST, "capabilities": {}})
    assert r["error"]["code"] == -32600


def test_unknown_method_and_bad_params(pipe):
    pipe.initialize()
    r = pipe.request("tools/frobnicate", id=3)
    assert r == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found: tools/frobnicate"}}
    assert pipe.request("tools/call", {"name": "no_such_tool"}, id=4)["error"]["code"] == -32602
    assert pipe.request("tools/call", [1, 2], id=5)["error"]["code"] == -32602
    assert pipe.request("resources/read", {"uri": "http://example.com/x"}, id=6)["error"]["code"] == -32602


def test_invalid_requests(pipe):
    pipe.send({"jsonrpc": "2.0", "id": 1})
    assert pipe.recv()["error"]["code"] == -32600
    pipe.send({"jsonrpc": "1.0", "id": 2, "method": "ping"})
    assert pipe.recv() == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32600, "message": "jsonrpc must be \"2.0\""}}
    pipe.send("42")
    assert pipe.recv()["error"]["code"] == -32600
    pipe.send("[]")
    assert pipe.recv() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "an empty batch"}}


def test_notifications_get_no_response(pipe):
    pipe.initialize()
    pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
    pipe.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
    pipe.send({"jsonrpc": "2.0", "id": 5, "result": {}})  # a response to nothing of ours
    assert pipe.request("ping", id=8) == {"jsonrpc": "2.0", "id": 8, "result": {}}
    rc, rest, _ = pipe.close()
    assert rc == 0 and rest == b""


def test_batch(pipe):
    pipe.initialize()
    pipe.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
               {"jsonrpc": "2.0", "method": "notifications/initialized"},
               {"jsonrpc": "2.0", "id": 2, "method": "nope"}])
    r = pipe.recv()
    assert isinstance(r, list) and len(r) == 2
    assert {x["id"] for x in r} == {1, 2}
    assert [x for x in r if x["id"] == 2][0]["error"]["code"] == -32601
    pipe.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
    assert pipe.request("ping", id=3)["id"] == 3  # the all-notifications batch got nothing


def test_eof_exits_zero_and_stdout_is_only_json(pipe):
    pipe.initialize()
    r = pipe.request("tools/call", {"name": "run_code", "arguments": {"language": "python", "code": "print('hi')"}})
    assert r["result"] == {"content": [{"type": "text", "text": "[stdout]\nhi\n"}], "isError": False}
    rc, rest, err = pipe.close()
    assert rc == 0 and rest == b""
    assert "serving MCP on stdio" in err


def test_server_unreachable_is_a_tool_error(server):
    p = Pipe("http://127.0.0.1:9")  # discard port: nothing listens
    p.initialize()
    r = p.request("tools/call", {"name": "list_sandboxes", "arguments": {}})
    assert r["result"]["isError"] is True
    assert "did not answer" in r["result"]["content"][0]["text"]
    assert p.close()[0] == 0


def test_url_flag_wins_over_the_environment(server):
    p = Pipe("http://127.0.0.1:9", args=["--url", url_of(server)])
    p.initialize()
    r = p.request("tools/call", {"name": "run_code", "arguments": {"language": "javascript", "code": "6*7"}})
    assert r["result"] == {"content": [{"type": "text", "text": "42\n"}], "isError": False}
    assert p.close()[0] == 0


def test_usage():
    p = subprocess.run([SANDBOXD_BIN, "mcp", "--help"], capture_output=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and b'"args": ["mcp"]' in p.stdout
    p = subprocess.run([SANDBOXD_BIN, "mcp", "extra"], capture_output=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and p.stdout == b"" and b"unexpected argument 'extra'" in p.stderr


def test_the_key_is_the_servers_auth():
    """An MCP client gets what an API client with the same key gets."""
    d = Daemon(sets=ROOMY_LIMITS + ["api_key=mcp-secret-key"])
    try:
        for key, ok in ((None, False), ("wrong", False), ("mcp-secret-key", True)):
            p = Pipe(f"http://127.0.0.1:{d.port}", key)
            p.initialize()
            r = p.request("tools/call", {"name": "run_code", "arguments": {"language": "python", "code": "6*7"}})
            assert r["result"]["isError"] is (not ok), (key, r)
            assert ("42" in r["result"]["content"][0]["text"]) is ok
            if not ok:
                assert "UNAUTHORIZED" in r["result"]["content"][0]["text"]
            assert p.close()[0] == 0
    finally:
        d.cleanup()


def tool(p, name, args, id=1):
    r = p.request("tools/call", {"name": name, "arguments": args}, id=id)
    return r["result"]["isError"], "\n".join(c["text"] for c in r["result"]["content"] if c["type"] == "text")


def test_long_output_keeps_its_start_and_end(pipe):
    pipe.initialize()
    err, text = tool(pipe, "create_sandbox", {})
    sandbox = text.split()[2].rstrip(".")
    err, text = tool(pipe, "run_command", {"sandbox": sandbox, "command": "seq 1 200000; echo failed-at-end >&2"})
    assert not err, text
    assert text.startswith("exit code: 0\n[stdout]\n1\n2\n3\n")
    assert "bytes of stdout not shown ...]" in text
    assert text.endswith("199999\n200000\n[stderr]\nfailed-at-end\n")
    assert len(text) < 100 * 1024
    err, text = tool(pipe, "run_command", {"sandbox": sandbox, "command": ["printenv", "GREETING"],
                                           "env": {"GREETING": "hi there"}, "cwd": "sub", "timeout": 5})
    assert text.startswith("exit code: 1\n") and "sub" in text  # cwd must exist: bash's cd error
    err, text = tool(pipe, "run_command", {"sandbox": sandbox, "command": ["printenv", "GREETING"],
                                           "env": {"GREETING": "hi there"}, "timeout": 5})
    assert (err, text) == (False, "exit code: 0\n[stdout]\nhi there\n")
    err, text = tool(pipe, "run_command", {"sandbox": sandbox, "command": "sleep 30", "timeout": 1})
    assert text.startswith("exit code: 124\n") and "timed out" in text, text
    err, text = tool(pipe, "run_command", {"sandbox": sandbox, "command": "true", "env": {"1BAD": "x"}})
    assert err and "not an environment variable name" in text
    assert tool(pipe, "delete_sandbox", {"sandbox": sandbox})[0] is False


def test_cancelled_call_stops_and_gets_no_answer(pipe):
    pipe.initialize()
    err, text = tool(pipe, "create_sandbox", {})
    sandbox = text.split()[2].rstrip(".")
    pipe.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "run_command", "arguments": {"sandbox": sandbox, "command": "echo started; sleep 600", "timeout": 900},
        "_meta": {"progressToken": "tok"}}})
    n = pipe.recv()
    assert n["method"] == "notifications/progress" and n["params"]["progressToken"] == "tok", n
    assert n["params"]["message"] == "started\n"
    pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9, "reason": "test"}})
    assert pipe.request("ping", id=10) == {"jsonrpc": "2.0", "id": 10, "result": {}}
    # EOF waits for the calls in flight: a command still sleeping would
    # keep the server past close()'s wait; and id 9 gets no response.
    rc, rest, _ = pipe.close()
    assert rc == 0 and rest == b""


def test_binary_files_and_blob_resources(pipe):
    pipe.initialize()
    sandbox = tool(pipe, "create_sandbox", {})[1].split()[2].rstrip(".")
    data = b"\x89PNG\r\n\x1a\n\x00\x01\xff binary"
    b64 = base64.b64encode(data).decode()
    assert tool(pipe, "write_file", {"sandbox": sandbox, "path": "a/b/c.png", "content": b64,
                                     "encoding": "base64"}) == (False, "Wrote /workspace/a/b/c.png.")
    r = pipe.request("tools/call", {"name": "read_file", "arguments": {"sandbox": sandbox, "path": "a/b/c.png"}})
    content = r["result"]["content"]
    assert content[0]["text"] == f"a/b/c.png: {len(data)} bytes of binary data image/png, base64:"
    assert content[1]["text"] == b64
    assert content[2] == {"type": "image", "data": b64, "mimeType": "image/png"}
    r = pipe.request("resources/read", {"uri": f"sandbox://{sandbox}/a/b/c.png"})
    assert r["result"]["contents"] == [{"uri": f"sandbox://{sandbox}/a/b/c.png", "mimeType": "image/png",
                                        "blob": b64}]
    # a name that needs percent-encoding in the URI
    assert not tool(pipe, "write_file", {"sandbox": sandbox, "path": "with space é.txt", "content": "é\n"})[0]
    uris = [x["uri"] for x in pipe.request("resources/list")["result"]["resources"]]
    assert f"sandbox://{sandbox}/with%20space%20%C3%A9.txt" in uris, uris
    r = pipe.request("resources/read", {"uri": f"sandbox://{sandbox}/with%20space%20%C3%A9.txt"})
    assert r["result"]["contents"][0]["text"] == "é\n"
    assert tool(pipe, "delete_file", {"sandbox": sandbox, "path": "a"})[0] is True  # a directory
    assert tool(pipe, "delete_file", {"sandbox": sandbox, "path": "a", "recursive": True}) == (False,
                                                                                            "Deleted /workspace/a.")
    assert "a/" not in tool(pipe, "list_files", {"sandbox": sandbox})[1]
    tool(pipe, "delete_sandbox", {"sandbox": sandbox})
