"""The jail spawner (src/jail/spawner.c): jails are cloned by one small,
single-threaded child of the daemon that holds none of the daemon's sockets,
they stay the daemon's own children, and spawning them leaves the daemon's
memory alone (no copy-on-write faults in the daemon after a pool refill)."""
import os
import statistics
import subprocess
import time

import pytest

from conftest import BIN, FAST_LIMITS, Daemon, text_of


def children(pid):
    kids = set()
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                kids |= {int(k) for k in f.read().split()}
        except OSError:
            pass
    return kids


def status_field(pid, key):
    """The field of /proc/PID/status, or "" once the process is gone (a used
    jail is reaped at any moment)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def spawners(d):
    # A jail being built is named after the spawner it was cloned from until
    # it renames itself; unlike the spawner it is in a pid namespace of its
    # own (two NSpid entries).
    return [p for p in children(d.proc.pid)
            if status_field(p, "Name") == "spawner" and len(status_field(p, "NSpid").split()) == 1]


def minflt(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


@pytest.fixture(scope="module")
def pooled():
    """A daemon with warm javascript members: cloned jails, not template forks."""
    d = Daemon(sets=FAST_LIMITS + ["pool.javascript=2"])
    yield d
    d.stop()


def wait_pool(d, lang, n, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = d.get("/ready")[1]["pools"].get(lang)
        if pool and pool["ready"] >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{lang} pool never reached {n}")


def fd_links(pid):
    links = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass  # closed between the listing and the readlink
    return links


def listening_socket(port):
    """The "socket:[inode]" of the TCP socket listening on 127.0.0.1:PORT."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols[1] == f"0100007F:{port:04X}" and cols[3] == "0A":
                return f"socket:[{cols[9]}]"
    raise AssertionError(f"nothing listens on port {port}")


def test_one_single_threaded_spawner_holding_no_socket_of_the_daemons(pooled):
    found = spawners(pooled)
    assert len(found) == 1, found
    sp = found[0]
    assert status_field(sp, "Threads") == "1"
    assert listening_socket(pooled.port) not in fd_links(sp)
    # While it clones a jail the spawner briefly holds the fds handed to
    # that jail (a kernel's socket, pipes); what it keeps across spawns is
    # its own end of the socket pair and nothing else of the kind. Wait
    # until the pools are full, then count what every sample shares.
    wait_pool(pooled, "javascript", 2)
    kept = fd_links(sp)
    for _ in range(5):
        time.sleep(0.05)
        kept &= fd_links(sp)
    assert sum(link.startswith("socket:") for link in kept) == 1, sorted(kept)
    assert not any(link.endswith(".db") or ".db-" in link for link in kept), sorted(kept)


def test_jails_are_the_daemons_children_not_the_spawners(pooled):
    wait_pool(pooled, "javascript", 2)
    assert text_of(pooled.execute("javascript", "1+1")) == "2"
    sp = spawners(pooled)[0]
    jails = [p for p in children(pooled.proc.pid) if p != sp]
    assert jails, "no jail is a child of the daemon"
    for p in jails:
        assert status_field(p, "PPid") in (str(pooled.proc.pid), "")
    assert children(sp) == set()


def asan_build():
    out = subprocess.run(["ldd", BIN], capture_output=True, text=True).stdout
    return "libasan" in out


def faults_per_request(d, n=12):
    """The daemon's minor faults per javascript request, the refill that
    follows it included (median)."""
    wait_pool(d, "javascript", 2)
    per = []
    for _ in range(n):
        before = minflt(d.proc.pid)
        assert text_of(d.execute("javascript", "1+1")) == "2"
        wait_pool(d, "javascript", 2)
        time.sleep(0.1)
        per.append(minflt(d.proc.pid) - before)
    return statistics.median(per)


@pytest.mark.skipif(asan_build(), reason="ASan's allocator touches fresh memory on every request")
def test_refills_leave_the_daemons_memory_alone(pooled):
    # A clone() of the daemon write-protects its memory: the pages its
    # threads write next fault again. The same measure on a daemon that
    # clones jails itself shows what the spawner removes.
    with_spawner = faults_per_request(pooled)
    d = Daemon(sets=FAST_LIMITS + ["pool.javascript=2", "jail.spawner=0"])
    try:
        assert spawners(d) == []
        without = faults_per_request(d)
    finally:
        d.stop()
    assert without >= 15, without
    assert with_spawner <= 5, (with_spawner, without)
