"""Budgets across a cluster (issue 16 item 4): the controller's concurrent
executions of an org are counted in the shared store (exec_slots), so N
executions on nodes a and b together fill a budget of N; the next one on
either node is 429 CONCURRENT_LIMIT_EXCEEDED, or in queue mode 202 and runs
once an execution on the OTHER node ends; kill -9 of a node holding slots
frees them once it is declared dead. Real daemons on one PostgreSQL
database (make cluster)."""
import threading
import time

import pytest

from cluster_common import PG_HOST, V1, Cluster, poll, psql

pytestmark = pytest.mark.skipif(not PG_HOST, reason="needs the PostgreSQL cluster of tests/pg/pg_plugin.py "
                                                    "(make cluster)")


def start(budget, queue=False):
    c = Cluster()
    sets = [f"controller.budget_executes={budget}", "controller.budget_sandboxes=10"]
    if queue:
        sets.append("controller.queue_mode=1")
    c.node("a", extra_sets=sets)
    c.node("b", extra_sets=sets)
    return c


@pytest.fixture
def cluster():
    c = start(2)
    yield c
    c.close()


@pytest.fixture
def queued():
    c = start(1, queue=True)
    yield c
    c.close()


def register(d):
    status, reg, _ = d.request("POST", V1 + "/register", {
        "first_name": "Ada", "last_name": "L", "organization_name": "Budget",
        "email": f"budget-{time.time_ns()}@example.com", "password": "SecurePassword123!", "use_case": "tests"})
    assert status == 201, reg
    return {"Authorization": f"ApiKey {reg['api_key']['key']}"}


def sandbox_on_each(c, creds):
    """{node id: a sandbox that node owns}, creating through each node in turn."""
    owned = {}
    for i in range(8):
        d = c.nodes["ab"[i % 2]]
        status, sb, _ = d.request("POST", V1 + "/sandbox/create", {}, headers=creds)
        assert status == 201, sb
        owner = poll(lambda: (c.owner(sb["sandbox_id"]) or ("", 0))[0], timeout=10, what="an owner")
        owned.setdefault(owner, sb["sandbox_id"])
        if set(owned) == {"a", "b"}:
            return owned
    raise AssertionError(f"placement never chose both nodes: {owned}")


def execute(d, creds, sid, command):
    status, body, _ = d.request("POST", f"{V1}/sandbox/{sid}/execute", {"command": command}, headers=creds)
    return status, body


def in_background(d, creds, sid, command):
    out = {}

    def run():
        try:
            out["result"] = execute(d, creds, sid, command)
        except OSError as e:   # its node was killed
            out["result"] = (None, str(e))
    t = threading.Thread(target=run)
    t.start()
    return t, out


def executing(c, node, creds):
    status, body, _ = c.nodes[node].request("GET", V1 + "/queue/health", headers=creds)
    assert status == 200, body
    return body["budget"]["executing"]


def test_executions_on_two_nodes_fill_one_budget(cluster):
    creds = register(cluster.nodes["a"])
    owned = sandbox_on_each(cluster, creds)
    slow = [in_background(cluster.nodes[n], creds, owned[n], "sleep 3; echo slow") for n in ("a", "b")]
    try:
        # Each node sees both executions: the count is the store's.
        poll(lambda: executing(cluster, "a", creds) == 2 and executing(cluster, "b", creds) == 2,
             what="two executions counted on both nodes")
        assert psql(cluster.db, "SELECT node_id FROM exec_slots ORDER BY node_id") == [["a"], ["b"]]
        for n in ("a", "b"):
            status, body = execute(cluster.nodes[n], creds, owned[n], "echo over")
            assert status == 429 and body["error"]["code"] == "CONCURRENT_LIMIT_EXCEEDED", body
    finally:
        for t, _ in slow:
            t.join()
    for _, out in slow:
        assert out["result"][0] == 200 and out["result"][1]["stdout"] == "slow\n", out
    assert psql(cluster.db, "SELECT count(*) FROM exec_slots") == [["0"]]
    status, body = execute(cluster.nodes["b"], creds, owned["a"], "echo free")
    assert status == 200 and body["stdout"] == "free\n", body


def test_a_queued_execution_runs_when_one_on_the_other_node_ends(queued):
    creds = register(queued.nodes["a"])
    owned = sandbox_on_each(queued, creds)
    began = time.time()
    t, out = in_background(queued.nodes["b"], creds, owned["b"], "sleep 2; echo slow")
    poll(lambda: executing(queued, "a", creds) == 1, what="b's execution counted on a")
    status, body = execute(queued.nodes["a"], creds, owned["a"], "date +%s.%N")
    assert status == 202 and body["status"] == "queued", body
    rid = body["requestId"]
    t.join()
    assert out["result"][0] == 200, out

    def done():
        s, r, _ = queued.nodes["a"].request("GET", f"{V1}/requests/{rid}", headers=creds)
        assert s == 200, r
        return r if r["status"] not in ("queued", "processing") else None
    r = poll(done, timeout=30, what="the queued execution to run")
    assert r["status"] == "completed" and r["response_status"] == 200, r
    # It ran after b's execution ended, not beside it.
    assert float(r["response_body"]["stdout"]) >= began + 1.9, (began, r)


def test_kill_9_of_a_node_holding_slots_frees_them(cluster):
    creds = register(cluster.nodes["a"])
    owned = sandbox_on_each(cluster, creds)
    slow = [in_background(cluster.nodes["a"], creds, owned["a"], "sleep 3") for _ in range(2)]
    poll(lambda: executing(cluster, "b", creds) == 2, what="a's two executions counted on b")
    status, body = execute(cluster.nodes["b"], creds, owned["b"], "echo over")
    assert status == 429 and body["error"]["code"] == "CONCURRENT_LIMIT_EXCEEDED", body
    cluster.kill9("a")
    for t, _ in slow:
        t.join()
    poll(lambda: psql(cluster.db, "SELECT count(*) FROM exec_slots WHERE node_id = 'a'") == [["0"]],
         what="a's slots freed once it is dead")

    def runs():
        s, res = execute(cluster.nodes["b"], creds, owned["b"], "echo after")
        assert s in (200, 429), res
        return res if s == 200 else None
    assert poll(runs, what="an execution on b after a died")["stdout"] == "after\n"
    assert executing(cluster, "b", creds) == 0
