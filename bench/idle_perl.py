"""What an idle pause costs perl itself on this machine, without the daemon.

    /usr/bin/python3 bench/idle_perl.py [--rounds N]

Three perl processes, each driven over a socket pair by this script, each
timed from the request's write to its answer's read, back to back and after
a 150 ms pause (the idle-daemon rows' pause), interleaved:

  - echo:   reads a line, writes a fixed answer (two process wake-ups, the
            least a separate process can answer in);
  - eval:   reads a line, string-evals it, writes the value (a minimal REPL);
  - kernel: the daemon's perl kernel (src/runtimes/kernels/perl_kernel.pl),
            started as a template's kernel and given the daemon's warm-up
            first, as a pool member is, answering the daemon's exact request
            line for `1+1` (no jail, no daemon).

And the bare start `perl -e 1+1` both ways. Prints p50s and the pause's
factor per row. The idle-daemon perl row pays what the kernel row pays after
the pause, plus the HTTP floor (the `canned-paced` row of section 1) and
the daemon's own path.
"""
import argparse
import os
import socket
import statistics
import subprocess
import time

from harness import kernel_line, spawn_timer

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.join(HERE, "..", "src", "runtimes", "kernels", "perl_kernel.pl")
PAUSE_S = 0.15
ECHO = r'$|=1; while (defined(my $l = <STDIN>)) { syswrite(STDOUT, "2\n"); }'
EVAL = r'$|=1; while (defined(my $l = <STDIN>)) { my $r = eval $l; syswrite(STDOUT, "$r\n"); }'
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def read_line(sock):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("perl closed its end")
        buf += chunk
    return buf


class Loop:
    """A perl one-liner on stdin/stdout."""

    def __init__(self, prog):
        self.sock, child = socket.socketpair()
        self.proc = subprocess.Popen(["/usr/bin/perl", "-e", prog], stdin=child, stdout=child, env=CLEAN_ENV)
        child.close()
        self.line = b"1+1\n"
        self.ask()

    def ask(self):
        self.sock.sendall(self.line)
        return read_line(self.sock)

    def close(self):
        self.sock.close()
        self.proc.wait()


class Kernel(Loop):
    """The perl kernel on fd 3, warmed up like a pool member; a fresh one per
    sample (a once-mode kernel answers one request)."""

    def __init__(self, cwd):
        self.sock, child = socket.socketpair()
        fd = child.fileno()
        self.proc = subprocess.Popen(["/usr/bin/perl", KERNEL, "zygote"], stdin=subprocess.DEVNULL,
                                     env=dict(CLEAN_ENV, SANDBOX_WORKSPACE_ROOT=cwd), cwd=cwd,
                                     close_fds=False, preexec_fn=lambda: os.dup2(fd, 3))
        child.close()
        read_line(self.sock)  # ready
        self.sock.sendall(kernel_line("1+1", cwd, "warmup").encode())
        read_line(self.sock)
        self.line = kernel_line("1+1", cwd, "reseed").encode()


def timed(fn, pause):
    if pause:
        time.sleep(pause)
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def sample_loop(prog, pause):
    loop = Loop(prog)
    try:
        return timed(loop.ask, pause)
    finally:
        loop.close()


def sample_kernel(cwd, pause):
    k = Kernel(cwd)
    try:
        out = []
        t = timed(lambda: out.append(k.ask()), pause)
        assert b'"text":"2"' in out[0], out
        return t
    finally:
        k.close()


BARE = spawn_timer(["/usr/bin/perl", "-e", "1+1"])  # as section 1 of bench/run.py spawns it


def sample_bare(pause):
    if pause:
        time.sleep(pause)
    else:  # back to back as section 1 runs it: right after other starts
        BARE(), BARE()
    return BARE() * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    cwd = os.path.realpath("/tmp")
    rows = {"echo": lambda p: sample_loop(ECHO, p), "eval": lambda p: sample_loop(EVAL, p),
            "kernel": lambda p: sample_kernel(cwd, p), "bare perl -e": sample_bare}
    got = {(name, pause): [] for name in rows for pause in (0, PAUSE_S)}
    for _ in range(args.rounds):
        for name, fn in rows.items():
            for pause in (0, PAUSE_S):
                got[(name, pause)].append(fn(pause))
    print(f"perl after an idle pause of {PAUSE_S * 1000:.0f} ms, {args.rounds} samples per row (p50 ms):")
    for name in rows:
        busy, idle = (statistics.median(got[(name, p)]) for p in (0, PAUSE_S))
        print(f"  {name:<13} back to back {busy:6.3f}   after the pause {idle:6.3f}   ×{idle / busy:.2f}")


if __name__ == "__main__":
    main()
