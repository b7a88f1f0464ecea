"""The playground at / (src/api/web, web/dist): the static serving over
plain HTTP (types, security headers, HEAD, ETag, 404/405, public page while
the API keeps its key), and the Run panel in headless Chromium driven by
tests/node/playground-run.mjs: every language, matplotlib as an <img>, a
context keeping a variable, Ctrl+Enter, the API-key prompt, 360 px wide.
Screenshots go to build/test-artifacts/web/ (printed)."""
import http.client
import json
import os
import shutil
import subprocess
import sys

import pytest

# Not "from conftest import": in one pytest session every test directory has
# a module called conftest (see tests/api_loader.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from api_loader import load_api  # noqa: E402

api = load_api()
Daemon, ROOMY_LIMITS, ROOT, SANDBOXD_BIN = api.Daemon, api.ROOMY_LIMITS, api.ROOT, api.BIN
NODE_DIR = os.path.join(ROOT, "tests", "node")

CHROMIUM = "/usr/bin/chromium"
KEY = "web-pl4yground-k3y"
DIST = os.path.join(ROOT, "web", "dist")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts", "web")
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}


@pytest.fixture(scope="module")
def keyed():
    d = Daemon(sets=ROOMY_LIMITS + [f"api_key={KEY}"])
    yield d
    d.cleanup()


def dist(name):
    with open(os.path.join(DIST, name), "rb") as f:
        return f.read()


def csp_directives(value):
    out = {}
    for part in value.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def raw_get(server, path, method="GET", headers=None):
    """The body as bytes; status and headers left on server.raw_*."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request(method, path, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    server.raw_status, server.raw_headers = resp.status, {k.lower(): v for k, v in resp.getheaders()}
    conn.close()
    return data


# ---- static serving (plain HTTP) ----

@pytest.mark.parametrize("path", sorted(ASSETS))
def test_every_asset_is_served_from_the_binary_with_its_type_and_headers(server, path):
    name, ctype = ASSETS[path]
    assert raw_get(server, path) == dist(name)
    h = server.raw_headers
    assert server.raw_status == 200
    assert h["content-type"] == ctype
    assert h["x-content-type-options"] == "nosniff"
    assert h["referrer-policy"] == "no-referrer"
    assert h["cache-control"] == "no-cache"
    assert h["etag"].startswith('"') and h["etag"].endswith('"')
    csp = csp_directives(h["content-security-policy"])
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"]  # no inline or eval'd script
    assert "data:" in csp["img-src"]  # PNG results
    assert csp["connect-src"] == ["'self'"] and csp["frame-ancestors"] == ["'none'"]
    assert "frame-src" in csp and "object-src" in csp


def test_the_committed_dist_is_embedded_in_the_binary():
    # src/api/web/web.c and the Makefile list these files: a new one in
    # web/dist would not be served.
    assert sorted(os.listdir(DIST)) == ["app.css", "app.js", "index.html"]
    with open(SANDBOXD_BIN, "rb") as f:
        binary = f.read()
    for name in ("index.html", "app.js", "app.css"):
        assert dist(name) in binary, f"{name} is not embedded in {SANDBOXD_BIN}"
    page = dist("index.html").decode()
    assert 'src="app.js"' in page and 'href="app.css"' in page
    # No CDN: neither the page nor the stylesheet loads from another origin
    # (the browser tests also see every request the page makes).
    assert b"http://" not in dist("index.html") and b"https://" not in dist("index.html")
    css = dist("app.css").replace(b" ", b"")
    assert b"url(http" not in css and b"url(//" not in css and b"@import" not in css


@pytest.mark.parametrize("path", sorted(ASSETS))
def test_head_answers_the_headers_without_a_body(server, path):
    name, ctype = ASSETS[path]
    body = raw_get(server, path, "HEAD")
    h = server.raw_headers
    assert server.raw_status == 200 and body == b""
    assert h["content-type"] == ctype and int(h["content-length"]) == len(dist(name))
    assert "content-security-policy" in h and h["x-content-type-options"] == "nosniff"


def test_etag_revalidation_answers_304(server):
    raw_get(server, "/app.js")
    etag = server.raw_headers["etag"]
    assert raw_get(server, "/app.js", headers={"If-None-Match": etag}) == b""
    assert server.raw_status == 304 and server.raw_headers["etag"] == etag
    assert raw_get(server, "/app.js", headers={"If-None-Match": '"0000000000000000"'}) == dist("app.js")
    assert server.raw_status == 200
    # Each file has its own tag.
    raw_get(server, "/app.css")
    assert server.raw_headers["etag"] != etag


@pytest.mark.parametrize("path", ["/nope.js", "/app.js/x", "/index.htm", "/app.map", "/../web/dist/app.js"])
def test_an_unknown_asset_is_a_404(server, path):
    status, body, _ = server.request("GET", path)
    assert status == 404, body


def test_other_methods_on_the_page_are_405_with_allow(server):
    for method in ("POST", "PUT", "DELETE"):
        raw_get(server, "/", method)
        assert server.raw_status == 405
        assert set(server.raw_headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}


def test_the_page_is_public_while_the_api_keeps_its_key(keyed):
    status, _, h = keyed.request("GET", "/")
    assert status == 200 and h["content-type"].startswith("text/html")
    status, _, _ = keyed.request("GET", "/app.js")
    assert status == 200
    status, body, _ = keyed.post("/execute/python", {"code": "1+1"})
    assert status == 401 and body["code"] == "UNAUTHORIZED"
    status, body, _ = keyed.post("/execute/python", {"code": "1+1"}, headers={"Authorization": f"Bearer {KEY}"})
    assert status == 200 and body["results"] == [{"text": "2"}]
    status, _, _ = keyed.request("GET", "/sandboxes")
    assert status == 401


# ---- the Run panel in a real browser ----

def browse(scenario, daemon, tmp_path, *extra):
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed (Debian package chromium): the browser tests need it")
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
        pytest.fail("tests/node/node_modules is missing: run `make node-deps`")
    shots = tmp_path / "shots"
    shots.mkdir()
    url = f"http://127.0.0.1:{daemon.port}/"
    r = subprocess.run(["node", os.path.join(NODE_DIR, "playground-run.mjs"), scenario, url, str(shots), CHROMIUM,
                        *extra], capture_output=True, timeout=240, cwd=NODE_DIR)
    assert r.returncode == 0, r.stderr.decode()[-4000:]
    rep = json.loads(r.stdout)
    os.makedirs(ARTIFACTS, exist_ok=True)
    for shot in rep["shots"]:
        assert os.path.getsize(shot) > 5000, shot
        shutil.copy(shot, ARTIFACTS)
    print(f"screenshots: {ARTIFACTS}/ ({', '.join(os.path.basename(s) for s in rep['shots'])})")
    origin = url.rstrip("/")
    assert rep["blocked"] == [], rep["blocked"]  # nothing but the daemon is asked for
    assert all(u.startswith(origin + "/") for u in rep["requests"]), rep["requests"]
    assert rep["pageErrors"] == [], rep["pageErrors"]
    return rep


def test_each_language_runs_stateless_and_shows_its_result(server, tmp_path):
    rep = browse("languages", server, tmp_path)
    runs = rep["runs"]
    assert rep["title"] == "sandboxd playground"
    assert runs["python"]["stdout"] == "py-out 42" and runs["python"]["stderr"] == "py-err"
    assert runs["python"]["texts"] == ["1024"] and runs["python"]["error"] == ""
    assert runs["javascript"]["stdout"] == "js-out 42"
    assert len(runs["javascript"]["json"]) == 1 and '"answer": 42' in runs["javascript"]["json"][0]
    assert runs["perl"]["stdout"] == "pl-out 42" and runs["perl"]["texts"] == ["pl-42"]
    assert runs["ruby"]["stdout"] == "rb-out 42" and runs["ruby"]["texts"] == ["42"]
    sh = runs["shell"]
    assert sh["stdout"] == "sh-out 42" and sh["stderr"] == "sh-err"
    assert sh["error"].startswith("ExitError: exit status 3")
    assert rep["shellTargetDisabled"] is True  # shell has no contexts
    for lang, run in runs.items():
        assert run["usage"].startswith(lang + " · ") and " ms" in run["usage"], run["usage"]
    posts = [r for r in rep["calls"] if r.startswith("POST ")]
    assert [p.rsplit("/", 1)[1] for p in posts] == ["python", "javascript", "perl", "ruby", "shell"]
    assert rep["consoleErrors"] == []


def test_python_in_a_sandbox_context_plots_keeps_state_and_runs_on_ctrl_enter(server, tmp_path):
    rep = browse("rich", server, tmp_path)
    ctx = rep["contextId"]
    assert len(ctx) >= 8 and ctx in rep["contextOptions"]
    # The variable set in one run is there in the next (same context).
    assert rep["set"]["error"] == "" and rep["kept"]["texts"] == ["42"]
    assert f"context {ctx[:8]} · run #2" in rep["kept"]["usage"]
    assert rep["keyboard"]["stdout"] == "by-keyboard"
    img = rep["plot"]["images"]
    assert len(img) == 1 and img[0]["src"] == "data:image/png;base64," and img[0]["width"] > 100
    html = rep["html"]["html"]
    assert len(html) == 1 and html[0]["sandbox"] == "" and "<b id=x>bold</b>" in html[0]["srcdoc"]
    assert rep["hacked"] is False  # the sandboxed iframe ran no script
    assert rep["treeNodes"] >= 2 and '"b": null' in rep["tree"]["json"][0]
    err = rep["error"]["error"]
    assert err.startswith("ValueError: boom") and "Traceback (most recent call last)" in err and "in f" in err
    # The sandbox runs went to the gateway with the context and display on.
    ex = [r for r in rep["calls"] if r.startswith("POST ") and "/sandboxes/web-rich/execute" in r]
    assert len(ex) == 8, rep["calls"]
    assert rep["exampleTarget"] == "sandbox" and len(rep["example"]["images"]) == 1
    assert "hello from Python" in rep["starter"] and "plt.legend" not in rep["starter"]
    # The only console error allowed: Chromium refusing the HTML result's script.
    assert all("sandboxed" in e and "allow-scripts" in e for e in rep["consoleErrors"]), rep["consoleErrors"]


def test_the_page_fits_360_px_without_horizontal_scroll(server, tmp_path):
    rep = browse("narrow", server, tmp_path)
    for where, w in rep["widths"].items():
        assert w["clientWidth"] == 360, where
        assert w["scrollWidth"] <= 360 and w["bodyScrollWidth"] <= 360, (where, w)
    assert rep["runVisible"] is True
    assert rep["narrowRun"]["stdout"] == "narrow"


def test_the_key_prompt_appears_on_401_and_the_run_works_after_the_key(keyed, tmp_path):
    rep = browse("key", keyed, tmp_path, KEY)
    assert rep["cancelled"].startswith("HTTP 401") and "Missing or invalid API key" in rep["cancelled"]
    assert rep["promptShown"] is True and rep["wrongKeyAskedAgain"] is True and rep["promptOpen"] is False
    assert "'with-key'" in rep["afterKey"] and "HTTP 401" not in rep["afterKey"]
    assert rep["stored"] == KEY  # sessionStorage, for this tab only
    assert rep["second"]["texts"] == ["'second'"]
    # Cancelled, refused, refused (wrong key), run (right key), run again:
    # the key is never in a URL.
    runs = [r for r in rep["calls"] if r.startswith("POST ") and "/execute/" in r]
    assert len(runs) == 5, rep["calls"]
    assert not any(KEY in r for r in rep["requests"])
