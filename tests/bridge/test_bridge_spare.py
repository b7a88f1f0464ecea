"""Spare jails (src/sandbox/spare.c): after a command, and when the warm
pool prepares a sandbox, the sandbox's next command jail is built ahead
(deferred: namespaces, mounts, cgroup, seccomp, Landlock done; its workload
waits for the command). The fast path must not change what a command sees:
these tests compare a command run in a spare with the sandbox's cold first
command, check that spares are used (GET /ready spareJails), used once,
see the workspace's current files, and leave no process behind."""
import os
import threading
import time

import pytest

from bridge_common import FAST_LIMITS, Daemon, exec_sse, new_sandbox

from jail_probe import PROBE as JAIL_PROBE, sections as probe_sections  # noqa: E402

# Its namespaces too: fresh ones but the sandbox's network namespace.
PROBE = JAIL_PROBE + r"""
echo "== ns"; for n in pid net mnt ipc uts cgroup user; do echo $n $(readlink /proc/self/ns/$n); done
"""


def spares(d):
    status, body, _ = d.get("/ready")
    assert status == 200, body
    return body["spareJails"]


def wait_held(d, n=1, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        sp = spares(d)
        if sp["held"] >= n:
            return sp
        assert time.monotonic() < deadline, sp
        time.sleep(0.02)


def run(d, sid, script, **body):
    status, _, _, out, err, code = exec_sse(d, sid, ["bash", "-c", script], **body)
    assert status == 200
    return code, out.decode(errors="replace"), err.decode(errors="replace")


def run_spare(d, sid, script, **body):
    """Runs script in sid's spare: one is held first, and the hits go up by
    exactly one (no miss)."""
    before = wait_held(d)
    res = run(d, sid, script, **body)
    after = spares(d)
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"], (before, after)
    return res


def run_cold(d, sid, script, **body):
    before = spares(d)
    res = run(d, sid, script, **body)
    after = spares(d)
    assert after["hits"] == before["hits"], (before, after)
    return res


def sections(text):
    return probe_sections(text.splitlines())


def daemon_children(d):
    """Pids whose parent is the daemon (jails' inits among them)."""
    kids = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == d.proc.pid:
            kids.add(int(p))
    return kids


@pytest.fixture
def d(bridge):
    """The daemon, its sandboxes deleted after each test: held counts only
    the running test's spares."""
    assert spares(bridge)["held"] == 0
    yield bridge
    while MADE:
        bridge.request("DELETE", f"/v1/sandbox/{MADE.pop()}")
    assert spares(bridge)["held"] == 0


MADE = []


def mk(d):
    MADE.append(new_sandbox(d))
    return MADE[-1]


def test_spare_view_equals_cold_view(d):
    sid = mk(d)
    assert spares(d)["held"] == 0  # nothing used it yet: no jail held for it
    code, cold, err = run_cold(d, sid, PROBE)
    assert code == 0 and err == "", err
    code, warm, err = run_spare(d, sid, PROBE)
    assert code == 0 and err == "", err
    w, c = sections(warm), sections(cold)
    assert list(w) == list(c)
    for name in c:
        if name != "ns":
            assert w[name] == c[name], (name, w[name], c[name])
    # The sandbox's network namespace. (That the others are the spare's own
    # is shown where two exist at once: the cold jail's are gone by now, and
    # the kernel may hand their freed numbers to the spare.)
    wn = dict(l.split(" ", 1) for l in w["ns"])
    cn = dict(l.split(" ", 1) for l in c["ns"])
    assert wn["net"] == cn["net"]
    assert "Seccomp:\t2" in w["status"] and "NoNewPrivs:\t1" in w["status"]
    assert any(l.startswith("CapEff:\t0000000000000000") for l in w["status"])


def test_env_cwd_files_and_exit_status_arrive(d):
    sid = mk(d)
    assert run(d, sid, "mkdir -p sub && echo one > sub/f")[0] == 0
    code, out, _ = run_spare(d, sid, "cat f; pwd; echo $HOME; exit 7", cwd="/workspace/sub")
    assert (code, out) == (7, "one\n/workspace/sub\n/workspace\n"), out
    code, out, _ = run_spare(d, sid, "echo two >> sub/f; cat sub/f")
    assert (code, out) == (0, "one\ntwo\n")


def test_a_spare_runs_one_command(d):
    """Each command gets a fresh pid namespace: its shell has the same pid
    every time (a namespace that served a command before would have handed
    out higher pids since). The namespace's inode number cannot show it: the
    kernel reuses a freed namespace's number for the next one."""
    sid = mk(d)
    code, first, _ = run(d, sid, "echo $$")
    assert code == 0
    for _ in range(3):
        code, out, _ = run_spare(d, sid, "echo $$; sleep 0 & wait; sleep 0 & wait")
        assert code == 0
        assert out == first, (out, first)


NS = "for n in pid net mnt ipc uts cgroup; do echo $n $(readlink /proc/self/ns/$n); done; sleep 0.3"


def test_spares_held_at_once_have_their_own_namespaces(d):
    """Two sandboxes' spares run at the same time: their namespaces exist at
    once, so an equal number would be one shared namespace."""
    a, b = mk(d), mk(d)
    run(d, a, "true")
    run(d, b, "true")
    before = wait_held(d, 2)
    outs = {}
    threads = [threading.Thread(target=lambda s=s: outs.__setitem__(s, run(d, s, NS))) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert spares(d)["hits"] == before["hits"] + 2
    ids = [dict(l.split(" ", 1) for l in outs[s][1].splitlines()) for s in (a, b)]
    assert set(ids[0]) == {"pid", "net", "mnt", "ipc", "uts", "cgroup"}, outs
    for n in ids[0]:
        assert ids[0][n] != ids[1][n], (n, ids)


def test_a_spare_is_only_for_its_sandbox(d):
    a, b = mk(d), mk(d)
    run(d, a, "echo a > mine")
    wait_held(d)
    before = spares(d)
    code, out, _ = run(d, b, "cat mine 2>/dev/null || echo none")
    assert out == "none\n"
    assert spares(d)["hits"] == before["hits"]


def test_delete_leaves_no_process(d):
    base = daemon_children(d)
    sid = mk(d)
    held = spares(d)["held"] + 1
    run(d, sid, "true")
    wait_held(d, held)
    spare_pids = daemon_children(d) - base
    assert spare_pids, "no spare jail process under the daemon"
    status, body, _ = d.request("DELETE", f"/v1/sandbox/{sid}")
    assert status in (200, 204), body
    assert spares(d)["held"] == held - 1
    deadline = time.monotonic() + 10
    while spare_pids & daemon_children(d):
        assert time.monotonic() < deadline, spare_pids & daemon_children(d)
        time.sleep(0.05)


def test_warm_pool_sandboxes_come_with_a_spare():
    dm = Daemon(sets=FAST_LIMITS, env={"WARM_POOL_TARGET": "2", "WARM_POOL_REFRESH_INTERVAL": "200"})
    try:
        wait_held(dm, 2)
        sid = new_sandbox(dm)
        before = spares(dm)
        code, out, _ = run(dm, sid, "echo $HOME; ls -A /workspace | wc -l")
        after = spares(dm)
        assert (code, out) == (0, "/workspace\n0\n")
        assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"], (before, after)
        base = daemon_children(dm)
        dm.stop()
        assert not base & daemon_children(dm)
    finally:
        dm.cleanup()


def test_a_spare_follows_the_commands_shape(d):
    """A session's command (fd 3: its state channel) and a plain one get
    different jails: a spare of the other shape is dropped (a miss, the
    command cold) and the next spare has the latest command's shape."""
    sid = mk(d)
    run(d, sid, "true")
    wait_held(d)
    h = {"Session-Id": "sp"}
    before = spares(d)
    status, _, _, out, _, code = exec_sse(d, sid, ["export", "SPX=kept"], headers=h)
    after = spares(d)
    assert (status, code) == (200, 0), out
    assert after["misses"] == before["misses"] + 1 and after["hits"] == before["hits"], (before, after)
    wait_held(d)
    before = spares(d)
    status, _, _, out2, _, code = exec_sse(d, sid, ["printenv", "SPX"], headers=h)
    after = spares(d)
    assert (status, code, out2) == (200, 0, b"kept\n"), out2
    assert after["hits"] == before["hits"] + 1, (before, after)
