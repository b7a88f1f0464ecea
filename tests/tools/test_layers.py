"""The layer check (scripts/check-layers.sh) passes on the tree and fails on
an #include that points up the layers."""
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-layers.sh"


def check(src):
    return subprocess.run(["bash", str(SCRIPT), str(src)], capture_output=True, text=True)


def test_tree_passes():
    r = check(ROOT / "src")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "layers: ok" in r.stdout


def copy_src(tmp_path):
    dst = tmp_path / "src"
    shutil.copytree(ROOT / "src", dst, ignore=shutil.ignore_patterns("vendor", "*.js", "*.py", "*.pl", "*.rb"))
    return dst


def test_upward_include_fails(tmp_path):
    src = copy_src(tmp_path)
    victim = src / "jail" / "seccomp.c"
    victim.write_text('#include "sandbox/sandbox.h"\n' + victim.read_text())
    r = check(src)
    assert r.returncode == 1
    assert 'jail/seccomp.c:1: includes "sandbox/sandbox.h": jail/ may not depend on sandbox/' in r.stdout


def test_http_below_api_fails(tmp_path):
    src = copy_src(tmp_path)
    victim = src / "http" / "server.h"
    victim.write_text(victim.read_text() + '\n#include "api/app.h"\n')
    r = check(src)
    assert r.returncode == 1
    assert "http/ may not depend on api/" in r.stdout


def test_unknown_folder_fails(tmp_path):
    src = copy_src(tmp_path)
    (src / "misc").mkdir()
    (src / "misc" / "x.c").write_text('#include "base/util.h"\n')
    r = check(src)
    assert r.returncode == 1
    assert "misc/x.c: folder 'misc' is not in the layer table" in r.stdout
