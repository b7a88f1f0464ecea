"""The runtime API's OpenAPI 3.1 document (GET /openapi.json) and its viewer
(/openapi.html): valid per a real validator, the source file built into the
binary, in step with the runtime and gateway route tables (both ways),
public (no key needed) while the routes it describes keep their auth."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402
from openapi_common import (check_ids_unique_and_auth_errors, check_is_the_source_built_in,  # noqa: E402
                            check_routes_both_ways, check_valid_3_1, check_viewer)

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
    check_is_the_source_built_in(spec, SRC_JSON, api.BIN)


def test_document_is_valid_openapi_3_1(spec):
    check_valid_3_1(spec)


def test_every_route_is_documented_and_every_documented_route_exists(spec):
    check_routes_both_ways(spec, "workers", lambda p: not p.endswith("/*"), {"SBX": GATEWAY},
                           [("post", "/languages/{}/sandboxes/{}/execute")])


def test_operation_ids_unique_and_errors_described(spec):
    check_ids_unique_and_auth_errors(spec)


def test_viewer_page(keyed):
    check_viewer(keyed, "/openapi.html")
