"""Fixtures of the mcp tests: tests/module_daemon.py (a daemon per test
module, and the black-box names of tests/api/conftest.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from module_daemon import *  # noqa: E402,F401,F403
