"""Attack suite, rows 9-14: storage, output, descriptors, request size (the security checklist of peers.md section 6;
one test per row, split by area: test_attacks_*.py).

The suite's method and conventions: attack_common.py."""

from attack_common import *  # noqa: F401,F403 (the suite's shared helpers)


# ---- 9-14: storage, output, descriptors, request size -------------------

FILL = """
import os, errno
def fill(d, chunk, count):
    n, err = 0, None
    try:
        for i in range(count):
            with open(f'{d}/fill{i}', 'wb') as f:
                f.write(b'x' * chunk)
            n += 1
    except OSError as e:
        err = e.errno
    return [n, err]
def big(path, size):
    try:
        with open(path, 'wb') as f:
            f.write(b'x' * size)
        return 'written'
    except OSError as e:
        return e.errno
"""


def test_row_09_disk_fill(daemon):
    mib = 1024 * 1024
    # Stateless: /workspace and /tmp are size-limited tmpfs, one file is
    # capped by RLIMIT_FSIZE (1 MiB).
    out = value(run(daemon, FILL + f"""
r = {{'bigfile': big('/workspace/big', 2 * {mib}), 'dd': os.system('dd if=/dev/zero of=/tmp/dd bs=1M count=4 2>/dev/null') >> 8}}
os.remove('/workspace/big'); os.remove('/tmp/dd')
r.update({{'ws': fill('/workspace', {mib}, 100), 'tmp': fill('/tmp', {mib}, 200)}})
r
"""))
    n, err = out["ws"]
    assert err == ENOSPC and 8 <= n <= 17, out  # 16 MiB tmpfs
    n, err = out["tmp"]
    assert err in (ENOSPC, EFBIG) and n <= 64, out  # 64 MiB tmpfs
    assert out["bigfile"] == EFBIG
    assert out["dd"] != 0  # SIGXFSZ / EFBIG past 1 MiB
    if IS_ROOT:
        # A sandbox workspace is its own ext4 image with a 16 MiB quota.
        s = sid()
        try:
            out = value(sbx(daemon, s, FILL + f"fill('/workspace', {mib}, 100)"))
            n, err = out
            assert err == ENOSPC and 10 <= n <= 20, out
            img = os.path.join(daemon.data_dir, "sandboxes", s, "workspace.img")
            st = os.stat(img)
            assert st.st_blocks * 512 <= 16 * mib * 5 // 4 + 3 * mib, st
            # The sandbox still works and can free space again.
            assert value(sbx(daemon, s, "import os\nos.remove('/workspace/fill0')\nopen('/workspace/ok','w').write('ok')")) == "2"
        finally:
            delete_sandbox(daemon, s)
    assert_alive(daemon)


def test_row_10_inode_exhaustion(daemon):
    code = """
import os
def many(d, limit):
    n, err = 0, None
    try:
        for i in range(limit):
            open(f'{d}/e{i}', 'w').close()
            n += 1
    except OSError as e:
        err = e.errno
    return [n, err]
"""
    out = value(run(daemon, code + "{'ws': many('/workspace', 20000), 'tmp': many('/tmp', 20000)}"))
    for where in ("ws", "tmp"):
        n, err = out[where]
        assert err == ENOSPC and n <= 4096, (where, out)
    if IS_ROOT:
        s = sid()
        try:
            n, err = value(sbx(daemon, s, code + "many('/workspace', 20000)"))
            assert err == ENOSPC and n <= 4096, (n, err)
        finally:
            delete_sandbox(daemon, s)
    assert_alive(daemon)


def test_row_11_output_flood(daemon):
    rss_before = daemon_rss_kib(daemon)
    for lang, code in [("python", "import subprocess\nsubprocess.run(['yes'])"),
                       ("python", "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'yes 1>&2'])"),
                       ("python", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"),
                       ("javascript", "for (;;) process.stdout.write('y'.repeat(10000) + '\\n')"),
                       ("ruby", "loop { $stderr.puts 'z' * 1000 }")]:
        t = time.time()
        res = run(daemon, code, lang=lang)
        limit_error(res, "Output limit")
        total = sum(len(x) for x in res["logs"]["stdout"] + res["logs"]["stderr"])
        # The cap plus the one byte that proved the overflow (and a U+FFFD
        # for a cut UTF-8 sequence).
        assert total <= 32 * 1024 + 4, (lang, total)
        assert time.time() - t < 6
    assert_no_jail_procs("yes")
    assert daemon_rss_kib(daemon) < rss_before + 32 * 1024
    assert_alive(daemon)


def test_row_12_binary_and_hostile_output(daemon):
    cases = [
        ("python", "import sys\nsys.stdout.buffer.write(b'A\\xff\\xfe\\xc3\\x28\\x00\\x1b[2J\\x1b]0;pwn\\x07\\r\\n')\n"
                   "sys.stdout.flush()\nsys.stderr.buffer.write(bytes(range(256)))\n'\\x00\\x1b[31m\\udcff'"),
        ("javascript", "console.log('\\ud800 lone \\udfff'); console.error('\\u0000\\u001b[0m'); '\\ud800\\u001b'"),
        ("perl", "binmode STDOUT; print \"\\xff\\xfe\\x00\\x1b[1m\\n\"; \"\\xff\\x1b\""),
        ("ruby", "$stdout.write(\"\\xff\\xfe\\x00\\e[1m\\n\".b); \"\\xff\\x00\".b"),
    ]
    for lang, code in cases:
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
        conn.request("POST", f"/execute/{lang}", body=json.dumps({"code": code}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        assert resp.status == 200, raw
        text = raw.decode("utf-8")  # strict: the body is valid UTF-8

        def no_lone_surrogates(o):
            if isinstance(o, str):
                o.encode("utf-8")  # raises on a lone surrogate
            elif isinstance(o, dict):
                for v in o.values():
                    no_lone_surrogates(v)
            elif isinstance(o, list):
                for v in o:
                    no_lone_surrogates(v)
        body = json.loads(text)
        no_lone_surrogates(body)
        assert "error" not in body, (lang, body)
        assert body["logs"]["stdout"] and body["results"], (lang, body)
    assert_alive(daemon)
    # NUL inside a structured (JSON-mapped) result, in every language: it
    # must come back escaped, not break the kernel protocol.
    for lang, code in [("python", "{'a': 'x\\x00y'}"), ("javascript", "({a: 'x\\u0000y'})"), ("javascript", "'x\\u0000y'"),
                       ("perl", "[\"x\\x00y\"]"), ("ruby", "{'a' => \"x\\x00y\"}"),
                       # an encoded surrogate (invalid UTF-8) in a Perl string result
                       ("perl", "\"x\\xED\\xA0\\x80y\"")]:
        res = run(daemon, code, lang=lang)
        assert "error" not in res and res["results"], (lang, res)
        strings = []

        def collect(o):
            if isinstance(o, str):
                strings.append(o)
            elif isinstance(o, dict):
                for v in o.values():
                    collect(v)
            elif isinstance(o, list):
                for v in o:
                    collect(v)
        collect(res["results"])
        # The NUL survives (escaped in the JSON); the bad sequence becomes U+FFFD.
        assert any("x\x00y" in t or "x\ufffd" in t for t in strings), (lang, res)
    assert_alive(daemon)


def fds_but_counters(d):
    """The daemon's open fds but its cgroup counter files: a live
    interpreter's group keeps up to four open (read with pread per
    request), and which pooled ones have been read varies. Those must
    belong to groups that still exist: a counter fd outliving its group
    is a leak too."""
    n = 0
    for f in os.listdir(f"/proc/{d.proc.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{d.proc.pid}/fd/{f}")
        except OSError:
            continue
        if target.startswith("/sys/fs/cgroup/"):
            assert os.path.exists(target), target
        else:
            n += 1
    return n


@pytest.fixture
def fixed_pools_daemon():
    """Pools that do not grow with demand (pool.grow_idle_s=0): a grown pool
    holds more interpreters, each with its pipes and pidfd, and the
    comparison below is about what the guest does, not the pool's size."""
    d = Daemon(sets=ATTACK_LIMITS + ["pool.grow_idle_s=0"])
    yield d
    d.cleanup()


def test_row_13_fd_exhaustion(fixed_pools_daemon):
    daemon = fixed_pools_daemon
    # The daemon's own fd count moves with its warm pools (each pre-spawned
    # interpreter holds a few pipes and a pidfd), so compare quiet states:
    # the count unchanged for a second.
    def steady_fds():
        for lang in ("python", "javascript", "perl", "ruby"):
            run(daemon, "1", lang=lang)
        samples = []
        deadline = time.time() + 8
        while time.time() < deadline:
            samples.append(fds_but_counters(daemon))
            if len(samples) >= 6 and len(set(samples[-6:])) == 1:
                break
            time.sleep(0.2)
        return samples[-1]

    fds_before = steady_fds()
    for _ in range(3):
        out = value(run(daemon, """
import os, socket
fds, err = [], None
try:
    while True:
        fds.append(os.open('/dev/null', os.O_RDONLY))
except OSError as e:
    err = e.errno
n = len(fds)
try:
    socket.socketpair(); sp = 'ok'
except OSError as e:
    sp = e.errno
{'n': n, 'err': err, 'socketpair': sp}
"""))
        assert out["err"] == EMFILE and out["n"] <= 64, out  # limits.nofile
        assert out["socketpair"] == EMFILE, out
    # Spawning is not an fd multiplier either: each child has its own cap.
    res = run(daemon, "import subprocess\nfor i in range(4):\n    subprocess.Popen(['/usr/bin/python3', '-c', "
                      "'import os\\nfds=[]\\ntry:\\n  while 1: fds.append(os.open(\"/dev/null\", 0))\\nexcept OSError: pass\\n"
                      "import time; time.sleep(0.2)'])\nimport time\ntime.sleep(0.5)\n1")
    assert value(res) == "1"
    fds_after = steady_fds()
    assert fds_after <= fds_before + 2, (fds_before, fds_after)
    assert_alive(daemon)


def test_row_14_huge_request_body(daemon):
    # Code over limits.code_bytes (64 KiB) inside a body under the body cap.
    status, body, _ = daemon.post("/execute/python", {"code": "#" * (70 * 1024)})
    assert status == 413, body
    # Body over limits.request_bytes (96 KiB).
    status, body, _ = daemon.post("/execute/python", {"code": "1", "envVars": {"X": "y" * (200 * 1024)}})
    assert status == 413, body
    # A multi-GB Content-Length is refused before any body byte is read.
    t = time.time()
    raw = raw_http(daemon.port, b"POST /execute/python HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 10000000000\r\n\r\n{\"code\":")
    assert status_of(raw) == 413, raw[:200]
    assert time.time() - t < 5
    # Chunked upload without a length: cut off at the cap while streaming.
    chunk = b"a" * 65536
    payload = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(40)) + b"0\r\n\r\n"
    raw = raw_http(daemon.port, b"POST /execute/python HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                b"Transfer-Encoding: chunked\r\n\r\n" + payload)
    assert status_of(raw) == 413, raw[:200]
    # Files API: content over 1 MiB and body over limits.files_request_bytes.
    s = sid()
    status, body = files(daemon, s, op="write", path="big", content="x" * (1024 * 1024 + 1))
    assert status == 413 and body["code"] == "FILE_TOO_LARGE", body
    body = json.dumps({"op": "write", "path": "big", "content": "x" * (5 * 1024 * 1024)}).encode()
    raw = raw_http(daemon.port, b"POST /languages/python/sandboxes/%s/files HTTP/1.1\r\nHost: localhost\r\n"
                                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (s.encode(), len(body)) + body)
    assert status_of(raw) == 413, raw[:200]
    status, body = files(daemon, s, op="exists", path="big")
    assert status == 200 and body["exists"] is False
    delete_sandbox(daemon, s)
    assert_alive(daemon)
