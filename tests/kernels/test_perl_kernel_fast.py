"""The Perl kernel's fast paths pinned against its general ones.

A stateless request from the daemon has one exact shape (compact JSON, the fields in
exec_build_request's order, env {}): the kernel decodes it with daemon_request, or, in a pool
member, as its warm-up's line with other code (like_warmup; plain_code and plain_answer when
the code's literal and the answer are plain ASCII). Other compact
objects go to fast_members, anything else to JSON::PP. All three must give the same answer,
output and error text for the same code; so must the result-size check (utf8_length) at the
limit, and the environment a warmed-up member shows the guest.

Run: /usr/bin/python3 -m pytest -q tests/kernels
"""
import json
import re

import pytest

from test_kernels import Kernel, ws  # noqa: F401  (ws is a fixture)

SNIPPETS = [
    "1+1",
    "'caf\u00e9'",
    '"line1\\nline2\\t\\"q\\"\\\\"',
    '"\\x{263a}\\x{1F600}"',
    '"\\xff\\xfe"',            # not UTF-8: Latin-1 characters
    "undef",
    "(1, 2, 3)",
    "[1, 'x', undef, {a => [2]}]",
    "{b => 1, a => 'caf\u00e9'}",
    "9**9**9",
    "sub { 1 }",
    "my $s = \"\u00e9\u20ac\";\nlength($s) . \"\\n\" . $s",
    "die \"boom\\n\"",
    "die 'boom'",
    "\n\ndie {code => 1}",
    "warn \"careful\\n\"; warn 'no newline'; 3",
    "print \"out\\n\"; print STDERR \"err\\n\"; printf('%s', 'x'); 4",
    "exit 3",
    "exit 0",
    "exit",
    "1 +",
    "eval 'die 1'; $@",
    "eval 'eval q{die 2}; $@'",
    "[$0, scalar(@ARGV), join(',', sort keys %ENV)]",
    "use Cwd; Cwd::getcwd() =~ m{/workspace\\z} ? 1 : 0",
    "chdir '/'; 1",
    "$_ = 5; [$_, $@, defined $. ? 1 : 0]",
]


def shapes(code, cwd, limit=65536):
    """The same request as the daemon writes it, as another compact object, as pretty JSON."""
    daemon = ('{"code":%s,"env":{},"cwd":%s,"resultLimit":%d,"typescript":false,"replay":false,'
              '"reseed":true}' % (json.dumps(code, ensure_ascii=False), json.dumps(cwd), limit))
    compact = json.dumps({"resultLimit": limit, "cwd": cwd, "code": code, "env": {}, "reseed": True},
                         separators=(",", ":"), ensure_ascii=False)
    pretty = json.dumps({"code": code, "env": {}, "cwd": cwd, "resultLimit": limit, "reseed": True})
    return [s.encode() for s in (daemon, compact, pretty)]


def run_line(ws, line, warmup=True, warmup_limit=65536):
    """A once-mode kernel answers one raw request line; its output is read after EOF on fd 3
    has ended it (it waits for that after answering). Warmed up, it is a pool member: a
    template's kernel (mode zygote; without the fork server's preload it serves fd 3 itself)
    given the daemon's warm-up first."""
    k = Kernel("perl", "zygote" if warmup else "once", ws)
    try:
        assert k.ready == {"ready": True}
        if warmup:
            warm = ('{"code":"1+1","env":{},"cwd":%s,"resultLimit":%d,"typescript":false,'
                    '"replay":false,"warmup":true}' % (json.dumps(k.workspace), warmup_limit))
            k.sock.sendall(warm.encode() + b"\n")
            k._read_line()
        k.sock.sendall(line + b"\n")
        resp = k._read_line()
    finally:
        k.close()
    resp["stdout"], resp["stderr"] = k.out["stdout"], k.out["stderr"]
    return resp


@pytest.mark.parametrize("code", SNIPPETS)
def test_request_shapes_give_the_same_answer(code, ws):  # noqa: F811
    # Addresses (HASH(0x…), CODE(0x…)) differ between processes.
    # A warmed member's request (the warm-up's line, other code: like_warmup), the same line
    # in a kernel without a warm-up (daemon_request), the other two shapes.
    lines = shapes(code, ws)
    runs = [run_line(ws, lines[0])] + [run_line(ws, line, warmup=False) for line in lines]
    answers = [re.sub(r"0x[0-9a-f]+", "0x", json.dumps(r, default=repr)) for r in runs]
    assert answers[0] == answers[1] == answers[2] == answers[3], code
    assert json.loads(answers[0])["cwd"] == ws or code.startswith("chdir")


@pytest.mark.parametrize("code,size", [
    ("'\u00e9' x 5", 10),          # characters from UTF-8 source: 2 bytes each
    ('"\\xff" x 5', 10),           # Latin-1 characters of a byte string: 2 bytes each
    ('"\\x{263a}" x 3', 9),
    ("'abc' x 3", 9),
    ("[('\u00e9') x 4]", len(json.dumps(["\u00e9"] * 4, separators=(",", ":"), ensure_ascii=False).encode())),
])
def test_result_limit_counts_utf8_bytes(code, size, ws):  # noqa: F811
    for limit, fits in ((size, True), (size - 1, False)):
        for line in shapes(code, ws, limit)[::2]:
            resp = run_line(ws, line)
            if fits:
                assert resp["error"] is None and len(resp["results"]) == 1, (code, limit, resp)
            else:
                assert resp["results"] == [] and resp["error"]["name"] == "ExecutionLimitError", (code, limit)
                assert resp["error"]["message"] == "Result limit exceeded (%d bytes)" % limit


def test_warmed_member_request_elsewhere(ws):  # noqa: F811
    """A request that differs from the warm-up in more than the code (its cwd) is decoded in
    full, and the member goes there (the warm-up's cwd is kept only for the same one)."""
    import os
    os.makedirs(os.path.join(ws, "sub"), exist_ok=True)
    line = shapes("use Cwd; Cwd::getcwd()", ws + "/sub")[0]
    resp = run_line(ws, line)
    assert resp["results"] == [{"text": ws + "/sub"}] and resp["cwd"] == ws + "/sub", resp
    resp = run_line(ws, shapes("use Cwd; Cwd::getcwd()", ws, limit=4)[0])
    assert resp["error"]["name"] == "ExecutionLimitError", resp


def test_warmed_member_env(ws):  # noqa: F811
    """The warm-up empties the boot environment; a request's env replaces it either way."""
    code = "join(',', map { \"$_=$ENV{$_}\" } sort keys %ENV)"
    for warmup in (True, False):
        resp = run_line(ws, shapes(code, ws)[0], warmup)
        assert resp["results"] == [{"text": ""}], resp
        line = json.dumps({"code": code, "env": {"B": "2", "A": "\u00e9"}, "cwd": ws}).encode()
        resp = run_line(ws, line, warmup)
        assert resp["results"] == [{"text": "A=\u00e9,B=2"}], resp


def test_repl_cells_find_at_empty_after_any_result(ws):  # noqa: F811
    """A plain result is mapped without an eval: the next cell still starts with $@ empty."""
    k = Kernel("perl", "repl", ws)
    try:
        assert k.ready == {"ready": True}
        for code in ("[9**9**9]", "7", "undef", "die 'x'", "'s'"):
            k.run(code)
            assert k.run("$@")["results"] == [{"text": ""}], code
    finally:
        k.close()


def test_a_line_like_the_warmup_with_more_between_is_judged_whole(ws):  # noqa: F811
    """like_warmup takes a line only when the code's literal ends where the warm-up's tail
    starts: anything between goes to the general decoders (here: not JSON at all)."""
    tail = shapes("1+1", ws)[0][len(b'{"code":"1+1"'):]
    resp = run_line(ws, b'{"code":"2"xx' + tail)
    assert resp["results"] == [] and resp["error"]["name"] == "EngineError", resp
    assert resp["error"]["message"].startswith("bad request"), resp
    resp = run_line(ws, b'{"code":"2"' + tail)
    assert resp["results"] == [{"text": "2"}] and resp["error"] is None, resp


@pytest.mark.parametrize("limit", ["7x", "-5", "1.5", " 7", "", "\u0667"])
def test_a_limit_that_is_not_all_digits_gives_the_default(limit, ws):  # noqa: F811
    line = json.dumps({"code": "'a' x 100", "env": {}, "cwd": ws, "resultLimit": limit}).encode()
    resp = run_line(ws, line)
    assert resp["error"] is None and resp["results"] == [{"text": "a" * 100}], (limit, resp)
    line = json.dumps({"code": "'a' x 100", "env": {}, "cwd": ws, "resultLimit": "99"}).encode()
    assert run_line(ws, line)["error"]["name"] == "ExecutionLimitError"


# ASCII code without escapes in its literal: a warmed member takes the plain path for these
# (plain_code), and answers from its prebuilt line only for a plain ASCII text from the cwd
# its warm-up left (plain_answer); everything else falls back to the general answer.
PLAIN_SNIPPETS = [
    "2",
    "'it' . 's'",
    "chr(34) . 'q'",           # a quote in the text: escaped by the general answer
    "chr(92)",
    "'a' . chr(10) . 'b'",
    "chr(127)",
    "chr(233)",                # Latin-1 character
    "chr(0x263a)",             # a wide character (utf8 string)
    "my $s = 'x'; utf8::upgrade($s); $s",
    "1/3",
    "-0.0",
    "''",
    "print 'out'; print STDERR 'err'; 5",
    "my $p = fork(); if (!$p) { print 'child'; exit 0 } waitpid($p, 0); 7",
    "chdir '/tmp'; 6",
    "chdir '..'; 6",
    "mkdir 'sub'; chdir 'sub'; 6",
    "$SIG{__DIE__} = sub { print 'hook' }; die 'x'",
    "exit 0",
    "exit 2",
    "bless {}, 'Foo'",
    "*STDOUT",
    "[map { $_ * 2 } 1..3]",
]


@pytest.mark.parametrize("code", PLAIN_SNIPPETS)
def test_plain_path_answers_as_the_general_path(code, ws):  # noqa: F811
    line = shapes(code, ws)[0]
    warmed, cold = run_line(ws, line), run_line(ws, line, warmup=False)
    answers = [re.sub(r"0x[0-9a-f]+", "0x", json.dumps(r, default=repr)) for r in (warmed, cold)]
    assert answers[0] == answers[1], code


@pytest.mark.parametrize("code,size", [("'a' x 9", 9), ("99 x 3", 6), ("chr(233) x 3", 6)])
def test_plain_path_keeps_the_result_limit(code, size, ws):  # noqa: F811
    """The warm-up asked for the same limit, so the request is its line with other code."""
    for limit, fits in ((size, True), (size - 1, False)):
        resp = run_line(ws, shapes(code, ws, limit)[0], warmup_limit=limit)
        if fits:
            assert resp["error"] is None and len(resp["results"]) == 1, (code, limit, resp)
        else:
            assert resp["results"] == [] and resp["error"]["name"] == "ExecutionLimitError", (code, limit)
