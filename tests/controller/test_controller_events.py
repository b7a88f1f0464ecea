"""Controller events (issue 15, item 1; seed 003 "Real-time Events (SSE)"):
GET /api/v1/events/stream sends an org's sandbox lifecycle events with an
`id:` and an `event:` line; a client that reconnects with Last-Event-ID (or
?lastEventId=) gets every event it missed, across a daemon restart too;
every auth way the seed lists; a :heartbeat comment; org isolation;
resources.limit_warning and security.violation from code executions."""
import base64
import http.client
import json
import socket
import urllib.parse

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, apikey, bearer, cookie, raw

# A short heartbeat so a test sees one without waiting 20 s.
EVENT_SETS = CTL_SETS + ["controller.events_heartbeat_ms=300"]


@pytest.fixture(scope="module")
def d():
    daemon = Daemon(sets=EVENT_SETS)
    yield daemon
    daemon.cleanup()


class Stream:
    """One SSE connection: events as {id, event, data}, comments apart."""

    def __init__(self, d, headers=None, query="", timeout=10):
        self.conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout)
        self.conn.request("GET", V1 + "/events/stream" + query, headers=headers or {})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.comments = []

    def body(self):
        return json.loads(self.resp.read())

    def next_event(self, stop_on_comment=False):
        """The next event; None when the stream ends or stays silent (or,
        with stop_on_comment, at a comment)."""
        ev = {}
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    return None
                line = line.decode().rstrip("\n")
                if line == "":
                    if "data" in ev:
                        return ev
                    continue
                if line.startswith(":"):
                    self.comments.append(line)
                    if stop_on_comment:
                        return None
                    continue
                k, _, v = line.partition(":")
                v = v[1:] if v.startswith(" ") else v
                ev[k] = json.loads(v) if k == "data" else v
        except (socket.timeout, TimeoutError):
            return None

    def until(self, pred, limit=50):
        """Events read until one satisfies pred (that one last)."""
        seen = []
        for _ in range(limit):
            ev = self.next_event()
            assert ev is not None, f"stream ended or went silent; saw {seen}"
            seen.append(ev)
            if pred(ev):
                return seen
        raise AssertionError(f"no matching event in {seen}")

    def close(self):
        self.conn.close()


def org(d):
    acc = account(d)
    return acc, apikey(acc["api_key"]["key"])


def create(d, creds):
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status == 201, sb
    return sb["sandbox_id"]


def delete(d, creds, sid):
    status, body, _ = raw(d, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)
    assert status == 200, body


def watched_sandbox(d):
    """A new org's key, a sandbox of it, and a stream opened after."""
    _, creds = org(d)
    sid = create(d, creds)
    return creds, sid, Stream(d, creds)


def about(sid, name):
    return lambda ev: ev["event"] == name and ev["data"]["sandboxId"] == sid


def test_lifecycle_events_carry_the_seeds_fields(d):
    acc, creds = org(d)
    s = Stream(d, creds)
    assert s.status == 200
    assert s.resp.getheader("Content-Type").startswith("text/event-stream")
    sid = create(d, creds)
    ev = s.until(about(sid, "sandbox.created"))[-1]
    data = ev["data"]
    assert ev["id"] == str(data["id"]) and int(ev["id"]) > 0
    assert data["event"] == "sandbox.created"
    assert data["orgId"] == acc["organization"]["id"]
    assert data["timestamp"].endswith("Z") and data["timestamp"].startswith("20")
    delete(d, creds, sid)
    got = s.until(about(sid, "sandbox.deleted"))
    names = [e["event"] for e in got if e["data"]["sandboxId"] == sid]
    assert names == ["sandbox.stopped", "sandbox.deleted"]
    assert got[-2]["data"]["reason"] == "requested"
    # Ids increase.
    assert int(got[-1]["id"]) > int(got[-2]["id"]) > int(ev["id"])
    s.close()


def test_reconnect_with_last_event_id_misses_nothing(d):
    _, creds = org(d)
    s = Stream(d, creds)
    first = create(d, creds)
    last = s.until(about(first, "sandbox.created"))[-1]["id"]
    s.close()
    # While nobody listens: the first goes, three more come (a hobby org
    # holds 3 at once) and one of them goes.
    delete(d, creds, first)
    missed = [create(d, creds) for _ in range(3)]
    delete(d, creds, missed[0])
    s = Stream(d, {**creds, "Last-Event-ID": last})
    got = s.until(about(missed[0], "sandbox.deleted"))
    created = [e["data"]["sandboxId"] for e in got if e["event"] == "sandbox.created"]
    assert created == missed
    ids = [int(e["id"]) for e in got]
    assert ids == sorted(ids) and ids[0] > int(last)
    # Then live.
    live = create(d, creds)
    s.until(about(live, "sandbox.created"))
    s.close()
    # ?lastEventId= (the "evt_" form too) replays the same.
    for q in (f"?lastEventId={last}", f"?lastEventId=evt_{last}"):
        s = Stream(d, creds, query=q)
        got = s.until(about(missed[0], "sandbox.deleted"))
        assert [e["data"]["sandboxId"] for e in got if e["event"] == "sandbox.created"] == missed
        s.close()


def test_an_expired_sandbox_says_why(d):
    _, creds = org(d)
    s = Stream(d, creds)
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {"timeout_seconds": 1}, headers=creds)
    assert status == 201, sb
    sid = sb["sandbox_id"]
    got = s.until(about(sid, "sandbox.deleted"))
    stopped = [e for e in got if e["event"] == "sandbox.stopped" and e["data"]["sandboxId"] == sid]
    assert stopped[0]["data"]["reason"] == "expired"
    s.close()


def test_without_last_event_id_only_live_events(d):
    _, creds = org(d)
    old = create(d, creds)
    s = Stream(d, creds)
    new = create(d, creds)
    got = s.until(about(new, "sandbox.created"))
    assert all(e["data"]["sandboxId"] != old for e in got)
    s.close()


def test_heartbeat_comment(d):
    _, creds = org(d)
    s = Stream(d, creds, timeout=5)
    for _ in range(5):
        s.next_event(stop_on_comment=True)
        if ":heartbeat" in s.comments:
            break
    assert ":heartbeat" in s.comments, s.comments
    s.close()


def test_every_auth_way(d):
    acc, creds = org(d)
    key = acc["api_key"]["key"]
    token = acc["token"]
    orgid = acc["organization"]["id"]
    q = urllib.parse.quote
    ways = [
        (apikey(key), ""),
        (bearer(key), ""),
        (bearer(token), ""),
        ({}, f"?token={q(token)}"),
        ({}, f"?token={q(key)}"),
        ({}, f"?apiKey={q(key)}&orgId={q(orgid)}"),
        (cookie(token), ""),
    ]
    streams = []
    for headers, query in ways:
        s = Stream(d, headers, query)
        assert s.status == 200, (headers, query, s.body())
        streams.append(s)
    sid = create(d, creds)
    for s in streams:
        s.until(about(sid, "sandbox.created"))
        s.close()


def test_bad_credentials_and_query_tokens_elsewhere(d):
    acc, creds = org(d)
    other, _ = org(d)
    key = acc["api_key"]["key"]
    q = urllib.parse.quote
    for headers, query, code in [
        ({}, "", "AUTH_REQUIRED"),
        ({}, "?token=sk_nope", "INVALID_CREDENTIALS"),
        ({}, f"?apiKey={q(key)}", "INVALID_CREDENTIALS"),  # orgId is required
        ({}, f"?apiKey={q(key)}&orgId={q(other['organization']['id'])}", "INVALID_CREDENTIALS"),
    ]:
        s = Stream(d, headers, query)
        assert s.status == 401, (query, s.status)
        assert s.body()["error"]["code"] == code
        s.close()
    # Query credentials open this route only.
    status, body, _ = raw(d, "GET", V1 + f"/sandboxes?token={q(key)}")
    assert status == 401 and body["error"]["code"] == "AUTH_REQUIRED"
    status, body, _ = raw(d, "GET", V1 + f"/sandboxes?apiKey={q(key)}&orgId={q(acc['organization']['id'])}")
    assert status == 401


@pytest.mark.parametrize("last", ["abc", "-1", "evt_", "1x", "99999999999999999999999"])
def test_bad_last_event_id_is_400(d, last):
    _, creds = org(d)
    s = Stream(d, {**creds, "Last-Event-ID": last})
    assert s.status == 400
    err = s.body()["error"]
    assert err["code"] == "VALIDATION_ERROR" and err["message"]
    s.close()


def test_types_filter(d):
    _, creds = org(d)
    s = Stream(d, creds, query="?types=sandbox.deleted")
    sid = create(d, creds)
    delete(d, creds, sid)
    ev = s.next_event()
    assert ev["event"] == "sandbox.deleted" and ev["data"]["sandboxId"] == sid
    s.close()
    s = Stream(d, creds, query="?types=,bad")
    assert s.status == 400 and s.body()["error"]["code"] == "VALIDATION_ERROR"
    s.close()


def test_org_isolation(d):
    _, a = org(d)
    _, b = org(d)
    sa = Stream(d, a)
    # B replays from the very start of the log: still none of A's.
    sb = Stream(d, {**b, "Last-Event-ID": "0"})
    a_sid = create(d, a)
    sa.until(about(a_sid, "sandbox.created"))
    b_sid = create(d, b)
    got = sb.until(about(b_sid, "sandbox.created"))
    assert all(e["data"]["sandboxId"] != a_sid for e in got)
    sa.close()
    sb.close()


def test_limit_warning_and_security_violation(d):
    creds, sid, s = watched_sandbox(d)
    sessions = V1 + f"/sandbox/{sid}/repl/sessions"
    status, res, _ = raw(d, "POST", sessions, {"language": "python"}, headers=creds)
    assert status == 201, res
    rid = res["session"]["id"]
    run = sessions + f"/{rid}/execute"
    status, res, _ = raw(d, "POST", run, {"code": "import time\nwhile True: pass"}, headers=creds)
    assert status == 200, res
    ev = s.until(about(sid, "resources.limit_warning"))[-1]
    assert ev["data"]["limit"] in ("cpu", "wall")
    # A system call the jail refuses (unshare is never allowed).
    code = "import ctypes\nctypes.CDLL(None).unshare(0x10000000)"
    status, res, _ = raw(d, "POST", run, {"code": code}, headers=creds)
    assert status == 200, res
    ev = s.until(about(sid, "security.violation"))[-1]
    assert ev["data"]["refusedSyscalls"] >= 1
    s.close()


def test_execute_events(d):
    creds, sid, s = watched_sandbox(d)
    run = V1 + f"/sandbox/{sid}/execute"
    status, res, _ = raw(d, "POST", run, {"command": "exit 3"}, headers=creds)
    assert status == 200 and res["exit_code"] == 3, res
    got = s.until(about(sid, "execution.completed"))
    assert [e["event"] for e in got] == ["execution.started", "execution.completed"]
    assert got[-1]["data"]["exitCode"] == 3 and got[-1]["data"]["timedOut"] is False
    status, res, _ = raw(d, "POST", run, {"command": "sleep 30", "timeout": 200}, headers=creds)
    assert status == 200 and res["timed_out"], res
    ev = s.until(about(sid, "resources.limit_warning"))[-1]
    assert ev["data"]["limit"] == "timeout" and ev["data"]["timeoutMs"] == 200
    s.close()


def test_checkpoint_events(d):
    creds, sid, s = watched_sandbox(d)
    status, cp, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/checkpoints", {"name": "one"}, headers=creds)
    assert status == 201, cp
    ev = s.until(about(sid, "checkpoint.created"))[-1]
    assert ev["data"]["checkpointId"] == cp["id"] and ev["data"]["name"] == "one"
    status, res, _ = raw(d, "POST", V1 + f"/checkpoints/{cp['id']}/restore", {}, headers=creds)
    assert status == 200, res
    ev = s.until(about(sid, "checkpoint.restored"))[-1]
    assert ev["data"]["checkpointId"] == cp["id"]
    s.close()


def test_disconnects_free_everything(d):
    _, creds = org(d)
    for _ in range(20):
        s = Stream(d, creds)
        s.close()
    # The daemon still streams (no slot leaked); the ASan build checks memory.
    s = Stream(d, creds)
    sid = create(d, creds)
    s.until(about(sid, "sandbox.created"))
    s.close()


def test_events_survive_a_restart():
    d = Daemon(sets=EVENT_SETS)
    try:
        acc, creds = org(d)
        s = Stream(d, creds)
        first = create(d, creds)
        last = s.until(about(first, "sandbox.created"))[-1]["id"]
        s.close()
        gone = create(d, creds)
        delete(d, creds, gone)
        d.stop()
        d2 = Daemon(sets=EVENT_SETS, data_dir=d.data_dir)
        try:
            s = Stream(d2, {**creds, "Last-Event-ID": last})
            got = s.until(about(gone, "sandbox.deleted"))
            assert [e["event"] for e in got] == ["sandbox.created", "sandbox.stopped", "sandbox.deleted"]
            # New ids keep growing after the restart.
            new = create(d2, creds)
            ev = s.until(about(new, "sandbox.created"))[-1]
            assert int(ev["id"]) > int(got[-1]["id"])
            s.close()
        finally:
            d2.cleanup()
    finally:
        d.cleanup()


def test_artifact_uploaded_event(d):
    creds, sid, s = watched_sandbox(d)
    try:
        files = {"files": [{"path": "a.txt", "content": base64.b64encode(b"hello").decode()}]}
        assert raw(d, "POST", V1 + f"/sandbox/{sid}/files", files, headers=creds)[0] == 200
        status, art, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/artifacts/upload", {"path": "a.txt"}, headers=creds)
        assert status == 201, art
        ev = s.until(about(sid, "artifact.uploaded"))[-1]
        assert ev["data"]["artifact"]["id"] == art["id"] and ev["data"]["artifact"]["size"] == 5
    finally:
        s.close()
