"""Concurrency budgets and queue mode (issue 15 item 2; seed "Concurrency
Budgets & Queue Mode"): an org's plan caps its sandboxes and executions at
once; past that 429 CONCURRENT_LIMIT_EXCEEDED, or with queue mode 202 with
a request id, run in order when a slot frees and polled at
GET /requests/:id; queued work survives a restart; 429
QUEUE_DEPTH_EXCEEDED; GET /queue/health; org isolation."""
import threading
import time

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, apikey, header, raw


def create(d, key, **body):
    return raw(d, "POST", V1 + "/sandbox/create", body, apikey(key))


def execute(d, key, sid, command, **body):
    body["command"] = command
    return raw(d, "POST", f"{V1}/sandbox/{sid}/execute", body, apikey(key))


def wait_done(d, key, rid, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s, body, _ = raw(d, "GET", f"{V1}/requests/{rid}", headers=apikey(key))
        assert s == 200, body
        if body["status"] not in ("queued", "processing"):
            return body
        time.sleep(0.1)
    raise AssertionError(f"request {rid} still {body['status']}")


@pytest.fixture(scope="module")
def plain():
    d = Daemon(sets=CTL_SETS + ["controller.budget_executes=1"])
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def queued():
    d = Daemon(sets=CTL_SETS + ["controller.queue_mode=1", "controller.budget_executes=1",
                                "controller.queue_max_depth=3"])
    yield d
    d.cleanup()


def test_hobby_plan_holds_three_sandboxes(plain):
    key = account(plain)["api_key"]["key"]
    ids = []
    for _ in range(3):
        s, body, _ = create(plain, key)
        assert s == 201, body
        ids.append(body["sandbox_id"])
    s, body, hdrs = create(plain, key)
    assert s == 429 and body["error"]["code"] == "CONCURRENT_LIMIT_EXCEEDED", body
    assert "hobby" in body["error"]["message"] and header(hdrs, "retry-after") == "1"
    # Another org has its own budget.
    other = account(plain)["api_key"]["key"]
    assert create(plain, other)[0] == 201
    # Deleting one frees its slot.
    assert raw(plain, "DELETE", f"{V1}/sandbox/{ids[0]}", headers=apikey(key))[0] == 200
    assert create(plain, key)[0] == 201


def test_execution_budget_without_queue_mode(plain):
    key = account(plain)["api_key"]["key"]
    s, body, _ = create(plain, key)
    sid = body["sandbox_id"]
    slow = threading.Thread(target=execute, args=(plain, key, sid, "sleep 2"))
    slow.start()
    try:
        deadline = time.time() + 10
        while time.time() < deadline:
            s, body, _ = raw(plain, "GET", V1 + "/queue/health", headers=apikey(key))
            if body["budget"]["executing"] == 1:
                break
            time.sleep(0.05)
        assert body["budget"] == {"plan": "hobby", "max_concurrent_sandboxes": 3, "max_concurrent_executes": 1,
                                  "sandboxes": 1, "executing": 1}
        s, body, _ = execute(plain, key, sid, "echo second")
        assert s == 429 and body["error"]["code"] == "CONCURRENT_LIMIT_EXCEEDED"
    finally:
        slow.join()
    s, body, _ = execute(plain, key, sid, "echo third")
    assert s == 200 and body["stdout"] == "third\n"


def test_queue_mode_runs_in_order_and_keeps_answers(queued):
    key = account(queued)["api_key"]["key"]
    sid = create(queued, key)[1]["sandbox_id"]
    slow = threading.Thread(target=execute, args=(queued, key, sid, "sleep 1; echo first >> log"))
    slow.start()
    time.sleep(0.3)
    rids = []
    for i in range(2):
        s, body, hdrs = execute(queued, key, sid, f"echo q{i} >> log; cat log")
        assert s == 202, body
        assert body["status"] == "queued" and body["requestId"].startswith("req_")
        assert body["position"] == i + 1 and body["queue_depth"] == i + 1
        assert body["estimated_wait_seconds"] >= 1
        assert header(hdrs, "x-stateset-queue-status") == "queued"
        assert header(hdrs, "x-stateset-queue-position") == str(i + 1)
        assert int(header(hdrs, "retry-after")) >= 1
        rids.append(body["requestId"])
    s, body, _ = raw(queued, "GET", f"{V1}/requests/{rids[1]}", headers=apikey(key))
    assert s == 200 and body["status"] == "queued" and body["position"] == 2
    slow.join()
    first, second = (wait_done(queued, key, r) for r in rids)
    assert first["status"] == "completed" and first["response_status"] == 200
    assert first["response_body"]["stdout"] == "first\nq0\n"
    assert second["response_body"]["stdout"] == "first\nq0\nq1\n"
    # Another org never sees them.
    other = account(queued)["api_key"]["key"]
    s, body, _ = raw(queued, "GET", f"{V1}/requests/{rids[0]}", headers=apikey(other))
    assert s == 404 and body["error"]["code"] == "NOT_FOUND"
    s, body, _ = raw(queued, "GET", V1 + "/requests?limit=1", headers=apikey(key))
    assert s == 200 and body["total"] == 2 and body["has_more"] is True
    assert [r["requestId"] for r in body["data"]] == [rids[1]]
    assert raw(queued, "GET", V1 + "/requests", headers=apikey(other))[1]["total"] == 0
    s, body, _ = raw(queued, "GET", V1 + "/queue/health", headers=apikey(key))
    assert s == 200 and body["queue_mode"] is True and body["completed_count"] == 2
    assert body["seconds_per_queue_position"] >= 1
    assert body["queue_depth"] == 0 and body["p95_wait_ms"] >= body["average_wait_ms"] > 0


def test_queue_depth_and_streams(queued):
    key = account(queued)["api_key"]["key"]
    sid = create(queued, key)[1]["sandbox_id"]
    slow = threading.Thread(target=execute, args=(queued, key, sid, "sleep 1.5"))
    slow.start()
    time.sleep(0.3)
    try:
        for _ in range(3):
            assert execute(queued, key, sid, "true")[0] == 202
        s, body, _ = execute(queued, key, sid, "true")
        assert s == 429 and body["error"]["code"] == "QUEUE_DEPTH_EXCEEDED"
        s, body, _ = execute(queued, key, sid, "true", stream=True)
        assert s == 429 and body["error"]["code"] == "CONCURRENT_LIMIT_EXCEEDED"
    finally:
        slow.join()


def test_queued_create_runs_when_a_sandbox_is_deleted(queued):
    key = account(queued)["api_key"]["key"]
    ids = [create(queued, key)[1]["sandbox_id"] for _ in range(3)]
    s, body, _ = create(queued, key, env={"A": "1"})
    assert s == 202, body
    rid = body["requestId"]
    time.sleep(0.5)
    assert raw(queued, "GET", f"{V1}/requests/{rid}", headers=apikey(key))[1]["status"] == "queued"
    assert raw(queued, "DELETE", f"{V1}/sandbox/{ids[0]}", headers=apikey(key))[0] == 200
    done = wait_done(queued, key, rid)
    assert done["response_status"] == 201 and done["kind"] == "sandbox"
    new_id = done["response_body"]["sandbox_id"]
    s, body, _ = raw(queued, "GET", f"{V1}/sandbox/{new_id}", headers=apikey(key))
    assert s == 200 and body["org_id"] == done["response_body"]["org_id"]


def test_queued_work_survives_a_restart(tmp_path):
    sets = CTL_SETS + ["controller.queue_mode=1", "controller.budget_executes=1"]
    d = Daemon(sets=sets, data_dir=str(tmp_path))
    try:
        key = account(d)["api_key"]["key"]
        sid = create(d, key)[1]["sandbox_id"]
        slow = threading.Thread(target=execute, args=(d, key, sid, "sleep 3"))
        slow.start()
        time.sleep(0.5)
        s, body, _ = execute(d, key, sid, "echo after-restart")
        assert s == 202, body
        rid = body["requestId"]
        d.stop()
        slow.join()
        d = Daemon(sets=sets, data_dir=str(tmp_path))
        done = wait_done(d, key, rid)
        assert done["status"] == "completed" and done["response_body"]["stdout"] == "after-restart\n"
    finally:
        d.cleanup()
