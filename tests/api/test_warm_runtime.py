"""The runtime API's warm sandboxes (sandbox.warm_runtime): a new id's first
call takes a prepared sandbox and its first python context adopts the
kernel started in it (GET /ready warmSandboxes counts both). The sandbox
must behave exactly as one created cold: its own workspace, env, state that
persists and survives kill -9, and the pool refills and shrinks."""
import os
import signal
import time
import uuid

from conftest import FAST_LIMITS, Daemon, unmount_under


def sid():
    return "w-" + uuid.uuid4().hex[:12]


def run(d, s, code, lang="python", **extra):
    body = {"code": code}
    body.update(extra)
    status, res, _ = d.post(f"/languages/{lang}/sandboxes/{s}/execute", body)
    assert status == 200, res
    assert not res.get("error"), res
    return res


def out(res):
    return "".join(res["logs"]["stdout"]).strip()


def warm(d):
    status, body, _ = d.get("/ready")
    assert status == 200
    return body["warmSandboxes"]


def wait_dirs(data, n, timeout=10):
    """The surplus warm sandboxes go after their kernels (killed and reaped
    off the request path): their directories may outlive the call by a few ms."""
    end = time.time() + timeout
    while len(warm_dirs(data)) != n and time.time() < end:
        time.sleep(0.05)
    return len(warm_dirs(data))


def wait_ready(d, n, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if warm(d)["ready"] >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"warm sandboxes never reached {n}: {warm(d)}")


def descendants(pid):
    """Every process below pid (through /proc/<pid>/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def warm_dirs(data):
    return sorted(n for n in os.listdir(os.path.join(data, "mnt")) if n.startswith("wrt-"))


def start(n=2, data_dir=None, extra=()):
    d = Daemon(sets=FAST_LIMITS + [f"sandbox.warm_runtime={n}", *extra], data_dir=data_dir)
    if n:
        wait_ready(d, n)
    return d


def test_first_execute_adopts_warm_kernel_and_state_persists():
    d = start()
    try:
        before = warm(d)
        s = sid()
        run(d, s, "x = 41")
        after = warm(d)
        assert after["taken"] == before["taken"] + 1
        assert after["adopted"] == before["adopted"] + 1
        assert out(run(d, s, "print(x + 1)")) == "42"
        status, info, _ = d.get(f"/languages/python/sandboxes/{s}")
        assert status == 200 and info["id"] == s and info["orgId"] == "default"
        assert len(info["contexts"]) == 1 and info["contexts"][0]["executions"] == 2
        # The warm sandbox is gone from the pool's names: it is s now.
        assert s in os.listdir(os.path.join(d.data_dir, "mnt"))
        status, _, _ = d.request("DELETE", f"/languages/python/sandboxes/{s}")
        assert status == 200
        assert s not in os.listdir(os.path.join(d.data_dir, "mnt"))
    finally:
        d.cleanup()


def test_an_info_get_creates_a_sandbox_that_takes_nothing():
    # Only a call that may run something takes a warm sandbox: an idle
    # sandbox created by reading it holds no kernel, mount or image (the
    # 10,000-idle-sandboxes row counts those bytes).
    d = start()
    try:
        wait_ready(d, 2)
        before = warm(d)
        s = sid()
        status, info, _ = d.get(f"/languages/python/sandboxes/{s}")
        assert status == 200 and info["id"] == s
        assert warm(d) == before
        assert not os.path.exists(os.path.join(d.data_dir, "sandboxes", s))
        assert s not in os.listdir(os.path.join(d.data_dir, "mnt"))
        # It is a sandbox all the same: its first cell runs (cold) and keeps state.
        run(d, s, "x = 41")
        assert out(run(d, s, "print(x + 1)")) == "42"
        assert warm(d)["taken"] == before["taken"]
    finally:
        d.cleanup()


def test_env_reaches_adopted_kernel():
    d = start()
    try:
        s = sid()
        status, res, _ = d.post(f"/languages/python/sandboxes/{s}/env", {"envVars": {"SBX_K": "from-sandbox"}})
        assert status == 200, res
        assert warm(d)["taken"] == 1
        res = run(d, s, "import os; print(os.environ.get('SBX_K'), os.environ.get('CALL_K'), os.getcwd())",
                  envVars={"CALL_K": "from-call"})
        assert out(res) == "from-sandbox from-call /workspace"
        assert warm(d)["adopted"] == 1
        # A context created with its own env adopts it too (a new sandbox).
        s2 = sid()
        wait_ready(d, 1)
        status, ctx, _ = d.post(f"/languages/python/sandboxes/{s2}/contexts", {"envVars": {"CTX_K": "ctx"}})
        assert status == 201, ctx
        res = run(d, s2, "import os; print(os.environ.get('CTX_K'), os.environ.get('SBX_K'), os.getcwd())",
                  contextId=ctx["id"])
        assert out(res) == "ctx None /workspace"
        assert warm(d)["adopted"] == 2
    finally:
        d.cleanup()


def test_two_new_sandboxes_share_nothing():
    d = start()
    try:
        a, b = sid(), sid()
        run(d, a, "open('/workspace/secret', 'w').write('a'); import os; print(os.stat('/workspace').st_dev)")
        res_b = run(d, b, "import os; print(os.listdir('/workspace'), os.stat('/workspace').st_dev)")
        assert warm(d)["adopted"] == 2
        assert out(res_b).startswith("[]")
        dev_a = out(run(d, a, "import os; print(os.stat('/workspace').st_dev, os.listdir('/workspace'))"))
        assert dev_a.split()[0] != out(res_b).split()[1]
        assert "secret" in dev_a
        # Different kernels: state set in one is not in the other.
        run(d, a, "only_a = 1")
        assert out(run(d, b, "print('only_a' in globals())")) == "False"
    finally:
        d.cleanup()


def test_pool_refills_after_takes():
    d = start()
    try:
        for _ in range(3):
            run(d, sid(), "pass")
        wait_ready(d, 2)
        w = warm(d)
        assert w["taken"] >= 2 and w["ready"] == 2
        assert len(warm_dirs(d.data_dir)) == 2
    finally:
        d.cleanup()


def test_disabled_goes_cold():
    d = start(0)
    try:
        s = sid()
        run(d, s, "y = 2")
        assert out(run(d, s, "print(y * 2)")) == "4"
        assert warm(d) == {"ready": 0, "taken": 0, "adopted": 0}
        assert warm_dirs(d.data_dir) == []
    finally:
        d.cleanup()


def test_javascript_first_then_python_adopts():
    d = start()
    try:
        s = sid()
        run(d, s, "globalThis.q = 3", lang="javascript")
        assert warm(d)["adopted"] == 0
        assert out(run(d, s, "print(7)")) == "7"
        assert warm(d)["adopted"] == 1
    finally:
        d.cleanup()


def test_kill_dash_nine_keeps_state_and_shrinks_on_restart():
    s, d = sid(), start()
    data, keep = d.data_dir, d.tmp
    try:
        run(d, s, "z = 5\nopen('/workspace/kept.txt', 'w').write('durable')")
        assert warm(d)["adopted"] == 1
        # The pool refilled before the kill: a kill -9 while the refill is
        # still preparing a warm sandbox (a loaded machine) leaves a third
        # warm directory that the restarted daemon does not remove (failed 2
        # in 8 under two busy loops on session 8's tree too): a known gap of
        # its own, not what this test is about.
        wait_ready(d, 2)
        procs = descendants(d.proc.pid)
        assert len(procs) >= 3  # the adopted kernel and two warm ones, at least
        d.tmp = None
        d.stop(signal.SIGKILL)
        # Nothing of the killed daemon outlives it: warm kernels included.
        end = time.time() + 20
        while time.time() < end and any(os.path.exists(f"/proc/{p}") for p in procs):
            time.sleep(0.1)
        assert not [p for p in procs if os.path.exists(f"/proc/{p}")]
        d2 = start(2, data_dir=data)
        try:
            assert out(run(d2, s, "print(z * 2, open('/workspace/kept.txt').read())")) == "10 durable"
            assert wait_dirs(data, 2) == 2
        finally:
            d2.stop()
        # The pool turned off: the warm sandboxes (and their kernels) go.
        d3 = Daemon(sets=FAST_LIMITS + ["sandbox.warm_runtime=0"], data_dir=data)
        try:
            end = time.time() + 30
            while warm_dirs(data) and time.time() < end:
                time.sleep(0.1)
            assert warm_dirs(data) == []
            assert out(run(d3, s, "print(z)")) == "5"
        finally:
            d3.stop()
    finally:
        unmount_under(data)
        keep.cleanup()


def test_adopted_kernel_shares_the_sandbox_memory_limit():
    """The warm kernel runs in the sandbox's own cgroup, as a cold first
    context would: with a 160 MiB sandbox limit, the adopted context and a
    second one never both hold 96 MiB."""
    d = start(extra=["sandbox.memory_bytes=160M", "limits.memory_bytes=256M"])
    try:
        s = sid()
        eat = "x = bytearray(b'\\x01') * (96 << 20)\nprint(len(x) >> 20)"
        assert out(run(d, s, eat)) == "96"
        assert warm(d)["adopted"] == 1
        status, ctx, _ = d.post(f"/languages/python/sandboxes/{s}/contexts", {})
        assert status == 201, ctx
        status, second, _ = d.post(f"/languages/python/sandboxes/{s}/execute", {"code": eat, "contextId": ctx["id"]})
        assert status == 200, second
        if not second.get("error"):
            # The limit's OOM killer took the first (the adopted kernel).
            status, first, _ = d.post(f"/languages/python/sandboxes/{s}/execute", {"code": "print(len(x) >> 20)"})
            assert status == 200 and (first.get("error") or first["context"]["restored"]), first
        else:
            assert second["error"]["name"] in ("ExecutionLimitError", "MemoryError"), second
    finally:
        d.cleanup()
