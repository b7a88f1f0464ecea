"""The node kernel's cheap cell path (issue 13) keeps every result the full path gives.

A cell that is one expression skips acorn: V8 checks that the code and "(" code "\\n)" both
compile, and what starts a statement of another kind ({, function, async, class, let, a
comment or <!-- that could hide one) takes the full path. The boot warm-up reads sample
requests through the request path and answers into /dev/null. These tests pin what those
two shortcuts must not change: the result of the last statement of each kind, declarations
across cells, top-level await, TypeScript, errors and their line numbers, output order, and
a once-mode kernel that the warm-up left clean (globals, env, cwd).

Run: /usr/bin/python3 -m pytest -q tests/kernels
NODE_KERNEL_DIR=<dir> runs them against another kernel (e.g. an older one: same answers).
"""
import os

import pytest

from test_kernels import KERNEL_DIR, Kernel

DIR = os.environ.get("NODE_KERNEL_DIR", KERNEL_DIR)


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    return os.path.realpath(str(root))


@pytest.fixture
def repl(ws):
    kern = Kernel("javascript", "repl", ws, kernel_dir=DIR)
    assert kern.ready == {"ready": True}
    yield kern
    if kern.proc.poll() is None:
        kern.close()


def once(ws, code, exit_status=0, **kw):
    """One request to a fresh once-mode kernel, as a pooled stateless execution."""
    kern = Kernel("javascript", "once", ws, kernel_dir=DIR)
    try:
        assert kern.ready == {"ready": True}
        resp = kern.run(code, **kw)
    finally:
        rc = kern.close()
    assert rc == exit_status, resp
    return resp


def results(resp):
    assert resp["error"] is None, resp
    return resp["results"]


def error(resp):
    assert resp["error"] is not None and resp["results"] == [], resp
    return resp["error"]


# What the last statement is decides whether there is a result: an expression statement
# gives its value, any other statement none (even one with a completion value).
@pytest.mark.parametrize("code,expected", [
    # one expression: the fast path
    ("1+1", [{"text": "2"}]),
    ("  42  \n", [{"text": "42"}]),
    ("x = 5", [{"text": "5"}]),
    ("'use strict'", [{"text": "'use strict'"}]),
    ("-1", [{"text": "-1"}]),
    ("[1, 2]", [{"json": [1, 2]}]),
    ("({a: 1})", [{"json": {"a": 1}}]),
    ("(1, 2)", [{"text": "2"}]),
    ("`t${1}`", [{"text": "'t1'"}]),
    ("void 0", []),
    ("undefined", []),
    ("async () => 1", [{"text": "async () => 1"}]),
    ("(function f() { return 1 })", [{"text": "function f() { return 1 }"}]),
    ("(class B {})", [{"text": "class B {}"}]),
    ("functionality = 3", [{"text": "3"}]),
    ("let = 7", [{"text": "7"}]),
    ("1 // c", [{"text": "1"}]),
    ("1\u2028+ 2", [{"text": "3"}]),
    ("Promise.resolve(5)", [{"json": {}}]),
    # statements that would be expressions inside "( )": no result
    ("{}", []),
    ("{a: 1}", []),
    ("{ 5 }", []),
    ("function f() { return 1 }", []),
    ("async function g() {}", []),
    ("function* gen() {}", []),
    ("class A {}", []),
    ("let [a] = [1]", []),
    ("let\nq = 1", []),
    ("/* c */ function f() {}", []),
    ("// c\nclass A {}", []),
    ("<!-- c\nfunction f() {}", []),
    ("-->c\nfunction f() {}", []),
    ("/* c */ { 5 }", []),
    ("// c\n{a: 1}", []),
    ("<!-- c\n{ 5 }", []),
    # other statements: no result, even with a completion value
    ("let z = 5", []),
    ("var v = 1", []),
    ("const c = 1", []),
    ("if (true) { 5 }", []),
    ("for (let i = 0; i < 2; i++) i", []),
    ("do 3; while (false)", []),
    ("l: 1", []),
    ("1;;", []),
    ("", []),
    ("   \n", []),
    # several statements: the last one's value
    ("1; 2", [{"text": "2"}]),
    ("1\n2", [{"text": "2"}]),
    ("1;", [{"text": "1"}]),
    ("{}\n+1", [{"text": "1"}]),
    ("/* c */ 1", [{"text": "1"}]),
    ("<!-- c\n1", [{"text": "1"}]),
    ("-->c\n1", [{"text": "1"}]),
    ("/re/.source", [{"text": "'re'"}]),
    ("#!/usr/bin/node\n1", [{"text": "1"}]),
    ("\ufeff1", [{"text": "1"}]),
    ("\\u006cet = 1", [{"text": "1"}]),
    ("var awaitY = 4; awaitY", [{"text": "4"}]),
])
@pytest.mark.parametrize("typescript", [False, True])
def test_result_is_the_last_expression_statements(ws, code, expected, typescript):
    assert results(once(ws, code, typescript=typescript)) == expected


@pytest.mark.parametrize("code,name,message,where", [
    ("nope + 1", "ReferenceError", "nope is not defined", ["    at <sandbox>:1:1"]),
    ("(1 +\n2 +\nnope)", "ReferenceError", "nope is not defined", ["    at <sandbox>:3:1"]),
    ("null.x", "TypeError", "Cannot read properties of null (reading 'x')", ["    at <sandbox>:1:6"]),
    ("[1].map(v => { throw new TypeError('in ' + v) })", "TypeError", "in 1",
     ["    at <sandbox>:1:22", "    at Array.map (<anonymous>)", "    at <sandbox>:1:5"]),
    ("Promise.reject(new Error('unhandled'))", "Error", "unhandled", ["    at <sandbox>:1:16"]),
    ("(async () => { throw new Error('late') })()", "Error", "late",
     ["    at <sandbox>:1:22", "    at <sandbox>:1:42"]),
    ("1\n+\nnope", "ReferenceError", "nope is not defined", ["    at <sandbox>:3:1"]),
    ("1 +", "SyntaxError", "Unexpected end of input", ["    at <sandbox>:1"]),
    ("1) + (2", "SyntaxError", "Unexpected token ')'", ["    at <sandbox>:1"]),
    ("1) ; (2", "SyntaxError", "Unexpected token ')'", ["    at <sandbox>:1"]),
    ("x\n++y", "ReferenceError", "x is not defined", ["    at <sandbox>:1:1"]),
    ("a\n=>1", "SyntaxError", "Unexpected token '=>'", ["    at <sandbox>:2"]),
    ("let", "ReferenceError", "let is not defined", ["    at <sandbox>:1:1"]),
    ("new.target", "SyntaxError", "new.target expression is not allowed here", ["    at <sandbox>:1"]),
    ("return 1", "SyntaxError", "Illegal return statement", ["    at <sandbox>:1"]),
])
def test_errors_and_their_lines(ws, code, name, message, where):
    e = error(once(ws, code))
    assert e == {"name": name, "message": message, "traceback": [f"{name}: {message}", *where]}


def test_typescript_still_goes_through_esbuild(ws):
    assert results(once(ws, "(1 as number) + 1", typescript=True)) == [{"text": "2"}]
    assert results(once(ws, "const n: number = 1; n", typescript=True)) == [{"text": "1"}]
    e = error(once(ws, "(1 as number) + 1"))
    assert (e["name"], e["message"]) == ("SyntaxError", "Unexpected identifier 'as'")


def test_output_order_and_flushing(ws):
    resp = once(ws, "console.log('a'), console.error('b'), 3")
    assert (results(resp), resp["stdout"], resp["stderr"]) == ([{"text": "3"}], ["a"], ["b"])
    resp = once(ws, "[console.log('x'), process.stdout.write('y\\n'), console.log('z')]")
    assert (results(resp), resp["stdout"]) == ([{"json": [None, True, None]}], ["x", "y", "z"])
    resp = once(ws, "process.stdout.write('partial')")
    assert (results(resp), resp["stdout"]) == ([{"text": "true"}], ["partial"])


def test_exit_in_an_expression(ws):
    assert results(once(ws, "process.exit(0)")) == []
    e = error(once(ws, "process.exit(3)", exit_status=3))
    assert e == {"name": "Error", "message": "process.exit(3) called", "traceback": []}


def test_await_and_import_take_the_full_path(ws):
    assert results(once(ws, "await 1")) == [{"text": "1"}]
    assert results(once(ws, "(await Promise.resolve(20)) + 1")) == [{"text": "21"}]
    assert results(once(ws, "awaitx = 3")) == [{"text": "3"}]
    code = "import('fs').then(m => typeof m.readFileSync)"
    assert results(once(ws, code)) == [{"json": {}}]
    assert results(once(ws, f"await {code}")) == [{"text": "'function'"}]


def test_the_warm_up_leaves_nothing_behind(ws):
    code = "Object.keys(globalThis).filter(k => !BUILTIN.includes(k))".replace(
        "BUILTIN", "['global', 'clearImmediate', 'setImmediate', 'clearInterval', 'clearTimeout',"
        " 'setInterval', 'setTimeout', 'queueMicrotask', 'structuredClone', 'atob', 'btoa',"
        " 'performance', 'fetch', 'crypto', 'navigator']")
    assert results(once(ws, code)) == [{"json": []}]
    for env in ({}, {"A": "1"}, {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}):
        assert results(once(ws, "process.env", env=env)) == [{"json": env}]
    sub = os.path.join(ws, "sub")
    os.mkdir(sub)
    resp = once(ws, "process.cwd()", cwd=sub)
    assert (results(resp), resp["cwd"]) == ([{"text": repr(sub)}], sub)


def test_declarations_across_cells(repl):
    # declarations on the full path, read on the fast path, and back
    assert results(repl.run("let a = 1; const b = 2; class C { m() { return 3 } }\n"
                            "function f() { return 4 }; var v = 5")) == []
    assert results(repl.run("a + b + new C().m() + f() + v")) == [{"text": "15"}]
    assert results(repl.run("x = a * 10")) == [{"text": "10"}]
    assert results(repl.run("x + 1")) == [{"text": "11"}]
    assert results(repl.run("let y = x; y")) == [{"text": "10"}]
    e = error(repl.run("let a = 9"))
    assert (e["name"], e["message"]) == ("SyntaxError", "Identifier 'a' has already been declared")
    e = error(repl.run("b = 3"))
    assert (e["name"], e["message"]) == ("TypeError", "Assignment to constant variable.")
    assert results(repl.run("[a, b]")) == [{"json": [1, 2]}]
    # top-level await hoists declarations to globals; the next fast-path cell sees them
    assert results(repl.run("const t = await Promise.resolve(7); function g() { return t }")) == []
    assert results(repl.run("g() + t")) == [{"text": "14"}]
    assert results(repl.run("class D {}")) == []
    assert results(repl.run("typeof D")) == [{"text": "'function'"}]
    assert results(repl.run("function h() { return 'h' }")) == []
    assert results(repl.run("h()")) == [{"text": "'h'"}]
    # an error in a fast-path cell keeps what earlier cells made
    assert error(repl.run("nope"))["name"] == "ReferenceError"
    assert results(repl.run("[x, g()]")) == [{"json": [10, 7]}]
    assert repl.close() == 0


# A pool member starts in the workspace, and its request asks for that cwd and an empty env,
# as the warm-up's samples do: the kernel then skips the env check and the chdir (nothing
# has changed them since). What the guest sees must be what the general path gives.
def test_a_request_like_the_warm_ups_sees_the_general_paths_env_and_cwd(ws):
    sub = os.path.join(ws, "sub")
    os.mkdir(sub)
    code = "[process.cwd(), process.env]"
    for env, cwd in (({}, ws), ({"A": "1"}, ws), ({}, sub)):
        kern = Kernel("javascript", "once", ws, kernel_dir=DIR, cwd=ws)
        try:
            assert kern.ready == {"ready": True}
            resp = kern.run(code, env=env, cwd=cwd)
        finally:
            kern.close()
        assert (results(resp), resp["cwd"]) == ([{"json": [cwd, env]}], cwd)


def test_a_cell_after_guest_code_gets_its_env_and_cwd_back(ws):
    sub = os.path.join(ws, "sub")
    os.mkdir(sub)
    kern = Kernel("javascript", "repl", ws, kernel_dir=DIR, cwd=ws)
    try:
        assert kern.ready == {"ready": True}
        assert results(kern.run("process.env.X = '1'; process.chdir('sub'); 2")) == [{"text": "2"}]
        resp = kern.run("[process.cwd(), process.env]", env={}, cwd=ws)
        assert (results(resp), resp["cwd"]) == ([{"json": [ws, {}]}], ws)
        # changed by a callback after the cell's code returned
        assert results(kern.run("await new Promise(r => setTimeout(() => {"
                                " process.env.Y = '2'; process.chdir('sub'); r() }, 0)); 3")) == [{"text": "3"}]
        resp = kern.run("[process.cwd(), process.env]", env={}, cwd=ws)
        assert (results(resp), resp["cwd"]) == ([{"json": [ws, {}]}], ws)
    finally:
        kern.close()


# Request lines reach the kernel in one read, several per read, or split across reads
# (also inside a UTF-8 sequence): each is answered once and whole.
def test_request_lines_however_they_are_split(ws):
    import json
    import time
    kern = Kernel("javascript", "repl", ws, kernel_dir=DIR)
    try:
        assert kern.ready == {"ready": True}

        def line(code):
            return json.dumps({"code": code, "env": {}, "cwd": ws, "resultLimit": 65536,
                               "typescript": False, "replay": False}, ensure_ascii=False).encode() + b"\n"
        kern.sock.sendall(line("'a1'") + line("'a2'") + line("'a3'"))
        assert [kern._read_line()["results"] for _ in range(3)] == \
            [[{"text": "'a1'"}], [{"text": "'a2'"}], [{"text": "'a3'"}]]
        two = line("'\u00e9\u20ac'") + line("'b2'")
        cut = two.index("\u20ac".encode()) + 1
        kern.sock.sendall(two[:cut])
        time.sleep(0.05)
        kern.sock.sendall(two[cut:])
        assert [kern._read_line()["results"] for _ in range(2)] == \
            [[{"text": "'\u00e9\u20ac'"}], [{"text": "'b2'"}]]
        assert results(kern.run("'c'")) == [{"text": "'c'"}]
    finally:
        kern.close()
