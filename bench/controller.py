"""Section 7 of bench/run.py: the controller API (issue 12), beside the
runtime API in the same run:

  a. `POST /api/v1/sandbox/:id/execute` of `true` (a command in the
     sandbox's jail, answered as JSON) vs the runtime API's stateless
     `POST /execute/shell` of `true`, one client back to back;
  b. the round trip a new tenant makes: `POST /register` → `POST
     /sandbox/create` → `POST /sandbox/:id/execute` `true`, end to end
     (register hashes a password with Argon2id, by design the slow step),
     and its three steps apart.
"""

import json
import time
import uuid

from harness import BenchError, Client, fmt_ms, fmt_x, ratio, summary

PARAMS = {"full": dict(exec_n=100, trip_n=10), "quick": dict(exec_n=10, trip_n=2)}
V1 = "/api/v1"


def _post(port, path, body, headers):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers)
        c.request("POST", path, body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        raw = r.read()
        return r.status, json.loads(raw) if raw else None
    finally:
        c.close()


def _register(port):
    email = f"bench-{uuid.uuid4().hex[:12]}@example.com"
    status, body = _post(port, V1 + "/register", {"first_name": "Bench", "last_name": "Mark",
                                                  "organization_name": "Bench " + email, "email": email,
                                                  "password": "BenchPassword123", "use_case": "bench"}, {})
    if status != 201:
        raise BenchError(f"register: HTTP {status}: {str(body)[:300]}")
    return {"Authorization": "ApiKey " + body["api_key"]["key"]}


def _create(port, creds):
    status, body = _post(port, V1 + "/sandbox/create", {}, creds)
    if status not in (200, 201):
        raise BenchError(f"sandbox/create: HTTP {status}: {str(body)[:300]}")
    return body["sandbox_id"]


def _execute(port, creds, sid):
    status, body = _post(port, f"{V1}/sandbox/{sid}/execute", {"command": ["true"]}, creds)
    if status != 200 or body.get("exit_code") != 0:
        raise BenchError(f"execute: HTTP {status}: {str(body)[:300]}")


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def section_controller(profile, work, run_bin, out):
    p = PARAMS[profile]
    d = work.daemon(run_bin).start()
    res = out.setdefault("controller", {})
    try:
        creds = _register(d.port)
        sid = _create(d.port, creds)
        _execute(d.port, creds, sid)
        d.settle()
        res["execute"] = summary([_timed(lambda: _execute(d.port, creds, sid)) for _ in range(p["exec_n"])])
        c = Client(d.port)
        c.request("POST", "/execute/shell", {"code": "true"})
        d.settle()

        def stateless():
            status, body = c.request("POST", "/execute/shell", {"code": "true"})
            if status != 200:
                raise BenchError(f"/execute/shell: HTTP {status}")
        res["stateless"] = summary([_timed(stateless) for _ in range(p["exec_n"])])
        c.close()
        steps = {"register": [], "create": [], "execute": [], "trip": []}
        for _ in range(p["trip_n"]):
            d.settle()
            t0 = time.perf_counter()
            cr = _register(d.port)
            t1 = time.perf_counter()
            s = _create(d.port, cr)
            t2 = time.perf_counter()
            _execute(d.port, cr, s)
            t3 = time.perf_counter()
            steps["register"].append(t1 - t0)
            steps["create"].append(t2 - t1)
            steps["execute"].append(t3 - t2)
            steps["trip"].append(t3 - t0)
        res["trip"] = {k: summary(v) for k, v in steps.items()}
    finally:
        d.stop()


def controller_report(out):
    r = out.get("controller")
    if not r:
        return []
    L = ["### 7. The controller API", "",
         "| row | p50 ms | p99 ms | ratio p50 / p99 |", "| --- | ---: | ---: | ---: |"]
    e, s = r["execute"], r["stateless"]
    L.append(f"| `POST /api/v1/sandbox/:id/execute` `[\"true\"]`, one client back to back | {fmt_ms(e['p50'])} | "
             f"{fmt_ms(e['p99'])} | {fmt_x(ratio(e['p50'], s['p50']))} / {fmt_x(ratio(e['p99'], s['p99']))} |")
    L.append(f"| runtime API `POST /execute/shell` `true` (reference) | {fmt_ms(s['p50'])} | {fmt_ms(s['p99'])} | 1.00× |")
    t = r["trip"]
    for k, label in (("trip", "register → create → execute, end to end"), ("register", "… `POST /register` (Argon2id)"),
                     ("create", "… `POST /sandbox/create`"), ("execute", "… first `execute` in it")):
        L.append(f"| {label} | {fmt_ms(t[k]['p50'])} | {fmt_ms(t[k]['p99'])} | |")
    L.append("")
    return L


def controller_compact(out):
    r = out.get("controller") or {}
    L = []
    if "execute" in r:
        L.append(f"{'controller execute true':<48} {fmt_ms(r['execute']['p50']):>9} {fmt_ms(r['execute']['p99']):>9}")
    if "trip" in r:
        t = r["trip"]["trip"]
        L.append(f"{'controller register→create→execute':<48} {fmt_ms(t['p50']):>9} {fmt_ms(t['p99']):>9}")
    return L
