"""Bridge sessions (issue 11 Deliver 4; cloudflare-bridge.md §6): POST and
DELETE /session, auto-creation by Session-Id, and the promise the anchor's
README makes and its code breaks: a `cd` or `export` in one /exec is seen
by the next /exec of the same session. Also: `exit N` still saves, one
command at a time per session, timeouts in a session, state that cannot be
carried (too many variables, a cwd outside /workspace) is refused."""
import base64
import http.client
import json
import re
import threading
import time

import pytest

from bridge_common import FAST_LIMITS, Daemon, exec_sse, new_sandbox
from exec_common import GRACE_MS, d  # noqa: F401 (d is a fixture)


@pytest.fixture
def sbx(d):
    return new_sandbox(d)


def run(d, sbx, session, *argv, **body):
    """(stdout, stderr, exit code) of argv in session (None: sessionless)."""
    h = {"Session-Id": session} if session else None
    status, _, _, out, err, code = exec_sse(d, sbx, list(argv), headers=h, **body)
    assert status == 200
    return out, err, code


def sh(d, sbx, session, script, **body):
    return run(d, sbx, session, "eval", script, **body)


def create(d, sbx, body=None, raw=None):
    if raw is not None:
        return d.request("POST", f"/v1/sandbox/{sbx}/session", raw=raw)
    return d.request("POST", f"/v1/sandbox/{sbx}/session", body=body)


def delete(d, sbx, sid):
    return d.request("DELETE", f"/v1/sandbox/{sbx}/session/{sid}")


# ---- routes ----

def test_create_with_an_id(d, sbx):
    status, body, _ = create(d, sbx, {"id": "work"})
    assert status == 200 and body == {"id": "work"}


@pytest.mark.parametrize("raw", [None, b"", b"not json", b"[1]", b"{"])
def test_create_with_no_or_bad_body_gets_a_default_id(d, sbx, raw):
    t = int(time.time() * 1000)
    status, body, _ = d.request("POST", f"/v1/sandbox/{sbx}/session", raw=raw)
    assert status == 200, body
    m = re.fullmatch(r"session-(\d+)", body["id"])
    assert m and abs(int(m.group(1)) - t) < 10000


def test_create_twice_is_502_session_error(d, sbx):
    assert create(d, sbx, {"id": "dup"})[0] == 200
    status, body, _ = create(d, sbx, {"id": "dup"})
    assert status == 502 and body["code"] == "session_error" and "dup" in body["error"]


def test_reserved_id_is_400(d, sbx):
    status, body, _ = create(d, sbx, {"id": "__DISABLE_SESSION__"})
    assert status == 400 and body["code"] == "invalid_request"


@pytest.mark.parametrize("bad", ["", "a..b", "a b", "x" * 129, "a/b"])
def test_bad_id_is_400(d, sbx, bad):
    status, body, _ = create(d, sbx, {"id": bad})
    assert status == 400 and body == {"error": "Invalid session ID format", "code": "invalid_request"}


def test_create_with_cwd_and_env(d, sbx):
    run(d, sbx, None, "mkdir", "-p", "/workspace/proj")
    status, _, _ = create(d, sbx, {"id": "ce", "cwd": "proj", "env": {"GREETING": "hi there", "N": "1"}})
    assert status == 200
    out, _, code = sh(d, sbx, "ce", 'pwd; echo "$GREETING" $N')
    assert code == 0 and out == b"/workspace/proj\nhi there 1\n"


def test_create_with_cwd_outside_is_403(d, sbx):
    status, body, _ = create(d, sbx, {"id": "out", "cwd": "/etc"})
    assert status == 403 and body["code"] == "invalid_request"


@pytest.mark.parametrize("env", [{"1BAD": "x"}, {"A": 1}, {"A-B": "x"}, {"A": None}])
def test_create_with_a_bad_env_is_400(d, sbx, env):
    status, body, _ = create(d, sbx, {"id": "badenv", "env": env})
    assert status == 400 and body["code"] == "invalid_request"


def test_delete(d, sbx):
    create(d, sbx, {"id": "gone"})
    status, body, _ = delete(d, sbx, "gone")
    assert status == 200
    assert body["success"] is True and body["sessionId"] == "gone"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["timestamp"])
    status, body, _ = delete(d, sbx, "gone")
    assert status == 502 and body == {"error": "Session 'gone' not found", "code": "session_error"}


def test_delete_unknown_is_502(d, sbx):
    status, body, _ = delete(d, sbx, "never")
    assert status == 502 and body == {"error": "Session 'never' not found", "code": "session_error"}


def test_delete_bad_id_is_400(d, sbx):
    status, body, _ = delete(d, sbx, "a..b")
    assert status == 400 and body["code"] == "invalid_request"


def test_delete_resets_the_state(d, sbx):
    sh(d, sbx, "r", "export GONE=1; cd /tmp")
    assert delete(d, sbx, "r")[0] == 200
    out, _, _ = sh(d, sbx, "r", 'echo "${GONE:-unset}" $PWD')
    assert out == b"unset /workspace\n"


# ---- the promise: state carries over ----

def test_cd_and_export_are_seen_by_the_next_exec(d, sbx):
    run(d, sbx, "s", "mkdir", "-p", "/workspace/a/b")
    run(d, sbx, "s", "cd", "a/b")
    run(d, sbx, "s", "export", "FOO=bar baz")
    out, _, code = sh(d, sbx, "s", 'pwd; echo "$FOO"')
    assert code == 0 and out == b"/workspace/a/b\nbar baz\n"
    # Another session and sessionless calls see none of it.
    assert sh(d, sbx, "other", 'pwd; echo "${FOO:-unset}"')[0] == b"/workspace\nunset\n"
    assert sh(d, sbx, None, 'pwd; echo "${FOO:-unset}"')[0] == b"/workspace\nunset\n"


def test_unknown_session_id_is_auto_created(d, sbx):
    out, _, code = sh(d, sbx, "fresh", "pwd; env | grep -c ^SESSIONVAR || true")
    assert code == 0 and out == b"/workspace\n0\n"
    status, body, _ = create(d, sbx, {"id": "fresh"})
    assert status == 502  # it exists now


def test_exit_n_still_saves(d, sbx):
    out, _, code = sh(d, sbx, "e", "cd /workspace && mkdir -p x && cd x; export AFTER=1; exit 7")
    assert code == 7
    out, _, code = sh(d, sbx, "e", 'echo $PWD $AFTER')
    assert code == 0 and out == b"/workspace/x 1\n"


def test_functions_variables_and_aliases_carry_over(d, sbx):
    sh(d, sbx, "f", "greet() { echo \"hello $1\"; }; plain='not exported'; declare -a arr=(1 '2 3'); "
                    "declare -A map=([k]=v); shopt -s expand_aliases; alias ll='echo aliased'")
    out, err, code = sh(d, sbx, "f", 'greet you; echo "$plain" "${arr[1]}" "${map[k]}"\nll')
    assert code == 0, err
    assert out == b"hello you\nnot exported 2 3 v\naliased\n"
    # Not exported stays not exported.
    out, _, _ = sh(d, sbx, "f", "bash -c 'echo ${plain:-child does not see it}'")
    assert out == b"child does not see it\n"


def test_unset_and_unexport_carry_over(d, sbx):
    create(d, sbx, {"id": "u", "env": {"KEEP": "1", "DROP": "2"}})
    sh(d, sbx, "u", "unset DROP; unset HOME")
    out, _, _ = sh(d, sbx, "u", 'echo "${KEEP:-x}${DROP:-x}${HOME:-x}"')
    assert out == b"1xx\n"


def test_cwd_of_a_call_is_for_that_call(d, sbx):
    run(d, sbx, None, "mkdir", "-p", "/workspace/p/q")
    sh(d, sbx, "c", "cd /workspace/p")
    out, _, _ = run(d, sbx, "c", "pwd", cwd="/workspace/p/q")
    assert out == b"/workspace/p/q\n"
    assert run(d, sbx, "c", "pwd")[0] == b"/workspace/p\n"
    # A cd inside such a call still counts.
    sh(d, sbx, "c", "cd /workspace", cwd="p/q")
    assert run(d, sbx, "c", "pwd")[0] == b"/workspace\n"


def test_missing_cwd_in_a_session_is_exit_1(d, sbx):
    out, err, code = run(d, sbx, "m", "pwd", cwd="nope")
    assert code == 1 and out == b"" and b"cd: /workspace/nope" in err


def test_cwd_outside_workspace_falls_back(d, sbx):
    sh(d, sbx, "o", "cd /tmp")
    assert run(d, sbx, "o", "pwd")[0] == b"/workspace\n"
    sh(d, sbx, "o", "mkdir -p /workspace/d && cd /workspace/d && rmdir /workspace/d")
    out, _, code = run(d, sbx, "o", "pwd")
    assert code == 0 and out == b"/workspace\n"


def test_output_is_exact_in_a_session(d, sbx):
    out, _, code = run(d, sbx, "b", "printf", "\\x00no newline\\xff")
    assert code == 0 and out == b"\x00no newline\xff"


def test_state_channel_is_not_the_users_output(d, sbx):
    out, err, code = sh(d, sbx, "q", "echo visible; export X=1")
    assert out == b"visible\n" and err == b"" and code == 0
    # Garbage where the state goes: no frame, the state stays.
    out, err, code = sh(d, sbx, "q", "echo junk >&$__sbx_fd; export X=2; trap - EXIT")
    assert code == 0 and out == b""
    assert sh(d, sbx, "q", "echo $X")[0] == b"1\n"


def test_a_closed_channel_leaks_nothing_to_stdout(d, sbx):
    sh(d, sbx, "cl", "export Z=1")
    out, err, code = sh(d, sbx, "cl", "exec {__sbx_fd}>&-; export Z=2; echo done")
    assert (out, err, code) == (b"done\n", b"", 0)
    assert sh(d, sbx, "cl", "echo $Z")[0] == b"1\n"


def test_forged_state_is_checked(d, sbx):
    # The guest can write its own session's state; it is still checked.
    sh(d, sbx, "g", "export KEEP=1")
    forged = r"printf 'SBXSTATE\0P/etc\0E1BAD=x\0Egood=yes\0S\0.\0' >&$__sbx_fd; trap - EXIT; exit 0"
    sh(d, sbx, "g", forged)
    out, _, code = sh(d, sbx, "g", 'pwd; echo "${good:-}" "${KEEP:-gone}"')
    # cwd outside /workspace: back to it; a bad name dropped; what was not
    # in the frame is unset (it is the session's own environment).
    assert code == 0 and out == b"/workspace\nyes gone\n"


def test_too_many_variables_are_not_carried_but_the_session_works(d, sbx):
    sh(d, sbx, "many", "cd /workspace; mkdir -p z; cd z; for i in $(seq 200); do export V$i=$i; done")
    out, err, code = sh(d, sbx, "many", "pwd; echo ${V1:-dropped}")
    assert code == 0, err
    assert out == b"/workspace/z\ndropped\n"


def test_big_values_are_not_carried(d, sbx):
    sh(d, sbx, "big", "export BIG=$(head -c 100000 /dev/zero | tr '\\0' x); export SMALL=s")
    out, err, code = sh(d, sbx, "big", 'echo ${#BIG} $SMALL')
    assert code == 0, err
    assert out == b"0 s\n"


# ---- timeouts, kills, order ----

def test_timeout_in_a_session_and_the_session_lives_on(d, sbx):
    sh(d, sbx, "t", "export BEFORE=1")
    t = time.time()
    out, err, code = sh(d, sbx, "t", "cd /tmp; echo start; sleep 30", timeout_ms=500)
    assert code == 124 and err.endswith(b"Command timed out after 500ms\n")
    assert time.time() - t < 5
    out, _, code = sh(d, sbx, "t", "echo $BEFORE")
    assert code == 0 and out == b"1\n"


def test_timeout_sigkill_in_a_session(d, sbx):
    t = time.time()
    out, err, code = sh(d, sbx, "tk", "trap '' TERM; sleep 30", timeout_ms=300)
    assert code == 124 and err.endswith(b"Command timed out after 300ms\n")
    assert 0.3 + GRACE_MS / 1000 - 0.1 < time.time() - t < 5
    assert sh(d, sbx, "tk", "echo alive")[0] == b"alive\n"


def test_commands_of_one_session_run_one_at_a_time(d, sbx):
    marks = {}

    def go(name, script):
        out, _, code = sh(d, sbx, "serial", script)
        marks[name] = (time.time(), out, code)
    t0 = time.time()
    a = threading.Thread(target=go, args=("a", "sleep 1.5; export A_DONE=1"))
    a.start()
    time.sleep(0.4)
    b = threading.Thread(target=go, args=("b", "echo ${A_DONE:-no}"))
    b.start()
    a.join()
    b.join()
    assert marks["a"][2] == 0 and marks["b"][2] == 0
    assert marks["b"][1] == b"1\n"  # b ran after a, in a's state
    assert marks["b"][0] >= marks["a"][0] - 0.05
    assert marks["a"][0] - t0 >= 1.4


def test_other_sessions_are_not_serialised(d, sbx):
    """Three sessions' commands overlap: each records when it started and
    ended (the jail's clock), and every start comes before every end."""
    res = {}

    def go(i):
        res[i] = sh(d, sbx, f"par{i}", "date +%s.%N; sleep 1.2; date +%s.%N")
    ts = [threading.Thread(target=go, args=(i,)) for i in range(3)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert all(r[2] == 0 for r in res.values()), res
    spans = [[float(x) for x in r[0].split()] for r in res.values()]
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans


def test_delete_kills_the_running_command_and_the_waiting_one_fails(d, sbx):
    res = {}

    def go(name, script):
        status, _, events, out, err, code = exec_sse(d, sbx, ["eval", script], headers={"Session-Id": "dk"})
        res[name] = (events, code)
    create(d, sbx, {"id": "dk"})
    a = threading.Thread(target=go, args=("a", "sleep 20"))
    a.start()
    time.sleep(0.5)
    b = threading.Thread(target=go, args=("b", "echo never"))
    b.start()
    time.sleep(0.5)
    t = time.time()
    assert delete(d, sbx, "dk")[0] == 200
    a.join(10)
    b.join(10)
    assert time.time() - t < 5
    assert res["a"][1] == 137
    events = [(e, x) for e, x in res["b"][0] if e in ("exit", "error", "stdout")]
    assert events == [("error", json.dumps({"error": "Session 'dk' not found", "code": "exec_error"},
                                           separators=(",", ":")))]


def test_sessions_go_with_their_sandbox(d, sbx):
    sh(d, sbx, "w", "export W=1")
    assert d.request("DELETE", f"/v1/sandbox/{sbx}")[0] == 204
    out, _, _ = sh(d, sbx, "w", 'echo "${W:-fresh}"')
    assert out == b"fresh\n"


def test_destroying_the_sandbox_kills_session_commands(d, sbx):
    res = {}

    def go():
        res["r"] = exec_sse(d, sbx, ["sleep", "20"], headers={"Session-Id": "k"})
    t = threading.Thread(target=go)
    t.start()
    time.sleep(0.8)
    t0 = time.time()
    assert d.request("DELETE", f"/v1/sandbox/{sbx}")[0] == 204
    t.join(10)
    assert time.time() - t0 < 5 and res["r"][5] == 137


def test_sessions_per_sandbox_are_capped():
    dm = Daemon(sets=FAST_LIMITS + ["sandbox.max_sessions=2"])
    try:
        s = new_sandbox(dm)
        assert create(dm, s, {"id": "one"})[0] == 200
        assert run(dm, s, "two", "true")[2] == 0  # auto-created
        status, body, _ = create(dm, s, {"id": "three"})
        assert status == 400 and body["code"] == "invalid_request" and "at most 2" in body["error"]
        status, _, _, _, _, _ = exec_sse(dm, s, ["true"], headers={"Session-Id": "three"})
        assert status == 400
        assert delete(dm, s, "one")[0] == 200
        assert create(dm, s, {"id": "three"})[0] == 200
    finally:
        dm.cleanup()


def test_forged_shell_text_that_exits_heals(d, sbx):
    sh(d, sbx, "h", "export KEEP=1")
    sh(d, sbx, "h", r"printf 'SBXSTATE\0P/workspace\0EKEEP=1\0Sexit 9\0.\0' >&$__sbx_fd; trap - EXIT; exit 0")
    out, _, code = sh(d, sbx, "h", "echo ran")
    assert code == 9 and out == b""  # the forged text ran, once
    out, _, code = sh(d, sbx, "h", "echo $KEEP")
    assert code == 0 and out == b"1\n"
