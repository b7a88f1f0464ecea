"""Where an idle-daemon request's time goes, segment by segment (issue 13).

    /usr/bin/python3 bench/idle_segments.py [--bin BIN[@KERNELS_DIR]] [--lang L] [-n N]

Starts a daemon, then sends N stateless `1+1` requests paced as section 1's
idle-daemon row is (the harness's settle(): the daemon's tree used no CPU
for 120 ms), each between two trace markers, with the scheduler, syscall
and user page-fault tracepoints on (tracefs; root). Prints the p50 of each
segment, in µs:

  client_pre   marker → the client's send wakes the HTTP thread
  wait_run     that wake-up → the HTTP thread runs
  daemon_pre   → the HTTP thread's write wakes the pool member
  member       → the member's answer wakes the HTTP thread
  daemon_post  → the HTTP thread's sendmsg (the reply)
  client_post  → the client has read and parsed the reply

and, per request, the HTTP thread's page faults before the reply (after a
refill by clone() they are write-protect faults) and whether the thread,
woken by the answer, preempted the member on its CPU or waited until the
member blocked. Not part of `make bench` (it needs tracefs and adds the
tracepoints' own cost to every segment): a diagnostic for one row.
"""
import argparse
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BenchError, Workdir, check_exec, settle  # noqa: E402

TRACEFS = "/sys/kernel/tracing/"
EVENTS = ["raw_syscalls/sys_enter", "exceptions/page_fault_user", "sched/sched_waking", "sched/sched_switch"]
MEMBER_COMM = r"(?:node|perl|python3|ruby)"
MEMBER = MEMBER_COMM + r"-\d+"
STAMP = re.compile(r" (\d+\.\d+): ")
SEGMENTS = ["client_pre", "wait_run", "daemon_pre", "member", "daemon_post", "client_post", "total"]


def tracefs_write(name, text):
    # O_APPEND: some tracefs files refuse a truncating open.
    fd = os.open(TRACEFS + name, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def stamp_us(line):
    return float(STAMP.search(line).group(1)) * 1e6


def first(lines, pattern, start=0):
    """Index of the first line at or after start that matches pattern."""
    rx = re.compile(pattern)
    return next(i for i in range(start, len(lines)) if rx.search(lines[i]))


def request_segments(lines):
    """The segments of one request's trace lines (marker to marker), or None
    when a step is missing (a request that met no pool member)."""
    try:
        wake = first(lines, r"^\s*python3-\d+ .*sched_waking: comm=MHD-worker")
        run = first(lines, r"next_comm=MHD-worker", wake)
        ask = first(lines, rf"^\s*MHD-worker-\d+ .*sched_waking: comm={MEMBER_COMM}", run)
        answer = first(lines, rf"^\s*{MEMBER} .*sched_waking: comm=MHD-worker", ask)
        back = first(lines, r"next_comm=MHD-worker", answer)
        reply = first(lines, r"^\s*MHD-worker-\d+ .*sys_enter: NR 46 ", back)
    except StopIteration:
        return None
    t = [stamp_us(lines[i]) for i in (0, wake, run, ask, answer, reply)] + [stamp_us(lines[-1])]
    seg = dict(zip(SEGMENTS, [t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3], t[5] - t[4], t[6] - t[5],
                              t[6] - t[0]]))
    seg["faults"] = sum(1 for line in lines[:reply] if re.match(r"^\s*MHD-worker-\d+ .*page_fault_user", line))
    seg["preempted"] = "prev_state=R" in lines[back]
    seg["answer_wait"] = stamp_us(lines[back]) - stamp_us(lines[answer])
    return seg


def traced_requests(daemon, lang, n):
    code = "1+1"
    for _ in range(5):
        status, res = daemon.client.request("POST", f"/execute/{lang}", {"code": code})
        check_exec(status, res, "2", f"POST /execute/{lang}")
        settle(daemon.proc.pid)
    with open(TRACEFS + "tracing_on") as f:
        was_on = f.read().strip()
    with open(TRACEFS + "buffer_size_kb") as f:
        buffer_kb = f.read().split()[0]
    tracefs_write("tracing_on", "0")
    open(TRACEFS + "trace", "w").close()
    latencies = []
    try:
        tracefs_write("buffer_size_kb", "20000")
        for e in EVENTS:
            tracefs_write(f"events/{e}/enable", "1")
        tracefs_write("tracing_on", "1")
        for i in range(n):
            settle(daemon.proc.pid)
            tracefs_write("trace_marker", f"IDLE{i} start")
            t0 = time.perf_counter()
            status, res = daemon.client.request("POST", f"/execute/{lang}", {"code": code})
            latencies.append(time.perf_counter() - t0)
            tracefs_write("trace_marker", f"IDLE{i} end")
            check_exec(status, res, "2", f"POST /execute/{lang}")
        tracefs_write("tracing_on", "0")
        with open(TRACEFS + "trace") as f:
            trace = f.read()
    finally:
        tracefs_write("tracing_on", "0")
        for e in EVENTS:
            tracefs_write(f"events/{e}/enable", "0")
        tracefs_write("buffer_size_kb", buffer_kb)
        tracefs_write("tracing_on", was_on)
    segments = []
    for i in range(n):
        m = re.search(rf"^[^\n]*IDLE{i} start\n.*?IDLE{i} end[^\n]*", trace, re.S | re.M)
        seg = request_segments(m.group(0).splitlines()) if m else None
        if seg:
            segments.append(seg)
    return latencies, segments


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(here, "..", "build", "sandboxd"),
                    help="sandboxd binary, optionally @KERNELS_DIR")
    ap.add_argument("--lang", default="javascript", choices=["python", "javascript", "perl", "ruby"])
    ap.add_argument("-n", type=int, default=25)
    args = ap.parse_args()
    if not os.access(TRACEFS + "trace_marker", os.W_OK):
        print("idle_segments: tracefs is not writable here (root needed); skipped")
        return 2
    binary, _, kernels = args.bin.partition("@")
    work = Workdir(sets=[f"kernels_dir={kernels}"] if kernels else [])
    try:
        daemon = work.daemon(os.path.abspath(binary)).start()
        latencies, segments = traced_requests(daemon, args.lang, args.n)
    except BenchError as e:
        print(f"idle_segments: {e}")
        return 1
    finally:
        work.cleanup()
    if not segments:
        print("idle_segments: no request met a pool member")
        return 1
    p50 = {k: statistics.median(s[k] for s in segments) for k in SEGMENTS + ["faults", "answer_wait"]}
    print(f"{args.lang}: idle-paced HTTP p50 {statistics.median(latencies) * 1000:.3f} ms (n={len(latencies)}, "
          f"{len(segments)} traced through a pool member)")
    print("  " + "  ".join(f"{k} {p50[k]:.0f}" for k in SEGMENTS) + "  (µs, p50 of each)")
    preempted = sum(1 for s in segments if s["preempted"])
    print(f"  HTTP thread's page faults before the reply: p50 {p50['faults']:.0f}; woken by the answer, it "
          f"preempted the member in {preempted} of {len(segments)} requests (answer → running p50 "
          f"{p50['answer_wait']:.0f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
