"""Interleaved A/B of stateless `POST /execute/<lang>` between daemon builds.

    python3 bench/ab_stateless.py LANG ROUNDS PAUSE_S BIN[@KERNELS_DIR][,KEY=VALUE...] ...

(KEY=VALUE: a --set for that daemon, e.g. build/sandboxd,jail.spawner=0.)

Starts one daemon per build (--log-level debug), then for ROUNDS rounds sends
10 requests to each in turn (PAUSE_S before each: 0 = back to back, 0.15 =
the idle-daemon row). Prints per build: HTTP p50/p90, the daemon's own
`run_ms` p50 (the kernel's run: request written to answer read) and the
member's CPU per request (`usage.fuelConsumed`, µs) and the daemon's minor page
faults (/proc/PID/stat) during the request and between requests (refills:
copy-on-write faults after a clone() of the daemon land here). On a shared machine
the HTTP figures are noisy; alternate the build order between runs.
"""
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(spec):
    path, *sets = spec.split(",")
    binary, _, kdir = path.partition("@")
    port, tmp = free_port(), tempfile.mkdtemp()
    extra = ["--set", "kernels_dir=" + kdir] if kdir else []
    for s in sets:
        extra += ["--set", s]
    log = open(tmp + "/log", "w")
    proc = subprocess.Popen([binary, *extra, "--listen", f"127.0.0.1:{port}", "--data-dir", tmp + "/data",
                             "--log-level", "debug"], stdout=log, stderr=log)
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port)
            c.request("GET", "/health")
            c.getresponse().read()
            break
        except OSError:
            time.sleep(0.1)
    return {"spec": spec, "proc": proc, "tmp": tmp, "log": tmp + "/log", "lat": [], "cpu": [], "flt_req": [], "flt_bg": [],
            "conn": http.client.HTTPConnection("127.0.0.1", port)}


def minflt(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def execute(d, lang, code):
    t = time.perf_counter()
    d["conn"].request("POST", f"/execute/{lang}", body=json.dumps({"code": code}),
                      headers={"Content-Type": "application/json"})
    body = d["conn"].getresponse().read()
    return time.perf_counter() - t, json.loads(body)


def main():
    lang, rounds, pause, specs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
    code = os.environ.get("CODE", "1+1")
    daemons = [start(s) for s in specs]
    time.sleep(3)  # pools fill
    for d in daemons:
        for _ in range(5):
            execute(d, lang, code)
    for _ in range(rounds):
        for d in daemons:
            last = minflt(d["proc"].pid)
            for _ in range(10):
                time.sleep(pause)
                before = minflt(d["proc"].pid)
                dt, res = execute(d, lang, code)
                after = minflt(d["proc"].pid)
                d["flt_req"].append(after - before)
                d["flt_bg"].append(before - last)
                last = after
                d["lat"].append(dt * 1000)
                d["cpu"].append(res.get("usage", {}).get("fuelConsumed", 0))
    for d in daemons:
        d["proc"].terminate()
        d["proc"].wait()
        runs = [float(m) for m in re.findall(rf"lang={lang} pooled=1 take_ms=[\d.]+ run_ms=([\d.]+)",
                                             open(d["log"]).read())][5:]
        lat = sorted(d["lat"])
        print(f'{d["spec"]}: http p50 {statistics.median(lat):.3f} ms p90 {lat[int(len(lat) * 0.9)]:.3f}'
              f'  run_ms p50 {statistics.median(runs) if runs else float("nan"):.3f} (n={len(runs)})'
              f'  member cpu p50 {statistics.median(d["cpu"]):.0f} us'
              f'  daemon faults p50 {statistics.median(d["flt_req"]):.0f} in the request,'
              f' {statistics.median(d["flt_bg"]):.0f} between')
        shutil.rmtree(d["tmp"], ignore_errors=True)


if __name__ == "__main__":
    main()
