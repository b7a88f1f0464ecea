"""The python kernel's per-cell work kept lean (issue 13, the per-request
floor) without changing what a cell sees: the env is exactly the request's
in every cell, a module written between cells (even within the directory's
mtime tick) imports, a cell run again gives the same answer and the same
warnings, and a guest's "once" warnings stay once.

Run: /usr/bin/python3 -m pytest -q tests/kernels
PYTHON_KERNEL_DIR=<dir> runs them against another kernel (e.g. an older one).
"""
import os

import pytest

from test_kernels import KERNEL_DIR, Kernel

DIR = os.environ.get("PYTHON_KERNEL_DIR", KERNEL_DIR)


@pytest.fixture
def k(tmp_path):
    ws = tmp_path / "workspace"
    ws.mkdir()
    kern = Kernel("python", "repl", os.path.realpath(str(ws)), kernel_dir=DIR)
    assert kern.ready == {"ready": True}
    yield kern
    if kern.proc.poll() is None:
        kern.close()


def value(resp):
    assert resp["error"] is None, resp
    (entry,) = resp["results"]
    return entry.get("json", entry.get("text"))


ENV = "import os\ndict(os.environ)"


def test_env_is_exactly_the_requests_in_every_cell(k):
    assert value(k.run(ENV, env={"A": "1", "B": "2"})) == {"A": "1", "B": "2"}
    assert value(k.run(ENV, env={"A": "1"})) == {"A": "1"}           # B unset
    assert value(k.run(ENV, env={"A": "3", "C": "x"})) == {"A": "3", "C": "x"}
    # What a cell set itself is gone in the next one, and so is what it unset.
    assert value(k.run("import os\nos.environ['Z'] = '1'\ndel os.environ['A']\nsorted(os.environ)",
                       env={"A": "3"})) == ["Z"]
    assert value(k.run(ENV, env={"A": "3"})) == {"A": "3"}
    # A key that cannot be set is skipped, the rest applied; non-strings as str.
    assert value(k.run(ENV, env={"BAD=KEY": "v", "N": 5})) == {"N": "5"}
    assert value(k.run(ENV, env={})) == {}
    # The processes a cell starts see it too.
    assert value(k.run("import subprocess\nsubprocess.run(['/usr/bin/env'], capture_output=True,"
                       " text=True).stdout.split()", env={"Q": "q"})) == ["Q=q"]


def test_module_written_between_cells_imports(k):
    ws = k.workspace
    err = k.run("import fresh_mod")["error"]
    assert err["name"] == "ModuleNotFoundError"
    # The import system has listed the directory: write a module, and put
    # the directory's mtime back so only a forgotten cache finds it.
    st = os.stat(ws)
    with open(os.path.join(ws, "fresh_mod.py"), "w") as f:
        f.write("V = 41\n")
    os.utime(ws, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert value(k.run("import fresh_mod\nfresh_mod.V + 1")) == "42"
    # Again, with a cell between that imports nothing.
    assert value(k.run("1")) == "1"
    st = os.stat(ws)
    with open(os.path.join(ws, "later_mod.py"), "w") as f:
        f.write("W = 7\n")
    os.utime(ws, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert value(k.run("import later_mod\nlater_mod.W")) == "7"


def test_cell_run_again_same_answer(k):
    assert k.run("x = 1")["results"] == []
    for want in ("2", "2", "2"):
        assert value(k.run("x + 1")) == want
    assert k.run("x = 5")["results"] == []
    assert value(k.run("x + 1")) == "6"
    # Statements then a last expression, run twice: both parts every time.
    assert value(k.run("x += 1\nx")) == "6"
    assert value(k.run("x += 1\nx")) == "7"
    # An error run again: the same error, its traceback showing the line.
    for _ in range(2):
        e = k.run("def f():\n    return 1 / 0\nf()")["error"]
        assert e["name"] == "ZeroDivisionError"
        assert any("return 1 / 0" in line for line in e["traceback"]), e
    # A syntax error every time.
    for _ in range(2):
        assert k.run("x = = 1")["error"]["name"] == "SyntaxError"


def test_compile_warning_shown_every_run(k):
    for _ in range(3):
        resp = k.run("x = 1\nx is 1")
        assert resp["error"] is None, resp
        assert any("SyntaxWarning" in line for line in resp["stderr"]), resp


def test_guest_once_warning_stays_once(k):
    code = "import warnings\nwarnings.warn('only once')"
    assert any("only once" in line for line in k.run(code)["stderr"])
    k.run("y = 2")          # a new cell between (compiled, not from the cache)
    k.run("z = 3 # other")
    assert not any("only once" in line for line in k.run(code)["stderr"])
