"""Controller files (issue 12, item 5): write (base64, several at once,
parents made), read as JSON and download as bytes (binary round trip,
SHA-256 equal), the /workspace confinement (a path leaving it: 400; a
symlink planted by guest code: 403), and that they are the sandbox's own
files: a command run in it sees them and its output is read back."""
import base64
import hashlib
import os

from controller_common import V1, account, apikey, execute, get_bytes, raw


def sandbox_for(d):
    creds = apikey(account(d)["api_key"]["key"])
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", {}, headers=creds)
    assert status == 201, sb
    return creds, sb["sandbox_id"]


def b64(data):
    return base64.b64encode(data).decode()


def put(d, creds, sid, files):
    return raw(d, "POST", V1 + f"/sandbox/{sid}/files", {"files": files}, headers=creds)[:2]


def get(d, creds, sid, path):
    return raw(d, "GET", V1 + f"/sandbox/{sid}/files?path={path}", headers=creds)[:2]


def download(d, creds, sid, path):
    return get_bytes(d, V1 + f"/sandbox/{sid}/files/download?path={path}", creds)


def test_binary_round_trip(ctl):
    creds, sid = sandbox_for(ctl)
    blob = os.urandom(300_000) + bytes(range(256))
    status, res = put(ctl, creds, sid, [{"path": "/workspace/bin/data.bin", "content": b64(blob)},
                                        {"path": "rel/hello.txt", "content": b64(b"hello\n")}])
    assert status == 200, res
    assert res == {"files": [{"path": "/workspace/bin/data.bin", "size": len(blob)},
                             {"path": "/workspace/rel/hello.txt", "size": 6}], "written": 2}
    status, got = get(ctl, creds, sid, "/workspace/bin/data.bin")
    assert status == 200 and got["encoding"] == "base64" and got["size"] == len(blob)
    assert got["path"] == "/workspace/bin/data.bin"
    assert hashlib.sha256(base64.b64decode(got["content"])).digest() == hashlib.sha256(blob).digest()
    status, hdrs, body = download(ctl, creds, sid, "bin/data.bin")
    assert status == 200 and hdrs["content-type"] == "application/octet-stream"
    assert int(hdrs["content-length"]) == len(blob)
    assert hashlib.sha256(body).digest() == hashlib.sha256(blob).digest()


def test_files_are_the_sandbox_own(ctl):
    creds, sid = sandbox_for(ctl)
    assert put(ctl, creds, sid, [{"path": "main.py", "content": b64(b"print('from file')\n")}])[0] == 200
    res = execute(ctl, creds, sid, "python3 main.py > out.txt; cat main.py | wc -c")
    assert res["exit_code"] == 0 and res["stdout"].strip() == "19"
    status, got = get(ctl, creds, sid, "out.txt")
    assert status == 200 and base64.b64decode(got["content"]) == b"from file\n"


def test_errors_and_confinement(ctl):
    creds, sid = sandbox_for(ctl)
    for path in ("/etc/passwd", "../../etc/passwd", "/workspace/../etc/passwd", ""):
        status, res = get(ctl, creds, sid, path)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", path
        status, res = put(ctl, creds, sid, [{"path": path or "/", "content": ""}])
        assert status == 400, (path, res)
        assert download(ctl, creds, sid, path)[0] == 400
    # A symlink guest code planted is never followed.
    execute(ctl, creds, sid, "ln -s /etc/passwd link; ln -s /etc linkdir")
    status, res = get(ctl, creds, sid, "link")
    assert status == 403 and res["error"]["code"] == "FORBIDDEN"
    assert download(ctl, creds, sid, "link")[0] == 403
    status, res = put(ctl, creds, sid, [{"path": "linkdir/x", "content": b64(b"x")}])
    assert status == 403, res
    status, res = get(ctl, creds, sid, "missing.txt")
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"
    assert download(ctl, creds, sid, "missing.txt")[0] == 404
    status, res = put(ctl, creds, sid, [{"path": "x", "content": "not base64!!"}])
    assert status == 400
    for files in ([], "x", [{"path": "x"}], [{"path": 5, "content": ""}]):
        status, res = put(ctl, creds, sid, files)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", files
    # Unknown sandbox ids are a 404 whatever the route.
    guess = "00000000-0000-4000-8000-000000000000"
    assert get(ctl, creds, guess, "x")[0] == 404
    assert put(ctl, creds, guess, [{"path": "x", "content": ""}])[0] == 404
    assert download(ctl, creds, guess, "x")[0] == 404
