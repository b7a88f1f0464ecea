"""Shared by the /exec and session tests: a daemon whose timed-out commands
get SIGKILL GRACE_MS after SIGTERM (bridge.exec_grace_ms), so timeout tests
take a second, not the default grace of five."""
import pytest

from bridge_common import FAST_LIMITS, Daemon

GRACE_MS = 300


@pytest.fixture(scope="module")
def d():
    dm = Daemon(sets=FAST_LIMITS + [f"bridge.exec_grace_ms={GRACE_MS}"])
    yield dm
    dm.cleanup()
