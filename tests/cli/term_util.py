"""Shared by test_cli_shell.py and test_cli_cp.py: an isolated client
environment pointing at the module's daemon, a fresh bridge sandbox, and a
run of the binary that fails on a sanitizer report (the CLI runs under
ASan/UBSan in those passes of `make test`)."""
import os
import subprocess

import pytest

from conftest import SANDBOXD_BIN

SANITIZER_MARKERS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"runtime error:")


def no_sanitizer_report(text):
    for m in SANITIZER_MARKERS:
        assert m not in (text or b""), text.decode(errors="replace")


@pytest.fixture
def env(server, tmp_path):
    e = dict(os.environ)
    for k in ("SANDBOXD_API_KEY", "SANDBOX_API_KEY", "SANDBOXD_CLIENT_CONFIG", "XDG_CONFIG_HOME"):
        e.pop(k, None)
    e["HOME"] = str(tmp_path / "home")
    e["SANDBOXD_URL"] = f"http://127.0.0.1:{server.port}"
    return e


@pytest.fixture
def sandbox(server):
    status, body, _ = server.post("/v1/sandbox", {})
    assert status == 200, body
    yield body["id"]
    server.request("DELETE", f"/v1/sandbox/{body['id']}")


def run(env, *args, stdin=None, stderr=subprocess.PIPE, cwd=None, timeout=120):
    p = subprocess.run([SANDBOXD_BIN, *args], input=stdin, stdout=subprocess.PIPE, stderr=stderr, env=env,
                       timeout=timeout, cwd=cwd)
    no_sanitizer_report(p.stderr)
    return p
