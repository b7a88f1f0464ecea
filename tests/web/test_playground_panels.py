"""The playground's side panels in a real browser (headless Debian chromium
driven by playwright-core, tests/node/playground-panels.mjs), on the page
the daemon serves: the sandbox list shows a sandbox made through the API
with its context, and a context clicked there becomes the Run tab's target;
a sandbox is created and deleted from the page; a file uploaded in the page
(file input, and a drop into a folder made in the page) is read back by
code; the download is the same bytes; a file and a folder are deleted; a
refused change says why; the terminal runs a command, has the size xterm
shows, follows a window resize and reports the shell's exit; each panel
fits 360 px. The daemon has an API key: the prompt fills the list once
answered, and every request carries the key in a header, never in a URL
(the PTY WebSocket's ?token= is the one exception browsers force).
Screenshots go to build/test-artifacts/web/panels-*.png (printed)."""
import base64
import json
import os
import subprocess

import pytest

from conftest import ROOMY_LIMITS, NODE_DIR, ROOT, Daemon

CHROMIUM = "/usr/bin/chromium"
KEY = "panels-k3y-0123"
AUTH = {"Authorization": f"Bearer {KEY}"}
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts", "web")
UPLOAD = "upload-\u00e9 data.bin"
PAYLOAD = bytes(range(256)) * 3 + "é ü\n".encode() + b"\x00\xff"
DROP = ("dropped.txt", "dropped into docs\n")
DOOMED = ("doomed.txt", "to be deleted\n")


@pytest.fixture(scope="module")
def keyed():
    d = Daemon(sets=list(ROOMY_LIMITS) + [f"api_key={KEY}"])
    yield d
    d.cleanup()


def python_in(d, sandbox, code, **extra):
    status, res, _ = d.post(f"/languages/python/sandboxes/{sandbox}/execute", {"code": code, **extra}, headers=AUTH)
    assert status == 200, res
    assert not res.get("error"), res
    return res


def stdout(res):
    return "".join(res["logs"]["stdout"])


@pytest.fixture(scope="module")
def run(keyed, tmp_path_factory):
    """Sets a sandbox up through the APIs, drives the page once, returns
    (report, setup); the tests below each judge one part of it."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed (Debian package chromium): the browser tests cannot run")
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
        pytest.fail("tests/node/node_modules is missing: run `make node-deps`")
    status, made, _ = keyed.post("/v1/sandbox", {}, headers=AUTH)
    assert status == 200, made
    sandbox = made["id"]
    status, ctx, _ = keyed.post(f"/languages/python/sandboxes/{sandbox}/contexts", {}, headers=AUTH)
    assert status == 201, ctx
    python_in(keyed, sandbox, "x = 6 * 7", contextId=ctx["id"])

    tmp = tmp_path_factory.mktemp("panels")
    upload = tmp / UPLOAD
    upload.write_bytes(PAYLOAD)
    os.makedirs(ARTIFACTS, exist_ok=True)
    cfg = {"url": f"http://127.0.0.1:{keyed.port}/", "key": KEY, "chromium": CHROMIUM, "shots": ARTIFACTS,
           "sandbox": sandbox, "context": ctx["id"],
           "upload": {"path": str(upload), "name": UPLOAD},
           "drop": {"name": DROP[0], "text": DROP[1]}, "doomed": {"name": DOOMED[0], "text": DOOMED[1]}}
    r = subprocess.run(["node", os.path.join(NODE_DIR, "playground-panels.mjs")], input=json.dumps(cfg).encode(),
                       capture_output=True, timeout=180, cwd=NODE_DIR)
    assert r.returncode == 0, r.stderr.decode()[-4000:]
    rep = json.loads(r.stdout)
    print("screenshots:", *rep["shots"], sep="\n  ")
    return rep, {"sandbox": sandbox, "context": ctx["id"]}


def ok(rep, *steps):
    for s in steps:
        assert rep["steps"].get(s) == "ok", f"step {s}: {rep['steps'].get(s)}"


def test_the_list_shows_an_api_made_sandbox_with_its_context(run):
    rep, setup = run
    ok(rep, "list")
    assert setup["sandbox"] in rep["listed"]["text"]
    ctxs = rep["listed"]["contexts"]
    assert [c["id"] for c in ctxs] == [setup["context"]], ctxs
    assert ctxs[0]["language"] == "python"
    assert ctxs[0]["state"] in ("running", "saved", "idle")
    assert "1 run" in ctxs[0]["text"], ctxs[0]["text"]


def test_a_context_chosen_in_the_list_is_the_run_tabs_target(run):
    rep, setup = run
    ok(rep, "use-context")
    assert setup["context"] in rep["useContextStatus"]
    assert rep["runTarget"] == setup["sandbox"]


def test_a_sandbox_is_created_and_deleted_from_the_page(run, keyed):
    rep, _ = run
    ok(rep, "create", "delete")
    assert len(rep["created"]) == 1
    made = rep["created"][0]
    assert rep["createdChosen"] == "true"
    assert made in rep["createStatus"]
    # The confirm was asked twice: dismissed (kept), then accepted.
    assert rep["keptAfterDismiss"] == 1
    assert sum(made in m for m in rep["dialogs"]) == 2
    status, listed, _ = keyed.get("/sandboxes", headers=AUTH)
    assert status == 200
    assert made not in [s["id"] for s in listed["sandboxes"]]
    assert "Deleted sandbox " + made in rep["deleteStatus"]


def test_an_uploaded_file_is_read_by_code_and_downloads_as_the_same_bytes(run, keyed):
    rep, setup = run
    ok(rep, "select", "upload", "download")
    assert rep["chosen"] == "true"
    assert rep["uploaded"] == {"type": "file", "size": len(PAYLOAD), "sizeText": "776 B", "kind": "binary"}
    res = python_in(keyed, setup["sandbox"], f"import base64; print(base64.b64encode(open('/workspace/{UPLOAD}', 'rb').read()).decode())")
    assert base64.b64decode(stdout(res).strip()) == PAYLOAD, res
    assert rep["downloadName"] == UPLOAD
    assert rep["downloadUrl"].startswith("blob:")
    with open(rep["downloadPath"], "rb") as f:
        assert f.read() == PAYLOAD


def test_a_folder_made_in_the_page_takes_a_dropped_file(run, keyed):
    rep, setup = run
    ok(rep, "mkdir", "drop")
    assert rep["folder"] == {"type": "directory", "kind": "folder"}
    assert rep["crumbs"] == ["workspace", "docs"]
    res = python_in(keyed, setup["sandbox"], f"print(repr(open('/workspace/docs/{DROP[0]}').read()))")
    assert stdout(res).strip() == repr(DROP[1]), res


def test_a_refused_change_says_why(run):
    rep, _ = run
    ok(rep, "mkdir-refused")
    # The files API's own message, not a bare status.
    assert rep["refusedStatus"].startswith("Cannot make ../escape: "), rep["refusedStatus"]
    assert "escapes /workspace" in rep["refusedStatus"], rep["refusedStatus"]


def test_a_file_is_deleted_from_the_page(run, keyed):
    rep, setup = run
    ok(rep, "delete-file")
    assert "Deleted " + DOOMED[0] in rep["filesStatus"]
    status, _, _ = keyed.get(f"/v1/sandbox/{setup['sandbox']}/file/workspace/{DOOMED[0]}", headers=AUTH)
    assert status == 404


def test_the_terminal_runs_a_command_and_shows_the_shells_exit(run):
    rep, _ = run
    ok(rep, "terminal", "terminal-exit")
    lines = [ln.rstrip() for ln in rep["terminalText"].splitlines()]
    assert "hi-42" in lines, rep["terminalText"]
    assert rep["exitCode"] == "3"
    assert "exited with code 3" in rep["exitStatus"]


def test_a_folder_is_deleted_with_its_contents(run, keyed):
    rep, setup = run
    ok(rep, "delete-folder")
    assert "everything in it" in rep["folderDialog"]
    status, res, _ = keyed.post(f"/languages/python/sandboxes/{setup['sandbox']}/files",
                                {"op": "exists", "path": "old"}, headers=AUTH)
    assert status == 200 and res["exists"] is False, res


def test_the_terminal_is_sized_to_its_panel_and_follows_the_window(run):
    rep, _ = run
    ok(rep, "terminal-size", "terminal-resize")
    # The shell's rows × cols are the ones xterm shows (fit to the panel).
    assert rep["sizeWide"]["rows"] == rep["xtermWide"], rep
    assert rep["sizeWide"]["cols"] > 100, rep["sizeWide"]
    assert rep["sizeNarrow"]["cols"] < 50, rep["sizeNarrow"]
    assert rep["sizeWidened"]["cols"] == rep["sizeWide"]["cols"], rep


def test_the_key_goes_in_headers_never_in_a_page_url(run):
    rep, setup = run
    assert rep["requests"], rep
    assert not [u for u in rep["requests"] if KEY in u], rep["requests"]
    # The PTY WebSocket is the one place a browser cannot send a header.
    assert rep["websockets"] and all(f"/v1/sandbox/{setup['sandbox']}/pty?" in u for u in rep["websockets"])
    assert all(f"token={KEY}" in u for u in rep["websockets"])
    assert rep["blocked"] == []
    assert rep["pageErrors"] == [], rep["pageErrors"]
    # The browser logs each failed response; the one expected is the refused mkdir's 403.
    expected = "Failed to load resource: the server responded with a status of 403 (Forbidden)"
    assert [e for e in rep["consoleErrors"] if e != expected] == [], rep["consoleErrors"]


def test_the_list_fills_once_the_key_prompt_is_answered(run):
    rep, _ = run
    ok(rep, "key-prompt")
    assert rep["promptAtLoad"] is False
    assert rep["listedBeforeKey"] == 0
    assert rep["listedAfterKey"] >= 1


def test_the_panels_fit_a_360px_screen(run):
    rep, _ = run
    ok(rep, "narrow")
    assert rep["overflow"] == [], rep["overflow"]
    for shot in rep["shots"]:
        assert os.path.getsize(shot) > 5000, shot
    assert os.path.basename(rep["shots"][-1]) == "panels-360-terminal.png"

