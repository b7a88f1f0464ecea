"""sandboxd's own additions to the runtime API that the playground, the CLI
and the MCP server use: GET /sandboxes and "display": true on a context's
execute (rich MIME bundles, python)."""
import base64


def test_list_sandboxes_with_contexts(daemon):
    s, _, _ = daemon.post("/languages/python/sandboxes/list-me/execute", {"code": "x = 41"})
    assert s == 200
    s, body, _ = daemon.get("/sandboxes?limit=1000")
    assert s == 200
    rows = {r["id"]: r for r in body["sandboxes"]}
    assert "list-me" in rows
    ctx = rows["list-me"]["contexts"]
    assert [c["language"] for c in ctx] == ["python"] and ctx[0]["executions"] == 1
    assert body["total"] >= len(body["sandboxes"]) and body["limit"] == 1000


def test_list_sandboxes_bad_paging(daemon):
    for q in ("limit=0", "limit=1001", "limit=x", "offset=-1"):
        s, body, _ = daemon.get(f"/sandboxes?{q}")
        assert s == 400 and body["code"] == "VALIDATION_FAILED", q


def test_display_returns_png_and_last_bundle(daemon):
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n{'a': 1}"
    s, body, _ = daemon.post("/languages/python/sandboxes/disp/execute", {"code": code, "display": True})
    assert s == 200, body
    png = base64.b64decode(body["display"][0]["image/png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert body["data"]["application/json"] == {"a": 1}
    assert body["results"] == [{"json": {"a": 1}}]


def test_display_off_keeps_the_contract(daemon):
    s, body, _ = daemon.post("/languages/python/sandboxes/disp2/execute", {"code": "1 + 1"})
    assert s == 200 and "display" not in body and "data" not in body


def test_display_must_be_boolean(daemon):
    s, body, _ = daemon.post("/languages/python/sandboxes/disp3/execute", {"code": "1", "display": "yes"})
    assert s == 400 and body["message"] == "display must be a boolean"
