"""Cluster mode, black-box (issue 16): real daemons on one PostgreSQL
database. Nodes see each other in /health/detailed; of two nodes racing to
adopt a dead node's sandbox exactly one owns it; kill -9 of a sandbox's
owner re-homes it on a live node within a bounded poll, with its contexts
(journal replay from the shared store) and — with the workspace replica —
its files. Run by `make cluster` (tests/pg/pg_plugin.py starts the server)."""
import json
import os
import time
import uuid

import pytest

from cluster_common import DEAD_AFTER_MS, PG_HOST, SETS, Cluster, api, poll

pytestmark = pytest.mark.skipif(not PG_HOST, reason="needs the PostgreSQL cluster of tests/pg/pg_plugin.py "
                                                    "(make cluster)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The workspace replica is helper cl-persist's (src/sandbox/replica.c):
# until it is merged a re-homed sandbox starts with an empty workspace.
HAVE_REPLICA = os.path.exists(os.path.join(ROOT, "src", "sandbox", "replica.h"))


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.close()


def sid():
    return "cl-" + uuid.uuid4().hex[:12]


def execute(node, s, code, lang="python"):
    status, res, _ = node.post(f"/languages/{lang}/sandboxes/{s}/execute", {"code": code})
    assert status == 200, res
    assert "error" not in res, res.get("error")
    r = res["results"]
    return r[0].get("json", r[0].get("text")) if r else None


def view(cluster, name):
    """{node id: node} as name's /health/detailed shows them."""
    return {n["id"]: n for n in cluster.health(name)["cluster"]["nodes"]}


def test_health_detailed_shows_every_node_and_who_is_dead(cluster):
    cluster.node("a")
    cluster.node("b")
    cluster.node("c")

    def all_live():
        v = view(cluster, "a")
        return v if {k for k, n in v.items() if n["live"]} == {"a", "b", "c"} else None
    nodes = poll(all_live, what="a to see a, b and c live")
    body = cluster.health("a")["cluster"]
    assert body["node_id"] == "a" and body["epoch"] >= 1 and body["rehomes"] == 0
    assert [k for k, n in nodes.items() if n["self"]] == ["a"]
    for name, n in nodes.items():
        assert n["url"] == f"http://127.0.0.1:{cluster.nodes[name].port}"
        assert n["state"] == "up"
        assert n["heartbeat_age_ms"] < DEAD_AFTER_MS
        assert set(n["load"]) == {"cpu_millis", "mem_bytes", "contexts", "sandboxes"}
    assert "cluster" in cluster.health("b") and cluster.health("b")["cluster"]["node_id"] == "b"

    cluster.kill9("c")
    # b may not have read the table since c joined: c appears, then dies.
    v = poll(lambda: (lambda v: v if v.get("c", {}).get("state") == "dead" else None)(view(cluster, "b")),
             what="b to see c dead")
    assert v["c"]["live"] is False and v["a"]["live"] and v["b"]["live"]


def test_a_node_started_without_the_secret_refuses_to_start(cluster):
    with pytest.raises(RuntimeError) as e:
        api.Daemon(sets=SETS + ["cluster.node_id=z"], extra_args=["--store", cluster.url])
    assert "cluster.secret" in str(e.value)


def test_two_nodes_racing_for_a_dead_nodes_sandbox_exactly_one_owns_it(cluster):
    x = cluster.node("x")
    s = sid()
    assert execute(x, s, "1 + 1") == "2"
    assert cluster.owner(s) == ("x", 0)
    cluster.kill9("x")
    # Both start while x's heartbeat goes stale, so both scan for its
    # sandboxes at about the same time; the lease CAS decides.
    cluster.node("a")
    cluster.node("b")
    owner = poll(lambda: (lambda o: o if o and o[0] in ("a", "b") else None)(cluster.owner(s)),
                 what="a or b to adopt the sandbox")
    # Long enough for any second claim to land (several heartbeats after
    # x is dead for both): none does, the lease moved exactly once.
    time.sleep(3 * DEAD_AFTER_MS / 1000)
    assert cluster.owner(s) == (owner[0], 1)
    assert cluster.health("a")["cluster"]["rehomes"] + cluster.health("b")["cluster"]["rehomes"] == 1
    events = cluster.rehomed_events(s)
    assert len(events) == 1
    assert json.loads(events[0][0]) == {"from": "x", "to": owner[0]}


def test_kill9_of_the_owner_rehomes_its_sandbox_with_its_contexts(cluster):
    for name in ("a", "b", "c"):
        cluster.node(name)
    s = sid()
    first = cluster.nodes["a"]
    execute(first, s, "x = 41\ndef f(): return x + 1")
    owner = cluster.owner(s)[0]
    assert owner in ("a", "b", "c")
    cluster.kill9(owner)
    t0 = time.time()
    new = poll(lambda: (lambda o: o if o and o[0] not in ("", owner) else None)(cluster.owner(s)),
               timeout=DEAD_AFTER_MS / 1000 + 10, what="the sandbox to be re-homed")
    assert new[0] in cluster.nodes and new[1] == 1
    assert time.time() - t0 < DEAD_AFTER_MS / 1000 + 10
    # The new owner serves it; the context comes back from its journal.
    assert execute(cluster.nodes[new[0]], s, "f()") == "42"
    assert cluster.rehomed_events(s) and json.loads(cluster.rehomed_events(s)[0][0])["from"] == owner


@pytest.mark.skipif(not HAVE_REPLICA, reason="the workspace replica (cl-persist's src/sandbox/replica.c) "
                                             "is not merged yet")
def test_kill9_of_the_owner_rehomes_its_sandbox_with_its_files(cluster):
    for name in ("a", "b"):
        cluster.node(name)
    s = sid()
    node = cluster.nodes["a"]
    execute(node, s, "open('/workspace/kept.txt', 'w').write('durable')")
    owner = cluster.owner(s)[0]
    # The replica is written at most replica_delay_ms after the burst.
    time.sleep(3)
    cluster.kill9(owner)
    new = poll(lambda: (lambda o: o if o and o[0] not in ("", owner) else None)(cluster.owner(s)),
               timeout=DEAD_AFTER_MS / 1000 + 10, what="the sandbox to be re-homed")
    assert execute(cluster.nodes[new[0]], s, "open('/workspace/kept.txt').read()") == "'durable'"


def test_a_node_stopped_and_resumed_drops_the_sandbox_another_node_took(cluster):
    a = cluster.node("a")
    cluster.node("b", extra_sets=["cluster.heartbeat_ms=100"])
    s = sid()
    assert execute(a, s, "1 + 1") == "2"
    if cluster.owner(s)[0] != "a":
        pytest.skip("placement put the sandbox on b")
    loaded = lambda n: view(cluster, "a")["a"]["load"]["sandboxes"] == n  # noqa: E731
    poll(lambda: loaded(1), what="a to count its sandbox")
    a.proc.send_signal(19)   # SIGSTOP: a's heartbeat goes stale, b adopts
    try:
        poll(lambda: (lambda o: o if o and o[0] == "b" else None)(cluster.owner(s)),
             timeout=DEAD_AFTER_MS / 1000 + 10, what="b to adopt a's sandbox")
    finally:
        a.proc.send_signal(18)   # SIGCONT
    # Fencing: a's next heartbeat sees the row names b and drops its copy.
    poll(lambda: loaded(0), what="a to drop the sandbox b owns")
    assert cluster.owner(s) == ("b", 1)
    assert execute(cluster.nodes["b"], s, "2 + 2") == "4"


def test_a_clean_stop_hands_the_sandboxes_over_without_waiting_for_death(cluster):
    slow_death = ["cluster.dead_after_ms=60000"]
    a = cluster.node("a", extra_sets=slow_death)
    cluster.node("b", extra_sets=slow_death)
    s = sid()
    execute(a, s, "x = 41\ndef f(): return x + 1")
    owner = cluster.owner(s)[0]
    other = "b" if owner == "a" else "a"
    cluster.nodes.pop(owner).cleanup()   # SIGTERM: drains, then marks itself down
    # Long before dead_after_ms (a minute): the down state is what counts.
    new = poll(lambda: (lambda o: o if o and o[0] == other else None)(cluster.owner(s)),
               timeout=15, what="the other node to take the sandbox over")
    assert new[1] == 1
    assert view(cluster, other)[owner]["state"] == "down"
    assert execute(cluster.nodes[other], s, "f()") == "42"
