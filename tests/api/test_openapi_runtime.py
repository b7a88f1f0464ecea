"""The runtime API's OpenAPI 3.1 document (GET /openapi.json) and its viewer
(/openapi.html): valid per a real validator, the source file built into the
binary, in step with the runtime and gateway route tables (both ways),
public (no key needed) while the routes it describes keep their auth."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402
from openapi_common import norm_doc, operations, registered_routes, validate  # noqa: E402

api = load_api()
SRC_JSON = os.path.join(api.ROOT, "src", "api", "workers", "openapi.json")
KEY = "runtime-openapi-k3y"
GATEWAY = "/languages/:lang/sandboxes/:id"


@pytest.fixture(scope="module")
def keyed():
    d = api.Daemon(sets=list(api.FAST_LIMITS) + [f"api_key={KEY}"])
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def spec(keyed):
    status, body, headers = keyed.get("/openapi.json")
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    return body


def test_served_without_a_key_while_the_api_needs_one(keyed, spec):
    assert spec["info"]["title"] == "sandboxd runtime API"
    status, body, _ = keyed.post("/execute/python", {"code": "1"})
    assert status == 401 and body["code"] == "UNAUTHORIZED"


def test_served_document_is_the_source_file_built_into_the_binary(keyed, spec):
    with open(SRC_JSON, "rb") as f:
        src = f.read()
    assert json.loads(src) == spec
    with open(api.BIN, "rb") as f:
        assert src in f.read()


def test_document_is_valid_openapi_3_1(spec):
    r = validate(json.dumps(spec).encode())
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == "valid 3.1"


def test_every_route_is_documented_and_every_documented_route_exists(spec):
    documented = {(m, norm_doc(p)) for m, p, _ in operations(spec)}
    registered = registered_routes("workers", lambda p: not p.endswith("/*"), {"SBX": GATEWAY})
    assert ("post", "/languages/{}/sandboxes/{}/execute") in registered  # the scan itself works
    assert registered - documented == set(), "routes missing from src/api/workers/openapi.json"
    assert documented - registered == set(), "documented routes the daemon does not serve"


def test_operation_ids_unique_and_errors_described(spec):
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids))
    for m, p, op in operations(spec):
        if op.get("security") != []:
            assert {"401", "default"} <= set(op["responses"]), (m, p)


def test_viewer_page(keyed):
    status, body, h = keyed.get("/openapi.html")
    assert status == 200 and h["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in h["content-security-policy"]
    assert h["referrer-policy"] == "no-referrer" and h["x-content-type-options"] == "nosniff"
    assert b"openapi.json" in body
