"""Fixtures of the controller API tests: one daemon for the module's tests."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controller_common import CTL_SETS, Daemon, api  # noqa: E402

# tests/api, tests/bridge, tests/controller and tests/attacks each have a
# module called "conftest"; in one pytest session tests/api's
# `from conftest import ...` may find this one: re-export its names (not
# its fixtures) so that works.
for _name, _value in vars(api).items():
    if not _name.startswith("_") and _name not in ("daemon", "pytest"):
        globals().setdefault(_name, _value)


@pytest.fixture(scope="module")
def ctl():
    d = Daemon(sets=CTL_SETS)
    yield d
    d.cleanup()
