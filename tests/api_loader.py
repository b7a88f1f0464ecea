"""Loads tests/api/conftest.py (the black-box Daemon and its helpers) under
its own module name, so suites in other directories (tests/attacks,
tests/bridge) can use it in the same pytest session as tests/api: every
directory has a module called "conftest", and only one can be imported
under that name."""
import importlib.util
import os
import sys

_API_CONFTEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api", "conftest.py")


def load_api():
    name = "sandboxd_api_conftest"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, _API_CONFTEST)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod
