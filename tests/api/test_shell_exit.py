"""How a pooled shell jail's run ends (engine/run.c workload_gone): the
answer comes once init has reaped the workload (the workload's pidfd hangs
up; PIDFD_INFO_EXIT gives its status) with both output pipes at EOF, not
after init's own exit and namespace teardown; the jail is reaped after the
answer. A background child holding a pipe makes the run end with init, as
for a cold jail. Either way the guest sees what a cold jail gives it: these
tests compare the two answers, and check that nothing the command started
outlives it."""
import os
import time

import pytest

from conftest import FAST_LIMITS, Daemon
from test_shell_pool import cold, descendants, pooled, run_pooled, wait_pool_full  # noqa: F401


def view(res):
    """The answer without what differs between any two runs."""
    return {k: v for k, v in res.items() if k not in ("durationMs", "usage")}


EXITS = ["true", "exit 3", "exit 200", "exit 130", "kill -9 $$", "kill -TERM $$",
         "echo o; echo e >&2; exit 1", "printf 'no newline'", "exec /bin/false"]


@pytest.mark.parametrize("code", EXITS)
def test_exit_status_and_output_as_a_cold_jail(pooled, cold, code):  # noqa: F811
    warm = run_pooled(pooled, code)
    assert view(warm) == view(cold.execute("shell", code)), code


def test_background_child_holding_output_ends_with_init(pooled, cold):  # noqa: F811
    """Its pipe is still open when bash exits: the run waits for init, whose
    exit kills it; its late line is never part of the answer, pooled or not."""
    code = "(sleep 0.3; echo late) & echo early"
    warm = run_pooled(pooled, code)
    assert warm["logs"]["stdout"] == ["early"], warm
    assert view(warm) == view(cold.execute("shell", code))


def sleepers(d):
    out = []
    for pid in descendants(d.proc.pid):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "sleep":
                    out.append(pid)
        except OSError:
            pass
    return out


def test_background_child_without_output_dies_with_the_jail(pooled):  # noqa: F811
    """A child that let go of every pipe does not delay the answer, and the
    pid namespace still ends with the run: no process of it survives."""
    t0 = time.monotonic()
    res = run_pooled(pooled, "(exec >/dev/null 2>&1 </dev/null; sleep 30) & echo bg")
    assert res["logs"]["stdout"] == ["bg"] and "error" not in res, res
    assert time.monotonic() - t0 < 10
    deadline = time.monotonic() + 5
    while sleepers(pooled) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleepers(pooled) == []


@pytest.fixture(scope="module")
def pooled_debug():
    d = Daemon(sets=FAST_LIMITS + ["pool.size=0", "pool.shell=2"], extra_args=["--log-level", "debug"])
    yield d
    d.cleanup()


def last_stateless_line(d):
    lines = [l for l in d.read_log().splitlines() if 'msg="stateless" lang=shell' in l]
    return lines[-1] if lines else ""


def test_pooled_run_answers_at_the_workloads_reap(pooled_debug):
    """The fast end is taken (where the kernel tells exit statuses through
    pidfds, Linux 6.15+). (Whether a background child holding a pipe makes
    the run wait for init depends on whether the daemon looks before init
    has exited and killed it; the answers are compared above.)"""
    run_pooled(pooled_debug, "/bin/true")
    line = last_stateless_line(pooled_debug)
    assert "pooled=1" in line, line
    uname = os.uname().release.split(".")
    if (int(uname[0]), int(uname[1].split("-")[0])) < (6, 15):
        pytest.skip("no PIDFD_INFO_EXIT before Linux 6.15: every run ends with init")
    assert "early_exit=1" in line, line
