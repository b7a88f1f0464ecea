"""Issue 10 row 12 for template executions: stateless runs forked from a
fork-server template (pool.<lang>=0) each get a network namespace of their
own, so one execution's abstract unix sockets are neither visible in
another's /proc/net/unix nor squattable by it. Each test asserts the safe
outcome and has a positive control (the binder sees its own name), so it
can fail."""
import os
import threading
import time
import uuid

import pytest

from attack_helpers import ATTACK_LIMITS, Daemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="templates need a privileged daemon")

# One line per fact: "name value".
BINDER = """
import socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(b"\\0NAME")
s.listen(1)
print("bound", time.time())
print("self_sees", b"@NAME" in open("/proc/net/unix", "rb").read())
print("pid1", open("/proc/1/comm").read().strip())
time.sleep(2.5)
print("end", time.time())
"""

PROBE = """
import socket, time
print("start", time.time())
print("sees", b"@NAME" in open("/proc/net/unix", "rb").read())
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind(b"\\0NAME")
    print("bind ok")
except OSError as e:
    print("bind", e.errno)
ifs = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
print("ifs", ",".join(ifs))
print("pid1", open("/proc/1/comm").read().strip())
print("end", time.time())
"""


@pytest.fixture(scope="module")
def tpl():
    # pool.python=0: stateless python runs fork from the template.
    sets = [s for s in ATTACK_LIMITS if not s.startswith("limits.wall_ms")]
    d = Daemon(sets=sets + ["limits.wall_ms=10000", "pool.python=0"])
    yield d
    d.cleanup()


def facts(res):
    out = {}
    for line in res["logs"]["stdout"]:
        for l in line.splitlines():
            k, _, v = l.partition(" ")
            out[k] = v
    return out


def execute(d, code):
    status, res, _ = d.post("/execute/python", {"code": code})
    assert status == 200 and "error" not in res, res
    return facts(res)


def test_row_12_template_runs_have_own_network_namespace(tpl):
    name = "sbx-tpl-" + uuid.uuid4().hex[:10]
    held = {}
    t = threading.Thread(target=lambda: held.update(execute(tpl, BINDER.replace("NAME", name))))
    t.start()
    time.sleep(1.0)
    probe = execute(tpl, PROBE.replace("NAME", name))
    t.join()
    # Both came from the template (pid 1 is its C reaper, a fork of python3).
    assert held["pid1"] == "python3" and probe["pid1"] == "python3", (held, probe)
    # Positive control: the binder sees its own name.
    assert held["self_sees"] == "True", held
    # The probe ran while the name was bound.
    assert float(held["bound"]) < float(probe["start"]) and float(probe["end"]) < float(held["end"]), (held, probe)
    assert probe["sees"] == "False", probe
    assert probe["bind"] == "ok", probe
    assert probe["ifs"] == "lo", probe


def test_row_12_template_netns_sees_only_lo(tpl):
    probe = execute(tpl, PROBE.replace("NAME", "sbx-tpl-" + uuid.uuid4().hex[:10]))
    assert probe["ifs"] == "lo" and probe["pid1"] == "python3", probe
