"""What the OpenAPI tests of every facade share: walking a document's
operations, the route tables in src/api/<facade>/*.c, and a real validator
(npm @seriousme/openapi-schema-validator in tests/node)."""
import json
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_DIR = os.path.join(ROOT, "tests", "node")
METHODS = ("get", "put", "post", "delete", "patch")
# { "GET", "/path", …  or  { "GET", MACRO "/rest", …  or  { "GET", MACRO, …
ROUTE_RE = re.compile(r'\{\s*"(GET|PUT|POST|DELETE|PATCH)"\s*,\s*([A-Z_]+)?\s*(?:"(/[^"]*)")?\s*,')


def operations(doc):
    for path, item in doc["paths"].items():
        for m in METHODS:
            if m in item:
                yield m, path, item[m]


def norm_doc(path):
    return re.sub(r"\{[^}]+\}", "{}", path)


def norm_route(pattern):
    return re.sub(r":[A-Za-z_]+|\*$", "{}", pattern)


def registered_routes(facade_dir, keep, macros=None):
    """(method, normalised path) of every route in src/api/<facade_dir>/*.c
    whose path keep(path) accepts; macros maps a path prefix macro (e.g.
    SBX) to its value."""
    found = set()
    src = os.path.join(ROOT, "src", "api", facade_dir)
    for f in sorted(os.listdir(src)):
        if not f.endswith(".c"):
            continue
        with open(os.path.join(src, f)) as fh:
            for method, macro, pattern in ROUTE_RE.findall(fh.read()):
                if not macro and not pattern:
                    continue
                path = (macros or {}).get(macro, "") + pattern if macro else pattern
                if keep(path):
                    found.add((method.lower(), norm_route(path)))
    return found


def node(script, *args, stdin=None, timeout=60):
    path = os.path.join(NODE_DIR, script)
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
        pytest.fail("tests/node/node_modules is missing: run `make node-deps`")
    return subprocess.run(["node", path, *args], input=stdin, capture_output=True, timeout=timeout, cwd=NODE_DIR)


def validate(doc_bytes):
    return node("validate-openapi.mjs", "-", stdin=doc_bytes)


# ---- checks every facade's OpenAPI test makes ----

def check_is_the_source_built_in(spec, src_json, binary):
    """The served document is the source file, assembled into the binary."""
    with open(src_json, "rb") as f:
        src = f.read()
    assert json.loads(src) == spec
    with open(binary, "rb") as f:
        assert src in f.read()


def check_valid_3_1(spec):
    r = validate(json.dumps(spec).encode())
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == "valid 3.1"


def check_routes_both_ways(spec, facade_dir, keep, macros, samples):
    """Every route of src/api/<facade_dir> is documented, and every
    documented route is served; samples prove the scan itself works."""
    documented = {(m, norm_doc(p)) for m, p, _ in operations(spec)}
    registered = registered_routes(facade_dir, keep, macros)
    assert set(samples) <= registered, set(samples) - registered
    assert registered - documented == set(), f"routes missing from src/api/{facade_dir}/openapi.json"
    assert documented - registered == set(), "documented routes the daemon does not serve"


def check_ids_unique_and_auth_errors(spec):
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids))
    for m, p, op in operations(spec):
        if op.get("security") != []:
            assert {"401", "default"} <= set(op["responses"]), (m, p)


def check_viewer(daemon, path):
    status, body, h = daemon.get(path)
    assert status == 200 and h["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in h["content-security-policy"]
    assert h["referrer-policy"] == "no-referrer" and h["x-content-type-options"] == "nosniff"
    assert b"openapi.json" in body
