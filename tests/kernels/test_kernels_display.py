"""The python kernel's repl extras (docs/kernel-protocol.md "Interrupts" and
"Display"): SIGINT stops the running cell only, and "display": true adds MIME
bundles (matplotlib figures as image/png, a pandas frame as text/html) while
a request without it is answered exactly as before."""
import base64
import importlib.util
import json
import os
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kernels import Kernel, ok, repl, ws  # noqa: E402,F401  (fixtures)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"



needs_mpl = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                               reason="python3-matplotlib not installed")
needs_pandas = pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="python3-pandas not installed")


def show(k, code, **kw):
    return k.run(code, display=True, env={"MPLCONFIGDIR": "/tmp/.mpl-kernel-tests"}, **kw)


def png(b64):
    raw = base64.b64decode(b64)
    assert raw.startswith(PNG_MAGIC)
    return raw


def test_sigint_stops_the_cell_and_keeps_state(repl):
    k = repl("python")
    ok(k.run("x = 41"))
    k.sock.sendall(json.dumps({"code": "y = 1\nwhile True: pass", "env": {}, "cwd": k.workspace}).encode()
                   + b"\n")
    time.sleep(0.5)
    os.kill(k.proc.pid, signal.SIGINT)
    resp = k._read_line()
    assert resp["error"]["name"] == "KeyboardInterrupt", resp
    assert any("while True" in line for line in resp["error"]["traceback"])
    assert ok(k.run("x + y")) == [{"text": "42"}]


def test_sigint_between_cells_is_ignored(repl):
    k = repl("python")
    ok(k.run("x = 1"))
    os.kill(k.proc.pid, signal.SIGINT)
    time.sleep(0.2)
    assert k.proc.poll() is None
    assert ok(k.run("x")) == [{"text": "1"}]


def test_no_display_fields_unless_asked(repl):
    k = repl("python")
    resp = k.run("{'a': 1}")
    assert "display" not in resp and "data" not in resp
    assert resp["results"] == [{"json": {"a": 1}}]


def test_result_bundles(repl):
    k = repl("python")
    resp = show(k, "{'a': [1, 2]}")
    assert resp["data"] == {"text/plain": "{'a': [1, 2]}", "application/json": {"a": [1, 2]}}
    assert resp["results"] == [{"json": {"a": [1, 2]}}] and resp["display"] == []
    resp = show(k, "class H:\n    def _repr_html_(self): return '<b>h</b>'\nH()")
    assert resp["data"]["text/html"] == "<b>h</b>"
    assert show(k, "x = 1")["data"] is None


@needs_mpl
def test_matplotlib_show_and_open_figures(repl):
    k = repl("python")
    resp = show(k, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nprint('after')")
    assert ok(resp) == [] and resp["stdout"] == ["after"], resp
    assert len(resp["display"]) == 1
    png(resp["display"][0]["image/png"])
    # A figure left open is shown once, after its cell; the next cell starts clean.
    resp = show(k, "plt.figure(); plt.bar([1, 2], [3, 4]); None")
    assert len(resp["display"]) == 1
    png(resp["display"][0]["image/png"])
    assert show(k, "1")["display"] == []
    # A Figure as the result is the result's image, not shown twice.
    resp = show(k, "fig, ax = plt.subplots(); ax.plot([0, 1]); fig")
    assert resp["display"] == [] and resp["data"]["text/plain"].startswith("<Figure")
    png(resp["data"]["image/png"])


@needs_mpl
def test_figures_of_replayed_cells_are_not_shown(repl):
    k = repl("python")
    ok(k.run("import matplotlib.pyplot as plt\nplt.plot([1])", replay=True,
             env={"MPLCONFIGDIR": "/tmp/.mpl-kernel-tests"}))
    assert show(k, "2")["display"] == []


@needs_pandas
def test_pandas_frame_is_html(repl):
    k = repl("python")
    resp = show(k, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
    html = resp["data"]["text/html"]
    assert "<table" in html and "<td>x</td>" in html, html
    assert "a  b" in resp["data"]["text/plain"]


@needs_mpl
def test_display_over_budget_keeps_text_only(repl):
    k = repl("python")
    resp = show(k, "import matplotlib.pyplot as plt\nplt.figure(figsize=(8, 8)); plt.imshow("
                "__import__('numpy').random.rand(400, 400)); None", result_limit=1024)
    assert len(resp["display"]) == 1
    only = resp["display"][0]
    assert list(only) == ["text/plain"] and "display omitted" in only["text/plain"]
