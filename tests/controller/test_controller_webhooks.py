"""Controller webhooks (issue 15, item 5; seed 003 "/webhooks"): an org's
endpoints receive its events as signed POSTs (X-Sandboxd-Signature:
t=<unix>,v1=<HMAC-SHA256 of "<t>.<body>">), retried with backoff and
recorded in a delivery log; a test delivery, secret rotation, redelivery;
deliveries queued while the receiver is down arrive after a daemon
restart; loopback/link-local targets refused unless allowed; org
isolation. The receiver is a python http.server the test runs on
loopback."""
import datetime
import hashlib
import hmac
import http.server
import json
import socket
import threading
import time

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, apikey, raw

# Loopback receivers need the allow key; retries fast so a test sees them.
HOOK_SETS = CTL_SETS + ["controller.webhooks_allow_private=true", "controller.webhooks_retry_base_ms=100",
                        "controller.webhooks_retry_max_ms=300", "controller.webhooks_max_attempts=4"]
WAIT_S = 30


class Receiver:
    """A loopback HTTP server that records every POST and answers with the
    next status of `script` (a status, or (status, {header: value})), then
    `then`."""

    def __init__(self, script=(), then=200, port=0, host="127.0.0.1", hold=None):
        self.requests = []
        self.hold = hold  # a threading.Event every answer waits for
        self.script = list(script)
        self.then = then
        self.cond = threading.Condition()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with rec.cond:
                    status = rec.script.pop(0) if rec.script else rec.then
                    status, extra = status if isinstance(status, tuple) else (status, {})
                    rec.requests.append({"headers": {k.lower(): v for k, v in self.headers.items()},
                                         "body": body, "status": status})
                    rec.cond.notify_all()
                if rec.hold is not None:
                    rec.hold.wait(WAIT_S)
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.server = Server((host, port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://{'[' + host + ']' if ':' in host else host}:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait(self, pred, what="a matching request"):
        """The requests once pred(requests) holds (fails after WAIT_S)."""
        deadline = time.time() + WAIT_S
        with self.cond:
            while not pred(self.requests):
                left = deadline - time.time()
                assert left > 0, f"timed out waiting for {what}; got {[r['body'] for r in self.requests]}"
                self.cond.wait(left)
            return list(self.requests)

    def events(self):
        with self.cond:
            return [json.loads(r["body"])["event"] for r in self.requests]

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def got_event(name, n=1):
    return lambda reqs: sum(json.loads(r["body"])["event"] == name for r in reqs) >= n


def verify(secret, req, tolerance=300):
    """The receiver's side of the scheme, as docs/controller-api.md shows it."""
    sig = dict(p.split("=", 1) for p in req["headers"]["x-sandboxd-signature"].split(","))
    t = int(sig["t"])
    assert abs(time.time() - t) < tolerance
    mac = hmac.new(secret.encode(), f"{t}.".encode() + req["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(mac, sig["v1"])


@pytest.fixture(scope="module")
def d():
    daemon = Daemon(sets=HOOK_SETS)
    yield daemon
    daemon.cleanup()


@pytest.fixture
def rx():
    r = Receiver()
    yield r
    r.close()


def org(d):
    acc = account(d)
    return acc, apikey(acc["api_key"]["key"])


def hook(d, creds, url, events=None, status=201, **extra):
    body = {"url": url, **extra}
    if events is not None:
        body["events"] = events
    st, h, _ = raw(d, "POST", V1 + "/webhooks", body, headers=creds)
    assert st == status, h
    return h


def sandbox(d, creds):
    st, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert st == 201, sb
    return sb["sandbox_id"]


def deliveries(d, creds, hid):
    st, body, _ = raw(d, "GET", V1 + f"/webhooks/{hid}/deliveries", headers=creds)
    assert st == 200, body
    return body["data"]


def wait_deliveries(d, creds, hid, pred):
    deadline = time.time() + WAIT_S
    while True:
        data = deliveries(d, creds, hid)
        if pred(data):
            return data
        assert time.time() < deadline, f"delivery log never matched: {data}"
        time.sleep(0.1)


def test_create_shows_the_secret_once_and_lists_without_it(d, rx):
    _, creds = org(d)
    h = hook(d, creds, rx.url, ["sandbox.created"], description="ci")
    assert h["id"].startswith("wh_") and h["secret"].startswith("whsec_")
    assert h["events"] == ["sandbox.created"] and h["active"] is True and h["description"] == "ci"
    st, one, _ = raw(d, "GET", V1 + f"/webhooks/{h['id']}", headers=creds)
    assert st == 200 and one["url"] == rx.url and "secret" not in one
    hook(d, creds, rx.url)  # events default to "*"
    st, page, _ = raw(d, "GET", V1 + "/webhooks?limit=1", headers=creds)
    assert st == 200 and page["total"] == 2 and page["has_more"] is True and len(page["data"]) == 1
    assert all("secret" not in w and "sealed_secret" not in w for w in page["data"])
    st, page2, _ = raw(d, "GET", V1 + "/webhooks?limit=1&offset=1", headers=creds)
    assert page2["data"][0]["events"] == ["*"]
    assert page2["data"][0]["id"] != page["data"][0]["id"]


@pytest.mark.parametrize("body", [
    {"url": "ftp://example.com/x"},
    {"url": "not a url"},
    {"url": "http://user:pw@example.com/"},
    {"url": "http://example.com/\u0000.evil"},
    {"url": "http://example.com/" + "a" * 2100},
    {"events": ["*"]},
    {"url": "http://example.com/", "events": []},
    {"url": "http://example.com/", "events": ["Bad Name"]},
    {"url": "http://example.com/", "events": "sandbox.created"},
    {"url": "http://example.com/", "active": "yes"},
])
def test_create_validates_its_body(d, body):
    _, creds = org(d)
    st, err, _ = raw(d, "POST", V1 + "/webhooks", body, headers=creds)
    assert st == 400 and err["error"]["code"] == "VALIDATION_ERROR", err


def test_a_receiver_failing_twice_gets_the_third_signed_delivery(d):
    rx = Receiver(script=[500, 500])
    try:
        _, creds = org(d)
        h = hook(d, creds, rx.url, ["sandbox.created"])
        sid = sandbox(d, creds)
        reqs = rx.wait(lambda r: len(r) >= 3, "three attempts")
        assert [r["status"] for r in reqs[:3]] == [500, 500, 200]
        last = reqs[2]
        body = json.loads(last["body"])
        assert body["event"] == "sandbox.created" and body["sandbox_id"] == sid
        assert body["id"].startswith("evt_") and body["created_at"].endswith("Z")
        assert isinstance(body["data"], dict)
        assert verify(h["secret"], last)
        assert not verify("whsec_wrong", last)
        assert last["headers"]["x-sandboxd-event"] == "sandbox.created"
        assert last["headers"]["content-type"] == "application/json"
        # One delivery, three attempts: the same id and body every time.
        assert len({r["headers"]["x-sandboxd-delivery"] for r in reqs[:3]}) == 1
        assert len({r["body"] for r in reqs[:3]}) == 1
        log = wait_deliveries(d, creds, h["id"], lambda data: data and data[0]["status"] == "succeeded")
        assert len(log) == 1
        dl = log[0]
        assert dl["id"] == last["headers"]["x-sandboxd-delivery"] and dl["event_id"] == body["id"]
        assert dl["attempts"] == 3 and dl["status_code"] == 200 and dl["error"] is None
        assert dl["delivered_at"] and dl["next_retry_at"] is None
        assert [a["status_code"] for a in dl["attempt_log"]] == [500, 500, 200]
        assert dl["attempt_log"][0]["error"] == "HTTP 500" and dl["attempt_log"][0]["next_retry_at"]
        assert all(a["duration_ms"] >= 0 for a in dl["attempt_log"])
        st, one, _ = raw(d, "GET", V1 + f"/webhooks/{h['id']}/deliveries/{dl['id']}", headers=creds)
        assert st == 200 and one["payload"] == body
    finally:
        rx.close()


def test_an_ipv6_receiver(d):
    rx = Receiver(host="::1")
    try:
        _, creds = org(d)
        h = hook(d, creds, rx.url)
        raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
        assert verify(h["secret"], rx.wait(got_event("webhook.test"))[0])
    finally:
        rx.close()


def test_a_delivery_is_failed_after_the_last_attempt(d):
    rx = Receiver(then=503)
    try:
        _, creds = org(d)
        h = hook(d, creds, rx.url)
        st, _, _ = raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
        assert st == 202
        log = wait_deliveries(d, creds, h["id"], lambda data: data and data[0]["status"] == "failed")
        assert log[0]["attempts"] == 4 and log[0]["status_code"] == 503 and log[0]["next_retry_at"] is None
        assert len(rx.requests) == 4
    finally:
        rx.close()


def iso_ms(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def test_retry_after_is_honoured_up_to_the_longest_delay(d):
    rx = Receiver(script=[(503, {"Retry-After": "1"})])
    try:
        _, creds = org(d)
        h = hook(d, creds, rx.url)
        raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
        log = wait_deliveries(d, creds, h["id"], lambda data: data and data[0]["status"] == "succeeded")
        first = log[0]["attempt_log"][0]
        assert first["status_code"] == 503
        # Asked for 1 s, capped at retry_max_ms (300); the backoff alone is
        # at most the base (100).
        gap = iso_ms(first["next_retry_at"]) - iso_ms(first["at"])
        assert 295 <= gap <= 305, first
    finally:
        rx.close()


def test_event_filters_deliver_only_what_was_subscribed(d):
    rxs = {k: Receiver() for k in ("deleted", "family", "star")}
    try:
        _, creds = org(d)
        hook(d, creds, rxs["deleted"].url, ["sandbox.deleted"])
        hook(d, creds, rxs["family"].url, ["sandbox.*"])
        hook(d, creds, rxs["star"].url, ["*"])
        sid = sandbox(d, creds)
        st, _, _ = raw(d, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)
        assert st == 200
        for r in rxs.values():
            r.wait(got_event("sandbox.deleted"), "sandbox.deleted")
        assert rxs["deleted"].events() == ["sandbox.deleted"]
        # One webhook receives in event order.
        assert rxs["star"].events() == ["sandbox.created", "sandbox.stopped", "sandbox.deleted"]
        assert rxs["family"].events() == rxs["star"].events()
    finally:
        for r in rxs.values():
            r.close()


def test_test_delivery_rotation_and_redelivery(d, rx):
    _, creds = org(d)
    h = hook(d, creds, rx.url, ["sandbox.created"])
    st, dl, _ = raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
    assert st == 202 and dl["event"] == "webhook.test" and dl["status"] == "pending"
    first = rx.wait(got_event("webhook.test"))[0]
    body = json.loads(first["body"])
    assert body["data"]["webhook_id"] == h["id"] and verify(h["secret"], first)

    st, rot, _ = raw(d, "POST", V1 + f"/webhooks/{h['id']}/rotate-secret", headers=creds)
    assert st == 200 and rot["secret"].startswith("whsec_") and rot["secret"] != h["secret"]
    raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
    second = rx.wait(got_event("webhook.test", 2))[1]
    assert verify(rot["secret"], second) and not verify(h["secret"], second)

    # Redelivery: the same body (so the same event id), a new delivery.
    st, again, _ = raw(d, "POST", V1 + f"/webhooks/{h['id']}/deliveries/{dl['id']}/redeliver", headers=creds)
    assert st == 202 and again["origin"] == "redeliver" and again["id"] != dl["id"]
    third = rx.wait(got_event("webhook.test", 3))[2]
    assert third["body"] == first["body"]
    assert third["headers"]["x-sandboxd-delivery"] == again["id"] != first["headers"]["x-sandboxd-delivery"]
    assert verify(rot["secret"], third)
    log = wait_deliveries(d, creds, h["id"], lambda data: len(data) == 3 and all(
        x["status"] == "succeeded" for x in data))
    assert [x["origin"] for x in log] == ["redeliver", "test", "test"]  # newest first


def test_update_and_delete(d, rx):
    _, creds = org(d)
    h = hook(d, creds, rx.url)
    st, up, _ = raw(d, "PATCH", V1 + f"/webhooks/{h['id']}",
                    {"events": ["sandbox.deleted"], "active": False, "description": "off"}, headers=creds)
    assert st == 200 and up["events"] == ["sandbox.deleted"] and up["active"] is False and up["description"] == "off"
    st, err, _ = raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
    assert st == 409, err
    st, up, _ = raw(d, "PUT", V1 + f"/webhooks/{h['id']}", {"active": True}, headers=creds)
    assert st == 200 and up["active"] is True and up["events"] == ["sandbox.deleted"]
    st, err, _ = raw(d, "PATCH", V1 + f"/webhooks/{h['id']}", {"url": "gopher://x"}, headers=creds)
    assert st == 400, err
    st, _, _ = raw(d, "DELETE", V1 + f"/webhooks/{h['id']}", headers=creds)
    assert st == 200
    for method in ("GET", "DELETE"):
        st, _, _ = raw(d, method, V1 + f"/webhooks/{h['id']}", headers=creds)
        assert st == 404
    st, _, _ = raw(d, "GET", V1 + f"/webhooks/{h['id']}/deliveries", headers=creds)
    assert st == 404


def test_org_isolation(d):
    rx_a, rx_b = Receiver(), Receiver()
    try:
        _, a = org(d)
        _, b = org(d)
        ha = hook(d, a, rx_a.url, ["*"])
        hb = hook(d, b, rx_b.url, ["*"])
        raw(d, "POST", V1 + f"/webhooks/{ha['id']}/test", headers=a)
        dl = rx_a.wait(got_event("webhook.test"))[0]["headers"]["x-sandboxd-delivery"]
        base = V1 + f"/webhooks/{ha['id']}"
        for method, path, body in [("GET", base, None), ("PATCH", base, {"active": False}),
                                   ("PUT", base, {"active": False}), ("DELETE", base, None),
                                   ("POST", base + "/rotate-secret", None), ("POST", base + "/test", None),
                                   ("GET", base + "/deliveries", None), ("GET", base + f"/deliveries/{dl}", None),
                                   ("POST", base + f"/deliveries/{dl}/redeliver", None)]:
            st, err, _ = raw(d, method, path, body, headers=b)
            assert st == 404 and err["error"]["code"] == "NOT_FOUND", (method, path, err)
        # B's id with A's delivery id is no way in either.
        st, _, _ = raw(d, "GET", V1 + f"/webhooks/{hb['id']}/deliveries/{dl}", headers=b)
        assert st == 404
        st, page, _ = raw(d, "GET", V1 + "/webhooks", headers=b)
        assert [w["id"] for w in page["data"]] == [hb["id"]]
        # A's events reach A's webhook only: once A's arrived, B's test
        # (queued after) is the first thing B's receiver ever gets.
        sandbox(d, a)
        rx_a.wait(got_event("sandbox.created"))
        raw(d, "POST", V1 + f"/webhooks/{hb['id']}/test", headers=b)
        rx_b.wait(got_event("webhook.test"))
        assert rx_b.events() == ["webhook.test"]
        st, one, _ = raw(d, "GET", base, headers=a)
        assert st == 200 and one["active"] is True  # B's PATCH changed nothing
    finally:
        rx_a.close()
        rx_b.close()


def test_loopback_and_metadata_targets_are_refused_without_the_allow_key():
    d = Daemon(sets=CTL_SETS)
    try:
        _, creds = org(d)
        for url in ("http://127.0.0.1:8080/hook", "http://169.254.169.254/latest/meta-data",
                    "http://[::1]/hook", "http://localhost/hook", "http://10.1.2.3/x", "http://192.168.1.1/x",
                    "http://[::ffff:127.0.0.1]/x", "http://0.0.0.0/x"):
            st, err, _ = raw(d, "POST", V1 + "/webhooks", {"url": url}, headers=creds)
            assert st == 400 and err["error"]["code"] == "VALIDATION_ERROR", (url, err)
            assert "refused" in err["error"]["message"]
    finally:
        d.cleanup()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_deliveries_queued_while_the_receiver_is_down_arrive_after_a_restart():
    sets = CTL_SETS + ["controller.webhooks_allow_private=true", "controller.webhooks_retry_base_ms=200",
                       "controller.webhooks_retry_max_ms=500", "controller.webhooks_max_attempts=100"]
    port = free_port()
    d = Daemon(sets=sets)
    rx = None
    try:
        _, creds = org(d)
        h = hook(d, creds, f"http://127.0.0.1:{port}/hook", ["sandbox.created"])
        sid = sandbox(d, creds)
        # Nothing listens: the attempts fail and are logged.
        wait_deliveries(d, creds, h["id"], lambda data: data and data[0]["attempts"] >= 2)
        d.stop()
        rx = Receiver(port=port)
        d2 = Daemon(sets=sets, data_dir=d.data_dir)
        try:
            reqs = rx.wait(got_event("sandbox.created"))
            body = json.loads(reqs[0]["body"])
            assert body["sandbox_id"] == sid and verify(h["secret"], reqs[0])
            log = wait_deliveries(d2, creds, h["id"], lambda data: data and data[0]["status"] == "succeeded")
            assert len(log) == 1 and log[0]["attempts"] >= 3
            # libcurl's own words, with the address it was pinned to.
            assert f"127.0.0.1 port {port}" in log[0]["attempt_log"][0]["error"], log[0]["attempt_log"][0]
            # Only the one event, once: the restart queued nothing twice.
            time.sleep(0.5)
            assert rx.events() == ["sandbox.created"]
        finally:
            d2.stop()
    finally:
        if rx:
            rx.close()
        d.cleanup()


def test_a_loopback_url_is_refused_again_at_delivery_time():
    """A webhook stored while loopback was allowed (or whose name now
    resolves inward) is checked again when it is sent: nothing reaches it."""
    allow = Daemon(sets=HOOK_SETS)
    rx = Receiver()
    try:
        _, creds = org(allow)
        h = hook(allow, creds, rx.url)
        allow.stop()
        d = Daemon(sets=CTL_SETS + ["controller.webhooks_max_attempts=1"], data_dir=allow.data_dir)
        try:
            st, _, _ = raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
            assert st == 202
            log = wait_deliveries(d, creds, h["id"], lambda data: data and data[0]["status"] == "failed")
            assert "refused" in log[0]["error"] and log[0]["status_code"] is None
            assert rx.requests == []
        finally:
            d.stop()
    finally:
        rx.close()
        allow.cleanup()


def test_a_hanging_receiver_delays_no_other_webhook_and_no_stop():
    d = Daemon(sets=HOOK_SETS + ["controller.webhooks_timeout_ms=60000"])
    slow, fast = Receiver(hold=threading.Event()), Receiver()
    try:
        _, a = org(d)
        _, b = org(d)
        hs = hook(d, a, slow.url)
        hf = hook(d, b, fast.url)
        raw(d, "POST", V1 + f"/webhooks/{hs['id']}/test", headers=a)
        slow.wait(lambda r: len(r) == 1, "the slow receiver's request")
        raw(d, "POST", V1 + f"/webhooks/{hf['id']}/test", headers=b)
        fast.wait(got_event("webhook.test"), "the fast receiver's request while the slow one hangs")
        # The stop cuts the hanging transfer: the daemon exits cleanly.
        d.stop()
        assert d.proc.returncode == 0, d.read_log()
    finally:
        slow.close()
        fast.close()
        d.cleanup()


def test_a_webhook_failing_for_too_long_is_disabled_and_can_be_enabled_again():
    d = Daemon(sets=HOOK_SETS + ["controller.webhooks_max_attempts=100", "controller.webhooks_disable_after_s=1"])
    rx = Receiver(then=500)
    try:
        _, creds = org(d)
        h = hook(d, creds, rx.url)
        raw(d, "POST", V1 + f"/webhooks/{h['id']}/test", headers=creds)
        deadline = time.time() + WAIT_S
        while True:
            st, one, _ = raw(d, "GET", V1 + f"/webhooks/{h['id']}", headers=creds)
            if not one["active"]:
                break
            assert time.time() < deadline, one
            time.sleep(0.1)
        assert one["disabled_reason"] and one["failing_since"]
        n = len(rx.requests)
        assert n >= 2
        # Off: no more attempts, the delivery waits.
        time.sleep(0.6)
        assert len(rx.requests) == n
        assert deliveries(d, creds, h["id"])[0]["status"] == "pending"
        rx.then = 200
        st, one, _ = raw(d, "PATCH", V1 + f"/webhooks/{h['id']}", {"active": True}, headers=creds)
        assert st == 200 and one["active"] and one["disabled_reason"] is None and one["failing_since"] is None
        wait_deliveries(d, creds, h["id"], lambda data: data[0]["status"] == "succeeded")
    finally:
        rx.close()
        d.cleanup()
