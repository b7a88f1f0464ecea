"""Cluster-mode fixtures (issue 16): one throwaway PostgreSQL database
shared by several real daemons, each with its own data dir and
--set cluster.node_id=<name>, a shared replica dir, and psql to look at
what the store holds. Needs the cluster of tests/pg/pg_plugin.py
(make cluster); without it the tests skip."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402

api = load_api()
V1 = "/api/v1"
SECRET = "cluster-test-secret"
HEARTBEAT_MS = 200
DEAD_AFTER_MS = 1500
SETS = list(api.FAST_LIMITS) + ["pool.size=0"]
PG_HOST = os.environ.get("SANDBOXD_TEST_PG_HOST")


def psql(db, sql):
    """One query's rows as lists of strings (psql -At)."""
    exe = os.path.join(os.environ["SANDBOXD_TEST_PG_BIN"], "psql")
    out = subprocess.run([exe, "-h", PG_HOST, "-U", "sandboxd", "-d", db, "-Atc", sql],
                         capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line]


def poll(fn, timeout=20.0, what="condition"):
    """fn() until it returns something true, or fail after timeout."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Cluster:
    """Daemons on one database; node(name) starts one, kill9(name) SIGKILLs it."""

    def __init__(self):
        self.db = "cl" + uuid.uuid4().hex[:16]
        createdb = os.path.join(os.environ["SANDBOXD_TEST_PG_BIN"], "createdb")
        subprocess.run([createdb, "-h", PG_HOST, "-U", "sandboxd", self.db], check=True, capture_output=True)
        self.url = f"postgresql:///{self.db}?host={PG_HOST}&user=sandboxd"
        self.tmp = tempfile.TemporaryDirectory(prefix="sandboxd-cluster-")
        self.replica = os.path.join(self.tmp.name, "replica")
        os.makedirs(self.replica)
        self.nodes = {}

    def node(self, name, extra_sets=()):
        sets = SETS + [f"cluster.node_id={name}", f"cluster.secret={SECRET}",
                       f"cluster.heartbeat_ms={HEARTBEAT_MS}", f"cluster.dead_after_ms={DEAD_AFTER_MS}",
                       f"cluster.replica=dir:{self.replica}"] + list(extra_sets)
        d = api.Daemon(sets=sets, extra_args=["--store", self.url])
        self.nodes[name] = d
        return d

    def kill9(self, name):
        d = self.nodes.pop(name)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        d.log.close()
        api.unmount_under(d.data_dir)
        if d.tmp:
            d.tmp.cleanup()

    def owner(self, sandbox_id):
        """(node_id, lease_epoch) of a sandbox's row, or None."""
        rows = psql(self.db, f"SELECT node_id, lease_epoch FROM sandboxes WHERE id = '{sandbox_id}'")
        return (rows[0][0], int(rows[0][1])) if rows else None

    def rehomed_events(self, sandbox_id):
        return psql(self.db, "SELECT payload FROM events WHERE name = 'sandbox.rehomed' "
                             f"AND sandbox_id = '{sandbox_id}' ORDER BY id")

    def health(self, name):
        status, body, _ = self.nodes[name].get(V1 + "/health/detailed")
        assert status == 200, body
        return body

    def close(self):
        for d in self.nodes.values():
            d.cleanup()
        self.nodes = {}
        self.tmp.cleanup()
