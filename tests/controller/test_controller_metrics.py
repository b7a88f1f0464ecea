"""GET /api/v1/metrics (issue 12, item 8): Prometheus text format 0.0.4
behind the internal token (X-Internal-Token or Authorization: Bearer;
controller.internal_token / INTERNAL_API_TOKEN), loopback clients only
when none is set; the text parses (a small parser below: # HELP/# TYPE,
samples, histograms cumulative up to +Inf = _count) and the counters move
when code runs. Also the seed's feature flags under their own names
(IDEMPOTENCY_ENABLED, REPL_ENABLED, INTERNAL_API_TOKEN)."""
import http.client
import re
import socket
import subprocess
import uuid

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, all_addresses_daemon, api, apikey, header, raw

TOKEN = "tok-" + uuid.uuid4().hex
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{name: {"type", "help", "samples": [(labels dict, value)]}}; asserts
    the format's rules on the way. Histogram samples (_bucket, _sum,
    _count) are filed under their family."""
    fams, current = {}, None
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            assert name not in fams, f"family {name} twice"
            current = fams[name] = {"help": help_, "type": None, "samples": []}
        elif line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert name in fams and fams[name]["type"] is None, line
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            fams[name]["type"] = typ
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample: {line!r}"
            name, labels = m.group(1), dict(LABEL.findall(m.group(3) or ""))
            value = float(m.group(4))
            family = re.sub(r"_(bucket|sum|count)$", "", name) if current and current["type"] == "histogram" else name
            assert current is not None and family in fams and fams[family] is current, line
            current["samples"].append((name, labels, value))
    for name, fam in fams.items():
        assert fam["type"], name
        if fam["type"] == "counter":
            assert all(v >= 0 for _, _, v in fam["samples"]), name
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return fams


def check_histogram(name, samples):
    series = {}
    for sname, labels, value in samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "count": None, "sum": None})
        if sname == name + "_bucket":
            s["buckets"].append((labels["le"], value))
        elif sname == name + "_count":
            s["count"] = value
        else:
            assert sname == name + "_sum"
            s["sum"] = value
    assert series
    for key, s in series.items():
        les = [le for le, _ in s["buckets"]]
        assert les[-1] == "+Inf", key
        bounds = [float(le) for le in les[:-1]]
        assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds), key
        counts = [v for _, v in s["buckets"]]
        assert counts == sorted(counts), f"{key}: buckets not cumulative"
        assert counts[-1] == s["count"], f"{key}: +Inf != _count"
        assert s["sum"] is not None and s["sum"] >= 0


def value(fams, name, **labels):
    family = fams[re.sub(r"_(bucket|sum|count)$", "", name)] if name not in fams else fams[name]
    for sname, l, v in family["samples"]:
        if sname == name and all(l.get(k) == want for k, want in labels.items()):
            return v
    raise KeyError((name, labels))


def scrape(d, headers=None):
    status, body, hdrs = d.request("GET", V1 + "/metrics", headers=headers)
    return status, body, hdrs


def test_loopback_scrape_parses_and_counts(ctl):
    d = ctl
    status, body, hdrs = scrape(d)
    assert status == 200, body
    assert hdrs["content-type"].startswith("text/plain; version=0.0.4")
    before = parse(body.decode())
    for fam in ("sandboxd_executions_total", "sandboxd_execution_duration_seconds", "sandboxd_sandboxes",
                "sandboxd_contexts_live", "sandboxd_pool_members", "sandboxd_http_requests_total",
                "sandboxd_errors_total"):
        assert fam in before, fam
    assert before["sandboxd_execution_duration_seconds"]["type"] == "histogram"
    assert before["sandboxd_sandboxes"]["type"] == "gauge"
    assert before["sandboxd_executions_total"]["type"] == "counter"

    d.execute("python", "print(1)")
    d.execute("python", "raise ValueError('x')")
    assert raw(d, "GET", V1 + "/nope-" + uuid.uuid4().hex)[0] == 404
    after = parse(scrape(d)[1].decode())

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("sandboxd_executions_total", api="runtime", outcome="ok") == 1
    assert delta("sandboxd_executions_total", api="runtime", outcome="error") == 1
    assert delta("sandboxd_execution_duration_seconds_count", api="runtime") == 2
    assert delta("sandboxd_execution_duration_seconds_sum", api="runtime") > 0
    assert delta("sandboxd_http_requests_total", code="2xx") >= 3   # two executes + the first scrape
    assert delta("sandboxd_http_requests_total", code="4xx") >= 1
    # The gateway's code contexts: a sandbox, a live interpreter.
    status, res, _ = d.request("POST", "/languages/python/sandboxes/m1/execute", body={"code": "1 + 1"})
    assert status == 200, res
    later = parse(scrape(d)[1].decode())
    assert value(later, "sandboxd_sandboxes") >= 1
    assert value(later, "sandboxd_contexts_live") >= 1
    assert value(later, "sandboxd_executions_total", api="gateway", outcome="ok") == 1
    assert value(later, "sandboxd_execution_duration_seconds_count", api="gateway") == 1


def non_loopback_address():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 1))
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith("127.") else addr


def get_from(addr, port, path, headers=None):
    conn = http.client.HTTPConnection(addr, port, timeout=20)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def test_no_token_means_loopback_only():
    addr = non_loopback_address()
    if not addr:
        pytest.skip("no non-loopback address on this host")
    d = all_addresses_daemon()
    port = d.port
    try:
        assert scrape(d)[0] == 200  # loopback
        status, body = get_from(addr, port, V1 + "/metrics")
        assert status == 401, body
        assert b"AUTH_REQUIRED" in body
        # Other routes are reachable from there: only /metrics is loopback-only.
        assert get_from(addr, port, V1 + "/health")[0] == 200
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def token_daemon():
    d = Daemon(sets=CTL_SETS, env={"INTERNAL_API_TOKEN": TOKEN})
    yield d
    d.cleanup()


@pytest.mark.parametrize("headers", [
    None,
    {"X-Internal-Token": "wrong"},
    {"X-Internal-Token": TOKEN[:-1]},
    {"X-Internal-Token": TOKEN + "x"},
    {"Authorization": "Bearer wrong"},
    {"Authorization": f"ApiKey {TOKEN}"},
])
def test_token_required_when_configured(token_daemon, headers):
    status, body, _ = scrape(token_daemon, headers)
    assert status == 401, body
    assert TOKEN.encode() not in body


@pytest.mark.parametrize("headers", [{"X-Internal-Token": TOKEN}, {"Authorization": f"Bearer {TOKEN}"},
                                     {"authorization": f"bearer {TOKEN}"}])
def test_token_accepted(token_daemon, headers):
    status, body, _ = scrape(token_daemon, headers)
    assert status == 200
    parse(body.decode())


def test_idempotency_flag_off_ignores_the_header():
    d = Daemon(sets=CTL_SETS, env={"IDEMPOTENCY_ENABLED": "false"})
    try:
        creds = apikey(account(d)["api_key"]["key"])
        idem = dict(creds, **{"Idempotency-Key": "same"})
        status, _, hdrs = raw(d, "POST", V1 + "/secrets", {"name": "A", "value": "v"}, idem)
        assert status == 201 and header(hdrs, "idempotency-status") is None
        # The same request again is run again (no replay): the name is taken.
        status, res, _ = raw(d, "POST", V1 + "/secrets", {"name": "A", "value": "v"}, idem)
        assert status == 409 and res["error"]["code"] == "CONFLICT"
    finally:
        d.cleanup()


def test_flags_default_on_and_bad_values_refused(ctl):
    creds = apikey(account(ctl)["api_key"]["key"])
    idem = dict(creds, **{"Idempotency-Key": "k-" + uuid.uuid4().hex})
    assert raw(ctl, "POST", V1 + "/secrets", {"name": "A", "value": "v"}, idem)[0] == 201
    status, _, hdrs = raw(ctl, "POST", V1 + "/secrets", {"name": "A", "value": "v"}, idem)
    assert status == 201 and header(hdrs, "idempotency-status") == "replayed"
    for env in ({"REPL_ENABLED": "maybe"}, {"IDEMPOTENCY_ENABLED": "2"}):
        proc = subprocess.run([api.BIN, "--print-config"], env=dict(env, PATH="/usr/bin:/bin"),
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and list(env)[0] in proc.stderr, (env, proc.stderr)
    proc = subprocess.run([api.BIN, "--print-config"], env={"PATH": "/usr/bin:/bin", "REPL_ENABLED": "false"},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    assert "controller.repl_enabled" in proc.stdout


def test_repl_flag_off_unregisters_the_repl_routes():
    d = Daemon(sets=CTL_SETS, env={"REPL_ENABLED": "false"})
    try:
        creds = apikey(account(d)["api_key"]["key"])
        status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, creds)
        assert status == 201, sb
        for method, path in (("POST", ""), ("GET", ""), ("POST", "/r1/execute"), ("DELETE", "/r1")):
            status, res, _ = raw(d, method, V1 + f"/sandbox/{sb['sandbox_id']}/repl/sessions{path}",
                                 {} if method == "POST" else None, creds)
            assert status == 404 and res["error"]["code"] == "NOT_FOUND", (method, path, res)
        # The rest of the API is there.
        assert raw(d, "GET", V1 + f"/sandbox/{sb['sandbox_id']}", headers=creds)[0] == 200
    finally:
        d.cleanup()


def test_controller_executions_are_counted(ctl):
    """The controller's execute (a command) and its REPL cells count as
    api="controller" executions."""
    d = ctl
    creds = apikey(account(d)["api_key"]["key"])
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status in (200, 201), sb
    sid = sb["sandbox_id"]
    before = parse(scrape(d)[1].decode())
    status, out, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": "exit 3"}, headers=creds)
    assert status == 200 and out["exit_code"] == 3, out
    status, s, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/repl/sessions", {}, headers=creds)
    assert status in (200, 201), s
    status, cell, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/repl/sessions/{s['session']['id']}/execute",
                          {"code": "6 * 7"}, headers=creds)
    assert status == 200 and cell["status"] == "ok", cell
    after = parse(scrape(d)[1].decode())

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)
    assert delta("sandboxd_executions_total", api="controller", outcome="error") == 1   # exit 3
    assert delta("sandboxd_executions_total", api="controller", outcome="ok") == 1      # the cell
    assert delta("sandboxd_execution_duration_seconds_count", api="controller") == 2
