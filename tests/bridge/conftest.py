"""Fixtures of the bridge API tests: one daemon for the module's tests."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bridge_common import Daemon  # noqa: E402


@pytest.fixture(scope="module")
def bridge():
    d = Daemon()
    yield d
    d.cleanup()
