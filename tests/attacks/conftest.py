"""Fixtures for the attack suite (tests/attacks)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attack_helpers import ATTACK_LIMITS, DAEMON_SECRET, DAEMON_SECRET_NAME, Daemon, api  # noqa: E402

# When tests/api and tests/attacks run in one pytest session, both files are
# imported as the module "conftest", and whichever came last is what
# tests/api's `from conftest import ...` finds: re-export its names (not its
# fixture) so that works either way.
for _name, _value in vars(api).items():
    if not _name.startswith("_") and _name not in ("daemon", "pytest"):
        globals().setdefault(_name, _value)


@pytest.fixture(scope="session")
def daemon():
    """One daemon shared by the attack suite: tests also check that it is
    still alive and serving afterwards."""
    # Info level (the last --log-level wins): if it ever dies, the log says
    # whether a signal stopped it.
    d = Daemon(sets=ATTACK_LIMITS, env={DAEMON_SECRET_NAME: DAEMON_SECRET}, extra_args=["--log-level", "info"])
    yield d
    crashed = d.proc.poll()
    log = d.read_log()
    d.cleanup()
    if crashed is not None:
        pytest.fail(f"the shared daemon died during the attack suite (status {crashed}):\n{log}")
