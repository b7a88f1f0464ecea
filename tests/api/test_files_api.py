"""POST /languages/:lang/sandboxes/:id/files over HTTP: every op, the error
table, and path escapes (including guest-planted symlinks)."""
import base64
import uuid

import pytest


def sid():
    return "f-" + uuid.uuid4().hex[:12]


def files(daemon, s, **body):
    return daemon.post(f"/languages/python/sandboxes/{s}/files", body)


def ok(daemon, s, **body):
    status, res, _ = files(daemon, s, **body)
    assert status == 200, res
    assert res["success"] is True and res["timestamp"].endswith("Z")
    return res


def err(daemon, s, status_code, code, **body):
    status, res, _ = files(daemon, s, **body)
    assert status == status_code, res
    assert res["code"] == code, res
    return res


def test_write_read_list_exists(daemon):
    s = sid()
    r = ok(daemon, s, op="write", path="/workspace/a.txt", content="hello")
    assert r["path"] == "/workspace/a.txt"
    r = ok(daemon, s, op="read", path="a.txt")
    assert r["content"] == "hello" and r["encoding"] == "utf-8" and r["isBinary"] is False
    assert r["mimeType"] == "text/plain" and r["size"] == 5
    ok(daemon, s, op="mkdir", path="/workspace/d/e", recursive=True)
    ok(daemon, s, op="write", path="/workspace/d/.hidden", content="h")
    r = ok(daemon, s, op="list", path="/workspace", recursive=True)
    names = [f["relativePath"] for f in r["files"]]
    assert "a.txt" in names and "d" in names and "d/e" in names and "d/.hidden" not in names
    assert r["count"] == len(r["files"])
    entry = next(f for f in r["files"] if f["name"] == "a.txt")
    assert entry["type"] == "file" and entry["mode"] == "-rw-r--r--" and entry["size"] == 5
    assert entry["permissions"] == {"readable": True, "writable": True, "executable": False}
    r = ok(daemon, s, op="list", path="/workspace", recursive=True, includeHidden=True)
    assert "d/.hidden" in [f["relativePath"] for f in r["files"]]
    assert ok(daemon, s, op="exists", path="/workspace/a.txt")["exists"] is True
    assert ok(daemon, s, op="exists", path="/workspace/zzz")["exists"] is False


def test_binary_base64_round_trip(daemon):
    s = sid()
    data = bytes(range(256))
    ok(daemon, s, op="write", path="b.png", content=base64.b64encode(data).decode(), encoding="base64")
    r = ok(daemon, s, op="read", path="b.png", encoding="base64")
    assert base64.b64decode(r["content"]) == data
    assert r["mimeType"] == "image/png"
    r = ok(daemon, s, op="read", path="b.png")
    assert r["isBinary"] is True


def test_rename_move_delete(daemon):
    s = sid()
    ok(daemon, s, op="write", path="x", content="1")
    r = ok(daemon, s, op="rename", path="x", newPath="y")
    assert r["newPath"] == "/workspace/y"
    ok(daemon, s, op="mkdir", path="dir")
    ok(daemon, s, op="move", path="y", newPath="dir/y")
    res = err(daemon, s, 400, "IS_DIRECTORY", op="delete", path="dir")
    assert "Pass { recursive: true }" in res["message"] and res["context"]["errno"] == "EISDIR"
    ok(daemon, s, op="delete", path="dir", recursive=True)
    err(daemon, s, 404, "FILE_NOT_FOUND", op="delete", path="dir")
    ok(daemon, s, op="delete", path="dir", force=True)


def test_error_table(daemon):
    s = sid()
    err(daemon, s, 404, "FILE_NOT_FOUND", op="read", path="missing")
    err(daemon, s, 404, "FILE_NOT_FOUND", op="write", path="no/parent/file", content="x")
    ok(daemon, s, op="mkdir", path="d")
    err(daemon, s, 400, "IS_DIRECTORY", op="read", path="d")
    ok(daemon, s, op="write", path="f", content="x")
    err(daemon, s, 400, "NOT_DIRECTORY", op="list", path="f")
    res = err(daemon, s, 500, "FILESYSTEM_ERROR", op="mkdir", path="d")
    assert res["context"]["errno"] == "EEXIST" and res["operation"] == "directory.create"
    res = err(daemon, s, 500, "FILESYSTEM_ERROR", op="mkdir", path="x/y")
    assert res["context"]["errno"] == "ENOENT"
    err(daemon, s, 400, "VALIDATION_FAILED", op="explode", path="f")
    err(daemon, s, 400, "VALIDATION_FAILED", op="read", path="f", encoding="latin1")
    res = err(daemon, s, 413, "FILE_TOO_LARGE", op="write", path="big", content="x" * (1024 * 1024 + 1))
    assert res["context"]["maxSize"] == 1048576 and res["context"]["actualSize"] == 1048577
    err(daemon, s, 500, "FILESYSTEM_ERROR", op="write", path="b64", content="!!!", encoding="base64")


@pytest.mark.parametrize("path", ["/etc/passwd", "../etc/passwd", "/workspace/../etc/passwd", "/", "..",
                                  "/workspace/../../root"])
def test_escapes_refused(daemon, path):
    s = sid()
    for op in ("read", "exists", "list", "write", "delete"):
        res = err(daemon, s, 403, "PERMISSION_DENIED", op=op, path=path, content="x")
        assert "root:" not in str(res)


def test_percent_encoded_dots_are_literal(daemon):
    s = sid()
    ok(daemon, s, op="write", path="%2e%2e", content="x")
    assert ok(daemon, s, op="exists", path="/workspace/%2e%2e")["exists"] is True


def test_guest_planted_symlinks_not_followed(daemon):
    s = sid()
    status, res, _ = daemon.post(f"/languages/python/sandboxes/{s}/execute", {
        "code": "import os\nos.symlink('/', 'root')\nos.symlink('/etc/passwd', 'pw')\nos.symlink('../../..', 'up')\n1"})
    assert status == 200 and "error" not in res, res
    for path in ("root/etc/passwd", "pw", "up/etc/passwd"):
        status, body, _ = files(daemon, s, op="read", path=path)
        assert status in (403, 404), body
        assert "root:" not in str(body)
    status, body, _ = files(daemon, s, op="write", path="pw", content="pwned")
    assert status in (200, 403), body
    with open("/etc/passwd") as f:
        assert "pwned" not in f.read()
    status, body, _ = files(daemon, s, op="list", path="root")
    assert status in (400, 403, 404), body
    status, body, _ = files(daemon, s, op="write", path="root/tmp/x", content="x")
    assert status in (403, 404)


def test_files_visible_to_code(daemon):
    s = sid()
    ok(daemon, s, op="write", path="data.json", content='{"n": 41}')
    status, res, _ = daemon.post(f"/languages/javascript/sandboxes/{s}/execute",
                                 {"code": "JSON.parse(fs.readFileSync('/workspace/data.json', 'utf8')).n + 1"})
    assert res["results"] == [{"text": "42"}], res


def test_workspace_quota_from_guest(daemon):
    s = sid()
    status, res, _ = daemon.post(f"/languages/python/sandboxes/{s}/execute", {
        "code": "import os\nn = 0\ntry:\n    for i in range(100):\n        open(f'/workspace/f{i}', 'wb').write(b'x' * 1000000)\n        n += 1\nexcept OSError as e:\n    err = e.errno\n[n, err]"})
    assert status == 200, res
    n, errno_ = res["results"][0]["json"]
    assert n < 40 and errno_ in (28, 27), (n, errno_)  # ENOSPC or EFBIG
