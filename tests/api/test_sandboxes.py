"""Gateway facade: sandboxes, code contexts, env layering, files and state
that survives eviction and kill -9 of the daemon."""
import os
import signal
import time
import uuid

import pytest

from conftest import Daemon, unmount_under


def sid():
    return "t-" + uuid.uuid4().hex[:12]


def base(lang, s):
    return f"/languages/{lang}/sandboxes/{s}"


def run(daemon, lang, s, code, **extra):
    body = {"code": code}
    body.update(extra)
    status, res, _ = daemon.post(base(lang, s) + "/execute", body)
    assert status == 200, res
    return res


def value(res):
    assert "error" not in res, res.get("error")
    r = res["results"]
    if not r:
        return None
    return r[0].get("json", r[0].get("text"))


def test_info_creates_sandbox(daemon):
    s = sid()
    status, info, headers = daemon.get(base("python", s))
    assert status == 200
    assert info["id"] == s
    assert info["orgId"] == "default"
    assert info["contexts"] == [] and info["envVars"] == {}
    assert info["workspace"] == {"files": 0, "bytes": 0}
    assert info["fileApi"] is True
    assert isinstance(info["expiresAt"], int)
    assert info["createdAt"].endswith("Z")
    assert headers["cache-control"] == "no-store"


@pytest.mark.parametrize("bad", ["-x", "x-", "a" * 64, "ad%20min", "ADMIN", "www", "..", "a/b"])
def test_invalid_ids(daemon, bad):
    status, body, _ = daemon.get(base("python", bad.replace("/", "%2F")))
    assert status in (400, 404), body
    if status == 400:
        assert body["code"] == "VALIDATION_FAILED"


def test_context_crud_and_cap(daemon):
    s = sid()
    status, ctx, _ = daemon.post(base("python", s) + "/contexts", {})
    assert status == 201, ctx
    assert ctx["binding"] == "PYTHON" and ctx["language"] == "python" and ctx["cwd"] == "/workspace"
    assert ctx["createdAt"].endswith("Z")
    ids = [ctx["id"]]
    for i in range(7):
        lang = ["javascript", "perl", "ruby", "python"][i % 4]
        status, c, _ = daemon.post(base(lang, s) + "/contexts", {"cwd": "/workspace"})
        assert status == 201, c
        ids.append(c["id"])
    status, body, _ = daemon.post(base("python", s) + "/contexts", {})
    assert status == 400 and "Cannot create more than 8" in body["message"]
    status, body, _ = daemon.get(base("perl", s) + "/contexts")
    assert [c["id"] for c in body["contexts"]] == ids
    status, body, _ = daemon.request("DELETE", base("python", s) + "/contexts/" + ids[3])
    assert status == 200 and body == {"success": True}
    status, body, _ = daemon.request("DELETE", base("python", s) + "/contexts/" + ids[3])
    assert status == 404 and body["code"] == "CONTEXT_NOT_FOUND"
    assert body["context"]["contextId"] == ids[3]
    status, body, _ = daemon.post(base("python", s) + "/execute", {"code": "1", "contextId": "nope"})
    assert status == 404 and body["code"] == "CONTEXT_NOT_FOUND"


STATE = {
    "python": ("x = 41\ndef f(): return x + 1", "f()", "42"),
    "javascript": ("let x = 41; const f = () => x + 1; class K {}", "f()", "42"),
    "perl": ("our $x = 41; sub f { return $x + 1 }", "f()", "42"),
    "ruby": ("x = 41\ndef f(v) = v + 1", "f(x)", "42"),
}


@pytest.mark.parametrize("lang", sorted(STATE))
def test_state_persists_per_language(daemon, lang):
    s = sid()
    setup, use, expected = STATE[lang]
    r1 = run(daemon, lang, s, setup)
    assert "error" not in r1, r1
    assert r1["executionCount"] == 1
    assert r1["context"]["executions"] == 1
    r2 = run(daemon, lang, s, use)
    assert value(r2) == expected
    assert r2["context"]["id"] == r1["context"]["id"]
    assert r2["executionCount"] == 2


def test_perl_my_does_not_persist(daemon):
    s = sid()
    run(daemon, "perl", s, "my $gone = 1; our $kept = 2;")
    assert value(run(daemon, "perl", s, "defined($gone) ? 'yes' : 'no'")) == "no"
    assert value(run(daemon, "perl", s, "$kept")) == "2"


def test_js_top_level_await_in_context(daemon):
    s = sid()
    run(daemon, "javascript", s, "const v = await Promise.resolve(20);")
    assert value(run(daemon, "javascript", s, "v * 2 + 2")) == "42"
    assert value(run(daemon, "javascript", s, "const n: number = 41;\nn + 1")) == "42"


def test_guest_exception_keeps_globals(daemon):
    s = sid()
    run(daemon, "python", s, "a = 1")
    res = run(daemon, "python", s, "b = 2\nraise ValueError('x')")
    assert res["error"]["name"] == "ValueError"
    assert value(run(daemon, "python", s, "a + b")) == "3"


def test_cross_language_files(daemon):
    s = sid()
    run(daemon, "python", s, "open('/workspace/shared.txt', 'w').write('from python')")
    assert value(run(daemon, "javascript", s, "fs.readFileSync('/workspace/shared.txt', 'utf8')")) == "'from python'"
    assert value(run(daemon, "ruby", s, "File.read('shared.txt')")) == '"from python"'
    status, info, _ = daemon.get(base("perl", s))
    assert {c["language"] for c in info["contexts"]} == {"python", "javascript", "ruby"}
    assert info["workspace"]["files"] == 1


def test_env_layering(daemon):
    s = sid()
    status, body, _ = daemon.post(base("python", s) + "/env", {"envVars": {"A": "sandbox", "B": "sandbox", "C": "sandbox"}})
    assert status == 200 and body == {"success": True}
    status, ctx, _ = daemon.post(base("python", s) + "/contexts", {"envVars": {"B": "context"}})
    code = "import os\n[os.environ.get(k) for k in 'ABC']"
    res = run(daemon, "python", s, code, contextId=ctx["id"], envVars={"C": "call"})
    assert value(res) == ["sandbox", "context", "call"]
    res = run(daemon, "python", s, code, contextId=ctx["id"], envVars={"A": None})
    assert value(res) == [None, "context", "sandbox"]
    daemon.post(base("python", s) + "/env", {"envVars": {"A": None}})
    status, info, _ = daemon.get(base("python", s))
    assert info["envVars"] == {"B": "sandbox", "C": "sandbox"}
    status, body, _ = daemon.post(base("python", s) + "/env", {"envVars": {"bad-key": "x"}})
    assert status == 400 and "Invalid envVars key: bad-key" in body["message"]


def test_cwd_persists_and_is_confined(daemon):
    s = sid()
    run(daemon, "python", s, "import os\nos.makedirs('sub', exist_ok=True)\nos.chdir('sub')")
    res = run(daemon, "python", s, "import os\nos.getcwd()")
    assert value(res) == "'/workspace/sub'"
    assert res["context"]["cwd"] == "/workspace/sub"
    res = run(daemon, "python", s, "import os\nos.chdir('/tmp')")
    assert res["context"]["cwd"] == "/workspace"
    status, body, _ = daemon.post(base("python", s) + "/contexts", {"cwd": "/etc"})
    assert status == 400


def test_execute_validation(daemon):
    s = sid()
    for body, msg in [({"code": ""}, "Non-empty code"), ({"code": "1", "cwd": "/x"}, "cwd is a context property"),
                      ({"code": "1", "input": 1}, "input is no longer supported"),
                      ({"code": "1", "envVars": {"1x": "a"}}, "Invalid envVars key")]:
        status, res, _ = daemon.post(base("python", s) + "/execute", body)
        assert status == 400 and msg in res["message"], res
    status, res, _ = daemon.post(base("cobol", s) + "/execute", {"code": "1"})
    assert status == 400 and "Unsupported language" in res["message"]
    status, res, headers = daemon.get(base("python", s) + "/execute")
    assert status == 405 and headers["allow"] == "POST"
    status, res, _ = daemon.get(base("python", s) + "/nope")
    assert status == 404


def test_limit_in_context_then_working_call(daemon):
    s = sid()
    run(daemon, "python", s, "keep = 'before'")
    res = run(daemon, "python", s, "keep = 'during'\nwhile True: pass")
    assert res["error"]["name"] == "ExecutionLimitError"
    res = run(daemon, "python", s, "keep")
    assert value(res) == "'before'"
    res = run(daemon, "javascript", s, "globalThis.k = 1")
    res = run(daemon, "javascript", s, "for (;;) console.log('flood')")
    assert res["error"]["name"] == "ExecutionLimitError"
    assert value(run(daemon, "javascript", s, "k + 1")) == "2"


def test_snapshot_info(daemon):
    s = sid()
    status, ctx, _ = daemon.post(base("python", s) + "/contexts", {})
    status, info, _ = daemon.get(base("python", s))
    assert info["contexts"][0]["snapshot"] is None
    res = run(daemon, "python", s, "z = 3", contextId=ctx["id"])
    assert "snapshotMs" in res["context"]
    status, info, _ = daemon.get(base("python", s))
    snap = info["contexts"][0]["snapshot"]
    assert snap["cells"] == 1 and snap["stale"] is False and isinstance(snap["takenAt"], int)
    assert info["contexts"][0]["executions"] == 1
    assert info["contexts"][0]["engine"].startswith("CPython")
    # The seed's SnapshotInfo fields: 64 KiB pages of the journal, and the
    # build (language, interpreter, kernel) that wrote it.
    assert snap["pages"] == 1 and snap["bytes"] == len("z = 3")
    assert snap["build"].startswith("python:" + info["contexts"][0]["engine"] + ":kernel-")
    big = "w = '" + "x" * 60000 + "'"
    run(daemon, "python", s, big, contextId=ctx["id"])
    run(daemon, "python", s, big, contextId=ctx["id"])
    status, info, _ = daemon.get(base("python", s))
    snap = info["contexts"][0]["snapshot"]
    assert snap["bytes"] == len("z = 3") + 2 * len(big)
    assert snap["pages"] == 2


def test_destroy_wipes_everything(daemon):
    s = sid()
    run(daemon, "python", s, "open('f', 'w').write('x')\ny = 1")
    status, body, _ = daemon.request("DELETE", base("python", s))
    assert status == 200 and body == {"success": True}
    status, info, _ = daemon.get(base("python", s))
    assert info["contexts"] == [] and info["workspace"]["files"] == 0
    res = run(daemon, "python", s, "import os\n[os.listdir('/workspace'), 'y' in globals()]")
    assert value(res) == [[], False]


def test_expires_at_stable_between_quick_calls(daemon):
    s = sid()
    _, a, _ = daemon.get(base("python", s))
    _, b, _ = daemon.get(base("python", s))
    assert a["expiresAt"] == b["expiresAt"]


def test_sandboxes_isolated_from_each_other(daemon):
    a, b = sid(), sid()
    run(daemon, "python", a, "open('secret', 'w').write('a-secret')")
    res = run(daemon, "python", b, "import os\nos.listdir('/workspace')")
    assert value(res) == []


# ---- restarts, eviction, expiry: each with its own daemon ----

def test_eviction_and_restore():
    d = Daemon(sets=["sandbox.max_resident_contexts=2", "limits.cpu_ms=2000", "limits.wall_ms=4000"])
    try:
        sids = [sid() for _ in range(4)]
        for i, s in enumerate(sids):
            run(d, "python", s, f"import random\nv = {i} * 10\nr = random.random()")
        for i, s in enumerate(sids):
            res = run(d, "python", s, "v + 1")
            assert value(res) == str(i * 10 + 1)
        status, ready, _ = d.get("/ready")
    finally:
        d.cleanup()


def test_kill_dash_nine_then_state_restored():
    d = Daemon()
    data = d.data_dir
    keep = d.tmp
    s = sid()
    try:
        for lang, (setup, use, expected) in STATE.items():
            run(d, lang, s, setup)
        run(d, "python", s, "open('/workspace/kept.txt', 'w').write('durable')")
        d.tmp = None
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        d.log.close()
        d2 = Daemon(data_dir=data)
        try:
            for lang, (setup, use, expected) in STATE.items():
                assert value(run(d2, lang, s, use)) == expected, lang
            assert value(run(d2, "python", s, "open('/workspace/kept.txt').read()")) == "'durable'"
            status, info, _ = d2.get(base("python", s))
            assert all(c["snapshot"]["stale"] is False for c in info["contexts"])
            # The journal's build is stored with it and survives the restart.
            assert all(c["snapshot"]["build"].startswith(c["language"] + ":") for c in info["contexts"])
        finally:
            d2.stop()
    finally:
        unmount_under(data)
        keep.cleanup()


def test_replay_does_not_touch_workspace():
    d = Daemon()
    data = d.data_dir
    keep = d.tmp
    s = sid()
    try:
        run(d, "python", s, "open('/workspace/log.txt', 'a').write('x')\nn = 1")
        status, res, _ = d.post(base("python", s) + "/files", {"op": "write", "path": "/workspace/log.txt", "content": "edited"})
        assert status == 200, res
        d.tmp = None
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        d.log.close()
        d2 = Daemon(data_dir=data)
        try:
            assert value(run(d2, "python", s, "n + 1")) == "2"
            assert value(run(d2, "python", s, "open('/workspace/log.txt').read()")) == "'edited'"
        finally:
            d2.stop()
    finally:
        unmount_under(data)
        keep.cleanup()


def test_idle_expiry():
    d = Daemon(sets=["sandbox.idle_ttl_ms=1500"])
    try:
        s = sid()
        run(d, "python", s, "open('f', 'w').write('x')")
        status, info, _ = d.get(base("python", s))
        assert info["expiresAt"] - int(time.time() * 1000) <= 1600
        time.sleep(2.5)
        status, info, _ = d.get(base("python", s))
        assert info["contexts"] == [] and info["workspace"]["files"] == 0
    finally:
        d.cleanup()
