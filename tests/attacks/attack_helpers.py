"""Shared helpers of the attack suite (tests/attacks): the Daemon class and
the suite's limits.

Reuses the black-box Daemon class of tests/api/conftest.py. That file is
loaded by path under its own module name, so this suite can run in the same
pytest session as tests/api (both directories have a module called
"conftest")."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402

api = load_api()
Daemon = api.Daemon
ROOT = api.ROOT
text_of = api.text_of

# A value only the daemon's own environment holds: it must never reach a jail.
DAEMON_SECRET_NAME = "SBX_ATTACK_DAEMON_SECRET"
DAEMON_SECRET = "daemon-secret-7f3a9c1e5b"

# Short limits so that every limit attack ends quickly; CPU is below the wall
# clock so that a busy loop is reported as CPU time, not wall clock.
ATTACK_LIMITS = [
    "limits.cpu_ms=2000",
    "limits.wall_ms=3000",
    "limits.memory_bytes=128M",
    "limits.pids=32",
    "limits.nofile=64",
    "exec.drain_timeout_ms=5000",
]


