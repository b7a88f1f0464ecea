"""The per-cell journal write (issue 13, the per-request floor): an executed
cell and its context's row are committed together, before the answer. A
daemon killed with SIGKILL in the middle of a stream of cells comes back
with every answered cell replayed, and with a context row that agrees with
its journal (executions = journaled cells), in each sandbox.journal_sync
mode."""
import signal
import threading
import time
import uuid

import pytest

from conftest import Daemon, FAST_LIMITS, unmount_under


def base(s):
    return f"/languages/python/sandboxes/{s}"


def value(res):
    assert "error" not in res, res.get("error")
    r = res["results"]
    return r[0].get("json", r[0].get("text")) if r else None


def stream(d, s, answered, stop):
    """n += 1 back to back; counts the cells answered 200 until the daemon dies."""
    while not stop.is_set():
        try:
            status, res, _ = d.post(base(s) + "/execute", {"code": "n += 1\nn"}, timeout=10)
        except Exception:  # noqa: BLE001 - the daemon was killed under us
            return
        if status != 200:
            return
        answered.append(int(value(res)))


@pytest.mark.parametrize("mode", ["group", "none", "always"])
def test_kill9_mid_stream_every_answered_cell_replayed(mode):
    sets = list(FAST_LIMITS) + [f"sandbox.journal_sync={mode}"]
    d = Daemon(sets=sets)
    data, keep = d.data_dir, d.tmp
    s = "t-" + uuid.uuid4().hex[:12]
    try:
        status, res, _ = d.post(base(s) + "/execute", {"code": "n = 0"})
        assert status == 200, res
        answered, stop = [], threading.Event()
        t = threading.Thread(target=stream, args=(d, s, answered, stop))
        t.start()
        deadline = time.monotonic() + 30
        while len(answered) < 40 and time.monotonic() < deadline:
            time.sleep(0.005)
        d.tmp = None
        d.proc.send_signal(signal.SIGKILL)   # mid-stream: a cell is likely in flight
        d.proc.wait()
        stop.set()
        t.join(timeout=30)
        d.log.close()
        assert len(answered) >= 40
        assert answered == list(range(1, len(answered) + 1))
        d2 = Daemon(data_dir=data, sets=sets)
        try:
            # Every answered cell is back; the one in flight may be too
            # (journaled before its answer was sent), nothing else.
            n = int(value(d2.post(base(s) + "/execute", {"code": "n"})[1]))
            assert n in (len(answered), len(answered) + 1), (n, len(answered))
            status, info, _ = d2.get(base(s))
            (ctx,) = info["contexts"]
            # The row was written with each cell: it agrees with the journal
            # (n = 0, n increments, and the "n" just run).
            assert ctx["snapshot"]["cells"] == n + 2, ctx
            assert ctx["executions"] == n + 2, ctx
            assert ctx["snapshot"]["stale"] is False
            assert ctx["snapshot"]["bytes"] == len("n = 0") + n * len("n += 1\nn") + len("n")
        finally:
            d2.stop()
    finally:
        unmount_under(data)
        keep.cleanup()
