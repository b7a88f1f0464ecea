"""The controller API's OpenAPI 3.1 document (GET /api/v1/openapi.json) and
its viewer (/api/v1/openapi.html): valid per a real validator, the source
file built into the binary, in step with the controller's route tables
(both ways), public while the routes it describes need credentials."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402
from openapi_common import norm_doc, operations, registered_routes, validate  # noqa: E402

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
    registered = registered_routes("controller", lambda p: p.startswith(PREFIX), MACROS)
    assert ("post", PREFIX + "/sandbox/{}/execute") in registered  # the scan itself works
    assert ("post", PREFIX + "/sandbox/{}/repl/sessions/{}/execute") in registered
    assert registered - documented == set(), "routes missing from src/api/controller/openapi.json"
    assert documented - registered == set(), "documented routes the daemon does not serve"


def test_operation_ids_unique_and_auth_errors_described(spec):
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids))
    for m, p, op in operations(spec):
        if op.get("security") != []:
            assert {"401", "default"} <= set(op["responses"]), (m, p)


def test_viewer_page(ctl):
    status, body, h = ctl.get(PREFIX + "/openapi.html")
    assert status == 200 and h["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in h["content-security-policy"]
    assert b"openapi.json" in body
