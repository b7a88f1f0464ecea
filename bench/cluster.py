#!/usr/bin/python3
"""Scale-out figures (issue 16, item 7): execute p50 on a sandbox's owner vs
through another node, and the re-home time after a node loss.

Starts a throwaway PostgreSQL (tests/pg/pg_cluster.sh) and two daemons in
cluster mode on loopback ports, sharing the store and a dir: replica:

    --store postgresql:///sandboxd?host=…  --set cluster.node_id=a|b
    --set cluster.advertise_url=http://127.0.0.1:PORT  --set cluster.secret=…
    --set cluster.replica=dir:TMP/replica   (heartbeat/dead_after: the defaults)

1. A python sandbox with a context holding x = 1; its owner is read from the
   store (sandboxes.node_id). `x + 1` is timed N times directly on the owner
   and N times through the other node (forwarded), interleaved.
2. Re-home, R rounds: a file is written in a fresh sandbox and x = 41 set,
   the replica delay is let pass, the owner is SIGKILLed, and the survivor is
   polled with `x + 1` (expect 42) until it answers; the row is the time from
   the kill to that answer, and the file must read back. The killed node is
   restarted (same id, data dir and port) between rounds; it must not take
   the sandbox back (fencing).

Needs root, Debian's postgresql and a build with cluster mode (the
cluster.* configuration keys); without them it says so and exits 2.

    /usr/bin/python3 bench/cluster.py --bin build/sandboxd [-n 100] [--rounds 3]
"""
import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

PG_CLUSTER = os.path.join(H.ROOT, "tests", "pg", "pg_cluster.sh")
REHOME_TIMEOUT_S = 120


def unavailable(why):
    print(f"cluster.py: cluster mode not available: {why}", file=sys.stderr)
    sys.exit(2)


def cluster_build(binary):
    p = subprocess.run([binary, "--print-config"], capture_output=True, text=True, timeout=30)
    return "`cluster.node_id`" in p.stdout


class Cluster:
    def __init__(self, binary, tmp, url):
        self.binary, self.tmp, self.url = binary, tmp, url
        self.secret = secrets.token_hex(32)
        self.replica = os.path.join(tmp, "replica")
        os.makedirs(self.replica)
        self.work = H.Workdir()
        self.nodes = {}
        for name in ("a", "b"):
            port = H.free_port()
            d = self.work.daemon(binary, sets=[
                f"store={url}", f"cluster.node_id={name}", f"cluster.advertise_url=http://127.0.0.1:{port}",
                f"cluster.secret={self.secret}", f"cluster.replica=dir:{self.replica}"])
            d.fixed_port = port
            self.nodes[name] = d

    def start(self, name):
        d = self.nodes[name]
        d.start(port=d.fixed_port)
        return d

    def owner_of(self, sandbox_id):
        """The node id the store names for the sandbox (ids may be stored
        with a prefix: matched by suffix)."""
        q = subprocess.run(["psql", "-X", "-A", "-t", self.url, "-c",
                            f"SELECT node_id FROM sandboxes WHERE id LIKE '%{sandbox_id}'"],
                           capture_output=True, text=True, timeout=30)
        rows = [r for r in q.stdout.split() if r]
        if q.returncode != 0 or len(rows) != 1:
            raise H.BenchError(f"owner of {sandbox_id}: {q.stderr.strip() or rows}")
        return rows[0]

    def cleanup(self):
        self.work.cleanup()


def execute(client, sid, code, expect=None):
    status, res = client.request("POST", f"/languages/python/sandboxes/{sid}/execute", {"code": code})
    return H.check_exec(status, res, expect, f"{sid}: {code!r}")


def new_sandbox(cl, via, setup):
    sid = "bench-" + uuid.uuid4().hex[:12]
    execute(via.client, sid, setup)
    owner = cl.owner_of(sid)
    if owner not in cl.nodes:
        raise H.BenchError(f"{sid}: owner {owner!r} is not a node of this run")
    other = "b" if owner == "a" else "a"
    return sid, owner, other


def forwarding(cl, n):
    sid, owner, other = new_sandbox(cl, cl.nodes["a"], "x = 1")
    direct, through = [], []
    for i in range(n + 5):
        for client, out in ((cl.nodes[owner].client, direct), (cl.nodes[other].client, through)):
            t0 = time.perf_counter()
            execute(client, sid, "x + 1", "2")
            if i >= 5:  # warm-ups
                out.append(time.perf_counter() - t0)
    return direct, through


def rehome_round(cl):
    sid, owner, other = new_sandbox(cl, cl.nodes["a"], "x = 41\nopen('/workspace/mark', 'w').write('kept')")
    time.sleep(3.0)  # > cluster.replica_delay_ms (2000): the workspace is persisted
    survivor = cl.nodes[other]
    cl.nodes[owner].kill9()
    t0 = time.perf_counter()
    deadline = time.monotonic() + REHOME_TIMEOUT_S
    last = None
    while time.monotonic() < deadline:
        try:
            execute(survivor.client, sid, "x + 1", "42")
            dt = time.perf_counter() - t0
            break
        except (H.BenchError, OSError) as e:
            last = e
            survivor.client.close()
            time.sleep(0.02)
    else:
        raise H.BenchError(f"{sid} did not come back on {other} within {REHOME_TIMEOUT_S} s: {last}")
    kept = H.value_of(execute(survivor.client, sid, "open('/workspace/mark').read()"))
    if kept not in ("'kept'", "kept"):
        raise H.BenchError(f"{sid}: the workspace came back without its file ({kept!r})")
    if cl.owner_of(sid) != other:
        raise H.BenchError(f"{sid} answered on {other} but the store names {cl.owner_of(sid)}")
    cl.start(owner)  # back with the same id: fencing keeps it off the sandbox
    execute(cl.nodes[owner].client, sid, "x + 1", "42")  # forwarded to the new owner
    if cl.owner_of(sid) != other:
        raise H.BenchError(f"{sid}: the restarted node {owner} took it back")
    return dt


def row(name, xs):
    return f"| {name} | {len(xs)} | {H.fmt_ms(H.pct(xs, 50) * 1000)} | {H.fmt_ms(H.pct(xs, 99) * 1000)} |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(H.ROOT, "build", "sandboxd"))
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        unavailable("run as root (the daemons' jails need it)")
    if not cluster_build(a.bin):
        unavailable(f"{a.bin} has no cluster.* configuration keys (a build before the cluster branches were merged)")
    tmp = tempfile.mkdtemp(prefix="sbx-cluster-bench-")
    os.chmod(tmp, 0o755)  # the postgres account must reach its directory inside
    pgdir = os.path.join(tmp, "pg")
    p = subprocess.run([PG_CLUSTER, "start", pgdir], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        unavailable(f"PostgreSQL cannot be started: {p.stderr.strip()[-300:]}")
    cl = Cluster(a.bin, tmp, p.stdout.strip())
    try:
        cl.start("a")
        cl.start("b")
        direct, through = forwarding(cl, a.n)
        rehome = [rehome_round(cl) for _ in range(a.rounds)]
    except H.BenchError as e:
        print(f"cluster.py: {e}", file=sys.stderr)
        for name, d in cl.nodes.items():
            print(f"--- node {name} log ---\n{d.read_log()}", file=sys.stderr)
        sys.exit(1)
    finally:
        cl.cleanup()
        subprocess.run([PG_CLUSTER, "stop", pgdir], capture_output=True, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
    print("| row | n | p50 ms | p99 ms |")
    print("| --- | ---: | ---: | ---: |")
    print(row("execute `x + 1` on the sandbox's owner", direct))
    print(row("execute `x + 1` through the other node (forwarded)", through))
    print(row("re-home: `kill -9` of the owner → first answer from the survivor", rehome))
    print(f"\nForwarding adds {H.fmt_ms((H.pct(through, 50) - H.pct(direct, 50)) * 1000)} ms at p50 "
          f"({H.fmt_x(H.pct(through, 50) / H.pct(direct, 50))}); re-home with the default "
          "cluster.heartbeat_ms=1000, cluster.dead_after_ms=5000, cluster.replica_delay_ms=2000.")


if __name__ == "__main__":
    main()
