"""pytest plugin (-p pg_plugin, with tests/pg on PYTHONPATH): runs the
black-box tests it is given with every daemon on PostgreSQL. At session
start it starts a throwaway cluster (tests/pg/pg_cluster.sh) and exports
its socket dir; tests/api/conftest.py's Daemon then passes
--store postgresql:///<db of its data dir>?host=... When the server cannot
be started, every test is skipped with the reason."""
import os
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "pg_cluster.sh")
_state = {"dir": None, "error": None}


def _pg_bin():
    versions = sorted((d for d in os.listdir("/usr/lib/postgresql") if d.isdigit()), key=int) \
        if os.path.isdir("/usr/lib/postgresql") else []
    return f"/usr/lib/postgresql/{versions[-1]}/bin" if versions else ""


def pytest_configure(config):
    d = tempfile.mkdtemp(prefix="sbx-pg-")
    os.rmdir(d)   # pg_cluster.sh creates it, owned by the server's account
    res = subprocess.run([SCRIPT, "start", d], capture_output=True, text=True)
    if res.returncode != 0:
        _state["error"] = res.stderr.strip()[:300] or "pg_cluster.sh start failed"
        subprocess.run([SCRIPT, "stop", d], capture_output=True)
        return
    _state["dir"] = d
    os.environ["SANDBOXD_TEST_PG_HOST"] = d
    os.environ["SANDBOXD_TEST_PG_BIN"] = _pg_bin()


def pytest_collection_modifyitems(config, items):
    if _state["error"]:
        skip = pytest.mark.skip(reason=f"PostgreSQL cannot be started: {_state['error']}")
        for item in items:
            item.add_marker(skip)


def pytest_unconfigure(config):
    if _state["dir"]:
        subprocess.run([SCRIPT, "stop", _state["dir"]], capture_output=True)
        os.environ.pop("SANDBOXD_TEST_PG_HOST", None)
