"""Controller checkpoints (issue 15, item 4): checkpoint → change (modify,
add, delete files and directories) → restore gives the old bytes exactly;
include/exclude scopes (and a restore leaves what is out of scope alone);
clone into a new sandbox (files and env); compare two checkpoints; the
stored tar's SHA-256, size, file count and mode; per-org quotas (413);
pagination; org isolation on every route (404); errors in the
controller's shape."""
import base64
import hashlib
import os
import stat
import tarfile

import pytest

from controller_common import CTL_SETS, V1, Daemon, account, apikey, raw


def new_org(d):
    acc = account(d)
    return apikey(acc["api_key"]["key"]), acc["organization"]["id"]


def new_sandbox(d, creds, **body):
    status, sb, _ = raw(d, "POST", V1 + "/sandbox/create", body, headers=creds)
    assert status == 201, sb
    return sb["sandbox_id"]


def sh(d, creds, sid, command):
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": command}, headers=creds)
    assert status == 200 and res["exit_code"] == 0, res
    return res["stdout"]


def put(d, creds, sid, files):
    body = {"files": [{"path": p, "content": base64.b64encode(c).decode()} for p, c in files.items()]}
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/files", body, headers=creds)
    assert status == 200, res


# Every entry of the workspace: files with their sha256, directories, links.
TREE = ("cd /workspace && find . -mindepth 1 \\( -type f -printf 'f %P ' -exec sh -c 'sha256sum < \"$1\" | cut -c1-64' _ {} \\; \\) "
        "-o \\( -type d -printf 'd %P\\n' \\) -o \\( -type l -printf 'l %P %l\\n' \\) | sort")


def tree(d, creds, sid):
    return sh(d, creds, sid, TREE)


def checkpoint(d, creds, sid, **body):
    body.setdefault("name", "cp")
    status, cp, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/checkpoints", body, headers=creds)
    assert status == 201, cp
    return cp


def restore(d, creds, cid, **body):
    status, res, _ = raw(d, "POST", V1 + f"/checkpoints/{cid}/restore", body, headers=creds)
    assert status == 200, res
    return res


BASE = {
    "main.py": b"print('v1')\n",
    "notes.txt": b"keep me\n",
    "src/lib.py": b"X = 1\n",
    "src/data.bin": bytes(range(256)) * 64,
    "node_modules/pkg/index.js": b"module.exports = 1\n",
    "empty/.keep": b"",
}


def test_checkpoint_change_restore_exact(ctl):
    creds, _ = new_org(ctl)
    sid = new_sandbox(ctl, creds)
    put(ctl, creds, sid, BASE)
    sh(ctl, creds, sid, "mkdir -p /workspace/emptydir && ln -s main.py /workspace/link.py && chmod 755 /workspace/main.py")
    before = tree(ctl, creds, sid)
    perms = sh(ctl, creds, sid, "stat -c '%a %n' /workspace/main.py /workspace/notes.txt")
    cp = checkpoint(ctl, creds, sid, name="before", description="the first state")
    assert cp["id"].startswith("ckpt_") and cp["sandbox_id"] == sid and cp["name"] == "before"
    assert cp["description"] == "the first state" and cp["file_count"] == len(BASE)
    assert cp["checksum"].startswith("sha256:") and cp["size_bytes"] > 0 and cp["created_at"].endswith("Z")
    # change: modify, add, delete files; add and delete directories
    sh(ctl, creds, sid, "cd /workspace && echo v2 > main.py && rm notes.txt && rm -r src && mkdir -p new/deep && "
                        "echo n > new/deep/n.txt && echo extra > extra.txt && rmdir emptydir && rm link.py && "
                        "truncate -s 10 empty/.keep")
    assert tree(ctl, creds, sid) != before
    res = restore(ctl, creds, cp["id"])
    assert res["restored"] is True and res["sandbox_id"] == sid and res["checkpoint_id"] == cp["id"]
    assert tree(ctl, creds, sid) == before
    assert sh(ctl, creds, sid, "stat -c '%a %n' /workspace/main.py /workspace/notes.txt") == perms
    # a second restore of an unchanged workspace changes nothing
    restore(ctl, creds, cp["id"])
    assert tree(ctl, creds, sid) == before


def test_stored_tar_matches(ctl):
    creds, org = new_org(ctl)
    sid = new_sandbox(ctl, creds)
    put(ctl, creds, sid, BASE)
    cp = checkpoint(ctl, creds, sid)
    path = os.path.join(ctl.data_dir, "checkpoints", org, cp["id"] + ".tar")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == cp["size_bytes"]
    data = open(path, "rb").read()
    assert cp["checksum"] == "sha256:" + hashlib.sha256(data).hexdigest()
    with tarfile.open(path) as tf:
        files = {m.name[2:]: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}
    assert files == BASE
    # deleting removes the row and the file
    status, res, _ = raw(ctl, "DELETE", V1 + f"/checkpoints/{cp['id']}", headers=creds)
    assert status == 200 and res == {"id": cp["id"], "deleted": True}
    assert not os.path.exists(path)
    status, res, _ = raw(ctl, "GET", V1 + f"/checkpoints/{cp['id']}", headers=creds)
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"


def test_corrupt_archive_is_refused(ctl):
    creds, org = new_org(ctl)
    sid = new_sandbox(ctl, creds)
    put(ctl, creds, sid, BASE)
    cp = checkpoint(ctl, creds, sid)
    path = os.path.join(ctl.data_dir, "checkpoints", org, cp["id"] + ".tar")
    with open(path, "r+b") as f:
        f.seek(600)
        f.write(b"X")
    sh(ctl, creds, sid, "echo changed > /workspace/main.py")
    status, res, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/restore", {}, headers=creds)
    assert status == 500 and res["error"]["code"] == "INTERNAL_ERROR"
    assert sh(ctl, creds, sid, "cat /workspace/main.py") == "changed\n"  # untouched
    # the same for a checkpoint's code contexts: checked before anything moves
    cp = checkpoint(ctl, creds, sid, include_contexts=True)
    side = os.path.join(ctl.data_dir, "checkpoints", org, cp["id"] + ".contexts.json")
    assert stat.S_IMODE(os.stat(side).st_mode) == 0o600 and open(side).read() == "[]"
    with open(side, "w") as f:
        f.write('[{"language": "python", "cells": []}]')
    sh(ctl, creds, sid, "echo again > /workspace/main.py")
    status, res, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/restore", {}, headers=creds)
    assert status == 500 and res["error"]["code"] == "INTERNAL_ERROR"
    assert sh(ctl, creds, sid, "cat /workspace/main.py") == "again\n"
    status, _, _ = raw(ctl, "DELETE", V1 + f"/checkpoints/{cp['id']}", headers=creds)
    assert status == 200 and not os.path.exists(side)


def test_include_and_exclude(ctl):
    creds, _ = new_org(ctl)
    sid = new_sandbox(ctl, creds)
    put(ctl, creds, sid, BASE)
    inc = checkpoint(ctl, creds, sid, include_paths=["*.py"])
    assert inc["file_count"] == 2 and inc["include_paths"] == ["*.py"]
    exc = checkpoint(ctl, creds, sid, exclude_paths=["/workspace/node_modules", "*.bin"])
    assert exc["file_count"] == len(BASE) - 2 and exc["exclude_paths"] == ["node_modules", "*.bin"]
    sub = checkpoint(ctl, creds, sid, include_paths=["./src"])
    assert sub["file_count"] == 2
    # change everything, then restore the exclude checkpoint: node_modules
    # and *.bin (out of its scope) keep their new state, the rest reverts
    sh(ctl, creds, sid, "cd /workspace && echo v2 > main.py && echo js2 > node_modules/pkg/index.js && "
                        "echo bin2 > src/data.bin && echo a > added.txt && mkdir -p node_modules/new && "
                        "echo y > node_modules/new/y.js && rm src/lib.py")
    restore(ctl, creds, exc["id"])
    assert sh(ctl, creds, sid, "cat main.py src/lib.py node_modules/pkg/index.js src/data.bin node_modules/new/y.js; "
                               "test -e added.txt || echo gone") == "print('v1')\nX = 1\njs2\nbin2\ny\ngone\n"
    # the include checkpoint restores only *.py (and removes new *.py)
    sh(ctl, creds, sid, "cd /workspace && echo v3 > main.py && echo z > src/new.py && echo t > other.txt")
    restore(ctl, creds, inc["id"])
    assert sh(ctl, creds, sid, "cat main.py other.txt; test -e src/new.py || echo gone") == "print('v1')\nt\ngone\n"


def test_clone_into_new_sandbox(ctl):
    creds, org = new_org(ctl)
    sid = new_sandbox(ctl, creds, env={"STAGE": "one", "KEEP": "k"})
    put(ctl, creds, sid, BASE)
    before = tree(ctl, creds, sid)
    cp = checkpoint(ctl, creds, sid, include_env=True)
    assert cp["include_env"] is True
    status, sb, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/clone", {"env": {"STAGE": "two"}}, headers=creds)
    assert status == 201, sb
    new = sb["sandbox_id"]
    assert new != sid and sb["checkpoint_id"] == cp["id"] and sb["source_sandbox_id"] == sid
    assert sb["org_id"] == org and sb["status"] == "running"
    assert tree(ctl, creds, new) == before
    assert sh(ctl, creds, new, "echo $STAGE $KEEP") == "two k\n"
    # the clone is independent; the checkpoint outlives its source sandbox
    sh(ctl, creds, new, "echo other > /workspace/main.py")
    assert sh(ctl, creds, sid, "cat /workspace/main.py") == "print('v1')\n"
    status, _, _ = raw(ctl, "DELETE", V1 + f"/sandbox/{sid}", headers=creds)
    assert status == 200
    status, res, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/restore", {}, headers=creds)
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"
    restore(ctl, creds, cp["id"], sandbox_id=new)
    assert tree(ctl, creds, new) == before
    status, sb2, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/clone", headers=creds)
    assert status == 201 and tree(ctl, creds, sb2["sandbox_id"]) == before
    assert sh(ctl, creds, sb2["sandbox_id"], "echo $STAGE") == "one\n"


def repl(d, creds, sid, rid=None, code=None):
    base = V1 + f"/sandbox/{sid}/repl/sessions"
    if rid is None:
        status, res, _ = raw(d, "GET" if code is None else "POST", base, None if code is None else {}, headers=creds)
        assert status in (200, 201), res
        return res
    status, res, _ = raw(d, "POST", f"{base}/{rid}/execute", {"code": code}, headers=creds)
    assert status == 200, res
    return "".join(o["text"] for o in res["outputs"] if o["type"] == "stdout")


def test_code_contexts_restore_and_clone(ctl):
    creds, _ = new_org(ctl)
    sid = new_sandbox(ctl, creds)
    s = repl(ctl, creds, sid, code="new")["session"]["id"]
    repl(ctl, creds, sid, s, "x = 41\nimport os\nos.chdir('/workspace')")
    assert repl(ctl, creds, sid, s, "print(x)") == "41\n"
    plain = checkpoint(ctl, creds, sid)
    assert plain["include_contexts"] is False and plain["contexts"] == 0
    cp = checkpoint(ctl, creds, sid, include_contexts=True)
    assert cp["include_contexts"] is True and cp["contexts"] == 1
    repl(ctl, creds, sid, s, "x = 100")
    other = repl(ctl, creds, sid, code="new")["session"]["id"]
    repl(ctl, creds, sid, other, "z = 1")
    restore(ctl, creds, cp["id"])
    # the same session (its id kept), its state rebuilt from the journal; the
    # session made after the checkpoint is gone
    assert [x["id"] for x in repl(ctl, creds, sid)["sessions"]] == [s]
    assert repl(ctl, creds, sid, s, "print(x)") == "41\n"
    # a clone gets its own copy under a new id
    status, sb, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/clone", {}, headers=creds)
    assert status == 201, sb
    sessions = repl(ctl, creds, sb["sandbox_id"])["sessions"]
    assert len(sessions) == 1 and sessions[0]["id"] != s
    assert repl(ctl, creds, sb["sandbox_id"], sessions[0]["id"], "print(x + 1)") == "42\n"
    assert repl(ctl, creds, sid, s, "print(x)") == "41\n"  # independent
    # a checkpoint without contexts leaves the sessions alone
    repl(ctl, creds, sid, s, "x = 7")
    restore(ctl, creds, plain["id"])
    assert repl(ctl, creds, sid, s, "print(x)") == "7\n"


def test_compare(ctl):
    creds, _ = new_org(ctl)
    sid = new_sandbox(ctl, creds)
    put(ctl, creds, sid, BASE)
    a = checkpoint(ctl, creds, sid, name="a")
    sh(ctl, creds, sid, "cd /workspace && echo longer-content > main.py && rm notes.txt && echo new > added.txt")
    b = checkpoint(ctl, creds, sid, name="b")
    status, diff, _ = raw(ctl, "GET", V1 + f"/checkpoints/{a['id']}/compare/{b['id']}", headers=creds)
    assert status == 200, diff
    assert diff["from"] == a["id"] and diff["to"] == b["id"]
    assert [(x["path"], x["size"]) for x in diff["added"]] == [("added.txt", 4)]
    assert [(x["path"], x["size"]) for x in diff["removed"]] == [("notes.txt", 8)]
    assert [(x["path"], x["old_size"], x["new_size"]) for x in diff["modified"]] == [
        ("main.py", len(BASE["main.py"]), 15)]
    assert diff["summary"] == {"added": 1, "removed": 1, "modified": 1}
    status, same, _ = raw(ctl, "GET", V1 + f"/checkpoints/{a['id']}/compare/{a['id']}", headers=creds)
    assert same["summary"] == {"added": 0, "removed": 0, "modified": 0} and same["unchanged"] > 0
    # same size, other bytes: modified
    sh(ctl, creds, sid, "cd /workspace && printf 'print(\"v9\")\\n' > main.py.tmp && truncate -s 15 main.py.tmp && "
                        "mv main.py.tmp main.py")
    c = checkpoint(ctl, creds, sid, name="c")
    status, diff, _ = raw(ctl, "GET", V1 + f"/checkpoints/{b['id']}/compare/{c['id']}", headers=creds)
    assert [x["path"] for x in diff["modified"]] == ["main.py"]


def test_lists_and_pagination(ctl):
    creds, _ = new_org(ctl)
    s1, s2 = new_sandbox(ctl, creds), new_sandbox(ctl, creds)
    ids = [checkpoint(ctl, creds, s1, name=f"n{i}")["id"] for i in range(3)]
    other = checkpoint(ctl, creds, s2)["id"]
    status, page, _ = raw(ctl, "GET", V1 + f"/sandbox/{s1}/checkpoints?limit=2", headers=creds)
    assert status == 200 and page["total"] == 3 and page["has_more"] is True and page["limit"] == 2
    assert [c["id"] for c in page["data"]] == ids[::-1][:2]  # newest first
    status, page, _ = raw(ctl, "GET", V1 + f"/sandbox/{s1}/checkpoints?limit=2&offset=2", headers=creds)
    assert [c["id"] for c in page["data"]] == [ids[0]] and page["has_more"] is False
    status, page, _ = raw(ctl, "GET", V1 + "/checkpoints", headers=creds)
    assert page["total"] == 4 and {c["id"] for c in page["data"]} == set(ids) | {other}
    status, page, _ = raw(ctl, "GET", V1 + f"/checkpoints?sandbox_id={s2}", headers=creds)
    assert [c["id"] for c in page["data"]] == [other]
    status, one, _ = raw(ctl, "GET", V1 + f"/checkpoints/{other}", headers=creds)
    assert status == 200 and one["sandbox_id"] == s2
    status, res, _ = raw(ctl, "GET", V1 + "/checkpoints?limit=0", headers=creds)
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR"


def test_org_isolation(ctl):
    a, _ = new_org(ctl)
    b, _ = new_org(ctl)
    sid = new_sandbox(ctl, a)
    put(ctl, a, sid, {"secret.txt": b"of org a\n"})
    cp = checkpoint(ctl, a, sid)
    bsid = new_sandbox(ctl, b)
    bcp = checkpoint(ctl, b, bsid)
    cid = cp["id"]
    for method, path, body in [
        ("GET", f"/checkpoints/{cid}", None),
        ("DELETE", f"/checkpoints/{cid}", None),
        ("POST", f"/checkpoints/{cid}/restore", {}),
        ("POST", f"/checkpoints/{cid}/restore", {"sandbox_id": bsid}),
        ("POST", f"/checkpoints/{cid}/clone", {}),
        ("GET", f"/checkpoints/{cid}/compare/{bcp['id']}", None),
        ("GET", f"/checkpoints/{bcp['id']}/compare/{cid}", None),
        ("GET", f"/sandbox/{sid}/checkpoints", None),
        ("POST", f"/sandbox/{sid}/checkpoints", {"name": "steal"}),
    ]:
        status, res, _ = raw(ctl, method, V1 + path, body, headers=b)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND", (method, path, res)
    # and A cannot restore its checkpoint into B's sandbox
    status, res, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cid}/restore", {"sandbox_id": bsid}, headers=a)
    assert status == 404
    status, page, _ = raw(ctl, "GET", V1 + "/checkpoints", headers=b)
    assert [c["id"] for c in page["data"]] == [bcp["id"]]
    status, page, _ = raw(ctl, "GET", V1 + f"/checkpoints?sandbox_id={sid}", headers=b)
    assert page["total"] == 0
    status, _, _ = raw(ctl, "GET", V1 + f"/checkpoints/{cid}", headers=a)
    assert status == 200  # still there: B's DELETE did nothing
    status, res, _ = raw(ctl, "GET", V1 + "/checkpoints")
    assert status == 401 and res["error"]["code"] == "AUTH_REQUIRED"


def test_validation_errors(ctl):
    creds, _ = new_org(ctl)
    sid = new_sandbox(ctl, creds)
    for body in ({}, {"name": ""}, {"name": 5}, {"name": "x", "include_paths": "*.py"},
                 {"name": "x", "include_paths": ["../etc"]}, {"name": "x", "exclude_paths": ["a/../../b"]},
                 {"name": "x", "include_env": "yes"}, {"name": "x", "include_contexts": "yes"},
                 {"name": "x" * 300}):
        status, res, _ = raw(ctl, "POST", V1 + f"/sandbox/{sid}/checkpoints", body, headers=creds)
        assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR", (body, res)
    status, res, _ = raw(ctl, "POST", V1 + "/sandbox/nope/checkpoints", {"name": "x"}, headers=creds)
    assert status == 404 and res["error"]["code"] == "NOT_FOUND"
    for method, path in [("GET", "/checkpoints/ckpt_nope"), ("DELETE", "/checkpoints/ckpt_nope"),
                         ("POST", "/checkpoints/ckpt_nope/restore"), ("POST", "/checkpoints/ckpt_nope/clone")]:
        status, res, _ = raw(ctl, method, V1 + path, {} if method == "POST" else None, headers=creds)
        assert status == 404 and res["error"]["code"] == "NOT_FOUND", (path, res)
    cp = checkpoint(ctl, creds, sid)
    status, res, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/restore", {"restore_env": 1}, headers=creds)
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR"
    status, res, _ = raw(ctl, "POST", V1 + f"/checkpoints/{cp['id']}/clone", {"timeout_seconds": -5}, headers=creds)
    assert status == 400 and res["error"]["code"] == "VALIDATION_ERROR"
    status, page, _ = raw(ctl, "GET", V1 + "/sandboxes", headers=creds)
    assert page["total"] == 1  # the refused clone made no sandbox


@pytest.fixture(scope="module")
def capped():
    d = Daemon(sets=CTL_SETS + ["controller.checkpoints_max=2", "controller.checkpoint_bytes=64K"])
    yield d
    d.cleanup()


def test_quotas(capped):
    creds, org = new_org(capped)
    sid = new_sandbox(capped, creds)
    put(capped, creds, sid, {"small.txt": b"s"})
    first = checkpoint(capped, creds, sid)
    checkpoint(capped, creds, sid)
    status, res, _ = raw(capped, "POST", V1 + f"/sandbox/{sid}/checkpoints", {"name": "third"}, headers=creds)
    assert status == 413 and res["error"]["code"] == "CHECKPOINT_QUOTA_EXCEEDED", res
    # another org has its own count
    other, _ = new_org(capped)
    checkpoint(capped, other, new_sandbox(capped, other))
    status, _, _ = raw(capped, "DELETE", V1 + f"/checkpoints/{first['id']}", headers=creds)
    assert status == 200
    # bytes: a checkpoint that would pass 64 KiB is refused and leaves no file
    put(capped, creds, sid, {"big.bin": os.urandom(70 * 1024)})
    status, res, _ = raw(capped, "POST", V1 + f"/sandbox/{sid}/checkpoints", {"name": "big"}, headers=creds)
    assert status == 413 and res["error"]["code"] == "CHECKPOINT_QUOTA_EXCEEDED", res
    assert len(os.listdir(os.path.join(capped.data_dir, "checkpoints", org))) == 1
    status, page, _ = raw(capped, "GET", V1 + "/checkpoints", headers=creds)
    assert page["total"] == 1
    # excluding the big file fits
    checkpoint(capped, creds, sid, exclude_paths=["big.bin"])
