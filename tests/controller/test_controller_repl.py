"""Controller REPL sessions (issue 12, item 6; seed 003 "REPL Sessions"):
create/list/execute/stream/interrupt/delete over a sandbox's code
contexts; state that persists between cells; outputs in order with rich
results (a matplotlib figure as image/png that decodes, a pandas frame as
text/html); an interrupt that really stops `while True: pass` and keeps the
session's variables; statuses; org isolation (404 by id guessing too)."""
import base64
import http.client
import json
import threading
import time

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, apikey, raw

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# matplotlib and pandas need more room than the fast limits give.
REPL_SETS = CTL_SETS + ["limits.cpu_ms=30000", "limits.wall_ms=60000", "limits.memory_bytes=768M",
                        "limits.pids=64"]


@pytest.fixture(scope="module")
def d():
    daemon = Daemon(sets=REPL_SETS)
    yield daemon
    daemon.cleanup()



def org_sandbox(d):
    creds = apikey(account(d)["api_key"]["key"])
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status == 201, sb
    return creds, sb["sandbox_id"]


def sessions_path(sid, *rest):
    return "/".join([V1 + f"/sandbox/{sid}/repl/sessions"] + list(rest))


def new_session(d, creds, sid, **body):
    status, res, _ = raw(d, "POST", sessions_path(sid), body, headers=creds)
    assert status == 201, res
    return res["session"]


def execute(d, creds, sid, rid, code):
    status, res, _ = raw(d, "POST", sessions_path(sid, rid, "execute"), {"code": code}, headers=creds)
    assert status == 200, res
    return res


def text_of(res, kind="stdout"):
    return "".join(o["text"] for o in res["outputs"] if o["type"] == kind)


def results(res):
    return [o["data"] for o in res["outputs"] if o["type"] == "result"]


@pytest.fixture(scope="module")
def py(d):
    creds, sid = org_sandbox(d)
    return creds, sid, new_session(d, creds, sid)


def test_create_and_list(d):
    creds, sid = org_sandbox(d)
    s = new_session(d, creds, sid)
    assert s["id"].startswith("repl_") and s["sandboxId"] == sid and s["language"] == "python"
    assert s["kernelId"].startswith("k_") and s["status"] == "idle"
    # No body at all is the default language too.
    status, res, _ = raw(d, "POST", sessions_path(sid), None, headers=creds)
    assert status == 201 and res["session"]["language"] == "python"
    status, res, _ = raw(d, "GET", sessions_path(sid), headers=creds)
    assert status == 200
    assert [x["id"] for x in res["sessions"]] == [s["id"], res["sessions"][1]["id"]]
    assert res["sessions"][0] == s


def test_idempotent_create(d):
    creds, sid = org_sandbox(d)
    hdrs = dict(creds, **{"Idempotency-Key": "repl-create-1"})
    first = raw(d, "POST", sessions_path(sid), {"language": "python"}, headers=hdrs)
    again = raw(d, "POST", sessions_path(sid), {"language": "python"}, headers=hdrs)
    assert first[0] == again[0] == 201 and first[1] == again[1]
    assert dict(again[2]).get("idempotency-status") == "replayed"
    status, res, _ = raw(d, "GET", sessions_path(sid), headers=creds)
    assert [x["id"] for x in res["sessions"]] == [first[1]["session"]["id"]]


def test_bad_language_is_400(d):
    creds, sid = org_sandbox(d)
    for body in ({"language": "cobol"}, {"language": "shell"}, {"language": 5}):
        status, res, _ = raw(d, "POST", sessions_path(sid), body, headers=creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", body


def test_execute_persists_state_and_counts(d, py):
    creds, sid, s = py
    res = execute(d, creds, sid, s["id"], "x = 42\nprint(x)\nx")
    assert res["status"] == "ok" and isinstance(res["durationMs"], int)
    assert res["outputs"] == [{"type": "stdout", "text": "42\n"},
                              {"type": "result", "data": {"text/plain": "42"}}]
    first = res["executionCount"]
    res = execute(d, creds, sid, s["id"], "import math\ny = x + 1")
    assert res["executionCount"] == first + 1 and res["outputs"] == []
    res = execute(d, creds, sid, s["id"], "{'y': y, 'pi': round(math.pi, 2)}")
    assert results(res) == [{"text/plain": "{'y': 43, 'pi': 3.14}",
                             "application/json": {"y": 43, "pi": 3.14}}]


def test_outputs_keep_their_order(d, py):
    creds, sid, s = py
    # Two pipes: what is written at the same instant may arrive grouped by
    # stream; output apart in time comes back in its order.
    res = execute(d, creds, sid, s["id"],
                  "import sys, time\nprint('a', flush=True)\ntime.sleep(0.2)\n"
                  "print('b', file=sys.stderr, flush=True)\ntime.sleep(0.2)\nprint('c')")
    assert [(o["type"], o["text"]) for o in res["outputs"]] == [("stdout", "a\n"), ("stderr", "b\n"),
                                                              ("stdout", "c\n")]


def test_error_with_traceback(d, py):
    creds, sid, s = py
    res = execute(d, creds, sid, s["id"], "print('before')\ndef f():\n    raise ValueError('bad')\nf()")
    assert res["status"] == "error"
    assert res["outputs"][0] == {"type": "stdout", "text": "before\n"}
    err = res["outputs"][-1]
    assert err["type"] == "error" and err["name"] == "ValueError" and err["value"] == "bad"
    assert err["traceback"][0].startswith("Traceback") and any("f()" in line for line in err["traceback"])
    # The session goes on.
    assert execute(d, creds, sid, s["id"], "1 + 1")["status"] == "ok"


def sse(d, creds, path, body):
    """The (event, data) pairs of a stream, and when each arrived."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    headers = dict(creds)
    headers["Content-Type"] = "application/json"
    conn.request("POST", path, body=json.dumps(body), headers=headers)
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    events, event = [], None
    for raw_line in resp:
        line = raw_line.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            events.append((event, json.loads(line[6:]), time.monotonic()))
            if event == "done":
                break
    conn.close()
    return events


def test_stream_as_produced(d, py):
    creds, sid, s = py
    code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.4)\n'end'"
    events = sse(d, creds, sessions_path(sid, s["id"], "stream"), {"code": code})
    outs = [e for e in events if e[0] == "output"]
    assert [e[1] for e in outs if e[1]["type"] == "stdout"] == [
        {"type": "stdout", "text": f"{i}\n"} for i in range(3)]
    # Produced over time, not all at the end.
    assert outs[2][2] - outs[0][2] > 0.5
    assert outs[-1][1] == {"type": "result", "data": {"text/plain": "'end'"}}
    done = events[-1]
    assert done[0] == "done" and done[1]["status"] == "ok" and done[1]["executionCount"] >= 1
    events = sse(d, creds, sessions_path(sid, s["id"], "stream"), {"code": "1/0"})
    assert events[-2][1]["type"] == "error" and events[-2][1]["name"] == "ZeroDivisionError"
    assert events[-1][1]["status"] == "error"


def status_of(d, creds, sid, rid):
    status, res, _ = raw(d, "GET", sessions_path(sid), headers=creds)
    assert status == 200
    return next(x["status"] for x in res["sessions"] if x["id"] == rid)


def interrupt_running(d, creds, sid, rid, run):
    """Starts run() (a cell that loops) on a thread, interrupts it once the
    session is busy; (interrupt answer, run()'s result)."""
    box = {}
    t = threading.Thread(target=lambda: box.update(res=run()))
    t.start()
    deadline = time.monotonic() + 20
    while status_of(d, creds, sid, rid) != "busy":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)  # in the loop by now
    status, res, _ = raw(d, "POST", sessions_path(sid, rid, "interrupt"), {}, headers=creds)
    assert status == 200 and res["status"] == "interrupted", res
    t.join(20)
    assert not t.is_alive()
    assert status_of(d, creds, sid, rid) == "idle"
    return res, box["res"]


def test_interrupt_stops_a_loop_and_keeps_variables(d):
    creds, sid = org_sandbox(d)
    s = new_session(d, creds, sid)
    execute(d, creds, sid, s["id"], "x = 'kept'")
    answer, res = interrupt_running(d, creds, sid, s["id"],
                                    lambda: execute(d, creds, sid, s["id"], "while True: pass"))
    assert answer["action"] in ("signal", "skip"), answer
    assert res["status"] == "error" and res["outputs"][-1]["name"] == "KeyboardInterrupt", res
    res = execute(d, creds, sid, s["id"], "x")
    assert results(res) == [{"text/plain": "'kept'"}]


def test_interrupt_a_stream(d):
    creds, sid = org_sandbox(d)
    s = new_session(d, creds, sid)
    execute(d, creds, sid, s["id"], "n = 3")
    code = "print('looping', flush=True)\nwhile True: pass"
    _, events = interrupt_running(d, creds, sid, s["id"],
                                  lambda: sse(d, creds, sessions_path(sid, s["id"], "stream"), {"code": code}))
    assert events[0][1] == {"type": "stdout", "text": "looping\n"}
    assert events[-2][1]["type"] == "error" and events[-2][1]["name"] == "KeyboardInterrupt"
    assert events[-1][0] == "done" and events[-1][1]["status"] == "error"
    assert results(execute(d, creds, sid, s["id"], "n * 2")) == [{"text/plain": "6"}]


def test_interrupt_restarts_a_kernel_that_cannot_survive_it(d):
    creds, sid = org_sandbox(d)
    s = new_session(d, creds, sid, language="javascript")
    execute(d, creds, sid, s["id"], "globalThis.kept = 'yes'")
    answer, res = interrupt_running(d, creds, sid, s["id"],
                                    lambda: execute(d, creds, sid, s["id"], "while (true) {}"))
    assert answer["action"] in ("restart", "skip"), answer
    assert res["status"] == "error" and res["outputs"][-1]["name"] == "KeyboardInterrupt", res
    # Restored from the journal: the variables of earlier cells come back.
    assert results(execute(d, creds, sid, s["id"], "kept")) == [{"text/plain": "'yes'"}]
    # Nothing running: nothing to do.
    status, res, _ = raw(d, "POST", sessions_path(sid, s["id"], "interrupt"), None, headers=creds)
    assert status == 200 and res == {"status": "interrupted", "action": "none"}


def test_matplotlib_figure_is_a_png(d, py):
    pytest.importorskip("matplotlib")
    creds, sid, s = py
    res = execute(d, creds, sid, s["id"],
                  "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')\nplt.show()")
    assert res["status"] == "ok", res
    (data,) = results(res)
    assert base64.b64decode(data["image/png"]).startswith(PNG_MAGIC)
    assert data["text/plain"].startswith("<Figure")
    # Shown once: the next cell has no figure.
    assert results(execute(d, creds, sid, s["id"], "None")) == []


def test_pandas_frame_is_html(d, py):
    pytest.importorskip("pandas")
    creds, sid, s = py
    res = execute(d, creds, sid, s["id"], "import pandas as pd\npd.DataFrame({'n': [1, 2], 'w': ['one', 'two']})")
    (data,) = results(res)
    assert "<table" in data["text/html"] and "<td>two</td>" in data["text/html"]
    assert "one" in data["text/plain"]


def test_other_language(d):
    creds, sid = org_sandbox(d)
    s = new_session(d, creds, sid, language="javascript")
    assert s["language"] == "javascript"
    execute(d, creds, sid, s["id"], "globalThis.n = 20")
    assert results(execute(d, creds, sid, s["id"], "n + 1")) == [{"text/plain": "21"}]


def test_delete(d):
    creds, sid = org_sandbox(d)
    s = new_session(d, creds, sid)
    status, res, _ = raw(d, "DELETE", sessions_path(sid, s["id"]), headers=creds)
    assert status == 200 and res == {"status": "destroyed"}
    status, res, _ = raw(d, "GET", sessions_path(sid), headers=creds)
    assert res["sessions"] == []
    status, res, _ = raw(d, "POST", sessions_path(sid, s["id"], "execute"), {"code": "1"}, headers=creds)
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"


def test_unknown_session_and_sandbox_404(d, py):
    creds, sid, s = py
    for rid in ("repl_00000000-0000-4000-8000-000000000000", "nope", "repl_", s["id"] + "x"):
        for method, tail, body in (("POST", "execute", {"code": "1"}), ("POST", "stream", {"code": "1"}),
                                   ("POST", "interrupt", {}), ("DELETE", None, None)):
            path = sessions_path(sid, rid, tail) if tail else sessions_path(sid, rid)
            status, res, _ = raw(d, method, path, body, headers=creds)
            assert status == 404 and res["error"]["code"] == "NOT_FOUND", (rid, tail)
    status, res, _ = raw(d, "GET", sessions_path("00000000-0000-4000-8000-000000000000"), headers=creds)
    assert status == 404


def test_another_orgs_sandbox_and_session_are_404(d, py):
    creds_a, sid_a, s = py
    creds_b, sid_b = org_sandbox(d)
    for method, path, body in (("GET", sessions_path(sid_a), None),
                               ("POST", sessions_path(sid_a), {}),
                               ("POST", sessions_path(sid_a, s["id"], "execute"), {"code": "1"}),
                               ("POST", sessions_path(sid_a, s["id"], "stream"), {"code": "1"}),
                               ("POST", sessions_path(sid_a, s["id"], "interrupt"), {}),
                               ("DELETE", sessions_path(sid_a, s["id"]), None),
                               # A's session id guessed under B's own sandbox.
                               ("POST", sessions_path(sid_b, s["id"], "execute"), {"code": "1"}),
                               ("DELETE", sessions_path(sid_b, s["id"]), None)):
        status, res, _ = raw(d, method, path, body, headers=creds_b)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND", (method, path)
    # A's session is untouched.
    status, res, _ = raw(d, "GET", sessions_path(sid_a), headers=creds_a)
    assert s["id"] in [x["id"] for x in res["sessions"]]


def test_validation(d, py):
    creds, sid, s = py
    for body in ({}, {"code": 5}):
        status, res, _ = raw(d, "POST", sessions_path(sid, s["id"], "execute"), body, headers=creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", body
