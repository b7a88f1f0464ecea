"""Shared helpers of the bridge API tests (tests/bridge): the black-box
Daemon of tests/api/conftest.py (loaded by path under its own module name,
as tests/attacks does), an SSE reader and small request helpers."""
import base64
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402

api = load_api()
Daemon = api.Daemon
ROOT = api.ROOT
FAST_LIMITS = api.FAST_LIMITS
NODE_DIR = os.path.join(ROOT, "tests", "node")


def new_sandbox(d, headers=None):
    """POST /v1/sandbox → the new id."""
    status, body, _ = d.request("POST", "/v1/sandbox", headers=headers)
    assert status == 200, body
    return body["id"]


def parse_sse(raw):
    """[(event, data)] of an SSE body (data lines joined with \\n)."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        event, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        events.append((event, "\n".join(data)))
    return events


def exec_sse(d, sid, argv, headers=None, timeout=60, **body):
    """POST /v1/sandbox/:id/exec → (status, headers, events, stdout bytes,
    stderr bytes, exit code or None)."""
    payload = dict(body)
    payload["argv"] = argv
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout)
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    conn.request("POST", f"/v1/sandbox/{sid}/exec", body=json.dumps(payload).encode(), headers=hdrs)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    rh = {k.lower(): v for k, v in resp.getheaders()}
    if resp.status != 200:
        return resp.status, rh, json.loads(raw) if raw else None, b"", b"", None
    events = parse_sse(raw)
    out = b"".join(base64.b64decode(d_) for e, d_ in events if e == "stdout")
    err = b"".join(base64.b64decode(d_) for e, d_ in events if e == "stderr")
    code = None
    for e, d_ in events:
        if e == "exit":
            code = json.loads(d_)["exit_code"]
    return resp.status, rh, events, out, err, code
