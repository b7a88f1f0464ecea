"""The runtime facade (seed 000): routes, validation order, error shapes,
result mapping per language, env vars, TypeScript and concurrency."""
import concurrent.futures
import json

import pytest

from conftest import text_of


def assert_error(status, body, headers, code, http_status, message=None):
    assert status == http_status, body
    assert body["code"] == code
    assert body["httpStatus"] == http_status
    assert isinstance(body["context"], dict)
    assert body["timestamp"].endswith("Z")
    assert headers.get("cache-control") == "no-store"
    if message is not None:
        assert message in body["message"], body["message"]


def test_health_and_ready(daemon):
    status, body, headers = daemon.get("/health")
    assert status == 200 and body == {"status": "ok", "ok": True}  # one /health for the runtime API and the bridge
    status, body, _ = daemon.get("/ready")
    assert status == 200 and body["status"] == "ready"


def test_readme_example_factorial(daemon):
    res = daemon.execute("python", "import math\nmath.factorial(20)")
    assert res["results"] == [{"text": "2432902008176640000"}]
    assert res["language"] == "python"
    assert res["engine"].startswith("CPython 3")
    assert res["logs"] == {"stdout": [], "stderr": []}
    assert isinstance(res["durationMs"], float)
    usage = res["usage"]
    assert usage["fuelLimit"] == 2000 * 1000
    # A trivial cell can read as 0: its whole run may fit in one scheduler
    # slice that the cgroup has not accounted yet when the answer arrives
    # (seen once under ASan). CPU-heavy runs are counted (test_limits.py).
    assert 0 <= usage["fuelConsumed"] <= usage["fuelLimit"]
    assert usage["memoryBytes"] > 0


@pytest.mark.parametrize("lang", ["javascript", "python", "perl", "ruby"])
def test_twelve_squared_every_language(daemon, lang):
    res = daemon.execute(lang, "12**2")
    assert res["results"] == [{"text": "144"}]
    assert res["language"] == lang


def test_bare_execute_is_javascript(daemon):
    status, res, _ = daemon.post("/execute", {"code": "'a' + 'b'"})
    assert status == 200
    assert res["language"] == "javascript"
    assert res["results"] == [{"text": "'ab'"}]


MAPPING = [
    # JavaScript
    ("javascript", "'hi'", [{"text": "'hi'"}]),
    ("javascript", "\"it's\"", [{"text": "'it\\'s'"}]),
    ("javascript", "null", [{"text": "null"}]),
    ("javascript", "undefined", []),
    ("javascript", "123n", [{"text": "123n"}]),
    ("javascript", "0/0", [{"text": "NaN"}]),
    ("javascript", "true", [{"text": "true"}]),
    ("javascript", "({a: 1, b: [1, 2]})", [{"json": {"a": 1, "b": [1, 2]}}]),
    ("javascript", "[1, 'x', null]", [{"json": [1, "x", None]}]),
    ("javascript", "const x = await Promise.resolve(41); x + 1", [{"text": "42"}]),
    # Python
    ("python", "'hi'", [{"text": "'hi'"}]),
    ("python", "None", []),
    ("python", "True", [{"text": "True"}]),
    ("python", "(1, 2)", [{"text": "(1, 2)"}]),
    ("python", "{'a': [1, 2]}", [{"json": {"a": [1, 2]}}]),
    ("python", "[1, 'x', None]", [{"json": [1, "x", None]}]),
    ("python", "[float('nan')]", [{"text": "[nan]"}]),
    ("python", "x = 5", []),
    # Perl
    ("perl", "'hi'", [{"text": "hi"}]),
    ("perl", "undef", []),
    ("perl", "{a => 1}", [{"json": {"a": 1}}]),
    ("perl", "[1, 2, 3]", [{"json": [1, 2, 3]}]),
    ("perl", "my $x = 6; $x * 7", [{"text": "42"}]),
    # Ruby
    ("ruby", "'hi'", [{"text": "\"hi\""}]),
    ("ruby", ":sym", [{"text": ":sym"}]),
    ("ruby", "nil", []),
    ("ruby", "{'a' => [1, 2]}", [{"json": {"a": [1, 2]}}]),
    ("ruby", "[1, nil]", [{"json": [1, None]}]),
]


@pytest.mark.parametrize("lang,code,expected", MAPPING)
def test_result_mapping(daemon, lang, code, expected):
    res = daemon.execute(lang, code)
    assert "error" not in res, res.get("error")
    assert res["results"] == expected


@pytest.mark.parametrize("lang,code", [
    ("python", "print('a')\nprint('b')\n1/0"),
    ("javascript", "console.log('a'); console.log('b'); null.x"),
    ("perl", "print \"a\\n\"; print \"b\\n\"; die 'boom'"),
    ("ruby", "puts 'a'\nputs 'b'\nraise 'boom'"),
])
def test_error_keeps_logs_before_it(daemon, lang, code):
    res = daemon.execute(lang, code)
    assert res["results"] == []
    assert res["logs"]["stdout"] == ["a", "b"]
    err = res["error"]
    assert set(err) >= {"name", "message", "traceback"}
    assert isinstance(err["traceback"], list)
    assert err["name"]


def test_python_error_shape(daemon):
    res = daemon.execute("python", "1 / 0")
    assert res["error"]["name"] == "ZeroDivisionError"
    assert res["error"]["message"] == "division by zero"
    assert res["error"]["traceback"][0].startswith("Traceback")


def test_js_top_level_return_is_syntax_error(daemon):
    res = daemon.execute("javascript", "return 1")
    assert res["error"]["name"] == "SyntaxError"


def test_ruby_top_level_break_is_local_jump_error(daemon):
    res = daemon.execute("ruby", "break")
    assert res["error"]["name"] == "LocalJumpError"


def test_one_log_entry_per_line(daemon):
    res = daemon.execute("python", "print('x\\ny')\nimport sys\nsys.stderr.write('e1\\ne2\\n')")
    assert res["logs"]["stdout"] == ["x", "y"]
    assert res["logs"]["stderr"] == ["e1", "e2"]
    res = daemon.execute("javascript", "console.log('a', 1, {b: 2}); console.error('oops')")
    assert res["logs"]["stdout"] == ['a 1 {"b":2}']
    assert res["logs"]["stderr"] == ["oops"]


@pytest.mark.parametrize("lang,code", [
    ("python", "import os\nos.environ['GREETING']"),
    ("javascript", "process.env.GREETING"),
    ("perl", "$ENV{GREETING}"),
    ("ruby", "ENV['GREETING']"),
])
def test_env_vars(daemon, lang, code):
    res = daemon.execute(lang, code, envVars={"GREETING": "hello", "bad-key": "dropped", "SKIP": None})
    assert "error" not in res
    assert "hello" in res["results"][0]["text"]


def test_env_is_built_from_scratch(daemon):
    res = daemon.execute("python", "import os\nsorted(os.environ)", envVars={"A": "1"})
    keys = res["results"][0]["json"]
    assert "A" in keys
    for leaked in ("SANDBOXD_BIN", "PYTHONUNBUFFERED", "NODE_EXTRA_CA_CERTS", "SSH_AUTH_SOCK", "PWD"):
        assert leaked not in keys
    assert set(keys) <= {"A", "PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE"}


def test_typescript(daemon):
    for lang in ("typescript", "ts", "javascript"):
        res = daemon.execute(lang, "const n: number = 41;\nn + 1")
        assert res["results"] == [{"text": "42"}], res
        assert res["language"] == "javascript"
    res = daemon.execute("javascript", "interface P { x: number }\nconst p: P = { x: 1 };\np")
    assert res["results"] == [{"json": {"x": 1}}]


def test_languages(daemon):
    status, body, headers = daemon.get("/languages")
    assert status == 200
    ids = [l["id"] for l in body["languages"]]
    assert ids[0] == "javascript"
    assert set(ids) >= {"javascript", "python", "perl", "ruby"}
    for lang in body["languages"]:
        assert lang["enabled"] is True
        assert lang["limits"]["codeBytes"] == 65536
        assert lang["limits"]["requestBytes"] == 98304
        assert lang["limits"]["fuel"] > 0
        assert lang["engine"] and lang["version"]
        assert lang["capabilities"]
    status, body, headers = daemon.post("/languages", {})
    assert status == 405
    assert "GET" in headers["allow"]


def test_runtime_routes(daemon):
    status, body, _ = daemon.get("/runtimes/python/interpreter")
    assert status == 200
    assert body["language"] == "python" and body["contexts"] is True and body["protocol"] == 1
    assert body["engine"].startswith("CPython")
    status, body, _ = daemon.post("/runtimes/perl/execute", {"code": "2+2"})
    assert status == 200 and body["results"] == [{"text": "4"}]
    status, body, headers = daemon.get("/runtimes/nope/interpreter")
    assert status == 404


def test_unsupported_language(daemon):
    for lang in ("cobol", "__proto__", "constructor"):
        status, body, headers = daemon.post(f"/execute/{lang}", {"code": "1"})
        assert_error(status, body, headers, "VALIDATION_FAILED", 400, "Unsupported language")


def test_method_not_allowed(daemon):
    status, body, headers = daemon.get("/execute/python")
    assert_error(status, body, headers, "VALIDATION_FAILED", 405)
    assert headers["allow"] == "POST"


def test_not_found(daemon):
    status, body, headers = daemon.get("/nope")
    assert_error(status, body, headers, "VALIDATION_FAILED", 404)


def test_content_type_415(daemon):
    status, body, headers = daemon.post("/execute/python", raw=b'{"code":"1"}', headers={"Content-Type": "text/plain"})
    assert_error(status, body, headers, "VALIDATION_FAILED", 415)
    status, body, headers = daemon.post("/execute/python", raw=b'{"code":"1"}')
    assert_error(status, body, headers, "VALIDATION_FAILED", 415)
    status, body, _ = daemon.post("/execute/python", raw=b'{"code":"1"}',
                                  headers={"Content-Type": "application/json; charset=utf-8"})
    assert status == 200


def test_request_too_large_413(daemon):
    big = json.dumps({"code": "1", "pad": "x" * 100000}).encode()
    status, body, headers = daemon.post("/execute/python", raw=big, headers={"Content-Type": "application/json"})
    assert_error(status, body, headers, "VALIDATION_FAILED", 413, "Request too large")


def test_code_too_large_413_counts_utf8(daemon):
    raw = json.dumps({"code": "あ" * 22000}, ensure_ascii=False).encode()
    assert len(raw) < 96 * 1024
    status, body, headers = daemon.post("/execute/python", raw=raw, headers={"Content-Type": "application/json"})
    assert_error(status, body, headers, "VALIDATION_FAILED", 413, "Code exceeds 64 KiB")


@pytest.mark.parametrize("raw,message", [
    (b"{not json", "Invalid JSON"),
    (b"[1,2]", "Expected an object"),
    (b'"str"', "Expected an object"),
    (b'{"code":"1","input":"x"}', "input is no longer supported"),
    (b'{"code":"1","language":"ruby"}', "Unsupported language 'ruby' on this runtime (python)"),
    (b'{"code":"   "}', "Non-empty code is required"),
    (b'{"code":""}', "Non-empty code is required"),
    (b'{}', "Non-empty code is required"),
    (b'{"code":5}', "Non-empty code is required"),
    (b'{"code":"1","envVars":{"A":5}}', "envVars values must be strings"),
    (b'{"code":"1","envVars":[1]}', "envVars must be an object"),
    (b'{"code":"1","code":"2"}', "Invalid JSON"),
])
def test_validation_400(daemon, raw, message):
    status, body, headers = daemon.post("/execute/python", raw=raw, headers={"Content-Type": "application/json"})
    assert_error(status, body, headers, "VALIDATION_FAILED", 400, message)


def test_language_aliases_accepted(daemon):
    for lang in ("python3", "PYTHON", "py"):
        status, body, _ = daemon.post("/execute/python", {"code": "1", "language": lang})
        assert status == 200, body
    for lang in ("js", "node", "ts", "typescript"):
        status, body, _ = daemon.post("/execute/javascript", {"code": "1", "language": lang})
        assert status == 200, body
    for path in ("python3", "js", "node", "ts"):
        status, body, _ = daemon.post(f"/execute/{path}", {"code": "1"})
        assert status == 200, body


def test_concurrent_executions_all_correct(daemon):
    langs = ["python", "javascript", "perl", "ruby"]

    def run(i):
        lang = langs[i % 4]
        code = {"python": f"{i} * 3", "javascript": f"{i} * 3", "perl": f"{i} * 3", "ruby": f"{i} * 3"}[lang]
        status, res, _ = daemon.post(f"/execute/{lang}", {"code": code})
        return i, status, res

    with concurrent.futures.ThreadPoolExecutor(max_workers=24) as pool:
        outcomes = list(pool.map(run, range(48)))
    for i, status, res in outcomes:
        assert status == 200, res
        assert res["results"] == [{"text": str(i * 3)}], (i, res)
