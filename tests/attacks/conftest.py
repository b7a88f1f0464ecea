"""Fixtures for the attack suite (tests/attacks)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attack_helpers import ATTACK_LIMITS, DAEMON_SECRET, DAEMON_SECRET_NAME, Daemon  # noqa: E402


@pytest.fixture(scope="session")
def daemon():
    """One daemon shared by the attack suite: tests also check that it is
    still alive and serving afterwards."""
    d = Daemon(sets=ATTACK_LIMITS, env={DAEMON_SECRET_NAME: DAEMON_SECRET})
    yield d
    crashed = d.proc.poll()
    log = d.read_log()
    d.cleanup()
    if crashed is not None:
        pytest.fail(f"the shared daemon died during the attack suite (status {crashed}):\n{log}")
