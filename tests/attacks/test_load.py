"""Load and slow clients: many idle connections, slowloris, oversized
requests — while a normal client keeps getting answers and the daemon's
memory stays bounded."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attack_helpers import api  # noqa: E402

Daemon = api.Daemon


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_thousand_idle_connections_and_a_working_client():
    d = Daemon(sets=["http.timeout_s=30"])
    socks = []
    try:
        before = rss_kib(d.proc.pid)
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
            socks.append(s)
        # Half of them start a request and stall inside the headers.
        for s in socks[::2]:
            s.sendall(b"POST /execute/python HTTP/1.1\r\nHost: localhost\r\n")
        t = time.time()
        status, body, _ = d.get("/health")
        assert status == 200
        res = d.execute("python", "6 * 7")
        assert res["results"] == [{"text": "42"}]
        assert time.time() - t < 20
        grown = rss_kib(d.proc.pid) - before
        assert grown < 64 * 1024, f"daemon grew by {grown} KiB for 1000 idle connections"
    finally:
        for s in socks:
            s.close()
        d.cleanup()


def test_slowloris_does_not_block_others_and_times_out():
    """MHD's idle timeout (http.timeout_s) counts from the last byte it read
    and there is no deadline for a whole request head: a client trickling one
    byte per 0.5 s keeps its connection open for as long as it trickles. What
    must hold: it is never answered, it holds nothing others need (they are
    served meanwhile, executions too), and once it goes quiet the idle
    timeout closes it."""
    d = Daemon(sets=["http.timeout_s=2"])
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\n")
        t = time.time()
        while time.time() - t < 6:  # three idle timeouts long
            s.sendall(b"X")
            assert d.get("/health")[0] == 200
            time.sleep(0.5)
        # Still open and unanswered: no byte, no FIN.
        s.setblocking(False)
        try:
            early = s.recv(100)
        except BlockingIOError:
            early = None
        assert early is None, f"the trickling connection got {early!r}"
        s.setblocking(True)
        s.settimeout(15)
        quiet = time.time()
        # Quiet now: closed by the idle timeout (2 s), without a response.
        data = s.recv(100)
        waited = time.time() - quiet
        assert data == b"", f"the trickling connection got {data!r}"
        assert waited < 2 + 4, f"closed only after {waited:.1f} s of silence"
        s.close()
        assert d.execute("python", "1")["results"] == [{"text": "1"}]
    finally:
        d.cleanup()


def test_idle_connection_is_closed_after_timeout():
    d = Daemon(sets=["http.timeout_s=1"])
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")  # never finishes the headers
        t = time.time()
        data = s.recv(100)  # b"" once the server closes it
        assert data == b"" and time.time() - t < 8
        s.close()
    finally:
        d.cleanup()


def test_oversized_header_rejected_daemon_fine():
    d = Daemon()
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n")
        data = s.recv(200)
        s.close()
        assert data == b"" or data.split(b" ")[1] in (b"413", b"431", b"400"), data
        assert d.get("/health")[0] == 200
    finally:
        d.cleanup()


def test_body_over_limit_is_413_without_reading_it_all():
    d = Daemon()
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        s.sendall(b"POST /execute/python HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000000000\r\n\r\n{")
        data = s.recv(400)
        s.close()
        assert b" 413 " in data.split(b"\r\n")[0], data
        assert d.get("/health")[0] == 200
    finally:
        d.cleanup()
