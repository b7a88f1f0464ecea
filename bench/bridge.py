"""Section 5 of bench/run.py: the bridge API (issue 11), each row beside a
baseline measured in the same run:

  a. 200 sequential `/exec` of `true` in one sandbox vs the runtime API's
     stateless `POST /execute/shell` of `true`;
  (a new sandbox + its first `/exec`, with and without the warm pool, is
  section 6: bench/bridge_pool.py);
  c. 5 MB of command output through SSE (MB/s of decoded bytes) vs host `cat`
     of the same bytes into a pipe;
  d. 50 parallel `PUT /file` of 64 KiB vs 50 threads writing the same files
     to a local directory;
  e. a 10 MB file round trip (PUT then GET, SHA-256 equal) vs `cp` on the host;
  f. a PTY keystroke echo round trip over the WebSocket vs the same through a
     local pseudo-terminal running bash.
"""

import base64
import hashlib
import http.client
import json
import os
import pty
import select
import subprocess
import tempfile
import threading
import time

from harness import BenchError, fmt_ms, fmt_x, ratio, summary

BRIDGE_PROFILES = {
    "full": dict(exec_n=200, sse_bytes=5 * 1024 * 1024, put_n=50, put_bytes=64 * 1024,
                 file_bytes=10 * 1024 * 1024, pty_n=200),
    "quick": dict(exec_n=10, sse_bytes=1024 * 1024, put_n=10, put_bytes=16 * 1024,
                  file_bytes=2 * 1024 * 1024, pty_n=20),
}


def _conn(port, timeout=60):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


def _request(port, method, path, body=None, headers=None):
    c = _conn(port)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def _new_sandbox(port):
    status, raw = _request(port, "POST", "/v1/sandbox")
    if status != 200:
        raise BenchError(f"POST /v1/sandbox: HTTP {status}: {raw[:300]!r}")
    return json.loads(raw)["id"]


def _exec(conn, sid, argv):
    """One /exec on a kept-alive connection → (decoded stdout bytes, exit code)."""
    conn.request("POST", f"/v1/sandbox/{sid}/exec", body=json.dumps({"argv": argv}).encode(),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    raw = r.read()
    if r.status != 200:
        raise BenchError(f"/exec {argv}: HTTP {r.status}: {raw[:300]!r}")
    out, code = [], None
    for block in raw.split(b"\n\n"):
        lines = block.split(b"\n")
        ev = next((ln[6:].strip() for ln in lines if ln.startswith(b"event:")), b"")
        data = b"".join(ln[5:].strip() for ln in lines if ln.startswith(b"data:"))
        if ev == b"stdout":
            out.append(base64.b64decode(data))
        elif ev == b"exit":
            code = json.loads(data)["exit_code"]
    return b"".join(out), code


def _timed(fn, n):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return summary(xs)


def _stateless_true(port):
    c = _conn(port)

    def fn():
        c.request("POST", "/execute/shell", body=json.dumps({"code": "true"}).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        if r.status != 200:
            raise BenchError(f"/execute/shell: HTTP {r.status}: {raw[:300]!r}")
    return fn, c


def row_exec(port, b, res):
    sid = _new_sandbox(port)
    c = _conn(port)
    _exec(c, sid, ["true"])
    res["exec"] = _timed(lambda: _exec(c, sid, ["true"]), b["exec_n"])
    c.close()
    fn, c2 = _stateless_true(port)
    fn()
    res["stateless"] = _timed(fn, b["exec_n"])
    c2.close()


def row_sse(port, b, res):
    n = b["sse_bytes"]
    sid = _new_sandbox(port)
    c = _conn(port)
    _exec(c, sid, ["bash", "-c", f"head -c {n} /dev/urandom > /workspace/blob"])
    want = hashlib.sha256(_exec(c, sid, ["cat", "/workspace/blob"])[0]).hexdigest()
    xs = []
    for _ in range(3):
        t0 = time.perf_counter()
        out, code = _exec(c, sid, ["cat", "/workspace/blob"])
        xs.append(time.perf_counter() - t0)
        if code != 0 or len(out) != n or hashlib.sha256(out).hexdigest() != want:
            raise BenchError("SSE output differs from the file")
    c.close()
    with tempfile.NamedTemporaryFile() as f:
        f.write(os.urandom(n))
        f.flush()
        ys = []
        for _ in range(3):
            t0 = time.perf_counter()
            p = subprocess.Popen(["/bin/cat", f.name], stdout=subprocess.PIPE)
            got = len(p.stdout.read())
            p.wait()
            ys.append(time.perf_counter() - t0)
            if got != n:
                raise BenchError("cat baseline short read")
    res["sse"] = {"bytes": n, "mb_s": n / 1e6 / min(xs), "cat_mb_s": n / 1e6 / min(ys)}


def _parallel(n, fn):
    lats, errors = [None] * n, []
    barrier = threading.Barrier(n)

    def work(i):
        barrier.wait()
        t0 = time.perf_counter()
        try:
            fn(i)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        lats[i] = time.perf_counter() - t0
    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    total = time.perf_counter() - t0
    if errors:
        raise BenchError(f"parallel: {errors[0]}")
    return total, summary(lats)


def row_put(port, b, res):
    n, size = b["put_n"], b["put_bytes"]
    sid = _new_sandbox(port)
    data = os.urandom(size)

    def put(i):
        status, raw = _request(port, "PUT", f"/v1/sandbox/{sid}/file/workspace/par/{i}.bin", body=data,
                               headers={"Content-Type": "application/octet-stream"})
        if status != 200:
            raise BenchError(f"PUT: HTTP {status}: {raw[:200]!r}")
    total, lat = _parallel(n, put)
    with tempfile.TemporaryDirectory() as d:
        def local(i):
            with open(os.path.join(d, f"{i}.bin"), "wb") as f:
                f.write(data)
        ltotal, llat = _parallel(n, local)
    res["put"] = {"n": n, "bytes": size, "total": total, "lat": lat, "local_total": ltotal, "local_lat": llat}


def row_file(port, b, res):
    n = b["file_bytes"]
    sid = _new_sandbox(port)
    data = os.urandom(n)
    t0 = time.perf_counter()
    status, raw = _request(port, "PUT", f"/v1/sandbox/{sid}/file/workspace/big.bin", body=data)
    t_put = time.perf_counter() - t0
    if status != 200:
        raise BenchError(f"PUT 10 MB: HTTP {status}: {raw[:200]!r}")
    t0 = time.perf_counter()
    status, got = _request(port, "GET", f"/v1/sandbox/{sid}/file/workspace/big.bin")
    t_get = time.perf_counter() - t0
    if status != 200 or hashlib.sha256(got).digest() != hashlib.sha256(data).digest():
        raise BenchError("10 MB round trip: content differs")
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "a"), os.path.join(d, "b")
        with open(src, "wb") as f:
            f.write(data)
        t0 = time.perf_counter()
        subprocess.run(["/bin/cp", src, dst], check=True)
        t_cp = time.perf_counter() - t0
    res["file"] = {"bytes": n, "put_s": t_put, "get_s": t_get, "cp_s": t_cp, "sha256_equal": True}


def _ws_pty(port, sid):
    import websocket  # Debian python3-websocket
    ws = websocket.create_connection(f"ws://127.0.0.1:{port}/v1/sandbox/{sid}/pty?cols=80&rows=24", timeout=20)
    while True:  # replay (if any), then {"type":"ready"}
        op, data = ws.recv_data()
        if op == 1 and json.loads(data).get("type") == "ready":
            return ws


def _echo_rtt(send, recv_until, n):
    xs = []
    for i in range(n):
        ch = b"abcdefghij"[i % 10:i % 10 + 1]
        t0 = time.perf_counter()
        send(ch)
        recv_until(ch)
        xs.append(time.perf_counter() - t0)
    return summary(xs)


def row_pty(port, b, res):
    sid = _new_sandbox(port)
    ws = _ws_pty(port, sid)
    ws.send_binary(b"stty -icanon; cat > /dev/null\r")  # a byte in, its echo out, nothing else
    time.sleep(0.5)

    def ws_recv(ch):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            op, data = ws.recv_data()
            if op == 2 and ch in data:
                return
        raise BenchError("PTY echo not seen")
    res["pty"] = _echo_rtt(ws.send_binary, ws_recv, b["pty_n"])
    ws.close()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv("/bin/bash", ["bash", "--norc", "-c", "stty -icanon; cat > /dev/null"])
    time.sleep(0.3)

    def local_recv(ch):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 1)
            if r and ch in os.read(fd, 4096):
                return
        raise BenchError("local PTY echo not seen")
    try:
        res["pty_local"] = _echo_rtt(lambda ch: os.write(fd, ch), local_recv, b["pty_n"])
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def section_bridge(profile, work, run_bin, out):
    b = BRIDGE_PROFILES[profile]
    d = work.daemon(run_bin).start()
    res = out.setdefault("bridge", {})
    try:
        for name, fn in (("exec", row_exec), ("sse", row_sse), ("put", row_put),
                         ("file", row_file), ("pty", row_pty)):
            d.settle()
            try:
                fn(d.port, b, res)
            except Exception as e:  # noqa: BLE001 - one row's failure must not hide the others
                res.setdefault("errors", {})[name] = f"{e.__class__.__name__}: {e}"
    finally:
        d.stop()
    if res.get("errors"):
        raise BenchError(f"bridge rows failed: {res['errors']}")


def bridge_report(out):
    r = out.get("bridge")
    if not r:
        return []
    L = ["### 5. The bridge API", "",
         "| row | p50 ms | p99 ms | baseline | p50 ms | p99 ms | ratio p50 / p99 |",
         "| --- | ---: | ---: | --- | ---: | ---: | ---: |"]

    def row(name, s, bname, bs):
        L.append(f"| {name} | {fmt_ms(s['p50'])} | {fmt_ms(s['p99'])} | {bname} | {fmt_ms(bs['p50'])} | "
                 f"{fmt_ms(bs['p99'])} | {fmt_x(ratio(s['p50'], bs['p50']))} / {fmt_x(ratio(s['p99'], bs['p99']))} |")
    if "exec" in r:
        row("`/exec` of `true`, one sandbox, sequential", r["exec"], "`POST /execute/shell` `true`", r["stateless"])
    if "pty" in r:
        row("PTY keystroke echo over the WebSocket", r["pty"], "local pty + bash", r["pty_local"])
    if "put" in r:
        p = r["put"]
        row(f"{p['n']} parallel `PUT /file` of {p['bytes'] // 1024} KiB (per request)", p["lat"],
            "threads writing local files", p["local_lat"])
    L.append("")
    if "put" in r:
        p = r["put"]
        L.append(f"- {p['n']} parallel PUTs took {p['total'] * 1000:.1f} ms in all "
                 f"(local writes: {p['local_total'] * 1000:.1f} ms).")
    if "sse" in r:
        s = r["sse"]
        L.append(f"- {s['bytes'] / 1048576:.0f} MiB of `/exec` output through SSE (base64 events, decoded): "
                 f"{s['mb_s']:.0f} MB/s; host `cat` of the same bytes into a pipe: {s['cat_mb_s']:.0f} MB/s "
                 f"({fmt_x(ratio(s['cat_mb_s'], s['mb_s']))} slower).")
    if "file" in r:
        f = r["file"]
        mb = f["bytes"] / 1e6
        L.append(f"- {f['bytes'] / 1048576:.0f} MiB file round trip, SHA-256 equal: PUT {f['put_s'] * 1000:.0f} ms "
                 f"({mb / f['put_s']:.0f} MB/s), GET {f['get_s'] * 1000:.0f} ms ({mb / f['get_s']:.0f} MB/s); "
                 f"host `cp` {f['cp_s'] * 1000:.0f} ms.")
    L.append("")
    return L


def bridge_compact(out):
    r = out.get("bridge") or {}
    L = []
    for k, label in (("exec", "bridge /exec true"), ("stateless", "bridge baseline /execute/shell"),
                     ("pty", "bridge PTY echo"),
                     ("pty_local", "bridge baseline local pty echo")):
        if k in r:
            L.append(f"{label:<48} {fmt_ms(r[k]['p50']):>9} {fmt_ms(r[k]['p99']):>9}")
    if "sse" in r:
        L.append(f"{'bridge SSE output':<48} {r['sse']['mb_s']:>9.0f} MB/s  (cat {r['sse']['cat_mb_s']:.0f} MB/s)")
    return L
