#!/usr/bin/env python3
"""New runtime-API sandbox + first execution, warm sandboxes on and off.

Two daemons (sandbox.warm_runtime=0 and =2, each its own data dir) run
side by side; samples alternate between them so that machine load hits
both alike. Each sample: wait until the daemon is idle (its warm pool
full again, then a pause), then POST /languages/python/sandboxes/<fresh
id>/execute of `print(1)` over a keep-alive connection (blocking), timed
client-side; the sandbox is deleted afterwards, untimed.

Usage: bench/warm_runtime.py [--bin build/sandboxd] [-n 30] [--pause 0.5]
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Daemon:
    def __init__(self, binary, port, sets):
        self.dir = tempfile.mkdtemp(prefix="warmrt-")
        args = [binary, "--listen", f"127.0.0.1:{port}", "--data-dir", self.dir, "--log-level", "warn"]
        for s in sets:
            args += ["--set", s]
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        self.conn = None
        self.port = port
        end = time.time() + 30
        while time.time() < end:
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                self.conn = None
            time.sleep(0.1)
        raise RuntimeError("daemon did not start")

    def request(self, method, path, body=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        data = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = self.conn.getresponse()
        payload = r.read()
        return r.status, json.loads(payload) if payload else None

    def settle(self, want, pause):
        end = time.time() + 30
        while want and time.time() < end and self.request("GET", "/ready")[1]["warmSandboxes"]["ready"] < want:
            time.sleep(0.05)
        time.sleep(pause)

    def sample(self):
        sid = "wb" + uuid.uuid4().hex[:12]
        t0 = time.perf_counter()
        status, res = self.request("POST", f"/languages/python/sandboxes/{sid}/execute", {"code": "print(1)"})
        dt = time.perf_counter() - t0
        if status != 200 or res["logs"]["stdout"] != ["1"]:
            raise RuntimeError(f"bad reply: {status} {res}")
        self.request("DELETE", f"/languages/python/sandboxes/{sid}")
        return dt * 1000

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        subprocess.run(["sh", "-c", f"grep ' {self.dir}' /proc/self/mountinfo | cut -d' ' -f5 | sort -r | "
                        "xargs -r -n1 umount -l"], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "sandboxd"))
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--pause", type=float, default=0.5)
    a = ap.parse_args()
    rows = {"cold (sandbox.warm_runtime=0)": (["sandbox.warm_runtime=0"], 0),
            "warm (sandbox.warm_runtime=2)": (["sandbox.warm_runtime=2"], 2)}
    daemons = {}
    try:
        for i, (name, (sets, want)) in enumerate(rows.items()):
            daemons[name] = (Daemon(a.bin, 18950 + i, sets), want)
        samples = {name: [] for name in rows}
        for name, (d, want) in daemons.items():  # untimed: first cgroup, caches
            d.settle(want, a.pause)
            d.sample()
        for _ in range(a.n):
            for name, (d, want) in daemons.items():
                d.settle(want, a.pause)
                samples[name].append(d.sample())
        for name, v in samples.items():
            v.sort()
            print(f"{name}: n={len(v)} p50={statistics.median(v):.2f} ms "
                  f"p10={v[len(v) // 10]:.2f} p90={v[len(v) * 9 // 10]:.2f} min={v[0]:.2f}")
    finally:
        for d, _ in daemons.values():
            d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
