"""What the conftest.py of tests/cli, tests/web and tests/mcp share: the
black-box Daemon of tests/api/conftest.py (loaded by path, see
tests/api_loader.py), its names, and a `server` fixture: a daemon of the
test module's own (temp data dir, free loopback port)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_loader import load_api  # noqa: E402

api = load_api()
Daemon = api.Daemon
ROOT = api.ROOT
SANDBOXD_BIN = os.environ.get("SANDBOXD_BIN", os.path.join(ROOT, "build", "sandboxd"))
NODE_DIR = os.path.join(ROOT, "tests", "node")

# Several test directories have a module called "conftest"; re-export the
# loaded names (not fixtures) so "from conftest import …" keeps working.
for _name, _value in vars(api).items():
    if not _name.startswith("_") and _name not in ("daemon", "pytest"):
        globals().setdefault(_name, _value)


@pytest.fixture(scope="module")
def server():
    """A daemon of this module's own (temp data dir, free loopback port)."""
    d = Daemon(sets=api.ROOMY_LIMITS)
    yield d
    d.cleanup()
