"""Bridge /exec (issue 11 Deliver 3; cloudflare-bridge.md §2): body
validation, the quoting vectors round-tripping through bash, SSE shape
(headers, exactly one terminal event, base64 of the exact bytes), output as
it is produced, timeouts (SIGTERM, grace, SIGKILL, 124), cwd confinement,
the client leaving, hostile argv. Sessions: test_bridge_sessions.py."""
import base64
import glob
import http.client
import json
import os
import socket
import time

import pytest

from bridge_common import exec_sse, new_sandbox
from exec_common import GRACE_MS, d  # noqa: F401 (d is a fixture)


@pytest.fixture(scope="module")
def sbx(d):
    return new_sandbox(d)


def post_exec(d, sid, body, headers=None, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    return d.request("POST", f"/v1/sandbox/{sid}/exec", raw=data,
                     headers=dict({"Content-Type": "application/json"}, **(headers or {})))


def terminal(events):
    return [(e, x) for e, x in events if e in ("exit", "error")]


# ---- validation ----

@pytest.mark.parametrize("raw", [b"", b"{", b"not json", b"[1,2]", b'"argv"', b"null"])
def test_bad_json_is_400(d, sbx, raw):
    status, body, _ = post_exec(d, sbx, None, raw=raw)
    assert status == 400 and body["code"] == "invalid_request", body


@pytest.mark.parametrize("argv", [None, [], "echo hi", {"0": "echo"}, 5])
def test_argv_must_be_a_non_empty_array(d, sbx, argv):
    body = {} if argv is None else {"argv": argv}
    status, res, _ = post_exec(d, sbx, body)
    assert status == 400
    assert res == {"error": "argv must be a non-empty array", "code": "invalid_request"}


@pytest.mark.parametrize("argv", [["echo", 1], ["echo", None], [["x"]], ["echo", {"a": 1}], ["echo", True]])
def test_argv_items_must_be_strings(d, sbx, argv):
    status, res, _ = post_exec(d, sbx, {"argv": argv})
    assert status == 400 and res["code"] == "invalid_request"
    assert res["error"].startswith("argv must be a non-empty array")


def test_argv_with_a_nul_is_400(d, sbx):
    status, res, _ = post_exec(d, sbx, {"argv": ["printf", "%s", "a\u0000b"]})
    assert status == 400 and res["code"] == "invalid_request" and "NUL" in res["error"]


def test_any_content_type_is_accepted(d, sbx):
    status, body, _ = d.request("POST", f"/v1/sandbox/{sbx}/exec", raw=json.dumps({"argv": ["true"]}).encode(),
                                headers={"Content-Type": "text/plain"})
    assert status == 200


@pytest.mark.parametrize("bad", ["", "a b", "a..b", "..", "x" * 129, "a/b", "é"])
def test_bad_session_id_is_400(d, sbx, bad):
    status, res, _ = post_exec(d, sbx, {"argv": ["true"]}, headers={"Session-Id": bad.encode().decode("latin-1")})
    assert status == 400
    assert res == {"error": "Invalid session ID format", "code": "invalid_request"}


# ---- quoting: every vector gives its bytes back through bash ----

VECTORS = ["it's", 'say "hi"', "a\\b", "$(id)", "`id`", "line1\nline2", "tab\there", "cr\rx", "", " ",
           "unicode é ✓ 😀", "'", "\\", "$'x'", "a;b|c&d>e<f", "*", "~", "!x", "#c", "$HOME", "${PATH}",
           "\\n", "'\"'\"'", "a\x01b\x1b[31m\x7f", "-n", "--", "=", "%s"]


@pytest.mark.parametrize("arg", VECTORS)
def test_quoting_round_trips(d, sbx, arg):
    status, _, events, out, err, code = exec_sse(d, sbx, ["printf", "%s", arg])
    assert status == 200 and code == 0, err
    assert out == arg.encode()


def test_all_bytes_round_trip_in_one_argument(d, sbx):
    arg = "".join(chr(i) for i in range(1, 256))
    _, _, _, out, err, code = exec_sse(d, sbx, ["printf", "%s", arg])
    assert code == 0 and out == arg.encode(), err


def test_plain_words_run_as_a_command_line(d, sbx):
    _, _, _, out, _, code = exec_sse(d, sbx, ["env", "A=1", "printenv", "A"])
    assert code == 0 and out == b"1\n"


def test_argv0_may_be_a_builtin_and_args_stay_words(d, sbx):
    _, _, _, out, _, code = exec_sse(d, sbx, ["echo", "a  b", "$(id)"])
    assert out == b"a  b $(id)\n" and code == 0


# ---- SSE shape ----

def test_headers_and_exactly_one_terminal_event(d, sbx):
    status, headers, events, out, err, code = exec_sse(d, sbx, ["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["cache-control"] == "no-cache"
    assert out == b"out\n" and err == b"err\n" and code == 3
    assert terminal(events) == [("exit", '{"exit_code":3}')]
    assert events[-1][0] == "exit"
    for e, data in events:
        if e in ("stdout", "stderr"):
            base64.b64decode(data, validate=True)


def test_binary_output_is_byte_exact(d, sbx):
    _, _, _, out, _, code = exec_sse(d, sbx, ["printf", "\\x00\\xff\\xfe\\xc3\\x28\\x00end"])
    assert code == 0 and out == b"\x00\xff\xfe\xc3\x28\x00end"
    _, _, _, out, _, _ = exec_sse(d, sbx, ["bash", "-c", "printf 'no newline'"])
    assert out == b"no newline"


def test_large_output(d, sbx):
    _, _, _, out, _, code = exec_sse(d, sbx, ["head", "-c", "3000000", "/dev/zero"])
    assert code == 0 and out == b"\0" * 3000000


def test_signal_death_is_128_plus_n(d, sbx):
    _, _, _, _, _, code = exec_sse(d, sbx, ["bash", "-c", "kill -9 $$"])
    assert code == 137


def test_stdin_is_empty(d, sbx):
    t = time.time()
    _, _, _, out, _, code = exec_sse(d, sbx, ["cat"])
    assert code == 0 and out == b"" and time.time() - t < 5


def test_runs_as_the_sandbox_user_in_workspace(d, sbx):
    _, _, _, out, _, code = exec_sse(d, sbx, ["bash", "-c", "id -un; pwd"])
    assert out == b"sandbox\n/workspace\n"


def read_events(resp):
    """Yields (time, event, data) as the SSE arrives."""
    event, data = None, []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if line == "":
            if event:
                yield time.time(), event, "\n".join(data)
            event, data = None, []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def open_exec(d, sid, body, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.request("POST", f"/v1/sandbox/{sid}/exec", body=json.dumps(body).encode(),
                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    return conn, conn.getresponse()


def test_output_flows_as_it_is_produced(d, sbx):
    t0 = time.time()
    conn, resp = open_exec(d, sbx, {"argv": ["bash", "-c", "for i in 1 2 3; do echo $i; sleep 1; done"]})
    got = [(t - t0, e, base64.b64decode(x) if e == "stdout" else x) for t, e, x in read_events(resp)]
    conn.close()
    lines = [(t, x) for t, e, x in got if e == "stdout"]
    assert [x for _, x in lines] == [b"1\n", b"2\n", b"3\n"]
    end = got[-1][0]
    assert got[-1][1] == "exit"
    assert end >= 2.0
    assert lines[0][0] < end - 1.5, got  # the first line came well before the end
    assert lines[1][0] < end - 0.5, got


# ---- timeouts ----

def test_timeout_sigterm_then_124(d, sbx):
    t = time.time()
    _, _, events, out, err, code = exec_sse(d, sbx, ["bash", "-c", "echo started; sleep 30"], timeout_ms=700)
    took = time.time() - t
    assert code == 124
    assert out == b"started\n"
    assert err.endswith(b"Command timed out after 700ms\n")
    assert 0.6 < took < 5
    assert len(terminal(events)) == 1


def test_timeout_sigkill_after_the_grace(d, sbx):
    t = time.time()
    _, _, _, out, err, code = exec_sse(d, sbx, ["bash", "-c", "trap 'echo got TERM' TERM; echo armed; "
                                                "while :; do sleep 0.1; done"], timeout_ms=500)
    took = time.time() - t
    assert code == 124 and err.endswith(b"Command timed out after 500ms\n")
    assert b"got TERM" in out  # SIGTERM first
    assert 0.5 + GRACE_MS / 1000 - 0.1 < took < 5  # then SIGKILL after the grace


def test_timeout_not_reached(d, sbx):
    _, _, _, out, err, code = exec_sse(d, sbx, ["echo", "quick"], timeout_ms=10000)
    assert code == 0 and out == b"quick\n" and err == b""


@pytest.mark.parametrize("bad", ["500", None, True, [500], {"ms": 1}, -5, 0])
def test_timeout_not_a_positive_number_is_ignored(d, sbx, bad):
    _, _, _, out, _, code = exec_sse(d, sbx, ["bash", "-c", "sleep 0.8; echo done"], timeout_ms=bad)
    assert code == 0 and out == b"done\n"


def test_fractional_timeout(d, sbx):
    _, _, _, _, err, code = exec_sse(d, sbx, ["sleep", "10"], timeout_ms=300.5)
    assert code == 124 and err.endswith(b"Command timed out after 300ms\n")


# ---- cwd ----

@pytest.mark.parametrize("cwd,want", [("sub", "/workspace/sub"), ("/workspace/sub", "/workspace/sub"),
                                      ("./sub/../sub/.", "/workspace/sub"), ("", "/workspace"),
                                      ("/workspace", "/workspace"), ("/tmp/../workspace/sub", "/workspace/sub"),
                                      ("sub//", "/workspace/sub")])
def test_cwd_resolves_within_workspace(d, sbx, cwd, want):
    exec_sse(d, sbx, ["mkdir", "-p", "/workspace/sub"])
    _, _, _, out, err, code = exec_sse(d, sbx, ["pwd"], cwd=cwd)
    assert code == 0 and out.decode() == want + "\n", err


@pytest.mark.parametrize("cwd", ["/", "/tmp", "/workspacefoo", "..", "../..", "/workspace/..", "sub/../../etc"])
def test_cwd_outside_workspace_is_403(d, sbx, cwd):
    status, res, _ = post_exec(d, sbx, {"argv": ["pwd"], "cwd": cwd})
    assert status == 403
    assert res == {"error": "cwd must resolve to a location within /workspace", "code": "invalid_request"}


@pytest.mark.parametrize("cwd", [5, None, ["x"], {"a": "/"}])
def test_non_string_cwd_is_ignored(d, sbx, cwd):
    _, _, _, out, _, code = exec_sse(d, sbx, ["pwd"], cwd=cwd)
    assert code == 0 and out == b"/workspace\n"


def test_missing_cwd_is_bash_error_and_exit_1(d, sbx):
    status, _, events, out, err, code = exec_sse(d, sbx, ["echo", "never"], cwd="does/not/exist")
    assert status == 200 and code == 1 and out == b""
    assert b"cd: /workspace/does/not/exist: No such file or directory" in err


# ---- the client leaving ----

def sleepers(tag):
    """Host pids whose command line is `sleep <tag>`."""
    want = b"sleep\0" + tag.encode() + b"\0"

    def cmdline(path):
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return b""
    return [p.split("/")[2] for p in glob.glob("/proc/[0-9]*/cmdline") if cmdline(p) == want]


def test_disconnect_kills_the_command(d, sbx):
    tag = "6.%d" % (time.time_ns() % 100000)
    exec_sse(d, sbx, ["rm", "-f", "/workspace/marker"])
    conn, resp = open_exec(d, sbx, {"argv": ["bash", "-c", f"echo go; sleep {tag}; touch /workspace/marker"]})
    assert resp.status == 200
    assert resp.readline().startswith(b"event: stdout")
    deadline = time.time() + 5
    while not sleepers(tag) and time.time() < deadline:
        time.sleep(0.05)
    assert sleepers(tag), "the command never started"
    t0 = time.time()
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    while sleepers(tag) and time.time() < t0 + 4:
        time.sleep(0.1)
    assert not sleepers(tag), "the command outlived its client"
    time.sleep(max(0, t0 + float(tag) + 0.5 - time.time()))
    _, _, _, out, _, _ = exec_sse(d, sbx, ["ls", "/workspace"])
    assert b"marker" not in out


# ---- hostile argv ----

def test_thousands_of_args(d, sbx):
    args = [str(i) for i in range(20000)]
    _, _, _, out, _, code = exec_sse(d, sbx, ["echo"] + args)
    assert code == 0 and out.split() == [a.encode() for a in args]


def test_a_large_command_up_to_the_cap(d, sbx):
    big = "y" * (1000 * 1024)
    _, _, _, out, err, code = exec_sse(d, sbx, ["printf", "%s", big])
    assert code == 0 and out == big.encode(), err[:200]


def test_the_cap_is_exact(d, sbx):
    cap = 1024 * 1024
    status, _, _ = post_exec(d, sbx, {"argv": ["true", "x" * (cap - 5)]})  # "true " + arg
    assert status == 200
    status, _, _ = post_exec(d, sbx, {"argv": ["true", "x" * (cap - 4)]})
    assert status == 400


def test_a_command_over_the_cap_is_400(d, sbx):
    status, res, _ = post_exec(d, sbx, {"argv": ["printf", "%s", "z" * (1024 * 1024 + 1)]})
    assert status == 400 and res["code"] == "invalid_request" and "too large" in res["error"]
    # Escaping counts: 300 KiB of newlines quote to 600 KiB plus; 600 KiB to over 1 MiB.
    status, _, _ = post_exec(d, sbx, {"argv": ["true", "\n" * (300 * 1024)]})
    assert status == 200
    status, res, _ = post_exec(d, sbx, {"argv": ["true", "\n" * (600 * 1024)]})
    assert status == 400


def test_control_bytes_and_escapes_everywhere(d, sbx):
    args = ["\x1b]0;title\x07", "\x08\x08", "\u2028\u2029", "\ufeff", "a\rb", "$'\\x41'", "\\x41"]
    _, _, _, out, err, code = exec_sse(d, sbx, ["printf", "%s\\0"] + args)
    assert code == 0, err
    assert out.split(b"\0")[:-1] == [a.encode() for a in args]


def test_a_session_id_of_the_disabled_kind_is_sessionless(d, sbx):
    h = {"Session-Id": "__DISABLE_SESSION__"}
    exec_sse(d, sbx, ["export", "NOPE=1"], headers=h)
    _, _, _, out, _, _ = exec_sse(d, sbx, ["bash", "-c", "echo ${NOPE:-unset}"], headers=h)
    assert out == b"unset\n"


def test_sessionless_calls_share_no_shell_state(d, sbx):
    exec_sse(d, sbx, ["export", "LEAK=1"])
    exec_sse(d, sbx, ["cd", "/tmp"])
    _, _, _, out, _, _ = exec_sse(d, sbx, ["bash", "-c", "echo ${LEAK:-none} $PWD"])
    assert out == b"none /workspace\n"


def test_sessionless_calls_run_in_parallel(d, sbx):
    import threading
    res = {}

    def run(i):
        res[i] = exec_sse(d, sbx, ["bash", "-c", "date +%s.%N; sleep 1.5; date +%s.%N"])
    ts = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert all(r[5] == 0 for r in res.values()), res
    # They overlap: every start (the jail's clock) comes before every end.
    spans = [[float(x) for x in r[3].split()] for r in res.values()]
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans


def test_closed_output_still_times_out(d, sbx):
    t = time.time()
    _, _, _, out, err, code = exec_sse(d, sbx, ["bash", "-c", "echo bye; exec >&- 2>&-; sleep 30"], timeout_ms=600)
    assert code == 124 and out == b"bye\n" and err.endswith(b"Command timed out after 600ms\n")
    assert time.time() - t < 5


def test_closed_output_then_exit_code(d, sbx):
    _, _, _, out, _, code = exec_sse(d, sbx, ["bash", "-c", "exec >&- 2>&-; sleep 1.5; exit 4"])
    assert code == 4 and out == b""
