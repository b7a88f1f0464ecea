"""Crash safety: kill -9 the daemon at random moments while clients write
files, set env vars and run context cells; restart on the same data dir and
check that every acknowledged write is there, nothing is corrupted, and the
SQLite store passes an integrity check."""
import os
import random
import signal
import sqlite3
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attack_helpers import api  # noqa: E402

Daemon = api.Daemon
unmount_under = api.unmount_under

ROUNDS = 4


class Ledger:
    """What the daemon acknowledged (HTTP 200) before it was killed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.files = {}      # (sandbox, path) -> content
        self.env = {}        # (sandbox, key) -> value
        self.cells = {}      # sandbox -> last acknowledged counter value


def worker(d, ledger, sid, stop, n):
    base = f"/languages/python/sandboxes/{sid}"
    i = 0
    while not stop.is_set():
        i += 1
        try:
            kind = i % 3
            if kind == 0:
                path = f"/workspace/w{n}-{i % 5}.txt"
                content = f"{sid}:{i}:" + "x" * random.randint(0, 3000)
                status, body, _ = d.post(base + "/files", {"op": "write", "path": path, "content": content}, timeout=10)
                if status == 200:
                    with ledger.lock:
                        ledger.files[(sid, path)] = content
            elif kind == 1:
                status, body, _ = d.post(base + "/env", {"envVars": {f"K{n}": str(i)}}, timeout=10)
                if status == 200:
                    with ledger.lock:
                        ledger.env[(sid, f"K{n}")] = str(i)
            else:
                status, body, _ = d.post(base + "/execute", {"code": "c = globals().get('c', 0) + 1\nc"}, timeout=10)
                if status == 200 and not body.get("error"):
                    with ledger.lock:
                        ledger.cells[sid] = int(body["results"][0]["text"])
        except (OSError, ValueError, KeyError, TypeError):
            time.sleep(0.01)  # the daemon is gone: keep trying until told to stop


def integrity_ok(data_dir):
    db = sqlite3.connect(os.path.join(data_dir, "sandboxd.db"))
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def test_kill_dash_nine_under_load_loses_nothing_acknowledged():
    rnd = random.Random(1234)
    ledger = Ledger()
    sids = ["crash-" + uuid.uuid4().hex[:8] for _ in range(3)]
    d = Daemon(sets=["limits.cpu_ms=2000", "limits.wall_ms=5000", "pool.size=1"])
    data, keep = d.data_dir, d.tmp
    d.tmp = None
    try:
        for round_ in range(ROUNDS):
            stop = threading.Event()
            threads = [threading.Thread(target=worker, args=(d, ledger, sid, stop, n))
                       for n, sid in enumerate(sids)]
            for t in threads:
                t.start()
            time.sleep(rnd.uniform(0.4, 1.5))
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            stop.set()
            for t in threads:
                t.join(timeout=30)
            d.log.close()
            assert integrity_ok(data)
            d = Daemon(data_dir=data, sets=["limits.cpu_ms=2000", "limits.wall_ms=5000", "pool.size=1"])
        # Everything acknowledged is there after the last restart.
        assert ledger.files and ledger.env, "the load produced no acknowledged writes"
        for (sid, path), content in ledger.files.items():
            status, body, _ = d.post(f"/languages/python/sandboxes/{sid}/files", {"op": "read", "path": path})
            assert status == 200, body
            # A later write may have been applied but not acknowledged before
            # the kill; the content must still be one complete version.
            assert body["content"] == content or body["content"].startswith(f"{sid}:"), (path, body["content"][:40])
            if body["content"] != content:
                i_seen = int(body["content"].split(":")[1])
                i_acked = int(content.split(":")[1])
                assert i_seen > i_acked, (path, i_seen, i_acked)
        for (sid, key), value in ledger.env.items():
            status, info, _ = d.get(f"/languages/python/sandboxes/{sid}")
            assert int(info["envVars"][key]) >= int(value)
        for sid, count in ledger.cells.items():
            status, body, _ = d.post(f"/languages/python/sandboxes/{sid}/execute", {"code": "c"})
            assert status == 200 and not body.get("error"), body
            assert int(body["results"][0]["text"]) >= count
        d.stop()
        assert integrity_ok(data)
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        unmount_under(data)
        keep.cleanup()
