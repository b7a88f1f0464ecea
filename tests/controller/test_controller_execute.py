"""Controller command execution (issue 12, item 4): argv vs string, env,
working_dir, exit codes, the timeout, SSE streaming as output is produced,
and the sandbox's own cgroup limits: memory past `memory` is killed, and a
CPU-bound loop under cpus "0.2" gets a fraction of a CPU."""
import http.client
import json
import time

from controller_common import V1, account, apikey, raw


def sandbox_for(d, **body):
    creds = apikey(account(d)["api_key"]["key"])
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", body, headers=creds)
    assert status == 201, sb
    return creds, sb["sandbox_id"]


def execute(d, creds, sid, command, **body):
    body["command"] = command
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/execute", body, headers=creds)
    return status, res


def run_ok(d, creds, sid, command, **body):
    status, res = execute(d, creds, sid, command, **body)
    assert status == 200, res
    return res


def test_string_runs_in_bash_argv_does_not(ctl):
    creds, sid = sandbox_for(ctl)
    res = run_ok(ctl, creds, sid, "echo $((1+2)) | tr 3 x; echo err >&2; exit 3")
    assert res["exit_code"] == 3 and res["stdout"] == "x\n" and res["stderr"] == "err\n"
    assert res["timed_out"] is False and res["stdout_truncated"] is False
    res = run_ok(ctl, creds, sid, ["echo", "$HOME", "a  b", "|", "x"])
    assert res == {"exit_code": 0, "stdout": "$HOME a  b | x\n", "stderr": "", "timed_out": False,
                   "stdout_truncated": False, "stderr_truncated": False}
    res = run_ok(ctl, creds, sid, ["/bin/sh", "-c", "echo direct"])
    assert res["stdout"] == "direct\n"
    res = run_ok(ctl, creds, sid, ["no-such-binary-xyz"])
    assert res["exit_code"] == 127


def test_env_and_working_dir(ctl):
    creds, sid = sandbox_for(ctl, env={"FROM_CREATE": "yes"})
    res = run_ok(ctl, creds, sid, "echo $FROM_CREATE $CALL; pwd", env={"CALL": "1"})
    assert res["stdout"] == "yes 1\n/workspace\n"
    run_ok(ctl, creds, sid, "mkdir -p sub/dir")
    for wd in ("/workspace/sub/dir", "sub/dir"):
        assert run_ok(ctl, creds, sid, ["pwd"], working_dir=wd)["stdout"] == "/workspace/sub/dir\n"
    for wd in ("/etc", "../..", "/workspace/../etc", 5):
        status, res = execute(ctl, creds, sid, "pwd", working_dir=wd)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", wd


def test_validation(ctl):
    creds, sid = sandbox_for(ctl)
    for body in ({}, {"command": ""}, {"command": []}, {"command": [1]}, {"command": 5},
                 {"command": "true", "env": {"1X": "a"}}, {"command": "true", "env": {"A": 1}},
                 {"command": "true", "timeout": 0}, {"command": "true", "timeout": "5"},
                 {"command": "true", "stream": "yes"}):
        status, res, _ = raw(ctl, "POST", V1 + f"/sandbox/{sid}/execute", body, headers=creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", body
    status, res = execute(ctl, creds, "00000000-0000-4000-8000-000000000000", "true")
    assert status == 404


def test_timeout_kills_with_124(ctl):
    creds, sid = sandbox_for(ctl)
    t0 = time.time()
    res = run_ok(ctl, creds, sid, "echo started; sleep 30", timeout=500)
    assert res["exit_code"] == 124 and res["timed_out"] is True
    assert res["stdout"] == "started\n" and "timed out after 500ms" in res["stderr"]
    assert time.time() - t0 < 20


def sse_events(d, creds, sid, body):
    """A generator of the parsed `data:` events of a streaming execute."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(creds)
    conn.request("POST", V1 + f"/sandbox/{sid}/execute", body=json.dumps(body).encode(), headers=hdrs)
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    try:
        while True:
            line = resp.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if line.startswith("data:"):
                event = json.loads(line[5:].strip())
                yield event
                if event["type"] in ("done", "error"):
                    return
    finally:
        conn.close()


def test_stream_arrives_as_produced(ctl):
    creds, sid = sandbox_for(ctl)
    # The command waits for a file the test makes only after it has seen the
    # first line: the line must have arrived while the command ran.
    script = "echo ready; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo after >&2; exit 7"
    events = sse_events(ctl, creds, sid, {"command": script, "stream": True, "timeout": 20000})
    first = next(events)
    assert first == {"type": "stdout", "data": "ready\n"}
    run_ok(ctl, creds, sid, "touch /workspace/go")
    rest = list(events)
    assert {"type": "stderr", "data": "after\n"} in rest
    assert rest[-2:] == [{"type": "exit", "exit_code": 7, "timed_out": False}, {"type": "done"}]


def test_stream_timeout(ctl):
    creds, sid = sandbox_for(ctl)
    events = list(sse_events(ctl, creds, sid, {"command": ["sleep", "30"], "stream": True, "timeout": 300}))
    assert any(e["type"] == "stderr" and "timed out" in e["data"] for e in events)
    assert events[-2] == {"type": "exit", "exit_code": 124, "timed_out": True}


def test_memory_limit_kills(ctl):
    creds, sid = sandbox_for(ctl, memory="64Mi")
    ok = run_ok(ctl, creds, sid, ["python3", "-c", "x = b'a' * (8 << 20); print(len(x))"])
    assert ok["exit_code"] == 0 and ok["stdout"] == str(8 << 20) + "\n"
    res = run_ok(ctl, creds, sid, ["python3", "-c", "x = b'a' * (256 << 20); print(len(x))"])
    # The OOM killer's SIGKILL: 128 + 9 (or Python's MemoryError, exit 1).
    assert res["exit_code"] in (137, 1) and res["stdout"] == "", res
    assert res["exit_code"] == 137 or "MemoryError" in res["stderr"]


def test_cpu_quota_holds(ctl):
    creds, sid = sandbox_for(ctl, cpus="0.2")
    code = ("import time\n"
            "w0, c0 = time.time(), time.process_time()\n"
            "while time.time() - w0 < 2: pass\n"
            "print((time.process_time() - c0) / (time.time() - w0))\n")
    res = run_ok(ctl, creds, sid, ["python3", "-c", code], timeout=30000)
    assert res["exit_code"] == 0, res
    share = float(res["stdout"])
    assert 0.02 < share < 0.5, share


def test_no_command_outlives_its_sandbox(ctl):
    creds, sid = sandbox_for(ctl, timeout_seconds=2)
    t0 = time.time()
    res = run_ok(ctl, creds, sid, "sleep 30", timeout=60000)
    # Its timeout is capped at the sandbox's remaining lifetime (124), and
    # the reaper deleting the expired sandbox kills every jail of it (137):
    # whichever comes first ends it, well before the 30 s.
    assert (res["exit_code"], res["timed_out"]) in ((124, True), (137, False)), res
    assert time.time() - t0 < 15


def test_commands_run_in_spare_jails_that_see_what_a_cold_one_sees(ctl):
    """After a command the sandbox's next command jail is built ahead
    (src/sandbox/spare.c): the next execute takes it (GET /ready
    spareJails.hits) and sees the same jail as the cold first command."""
    creds, sid = sandbox_for(ctl, env={"FROM_CREATE": "yes"})
    probe = ("grep -E '^(Seccomp|NoNewPrivs|CapEff|Uid):' /proc/self/status; ls -l /proc/self/fd | wc -l; "
             "cut -d' ' -f4- /proc/self/mountinfo | sed -E 's/ shared:[0-9]+| master:[0-9]+//g' | sort; "
             "cat /proc/self/cgroup; env | grep -v '^_=' | sort; pwd; ls -A")
    cold = run_ok(ctl, creds, sid, probe)
    # Other tests' sandboxes hold spares too: run until this one's is used.
    for _ in range(100):
        time.sleep(0.05)
        before = ctl.get("/ready")[1]["spareJails"]
        warm = run_ok(ctl, creds, sid, probe)
        if ctl.get("/ready")[1]["spareJails"]["hits"] == before["hits"] + 1:
            break
    else:
        raise AssertionError("no command ran in a spare jail")
    assert warm == cold and cold["exit_code"] == 0 and "FROM_CREATE=yes" in cold["stdout"], (warm, cold)
