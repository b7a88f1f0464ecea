"""Controller templates (issue 15, item 6): the catalog shipped in
templates/ (list, filters, categories, one template with its files) and
POST /sandbox/create-from-template: every template's files land in
/workspace byte for byte, its env is the sandbox's, and its setup command
ran once (its effect is on disk). A failing setup is a 422 whose sandbox is
gone; a custom templates_dir shows the loader's rules; errors keep the
controller's envelope and org isolation holds for the sandboxes made."""
import base64
import json
import os
import tempfile

import pytest

from controller_common import CTL_SETS, V1, Daemon, ROOT, account, apikey, raw

TEMPLATES = os.path.join(ROOT, "templates")
SHIPPED = sorted(n for n in os.listdir(TEMPLATES) if os.path.exists(os.path.join(TEMPLATES, n, "template.json")))


def creds_for(d):
    return apikey(account(d)["api_key"]["key"])


def shipped_files(tid):
    base = os.path.join(TEMPLATES, tid, "files")
    out = {}
    for dirpath, _, names in os.walk(base):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, base)] = open(p, "rb").read()
    return out


def execute(d, creds, sid, command):
    status, res, _ = raw(d, "POST", V1 + f"/sandbox/{sid}/execute", {"command": command}, headers=creds)
    assert status == 200, res
    return res


def read_file(d, creds, sid, path):
    status, got, _ = raw(d, "GET", V1 + f"/sandbox/{sid}/files?path={path}", headers=creds)
    assert status == 200, got
    return base64.b64decode(got["content"])


def test_shipped_templates_exist():
    assert {"python-data-analysis", "node-web-server", "shell-basics"} <= set(SHIPPED)


def test_list_filters_and_categories(ctl):
    creds = creds_for(ctl)
    status, body, _ = raw(ctl, "GET", V1 + "/templates", headers=creds)
    assert status == 200, body
    assert [t["id"] for t in body["templates"]] == SHIPPED and body["total"] == len(SHIPPED)
    t = next(t for t in body["templates"] if t["id"] == "python-data-analysis")
    assert t["language"] == "python" and "pandas" in t["tags"] and t["has_setup"] is True
    assert t["file_count"] == len(shipped_files("python-data-analysis")) and "files" not in t
    status, body, _ = raw(ctl, "GET", V1 + "/templates?language=JavaScript", headers=creds)
    assert [t["id"] for t in body["templates"]] == ["node-web-server"]
    status, body, _ = raw(ctl, "GET", V1 + "/templates?category=basics", headers=creds)
    assert [t["id"] for t in body["templates"]] == ["shell-basics"]
    status, body, _ = raw(ctl, "GET", V1 + "/templates?search=matplotlib", headers=creds)
    assert [t["id"] for t in body["templates"]] == ["python-data-analysis"]
    status, body, _ = raw(ctl, "GET", V1 + "/templates?tag=http", headers=creds)
    assert [t["id"] for t in body["templates"]] == ["node-web-server"]
    status, body, _ = raw(ctl, "GET", V1 + "/templates?search=no-such-thing", headers=creds)
    assert status == 200 and body == {"total": 0, "templates": []}
    status, body, _ = raw(ctl, "GET", V1 + "/templates/categories", headers=creds)
    assert status == 200
    cats = {c["id"]: c["count"] for c in body["categories"]}
    assert cats["data-science"] == 1 and cats["web"] == 1 and cats["basics"] == 1
    assert sum(cats.values()) == len(SHIPPED)


def test_get_one_with_files(ctl):
    creds = creds_for(ctl)
    status, t, _ = raw(ctl, "GET", V1 + "/templates/shell-basics", headers=creds)
    assert status == 200, t
    meta = json.load(open(os.path.join(TEMPLATES, "shell-basics", "template.json")))
    assert t["env"] == meta["env"] and t["setup_command"] == meta["setup_command"]
    files = {f["path"]: f for f in t["files"]}
    for path, data in shipped_files("shell-basics").items():
        assert files[path]["encoding"] == "utf-8" and files[path]["content"].encode() == data
        assert files[path]["size"] == len(data)


def test_auth_and_unknown(ctl):
    status, body, _ = raw(ctl, "GET", V1 + "/templates")
    assert status == 401 and body["error"]["code"] == "AUTH_REQUIRED"
    creds = creds_for(ctl)
    status, body, _ = raw(ctl, "GET", V1 + "/templates/nope", headers=creds)
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"
    status, body, _ = raw(ctl, "POST", V1 + "/sandbox/create-from-template", {"template_id": "nope"}, headers=creds)
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"
    for bad in ({}, {"template_id": 7}, {"template_id": "shell-basics", "run_setup": "yes"},
                {"template_id": "shell-basics", "timeout_seconds": -1}):
        status, body, _ = raw(ctl, "POST", V1 + "/sandbox/create-from-template", bad, headers=creds)
        assert status == 400 and body["error"]["code"] == "VALIDATION_ERROR", (bad, body)
    status, body, _ = raw(ctl, "GET", V1 + "/sandboxes", headers=creds)
    assert body["total"] == 0  # no refused request left a sandbox


@pytest.mark.parametrize("tid", ["python-data-analysis", "node-web-server", "shell-basics"])
def test_create_from_each_template(ctl, tid):
    creds = creds_for(ctl)
    status, sb, _ = raw(ctl, "POST", V1 + "/sandbox/create-from-template",
                        {"template_id": tid, "env": {"EXTRA": "1"}}, headers=creds)
    assert status == 201, sb
    sid = sb["sandbox_id"]
    assert sb["template_id"] == tid and sb["status"] == "running"
    assert sb["files_written"] == len(shipped_files(tid))
    assert sb["setup"]["exit_code"] == 0 and sb["setup"]["timed_out"] is False
    for path, data in shipped_files(tid).items():
        assert read_file(ctl, creds, sid, path) == data, path
    meta = json.load(open(os.path.join(TEMPLATES, tid, "template.json")))
    for k, v in meta["env"].items():
        assert execute(ctl, creds, sid, f"printf %s \"${k}\"")["stdout"] == v
    assert execute(ctl, creds, sid, "printf %s \"$EXTRA\"")["stdout"] == "1"
    if tid == "python-data-analysis":
        summary = read_file(ctl, creds, sid, "output/summary.txt").decode()
        assert "north" in summary and "total revenue: 2240.00" in summary
        assert sb["setup"]["stdout"] == "setup done\n"
    elif tid == "shell-basics":
        assert read_file(ctl, creds, sid, "hello.txt").decode().startswith("Hello from a template, ")
        assert execute(ctl, creds, sid, "test -x scripts/hello.sh && echo x")["stdout"] == "x\n"
    else:
        assert sb["setup"]["stdout"].startswith("node v")
        # the server it ships answers from inside the sandbox
        out = execute(ctl, creds, sid, "(node server.js > server.log 2>&1 &) ; for i in $(seq 50); do "
                      "node -e 'require(\"http\").get(\"http://127.0.0.1:3000/health\", r => "
                      "{let b=\"\";r.on(\"data\",c=>b+=c);r.on(\"end\",()=>{console.log(b);process.exit(0)})})"
                      ".on(\"error\",()=>process.exit(1))' && break; sleep 0.1; done")
        assert json.loads(out["stdout"].strip().splitlines()[-1])["status"] == "ok", out
    # the sandbox is the caller's org's only
    other = creds_for(ctl)
    status, body, _ = raw(ctl, "GET", V1 + f"/sandbox/{sid}", headers=other)
    assert status == 404


def test_env_override_and_no_setup(ctl):
    creds = creds_for(ctl)
    status, sb, _ = raw(ctl, "POST", V1 + "/sandbox/create-from-template",
                        {"template_id": "shell-basics", "run_setup": False, "env": {"GREETING": "Hi"}}, headers=creds)
    assert status == 201, sb
    assert sb["setup"] is None
    out = execute(ctl, creds, sb["sandbox_id"], "test -e hello.txt; echo $?; ./scripts/hello.sh 2>&1 || bash scripts/hello.sh")
    assert out["stdout"].startswith("1\n") and "Hi, " in out["stdout"]


def write_template(base, tid, meta, files):
    os.makedirs(os.path.join(base, tid, "files"), exist_ok=True)
    with open(os.path.join(base, tid, "template.json"), "w") as f:
        json.dump(meta, f)
    for path, data in files.items():
        p = os.path.join(base, tid, "files", path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


def meta_of(tid, setup):
    return {"id": tid, "name": tid, "description": "d", "category": "test", "language": "bash", "setup_command": setup}


def test_custom_dir_failing_setup_and_binary_files():
    with tempfile.TemporaryDirectory() as base:
        write_template(base, "fails", meta_of("fails", "echo partial; echo oops >&2; exit 3"), {"a.txt": b"a"})
        blob = bytes(range(256))
        write_template(base, "binary", meta_of("binary", None), {"deep/x/blob.bin": blob})
        d = Daemon(sets=CTL_SETS + [f"controller.templates_dir={base}"])
        try:
            creds = creds_for(d)
            status, body, _ = raw(d, "GET", V1 + "/templates", headers=creds)
            assert [t["id"] for t in body["templates"]] == ["binary", "fails"]
            status, t, _ = raw(d, "GET", V1 + "/templates/binary", headers=creds)
            assert t["files"][0]["encoding"] == "base64" and base64.b64decode(t["files"][0]["content"]) == blob
            status, sb, _ = raw(d, "POST", V1 + "/sandbox/create-from-template", {"template_id": "binary"}, headers=creds)
            assert status == 201 and sb["setup"] is None
            assert read_file(d, creds, sb["sandbox_id"], "deep/x/blob.bin") == blob
            status, body, _ = raw(d, "POST", V1 + "/sandbox/create-from-template", {"template_id": "fails"}, headers=creds)
            assert status == 422, body
            assert body["error"]["code"] == "TEMPLATE_SETUP_FAILED"
            det = body["error"]["details"]
            assert det["exit_code"] == 3 and det["stdout"] == "partial\n" and "oops" in det["stderr"]
            status, body, _ = raw(d, "GET", V1 + "/sandboxes", headers=creds)
            assert body["total"] == 1  # the failed one was deleted
        finally:
            d.cleanup()


def test_malformed_template_refuses_start():
    with tempfile.TemporaryDirectory() as base:
        write_template(base, "bad", {"id": "other", "name": "x"}, {})
        d = None
        with pytest.raises(Exception):
            d = Daemon(sets=CTL_SETS + [f"controller.templates_dir={base}"])
        if d:
            d.cleanup()
