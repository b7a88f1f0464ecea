"""Pre-spawned command jails (pool.shell): a shell request takes a jail that
was built, cgroup-attached and confined ahead of time and whose workload
waits for its one command. The fast path must not change what the command
sees: these tests compare a pooled command's view of its jail with a cold
one's (pool.shell=0), line by line, and check that pool members are used,
used once, and that the request's code, env, cwd and stdin arrive."""
import os
import re
import signal
import sys
import time

import pytest

from conftest import FAST_LIMITS, Daemon

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from jail_probe import PROBE, sections as probe_sections  # noqa: E402


def shell_pool(d):
    return d.get("/ready")[1]["pools"].get("shell")


def wait_pool_full(d, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        p = shell_pool(d)
        if p and p["ready"] >= p["target"] or time.monotonic() > deadline:
            return p
        time.sleep(0.05)


@pytest.fixture(scope="module")
def pooled():
    # No growth: a test that drains the pool must not change its size for the next.
    d = Daemon(sets=FAST_LIMITS + ["pool.size=0", "pool.shell=2", "pool.grow_idle_s=0"])
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def cold():
    d = Daemon(sets=FAST_LIMITS + ["pool.size=0", "pool.shell=0"])
    yield d
    d.cleanup()


def run_pooled(d, code, **extra):
    """Runs code on a pool member: the pool is full first, and its hits go
    up by exactly one."""
    before = wait_pool_full(d)
    assert before["ready"] == 2, before
    res = d.execute("shell", code, **extra)
    after = shell_pool(d)
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"], (before, after)
    return res


def sections(res):
    return probe_sections(res["logs"]["stdout"])


def test_pool_is_listed_and_filled(pooled, cold):
    p = wait_pool_full(pooled)
    assert p["target"] == 2 and p["ready"] == 2 and p["memberBytes"] > 0, p
    c = shell_pool(cold)
    assert c["target"] == 0 and c["ready"] == 0, c


def test_pooled_view_equals_cold_view(pooled, cold):
    env = {"PROBE_VAR": "x y"}
    warm = run_pooled(pooled, PROBE, envVars=env)
    before = shell_pool(cold)
    fresh = cold.execute("shell", PROBE, envVars=env)
    assert shell_pool(cold)["hits"] == before["hits"] == 0
    assert "error" not in warm and "error" not in fresh, (warm, fresh)
    assert warm["logs"]["stderr"] == fresh["logs"]["stderr"] == []
    w, c = sections(warm), sections(fresh)
    assert list(w) == list(c)
    for name in c:
        assert w[name] == c[name], (name, w[name], c[name])
    # What the comparison relies on, stated once: a confined view.
    assert "Seccomp:\t2" in w["status"] and "NoNewPrivs:\t1" in w["status"]
    assert any(l.startswith("CapEff:\t0000000000000000") for l in w["status"])
    # 0-2, and the glob's own directory fd (closed by the time readlink runs).
    assert w["fds"] == ["N /dev/null", "N pipe:[N]", "N pipe:[N]", "N "], w["fds"]
    assert w["net"][0] == "lo:"
    assert "PROBE_VAR=x y" in w["env"]


def ns_ids(res):
    return dict(l.split(" ", 1) for l in res["logs"]["stdout"])


NS = "for n in pid net mnt ipc uts cgroup user; do echo $n $(readlink /proc/self/ns/$n); done"


def test_every_pooled_command_gets_fresh_namespaces(pooled):
    """Two members that both wait in the full pool: their namespaces exist
    at once, so equal ids would be one namespace. (A member spawned after
    the first command's jail went may get its freed namespace numbers: the
    kernel hands out the lowest free one.)"""
    before = wait_pool_full(pooled)
    first = ns_ids(pooled.execute("shell", NS))
    second = ns_ids(pooled.execute("shell", NS))
    assert shell_pool(pooled)["hits"] == before["hits"] + 2, (before, shell_pool(pooled))
    assert set(first) == {"pid", "net", "mnt", "ipc", "uts", "cgroup", "user"}
    for n in first:
        assert first[n] != second[n], (n, first[n])


def test_a_pooled_jail_runs_one_command(pooled):
    """A jail is never reused: what the first command leaves behind (files,
    a background process) is gone for the next."""
    res = run_pooled(pooled, "echo s > /tmp/mark; echo w > /workspace/mark; (sleep 20 &) ; echo started")
    assert res["logs"]["stdout"] == ["started"]
    res = run_pooled(pooled, "ls -A /tmp /workspace; pgrep -c sleep || true")
    out = res["logs"]["stdout"]
    assert "mark" not in " ".join(out) and out[-1] == "0", out


def test_code_env_cwd_and_stdin_arrive(pooled):
    code = "printf '%s|' \"$0\" \"$A\" \"$B\" \"$(pwd)\"; cat; echo rc=$?; readlink /proc/self/fd/0"
    res = run_pooled(pooled, code, envVars={"A": "1", "B": "with space=and equals"})
    assert res["logs"]["stdout"] == ["/bin/bash|1|with space=and equals|/workspace|rc=0", "/dev/null"], res
    # A long command (as long as a request may carry) arrives whole.
    big = "x" * 60000
    res = run_pooled(pooled, f"s={big}; echo ${{#s}}")
    assert res["logs"]["stdout"] == ["60000"], res


def test_pooled_limits_and_exit_status(pooled):
    res = run_pooled(pooled, "echo out; echo err >&2; exit 7")
    assert res["logs"]["stdout"] == ["out"] and res["logs"]["stderr"] == ["err"]
    assert res["error"]["exitCode"] == 7
    res = run_pooled(pooled, "echo start; sleep 30")
    assert res["error"]["name"] == "ExecutionLimitError" and "Wall-clock" in res["error"]["message"]
    res = run_pooled(pooled, "yes x")
    assert res["error"]["name"] == "ExecutionLimitError" and "Output limit" in res["error"]["message"]
    res = run_pooled(pooled, "/bin/true")
    assert "error" not in res and res["usage"]["memoryBytes"] > 0


def test_drained_pool_falls_back_to_cold_jails(pooled):
    wait_pool_full(pooled)
    before = shell_pool(pooled)
    outs = [pooled.execute("shell", "echo $$")["logs"]["stdout"] for _ in range(6)]
    after = shell_pool(pooled)
    assert all(o and re.fullmatch(r"\d+", o[0]) for o in outs), outs
    assert after["hits"] + after["misses"] == before["hits"] + before["misses"] + 6, (before, after)


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def test_members_that_died_waiting_are_not_used(pooled):
    """A waiting member killed from outside (its launcher, the process that
    would exec the command) is dropped: the request still runs, in a jail
    that works."""
    wait_pool_full(pooled)
    launchers = []
    for pid in descendants(pooled.proc.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() == b"launch\0":
                    launchers.append(pid)
        except OSError:
            pass
    assert len(launchers) >= 2, launchers  # one per member (the pool may have grown)
    for pid in launchers:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    res = pooled.execute("shell", "echo alive")
    assert res["logs"]["stdout"] == ["alive"], res
