"""Attack suite, rows 40-43: API abuse (the security checklist of peers.md section 6;
one test per row, split by area: test_attacks_*.py).

The suite's method and conventions: attack_common.py."""

from attack_common import *  # noqa: F401,F403 (the suite's shared helpers)


# ---- 40-43: API abuse ----------------------------------------------------


def test_row_40_too_many_contexts(daemon):
    s = sid()
    try:
        ids = []
        for i in range(8):
            lang = ["python", "javascript", "perl", "ruby"][i % 4]
            status, body, _ = daemon.post(f"/languages/{lang}/sandboxes/{s}/contexts", {})
            assert status == 201, body
            ids.append(body["id"])
        status, body, _ = daemon.post(f"/languages/python/sandboxes/{s}/contexts", {})
        assert status == 400 and body["code"] == "VALIDATION_FAILED", body
        assert "Cannot create more than 8" in body["message"]
        # A context's processes stay under the per-execution pids cap.
        limit_error(sbx(daemon, s, "import os\nwhile True:\n    os.fork()", contextId=ids[0]), "Process limit")
        assert value(sbx(daemon, s, "1 + 1", contextId=ids[0])) == "2"
        status, body, _ = daemon.get(f"/languages/python/sandboxes/{s}/contexts")
        assert len(body["contexts"]) == 8
    finally:
        delete_sandbox(daemon, s)


def test_row_41_api_key():
    key = "k-" + uuid.uuid4().hex
    # Passed with --set: it is then in the daemon's argv as well.
    d = Daemon(sets=ATTACK_LIMITS + [f"api_key={key}"])
    try:
        body = {"code": "1"}
        assert d.get("/health")[0] == 200  # the one unauthenticated route
        for hdrs in ({}, {"Authorization": "Bearer"}, {"Authorization": "Bearer "}, {"Authorization": "Bearer x"},
                     {"Authorization": f"Bearer {key}x"}, {"Authorization": f"Bearer {key[:-1]}"},
                     {"Authorization": key}, {"Authorization": f"Basic {key}"}, {"X-API-Key": key + "x"},
                     {"X-API-Key": ""}, {"Authorization": f"Bearer {key.upper()}"}):
            for method, path in (("POST", "/execute/python"), ("GET", "/languages"),
                                 ("POST", "/languages/python/sandboxes/k1/files")):
                status, res, _ = d.request(method, path, body=body, headers=hdrs)
                assert status == 401, (hdrs, path, status, res)
        for hdrs in ({"Authorization": f"Bearer {key}"}, {"X-API-Key": key}):  # the two accepted forms
            status, res, _ = d.request("POST", "/execute/python",
                                       body={"code": "import os\nrepr([open(f'/proc/{p}/{f}', 'rb').read() "
                                                     "for p in os.listdir('/proc') if p.isdigit() "
                                                     "for f in ('cmdline', 'environ') if os.access(f'/proc/{p}/{f}', os.R_OK)])"},
                                       headers=hdrs)
            assert status == 200 and key not in json.dumps(res), res
        d.stop()
        assert key not in open(d.log_path).read()
    finally:
        d.cleanup()


def test_row_42_malformed_http(daemon):
    port = daemon.port
    # Oversized headers: refused (4xx) or the connection is closed.
    raw = raw_http(port, b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * (256 * 1024) + b"\r\n\r\n")
    assert raw == b"" or 400 <= status_of(raw) < 500, raw[:200]
    raw = raw_http(port, b"GET /health HTTP/1.1\r\nHost: localhost\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(20000)) + b"\r\n")
    assert raw == b"" or 400 <= status_of(raw) < 500, raw[:200]
    # Deeply nested JSON: a 400, not a crash (stack exhaustion in the parser).
    for path, depth in (("/execute/python", 90 * 1024), ("/languages/python/sandboxes/deep/files", 1_000_000)):
        status, body, _ = daemon.request("POST", path, raw=b"[" * depth,
                                         headers={"Content-Type": "application/json"})
        assert status == 400, (path, status, body)
        status, body, _ = daemon.request("POST", path, raw=b'{"code":' + b'{"a":' * (depth // 5),
                                         headers={"Content-Type": "application/json"})
        assert status == 400, (path, status, body)
    # Pipelined requests followed by garbage: the good ones are answered in
    # order, the garbage gets a 400 or a close.
    raw = raw_http(port, b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n" * 3 + b"\x00\xff GARBAGE \r\n\r\n", shutdown=True)
    assert raw.count(b"HTTP/1.1 200") == 3, raw[:500]
    for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),  # a TLS hello
                 b"GET / HTTP/9.9\r\n\r\n", b"GET\r\n\r\n", b"POST /execute/python HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                 # smuggling shapes: two lengths, length plus chunked, a bad chunk size
                 b"POST /execute/python HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 5\r\nContent-Length: 500\r\n\r\n{}",
                 b"POST /execute/python HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health HTTP/1.1\r\n\r\n",
                 b"POST /execute/python HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\nzzzz\r\n",
                 b"\r\n" * 10000):
        raw = raw_http(port, junk, read_timeout=3, shutdown=True)
        assert raw == b"" or status_of(raw) is None or status_of(raw) >= 400, (junk[:40], raw[:200])
    # A NUL in the path: libmicrohttpd ends the path there, so this is
    # `GET /` (the public playground page), never /health or anything the
    # bytes after the NUL name.
    raw = raw_http(port, b"GET /\x00health HTTP/1.1\r\nHost: localhost\r\n\r\n", read_timeout=3, shutdown=True)
    assert raw == b"" or status_of(raw) is None or status_of(raw) >= 400 or (
        status_of(raw) == 200 and b"<title>sandboxd playground</title>" in raw and b'"status":"ok"' not in raw), raw[:300]
    # Slowloris: many clients dribbling headers byte by byte for 3 s while a
    # normal client keeps getting answers.
    stop = threading.Event()
    slow_ok = []

    def dribble():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            req = b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"z" * 1000
            for i in range(len(req)):
                if stop.is_set():
                    break
                s.send(req[i:i + 1])
                time.sleep(0.02)
            slow_ok.append(True)
            s.close()
        except OSError:
            slow_ok.append(False)  # the server may drop a slow client

    threads = [threading.Thread(target=dribble) for _ in range(64)]
    for t in threads:
        t.start()
    latencies = []
    end = time.time() + 3
    while time.time() < end:
        t0 = time.time()
        status, body, _ = daemon.get("/health", timeout=5)
        latencies.append(time.time() - t0)
        assert status == 200
        time.sleep(0.05)
    assert value(run(daemon, "'served during slowloris'")) == "'served during slowloris'"
    stop.set()
    for t in threads:
        t.join()
    assert len(latencies) > 10 and max(latencies) < 1.0, latencies
    assert_alive(daemon)


def test_row_43_request_flood():
    d = Daemon(sets=ATTACK_LIMITS + ["exec.workers=2", "exec.queue=2"], extra_args=["--log-level", "debug"])
    try:
        def one(_):
            try:
                return d.request("POST", "/execute/python", body={"code": "import time\ntime.sleep(1)\n'done'"},
                                 timeout=30)
            except OSError as e:
                return repr(e), None, {}

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            results = list(pool.map(one, range(12)))
        statuses = [r[0] for r in results]
        assert all(isinstance(st, int) for st in statuses), (statuses, d.read_log())
        assert statuses.count(200) >= 2 and statuses.count(503) >= 1, statuses
        assert set(statuses) <= {200, 503}, statuses
        for status, body, headers in results:
            if status == 503:
                assert int(headers["retry-after"]) >= 1, headers
                assert body["code"] == "OVERLOADED", body
            else:
                assert body["results"] == [{"text": "'done'"}], body
        # No crash, and it serves normally once the burst is over.
        assert d.proc.poll() is None
        assert d.get("/health")[0] == 200
        assert value(run(d, "'after'")) == "'after'"
    finally:
        d.cleanup()
