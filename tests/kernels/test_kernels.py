"""Tests of the in-jail language kernels (docs/kernel-protocol.md), run without a jail.

Each kernel is started the way the daemon starts it: fd 3 = one end of a socketpair,
fd 0 = /dev/null, fd 1/2 = pipes, environment cleared to PATH/HOME/LANG plus
SANDBOX_WORKSPACE_ROOT (a temporary directory standing in for /workspace).

Run: /usr/bin/python3 -m pytest -q tests/kernels
Another node binary (e.g. Debian's node 18): SANDBOXD_TEST_NODE=/path/to/node.
"""
import fcntl
import json
import os
import selectors
import shutil
import socket
import subprocess
import time

import pytest

# ---------------------------------------------------------------------------------------
# Harness: start a kernel the way the daemon does.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL_DIR = os.path.join(ROOT, "src", "runtimes", "kernels")

LANGUAGES = ("python", "javascript", "perl", "ruby")
# Another node binary can be tried, e.g. Debian's node 18: SANDBOXD_TEST_NODE=/path/to/node
NODE = os.environ.get("SANDBOXD_TEST_NODE", "/usr/bin/node")


def command(lang, kernel_dir=KERNEL_DIR):
    """The kernel command line, as in docs/kernel-protocol.md (minus the jail paths)."""
    return {
        "python": ["/usr/bin/python3", "-I", os.path.join(kernel_dir, "python_kernel.py")],
        "javascript": [NODE, "--max-old-space-size=256",
                       os.path.join(kernel_dir, "node_kernel.js")],
        "perl": ["/usr/bin/perl", os.path.join(kernel_dir, "perl_kernel.pl")],
        "ruby": ["/usr/bin/ruby", "--disable-gems", os.path.join(kernel_dir, "ruby_kernel.rb")],
    }[lang]


TIMEOUT = 15.0


def _split_lines(data):
    text = data.decode("utf-8", "replace")
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


class Kernel:
    def __init__(self, lang, mode, workspace, extra_env=None, kernel_dir=KERNEL_DIR, cwd="/"):
        self.lang = lang
        self.mode = mode
        self.workspace = str(workspace)
        parent, child = socket.socketpair()
        self.sock = parent
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
               "SANDBOX_WORKSPACE_ROOT": self.workspace}
        if extra_env:
            env.update(extra_env)
        child_fd = child.fileno()

        def setup_fd3():
            os.dup2(child_fd, 3)  # dup2 clears close-on-exec on fd 3

        self.proc = subprocess.Popen(
            command(lang, kernel_dir) + [mode], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, cwd=cwd, close_fds=False,
            preexec_fn=setup_fd3)
        child.close()
        for pipe in (self.proc.stdout, self.proc.stderr):
            fl = fcntl.fcntl(pipe.fileno(), fcntl.F_GETFL)
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETFL, fl | os.O_NONBLOCK)
        self.buf = b""
        self.out = {"stdout": b"", "stderr": b""}
        self.ready = self._read_line()

    def _drain(self):
        for name, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            while True:
                try:
                    chunk = os.read(pipe.fileno(), 65536)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                self.out[name] += chunk

    def _read_line(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ, "sock")
        sel.register(self.proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(self.proc.stderr, selectors.EVENT_READ, "stderr")
        try:
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("kernel did not answer; stderr=%r" % self.out["stderr"])
                for key, _ in sel.select(left):
                    if key.data == "sock":
                        chunk = self.sock.recv(65536)
                        if not chunk:
                            self._drain()
                            raise EOFError("kernel closed fd 3; stderr=%r" % self.out["stderr"])
                        self.buf += chunk
                    else:
                        try:
                            chunk = os.read(key.fileobj.fileno(), 65536)
                        except BlockingIOError:
                            continue
                        if chunk:
                            self.out[key.data] += chunk
                        else:
                            sel.unregister(key.fileobj)
        finally:
            sel.close()
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send_raw(self, line):
        self.sock.sendall(line)
        resp = self._read_line()
        self._drain()
        self.out = {"stdout": b"", "stderr": b""}
        return resp

    def run(self, code, env=None, cwd=None, result_limit=65536, typescript=False,
            replay=False, timeout=TIMEOUT, **extra):
        req = {"code": code, "env": env or {}, "cwd": cwd or self.workspace,
               "resultLimit": result_limit, "typescript": typescript, "replay": replay}
        req.update(extra)
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        resp = self._read_line(timeout)
        self._drain()
        resp["stdout"] = _split_lines(self.out["stdout"])
        resp["stderr"] = _split_lines(self.out["stderr"])
        self.out = {"stdout": b"", "stderr": b""}
        return resp

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self._drain()
        self.sock.close()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc


def run_once(lang, code, workspace, kernel_dir=KERNEL_DIR, **kw):
    """Starts a kernel in once mode and runs one request; resp["exit"] is its exit status."""
    k = Kernel(lang, "once", workspace, kernel_dir=kernel_dir)
    try:
        assert k.ready == {"ready": True}
        resp = k.run(code, **kw)
    finally:
        rc = k.close()
    resp["exit"] = rc
    return resp


# ---------------------------------------------------------------------------------------

NEVER_SETTLED = ("Execution did not complete: a promise never settled "
                 "(timers and indefinitely pending promises are unsupported)")
LIMIT_ERROR = {"name": "ExecutionLimitError", "message": "Result limit exceeded (64 KiB)",
               "traceback": []}


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    return os.path.realpath(str(root))


def once(lang, code, ws, **kw):
    resp = run_once(lang, code, ws, **kw)
    assert resp["exit"] == 0, resp
    return resp


@pytest.fixture
def repl(ws):
    kernels = []

    def start(lang):
        k = Kernel(lang, "repl", ws)
        assert k.ready == {"ready": True}
        kernels.append(k)
        return k

    yield start
    for k in kernels:
        if k.proc.poll() is None:
            k.close()


def ok(resp):
    assert resp["error"] is None, resp
    return resp["results"]


def err(resp):
    assert resp["error"] is not None, resp
    assert resp["results"] == []
    return resp["error"]


# ---------------------------------------------------------------------------------------
# Start-up and the mode contract

@pytest.mark.parametrize("lang", LANGUAGES)
def test_ready_once_serves_one_request_and_exits_zero(lang, ws):
    k = Kernel(lang, "once", ws)
    assert k.ready == {"ready": True}
    resp = k.run("12**2")
    assert resp["results"] == [{"text": "144"}]
    assert resp["error"] is None and resp["cwd"] == ws
    assert k.close() == 0


@pytest.mark.parametrize("lang", LANGUAGES)
def test_once_waits_after_its_answer_until_eof(lang, ws):
    """A once-mode kernel does not exit by itself after its answer: the daemon
    kills it (at idle priority, after the answer is on its way), or EOF ends it."""
    k = Kernel(lang, "once", ws)
    assert k.ready == {"ready": True}
    assert ok(k.run("6*7")) == [{"text": "42"}]
    time.sleep(0.3)
    assert k.proc.poll() is None, "exited before EOF"
    assert k.close() == 0


@pytest.mark.parametrize("lang", LANGUAGES)
def test_repl_serves_until_eof_and_rejects_bad_lines(lang, repl):
    k = repl(lang)
    bad = k.send_raw(b"this is not json\n")
    assert bad["results"] == [] and bad["error"]["name"] == "EngineError"
    for _ in range(3):
        assert ok(k.run("12**2")) == [{"text": "144"}]
    assert k.close() == 0


@pytest.mark.parametrize("lang,code", [
    ("python", "import os\nos.system('readlink /proc/self/fd/3 || echo none')"),
    ("javascript", "require('child_process').execSync('readlink /proc/self/fd/3 || echo none', "
                   "{stdio: 'inherit'}); undefined"),
    ("perl", "system('readlink /proc/self/fd/3 || echo none'); undef"),
    ("ruby", "system('readlink /proc/self/fd/3 || echo none'); nil"),
])
def test_control_fd_does_not_leak_into_subprocesses(lang, code, ws):
    resp = once(lang, code, ws, env={"PATH": "/usr/bin:/bin"})
    assert resp["error"] is None, resp
    assert resp["stdout"], resp
    assert not any("socket:" in line for line in resp["stdout"]), resp["stdout"]


def test_node_async_spawn_does_not_leak_control_fd(ws):
    code = ("const out = await new Promise((res, rej) => require('child_process')"
            ".exec('readlink /proc/self/fd/3 || echo none', (e, so) => e ? rej(e) : res(so)));"
            "\nout.trim()")
    (text,) = ok(once("javascript", code, ws, env={"PATH": "/usr/bin:/bin"}))
    assert "socket:" not in text["text"]


@pytest.mark.parametrize("lang,code", [
    ("python", "import os, sys\npid = os.fork()\nif pid == 0:\n    print('child')\n    sys.exit(3)\n"
               "os.waitpid(pid, 0)[1] >> 8"),
    ("perl", "my $pid = fork(); if ($pid == 0) { print \"child\\n\"; } else { waitpid($pid, 0); $? >> 8 }"),
    ("ruby", "pid = fork\nif pid.nil?\n  puts 'child'\n  raise 'in child'\nend\nProcess.wait(pid)\n$?.exitstatus"),
])
def test_forked_guest_children_never_answer(lang, code, repl):
    k = repl(lang)
    resp = k.run(code)
    assert resp["stdout"] == ["child"]
    assert ok(resp) == [{"text": {"python": "3", "perl": "0", "ruby": "1"}[lang]}]
    assert ok(k.run("1 + 1")) == [{"text": "2"}]
    assert k.buf == b""  # nothing else arrived on fd 3


def test_kernels_find_their_files_relative_to_their_own_path(ws, tmp_path):
    moved = tmp_path / "opt" / "kernels"
    shutil.copytree(KERNEL_DIR, str(moved))
    resp = run_once("javascript", "const v = await Promise.resolve(2); v * 21", ws,
                    kernel_dir=str(moved))
    assert resp["exit"] == 0 and ok(resp) == [{"text": "42"}]


# ---------------------------------------------------------------------------------------
# Result mapping

MAPPING = [
    ("python", "12**2", [{"text": "144"}]),
    ("python", "import math\nmath.factorial(20)", [{"text": "2432902008176640000"}]),
    ("python", "'hi'", [{"text": "'hi'"}]),
    ("python", "(1, 2)", [{"text": "(1, 2)"}]),
    ("python", "True", [{"text": "True"}]),
    ("python", "None", []),
    ("python", "x = 1", []),
    ("python", "{'a': [1, 2.5], 'b': None}", [{"json": {"a": [1, 2.5], "b": None}}]),
    ("python", "[1, float('nan')]", [{"text": "[1, nan]"}]),
    ("javascript", "12**2", [{"text": "144"}]),
    ("javascript", "'hi'", [{"text": "'hi'"}]),
    ("javascript", "\"it's \\\\ ok\"", [{"text": "'it\\'s \\\\ ok'"}]),
    ("javascript", "2n ** 64n", [{"text": "18446744073709551616n"}]),
    ("javascript", "null", [{"text": "null"}]),
    ("javascript", "undefined", []),
    ("javascript", "let z = 5", []),
    ("javascript", "NaN", [{"text": "NaN"}]),
    ("javascript", "1 < 2", [{"text": "true"}]),
    ("javascript", "({a: 1, b: [1, 2n], c: undefined})", [{"json": {"a": 1, "b": [1, "2n"]}}]),
    ("javascript", "new Date(0)", [{"json": "1970-01-01T00:00:00.000Z"}]),
    ("javascript", "new Map([[1, 2]])", [{"json": {}}]),
    ("javascript", "const o = {}; o.self = o; o", [{"text": "[object Object]"}]),
    ("javascript", "(function f() { return 1 })", [{"text": "function f() { return 1 }"}]),
    ("perl", "12**2", [{"text": "144"}]),
    ("perl", "'hi'", [{"text": "hi"}]),
    ("perl", "undef", []),
    ("perl", "{a => 1, b => [1, 'x']}", [{"json": {"a": 1, "b": [1, "x"]}}]),
    ("perl", "my @a = (1, 2, 3); \\@a", [{"json": [1, 2, 3]}]),
    ("perl", "'caf\u00e9'", [{"text": "caf\u00e9"}]),
    ("ruby", "12**2", [{"text": "144"}]),
    ("ruby", "'hi'", [{"text": "\"hi\""}]),
    ("ruby", ":sym", [{"text": ":sym"}]),
    ("ruby", "nil", []),
    ("ruby", "{a: 1, 'b' => [1, nil]}", [{"json": {"a": 1, "b": [1, None]}}]),
    ("ruby", "[1, Float::NAN]", [{"text": "[1, NaN]"}]),
]


@pytest.mark.parametrize("lang,code,expected", MAPPING)
def test_result_mapping(lang, code, expected, ws):
    assert ok(once(lang, code, ws)) == expected


@pytest.mark.parametrize("lang,code,prefix", [
    ("perl", "sub { 1 }", "CODE(0x"),
    ("perl", "[9**9**9]", "ARRAY(0x"),   # JSON::PP would write inf: text fallback
])
def test_perl_text_fallbacks(lang, code, prefix, ws):
    (entry,) = ok(once(lang, code, ws))
    assert entry["text"].startswith(prefix)


# ---------------------------------------------------------------------------------------
# Logs

@pytest.mark.parametrize("lang,code,stdout,stderr,result", [
    ("python", "import sys\nprint('out 1')\nprint('a\\nb')\nprint('err', file=sys.stderr)\n7",
     ["out 1", "a", "b"], ["err"], [{"text": "7"}]),
    ("javascript",
     "console.log('x', 1, {a: 1}, [1, 's'], 2n, undefined, null, true);"
     "console.info('info'); console.debug('dbg');"
     "console.warn('w', {b: [2]}); console.error('e'); 7",
     ["x 1 {\"a\":1} [1,\"s\"] 2n undefined null true", "info", "dbg"],
     ["w {\"b\":[2]}", "e"], [{"text": "7"}]),
    ("perl", "print \"out 1\\n\"; printf(\"%s\\n\", 'two'); warn \"careful\\n\"; print STDERR \"e2\\n\"; 7",
     ["out 1", "two"], ["careful", "e2"], [{"text": "7"}]),
    ("ruby", "puts 'out 1'; print \"two\\n\"; warn 'careful'; $stderr.puts 'e2'; 7",
     ["out 1", "two"], ["careful", "e2"], [{"text": "7"}]),
])
def test_logs_go_to_stdout_and_stderr(lang, code, stdout, stderr, result, ws):
    resp = once(lang, code, ws)
    assert ok(resp) == result
    assert resp["stdout"] == stdout
    assert resp["stderr"] == stderr


def test_node_console_log_circular_falls_back_to_string(ws):
    resp = once("javascript", "const o = {}; o.o = o; console.log('v', o, () => 1)", ws)
    assert resp["stdout"] == ["v [object Object] () => 1"]


# ---------------------------------------------------------------------------------------
# Errors (logs written before the error are kept)

def test_python_error_traceback(ws):
    resp = once("python", "print('before')\ndef f():\n    raise KeyError('k')\nf()", ws)
    e = err(resp)
    assert resp["stdout"] == ["before"]
    assert e["name"] == "KeyError" and e["message"] == "'k'"
    tb = e["traceback"]
    assert tb[0] == "Traceback (most recent call last):"
    assert '  File "<sandbox>", line 4, in <module>' in tb
    assert '  File "<sandbox>", line 3, in f' in tb
    assert tb[-1] == "KeyError: 'k'"
    assert not any("python_kernel" in line for line in tb)


def test_python_syntax_error(ws):
    e = err(once("python", "1 +", ws))
    assert e["name"] == "SyntaxError"
    assert e["traceback"][0] == "Traceback (most recent call last):"
    assert any('File "<sandbox>", line 1' in line for line in e["traceback"])
    assert not any("ast.py" in line or "python_kernel" in line for line in e["traceback"])


def test_javascript_error(ws):
    resp = once("javascript", "console.log('before');\nfunction f() { throw new TypeError('bad') }\nf()",
                ws)
    e = err(resp)
    assert resp["stdout"] == ["before"]
    assert e["name"] == "TypeError" and e["message"] == "bad"
    assert e["traceback"][0] == "TypeError: bad"
    assert any("<sandbox>:2" in line for line in e["traceback"])
    assert not any("node_kernel" in line or "node:vm" in line for line in e["traceback"])


@pytest.mark.parametrize("code", ["return 1", "const a = await 1; return a"])
def test_javascript_top_level_return_is_syntax_error(code, ws):
    e = err(once("javascript", code, ws))
    assert e["name"] == "SyntaxError"
    assert e["message"] in ("Illegal return statement",
                            "await is only valid in async functions and the top level bodies of modules")
    assert e["traceback"][0].startswith("SyntaxError: ")


def test_javascript_plain_return_message(ws):
    e = err(once("javascript", "console.log(1)\nreturn 5", ws))
    assert (e["name"], e["message"]) == ("SyntaxError", "Illegal return statement")


def test_javascript_throw_non_error(ws):
    assert err(once("javascript", "throw 'str'", ws)) == {
        "name": "Error", "message": "str", "traceback": []}


def test_javascript_async_errors(ws):
    e = err(once("javascript", "setTimeout(() => { throw new RangeError('late') }, 1);\n"
                               "await new Promise(r => setTimeout(r, 200))", ws))
    assert (e["name"], e["message"]) == ("RangeError", "late")
    e = err(once("javascript", "await Promise.reject(new Error('rejected'))", ws))
    assert (e["name"], e["message"]) == ("Error", "rejected")
    e = err(once("javascript", "Promise.reject(new Error('unhandled'))", ws))
    assert (e["name"], e["message"]) == ("Error", "unhandled")


def test_javascript_never_settled_promise(ws):
    resp = once("javascript", "console.log('waiting'); await new Promise(() => {})", ws)
    assert err(resp) == {"name": "Error", "message": NEVER_SETTLED, "traceback": []}
    assert resp["stdout"] == ["waiting"]


def test_javascript_timers_work(ws):
    code = "const t0 = Date.now(); await new Promise(r => setTimeout(r, 20)); Date.now() - t0 >= 15"
    assert ok(once("javascript", code, ws)) == [{"text": "true"}]


def test_perl_errors(ws):
    resp = once("perl", "print \"before\\n\"; die \"boom\\n\"", ws)
    assert err(resp) == {"name": "PerlError", "message": "boom", "traceback": []}
    assert resp["stdout"] == ["before"]
    e = err(once("perl", "die 'at line'", ws))
    assert e["message"] == "at line at <sandbox> line 1."
    e = err(once("perl", "package Oops; sub new { bless {}, shift } package main; die Oops->new", ws))
    assert e["name"] == "Oops" and e["message"].startswith("Oops=HASH(")
    e = err(once("perl", "1 +", ws))
    assert e["name"] == "PerlError" and "syntax error" in e["message"]


def test_perl_exit_ends_the_cell_not_the_kernel(repl):
    k = repl("perl")
    resp = k.run("print \"a\\n\"; exit 0; print \"b\\n\"")
    assert ok(resp) == [] and resp["stdout"] == ["a"]
    assert err(k.run("exit 3"))["message"] == "exit 3"
    assert ok(k.run("1 + 1")) == [{"text": "2"}]


def test_ruby_error(ws):
    resp = once("ruby", "puts 'before'\ndef f\n  raise ArgumentError, 'bad arg'\nend\nf", ws)
    e = err(resp)
    assert resp["stdout"] == ["before"]
    assert (e["name"], e["message"]) == ("ArgumentError", "bad arg")
    assert e["traceback"] == ["<sandbox>:3:in `f'", "<sandbox>:5:in `<main>'"]


@pytest.mark.parametrize("code", ["return 1", "break", "next", "redo", "retry"])
def test_ruby_top_level_jumps_are_local_jump_errors(code, ws):
    assert err(once("ruby", code, ws))["name"] == "LocalJumpError"


# ---------------------------------------------------------------------------------------
# Result limit

@pytest.mark.parametrize("lang,code", [
    ("python", "'x' * 140000"),
    ("javascript", "'x'.repeat(140000)"),
    ("perl", "'x' x 140000"),
    ("ruby", "'x' * 140000"),
])
def test_result_limit(lang, code, ws):
    start = time.monotonic()
    assert err(once(lang, code, ws)) == LIMIT_ERROR
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("lang,code", [
    ("python", "list(range(1000))"),
    ("javascript", "Array.from({length: 1000}, (_, i) => i)"),
    ("perl", "[0 .. 999]"),
    ("ruby", "(0...1000).to_a"),
])
def test_result_limit_counts_json_and_formats_kib(lang, code, ws):
    e = err(once(lang, code, ws, result_limit=2048))
    assert e["message"] == "Result limit exceeded (2 KiB)"
    assert ok(once(lang, code, ws, result_limit=8192))[0]["json"][999] == 999


# ---------------------------------------------------------------------------------------
# Environment and working directory

@pytest.mark.parametrize("lang,code", [
    ("python", "import os, subprocess\n[os.environ.get('FOO'), os.environ.get('HOME'),"
               " subprocess.run(['/bin/sh', '-c', 'echo $FOO'], capture_output=True,"
               " text=True).stdout.strip()]"),
    ("javascript", "[process.env.FOO, process.env.HOME ?? null,"
                   " require('child_process').execSync('echo $FOO').toString().trim()]"),
    ("perl", "my $c = `echo \\$FOO`; chomp $c; [$ENV{FOO}, $ENV{HOME}, $c]"),
    ("ruby", "[ENV['FOO'], ENV['HOME'], `echo $FOO`.chomp]"),
])
def test_env_replaces_the_whole_environment(lang, code, ws):
    resp = once(lang, code, ws, env={"FOO": "b\u00e4r", "PATH": "/usr/bin:/bin"})
    assert ok(resp) == [{"json": ["b\u00e4r", None, "b\u00e4r"]}]


CHDIR = {
    "python": ("import os\nos.chdir({!r})", "import os\nos.getcwd()"),
    "javascript": ("process.chdir({!r})", "process.cwd()"),
    "perl": ("chdir {!r}; undef", "use Cwd; Cwd::getcwd()"),
    "ruby": ("Dir.chdir({!r}); nil", "Dir.pwd"),
}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_cwd_is_applied_and_confined(lang, ws):
    sub = os.path.join(ws, "sub")
    os.makedirs(os.path.join(sub, "inner"))
    chdir, getcwd = CHDIR[lang]
    (entry,) = ok(once(lang, getcwd, ws, cwd=sub))
    assert sub in entry["text"]
    assert once(lang, "1", ws, cwd=sub)["cwd"] == sub
    assert once(lang, chdir.format("inner"), ws, cwd=sub)["cwd"] == os.path.join(sub, "inner")
    assert once(lang, chdir.format("/"), ws, cwd=sub)["cwd"] == ws
    assert once(lang, chdir.format(".."), ws, cwd=ws)["cwd"] == ws


# ---------------------------------------------------------------------------------------
# JavaScript: top-level await and TypeScript

@pytest.mark.parametrize("code,expected", [
    ("const x = await Promise.resolve(41); x + 1", [{"text": "42"}]),
    ("console.log('s'); await Promise.resolve('v')", [{"text": "'v'"}]),
    ("for await (const v of [Promise.resolve(1)]) {}; const y = 2", []),
    ("const {a, b: [c]} = await Promise.resolve({a: 1, b: [2]}); ({a, c})", [{"json": {"a": 1, "c": 2}}]),
])
def test_javascript_top_level_await(code, expected, ws):
    assert ok(once("javascript", code, ws)) == expected


@pytest.mark.parametrize("code,expected", [
    ("const n: number = 41;\nn + 1", [{"text": "42"}]),
    ("interface P {x:number}; const p: P = {x:1}; p", [{"json": {"x": 1}}]),
    ("const v = (await Promise.resolve(6)) as number; v * 7", [{"text": "42"}]),
    ("enum E { A, B }\nE.B", [{"text": "1"}]),
    ("12**2", [{"text": "144"}]),
])
def test_typescript(code, expected, ws):
    assert ok(once("javascript", code, ws, typescript=True)) == expected


def test_typescript_errors(ws):
    e = err(once("javascript", "const x: = 1", ws, typescript=True))
    assert e["name"] == "SyntaxError" and e["traceback"][0].startswith("SyntaxError: ")
    e = err(once("javascript", "const n: number = 1", ws))  # no typescript flag: plain JS
    assert e["name"] == "SyntaxError"


# ---------------------------------------------------------------------------------------
# REPL mode

def test_python_repl(repl, ws):
    k = repl("python")
    assert ok(k.run("x = 5\ndef f():\n    return x * 2")) == []
    assert ok(k.run("f()")) == [{"text": "10"}]
    assert err(k.run("y = 1\nraise ValueError('v')"))["name"] == "ValueError"
    assert ok(k.run("y + x")) == [{"text": "6"}]
    assert ok(k.run("__name__")) == [{"text": "'__main__'"}]
    assert ok(k.run("z = 3", replay=True)) == []
    assert ok(k.run("z")) == [{"text": "3"}]
    # The workspace root is importable from any cwd.
    with open(os.path.join(ws, "mylib.py"), "w") as fh:
        fh.write("VALUE = 7\n")
    os.mkdir(os.path.join(ws, "sub"))
    assert ok(k.run("import mylib\nmylib.VALUE", cwd=os.path.join(ws, "sub"))) == [{"text": "7"}]
    assert k.close() == 0


def test_python_reseed(repl):
    k = repl("python")
    ok(k.run("import random\nrandom.seed(42)\na = random.random()\nrandom.seed(42)"))
    assert ok(k.run("random.random() == a", reseed=True)) == [{"text": "False"}]
    ok(k.run("random.seed(42)"))
    assert ok(k.run("random.random() == a")) == [{"text": "True"}]


def test_javascript_repl_declarations_persist(repl):
    k = repl("javascript")
    assert ok(k.run("let a = 1; const b = 2; class C { m() { return 3 } }\n"
                    "function f() { return 4 }; var v = 5")) == []
    assert ok(k.run("a + b + new C().m() + f() + v")) == [{"text": "15"}]
    # Cells with top-level await: declarations are hoisted to globals.
    assert ok(k.run("const t = await Promise.resolve(10); let u = 20;\n"
                    "function g() { return t + u }; class D {}; if (true) { var w = 9 }")) == []
    assert ok(k.run("[t, u, g(), typeof D, w]")) == [{"json": [10, 20, 30, "function", 9]}]
    assert ok(k.run("const r = await Promise.resolve(a + t); r")) == [{"text": "11"}]
    assert ok(k.run("r * 2")) == [{"text": "22"}]
    assert ok(k.run("'use strict';\nclass K { v() { return kf() } }\nfunction kf() { return 1 }\n"
                    "await 0; typeof kf")) == [{"text": "'function'"}]
    assert ok(k.run("new K().v() + kf()")) == [{"text": "2"}]


def test_javascript_repl_errors_keep_globals(repl):
    k = repl("javascript")
    assert err(k.run("globalThis.kept = 1; let also = 2; throw new Error('boom')"))["message"] == "boom"
    assert ok(k.run("kept + also")) == [{"text": "3"}]
    assert err(k.run("await new Promise(() => {})"))["message"] == NEVER_SETTLED
    assert err(k.run("const p = await Promise.resolve(1); null.x"))["name"] == "TypeError"
    assert ok(k.run("p + kept", replay=True)) == [{"text": "2"}]
    assert k.close() == 0


def test_javascript_repl_fs_global_and_import(repl, ws):
    k = repl("javascript")
    sub = os.path.join(ws, "sub")
    os.mkdir(sub)
    code = ("fs.writeFileSync('lib.mjs', 'export const k = 40; export default () => 2');\n"
            "fs.mkdirSync('d'); fs.readdirSync('.').sort()")
    assert ok(k.run(code, cwd=sub)) == [{"json": ["d", "lib.mjs"]}]
    assert ok(k.run("const m = await import('./lib.mjs'); m.k + m.default()", cwd=sub)) == [
        {"text": "42"}]
    assert ok(k.run("m.k")) == [{"text": "40"}]


def test_javascript_repl_typescript(repl):
    k = repl("javascript")
    assert ok(k.run("const n: number = 41;", typescript=True)) == []
    assert ok(k.run("n + 1", typescript=True)) == [{"text": "42"}]


def test_perl_repl(repl):
    k = repl("perl")
    assert ok(k.run("our $x = 5; my $m = 9; sub dbl { $_[0] * 2 } undef")) == []
    assert ok(k.run("dbl($x)")) == [{"text": "10"}]
    assert ok(k.run("defined $m ? 'yes' : 'no'")) == [{"text": "no"}]
    assert err(k.run("our $y = 1; die 'oops'"))["message"] == "oops at <sandbox> line 1."
    assert ok(k.run("$y + $x")) == [{"text": "6"}]
    assert ok(k.run("our $z = 3; undef", replay=True)) == []
    assert ok(k.run("$z")) == [{"text": "3"}]
    assert k.close() == 0


def test_ruby_repl(repl):
    k = repl("ruby")
    assert ok(k.run("x = 5; def dbl(v) = v * 2; K = 10; nil")) == []
    assert ok(k.run("dbl(x) + K")) == [{"text": "20"}]
    assert err(k.run("y = 1; raise 'oops'"))["message"] == "oops"
    assert ok(k.run("y + x")) == [{"text": "6"}]
    assert ok(k.run("class Foo; def hi = 'hi'; end; nil", replay=True)) == []
    assert ok(k.run("Foo.new.hi")) == [{"text": "\"hi\""}]
    assert k.close() == 0


# ---------------------------------------------------------------------------------------
# The daemon's request shape (compact JSON, raw UTF-8: the Perl kernel's fast path, which
# must decode exactly like JSON::PP) and an environment that changes between requests (the
# kernels skip rewriting an environment that already is the requested one).

ESCAPES = {
    "perl": 'my $s = "\u00e9\u20ac\t\\\\\\"/";\n[$s, length($s), $ENV{FOO}, join(",", sort keys %ENV)]',
    "javascript": 'var s = "\u00e9\u20ac\t\\\\\\"/";\n[s, s.length, process.env.FOO ?? null,'
                  ' Object.keys(process.env).join(",")]',
    "ruby": 's = "\u00e9\u20ac\t\\\\\\"/"\n[s, s.bytesize, ENV["FOO"], ENV.keys.join(",")]',
}


def send_raw(k, line):
    k.sock.sendall(line + b"\n")
    resp = k._read_line()
    k._drain()
    k.out = {"stdout": b"", "stderr": b""}
    return resp


@pytest.mark.parametrize("lang", sorted(ESCAPES))
def test_compact_requests_with_escapes_and_changing_env(lang, repl):
    k = repl(lang)
    code = ESCAPES[lang]
    length = 6 if lang == "javascript" else 9  # characters / UTF-8 bytes
    sorted_keys = lang == "perl"
    for env, foo, keys in [({"FOO": "1", "PATH": "/usr/bin:/bin"}, "1", "FOO,PATH"),
                           ({"PATH": "/usr/bin:/bin", "FOO": "2"}, "2", "PATH,FOO"),
                           ({"PATH": "/usr/bin:/bin", "FOO": "2"}, "2", "PATH,FOO"),
                           ({}, None, "")]:
        req = {"code": code, "env": env, "cwd": k.workspace, "resultLimit": 65536,
               "typescript": False, "replay": False}
        want = [{"json": ["\u00e9\u20ac\t\\\"/", length, foo, "FOO,PATH" if keys and sorted_keys else keys]}]
        lines = [json.dumps(req, separators=(",", ":"), ensure_ascii=False).encode(),
                 json.dumps(req, separators=(",", ":")).encode().replace(b"/", b"\\/"),
                 json.dumps(req).encode()]
        for line in lines:
            assert ok(send_raw(k, line)) == want, line
    # Shapes the fast path leaves to JSON::PP: still answered, or refused as bad requests.
    assert ok(send_raw(k, b'{"code":"1+1","resultLimit":6.5e4,"env":{"A":"\\ud83d\\ude00"}}')) == [{"text": "2"}]
    assert err(send_raw(k, b'{"code":"1+1",}'))["name"] == "EngineError"
