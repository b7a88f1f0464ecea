"""The controller API's OpenAPI 3.1 document (GET /api/v1/openapi.json) and
its viewer (/api/v1/openapi.html): valid per a real validator, the source
file built into the binary, in step with the controller's route tables
(both ways), public while the routes it describes need credentials."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402
from openapi_common import (check_ids_unique_and_auth_errors, check_is_the_source_built_in,  # noqa: E402
                            check_routes_both_ways, check_valid_3_1, check_viewer)

api = load_api()
SRC_JSON = os.path.join(api.ROOT, "src", "api", "controller", "openapi.json")
PREFIX = "/api/v1"
MACROS = {"CTL_PREFIX": PREFIX, "SESSIONS": PREFIX + "/sandbox/:id/repl/sessions"}


@pytest.fixture(scope="module")
def ctl():
    d = api.Daemon()
    yield d
    d.cleanup()


@pytest.fixture(scope="module")
def spec(ctl):
    status, body, headers = ctl.get(PREFIX + "/openapi.json")
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    return body


def test_public_while_the_routes_need_credentials(ctl, spec):
    assert spec["info"]["title"] == "sandboxd controller API"
    status, body, _ = ctl.get(PREFIX + "/sandboxes")
    assert status == 401 and body["error"]["code"] == "AUTH_REQUIRED"


def test_served_document_is_the_source_file_built_into_the_binary(spec):
    check_is_the_source_built_in(spec, SRC_JSON, api.BIN)


def test_document_is_valid_openapi_3_1(spec):
    check_valid_3_1(spec)


def test_every_route_is_documented_and_every_documented_route_exists(spec):
    check_routes_both_ways(spec, "controller", lambda p: p.startswith(PREFIX), MACROS,
                           [("post", PREFIX + "/sandbox/{}/execute"),
                            ("post", PREFIX + "/sandbox/{}/repl/sessions/{}/execute")])


def test_operation_ids_unique_and_auth_errors_described(spec):
    check_ids_unique_and_auth_errors(spec)


def test_viewer_page(ctl):
    check_viewer(ctl, PREFIX + "/openapi.html")
