"""Attack suite, rows 15-22: the files API against a hostile workspace (the security checklist of peers.md section 6;
one test per row, split by area: test_attacks_*.py).

The suite's method and conventions: attack_common.py."""

from attack_common import *  # noqa: F401,F403 (the suite's shared helpers)


# ---- 15-19: files API against a hostile workspace -----------------------


def test_row_15_path_traversal(daemon):
    s = sid()
    with open("/etc/passwd", "rb") as f:
        passwd = f.read()
    assert files(daemon, s, op="write", path="inside", content="i")[0] == 200
    escapes = ["../etc/passwd", "/etc/passwd", "/workspace/../etc/passwd", "/workspace/../../root", "..", "/",
               "/workspace/a/../../etc/passwd", "//etc/passwd", "/./etc/passwd", "/workspace/./../etc"]
    for p in escapes:
        for op in ("read", "exists", "list", "write", "delete", "mkdir"):
            status, body = files(daemon, s, op=op, path=p, content="pwned", recursive=True, force=True)
            assert status == 403 and body["code"] == "PERMISSION_DENIED", (p, op, status, body)
            assert "root:" not in json.dumps(body)
        for op in ("rename", "move"):
            status, body = files(daemon, s, op=op, path="inside", newPath=p)
            assert status == 403, (p, op, body)
            status, body = files(daemon, s, op=op, path=p, newPath="stolen")
            assert status == 403, (p, op, body)
    # %2e%2e is a literal name, never decoded.
    status, body = files(daemon, s, op="write", path="%2e%2e", content="lit")
    assert status == 200 and body["path"] == "/workspace/%2e%2e", body
    status, body = files(daemon, s, op="read", path="%2e%2e/%2e%2e/etc/passwd")
    assert status in (400, 404) and "root:" not in json.dumps(body), body  # ENOTDIR: %2e%2e is a file
    status, body = files(daemon, s, op="list", path="/workspace")
    assert sorted(f["name"] for f in body["files"]) == ["%2e%2e", "inside"], body
    # NUL bytes and over-long paths are invalid input.
    for p in ("inside\u0000/../../etc/passwd", "\u0000", "a" * 300, "a/" * 3000 + "x", "/workspace/" + "b" * 5000):
        status, body = files(daemon, s, op="read", path=p)
        assert status == 400 and body["code"] == "VALIDATION_FAILED", (p[:20], status, body)
        status, body = files(daemon, s, op="rename", path="inside", newPath=p)
        assert status == 400, (p[:20], status, body)
    assert files(daemon, s, op="read", path="inside")[1]["content"] == "i"
    with open("/etc/passwd", "rb") as f:
        assert f.read() == passwd
    delete_sandbox(daemon, s)


def _plant(daemon, s, target_dir):
    res = sbx(daemon, s, f"""
import os
os.makedirs('/workspace/real', exist_ok=True)
open('/workspace/real/f', 'w').write('inner')
os.symlink({target_dir!r}, '/workspace/ldir')
os.symlink({target_dir + '/secret'!r}, '/workspace/lfile')
os.symlink('../' * 12 + {target_dir.lstrip('/')!r}, '/workspace/lup')
os.symlink('/', '/workspace/lroot')
os.symlink('real', '/workspace/linner')
sorted(os.listdir('/workspace'))
""")
    assert value(res) == ["ldir", "lfile", "linner", "lroot", "lup", "real"], res


def _symlink_ops(daemon, s, sentinel_dir):
    """Every files op through every planted link; returns all bodies."""
    bodies = []
    name = os.path.basename(sentinel_dir)
    reads = ["lfile", "ldir/secret", "lup/secret", f"lroot{sentinel_dir}/secret", "linner/f"]
    for p in reads:
        for enc in ("utf-8", "base64"):
            bodies.append((p, files(daemon, s, op="read", path=p, encoding=enc)))
    for p in ["ldir", "lup", "lroot", f"lroot{os.path.dirname(sentinel_dir)}", "linner"]:
        bodies.append((p, files(daemon, s, op="list", path=p, recursive=True, includeHidden=True)))
    bodies.append(("list-root", files(daemon, s, op="list", path="/workspace", recursive=True, includeHidden=True)))
    for p in ["lfile", "ldir/secret", "ldir/new", "lup/new", f"lroot{sentinel_dir}/new"]:
        bodies.append((p, files(daemon, s, op="write", path=p, content="PWNED")))
    for p in ["ldir/newdir", "lup/a/b"]:
        bodies.append((p, files(daemon, s, op="mkdir", path=p, recursive=True)))
    for p in ["ldir/secret", "lup/secret"]:
        bodies.append((p, files(daemon, s, op="exists", path=p)))
        bodies.append((p, files(daemon, s, op="rename", path=p, newPath="stolen")))
        bodies.append((p, files(daemon, s, op="move", path="real/f", newPath=p)))
        bodies.append((p, files(daemon, s, op="delete", path=p, force=True)))
    bodies.append(("ldir-rec", files(daemon, s, op="delete", path="ldir/", recursive=True)))
    for status, body in [b for _, b in bodies]:
        assert status < 500, body
        assert "HOST-SENTINEL" not in json.dumps(body), body
        assert name not in json.dumps(body.get("files", "")), body
    return bodies


def test_row_16_guest_planted_symlinks(daemon, sentinel):
    base, secret, before = sentinel
    s = sid()
    try:
        _plant(daemon, s, base)
        bodies = dict((p, b) for p, b in _symlink_ops(daemon, s, base))
        # Reads through any link are refused, even a link that stays inside.
        assert bodies["lfile"][0] in (403, 404) and bodies["linner/f"][0] == 403
        # The guest still sees its own links as links (acting on the link
        # itself, like delete, is fine); the host directory is untouched.
        assert snapshot_tree(base) == before
    finally:
        delete_sandbox(daemon, s)
    assert snapshot_tree(base) == before


def test_row_17_toctou_dir_symlink_swap(daemon, sentinel):
    base, secret, before = sentinel
    s = sid()
    try:
        # A guest thread keeps swapping /workspace/race between a real
        # directory (holding "secret") and a symlink to the host directory,
        # in the background of a resident context, while we hammer the API.
        res = sbx(daemon, s, f"""
import os, threading, time
os.makedirs('/workspace/race', exist_ok=True)
open('/workspace/race/secret', 'w').write('guest-owned')
swaps = [0]
def swapper():
    end = time.time() + 3.0
    while time.time() < end:
        os.rename('/workspace/race', '/workspace/race_real')
        os.symlink({base!r}, '/workspace/race')
        time.sleep(0.0002)
        os.unlink('/workspace/race')
        os.rename('/workspace/race_real', '/workspace/race')
        swaps[0] += 1
        time.sleep(0.0001)
threading.Thread(target=swapper, daemon=True).start()
1
""")
        assert value(res) == "1"
        seen = {"ok": 0, "refused": 0}
        end = time.time() + 2.5
        i = 0
        while time.time() < end:
            i += 1
            for body in ({"op": "read", "path": "race/secret"},
                         {"op": "write", "path": "race/secret", "content": f"api-{i}"},
                         {"op": "write", "path": f"race/new{i % 3}", "content": "PWNED"},
                         {"op": "list", "path": "race"},
                         {"op": "mkdir", "path": f"race/d{i}"},
                         {"op": "delete", "path": f"race/d{i}", "recursive": True},
                         {"op": "rename", "path": "race/secret", "newPath": "race/secret2"},
                         {"op": "rename", "path": "race/secret2", "newPath": "race/secret"}):
                status, res = files(daemon, s, **body)
                assert status < 500 or res.get("code") == "FILESYSTEM_ERROR", res
                dumped = json.dumps(res)
                assert "HOST-SENTINEL" not in dumped, res
                if body["op"] == "read" and status == 200:
                    assert res["content"] in ("guest-owned",) or res["content"].startswith("api-"), res
                seen["ok" if status == 200 else "refused"] += 1
        time.sleep(0.7)
        swaps = value(sbx(daemon, s, "swaps[0]"))
        assert int(swaps) > 50, swaps  # the race really ran
        assert seen["ok"] > 0 and seen["refused"] > 0, seen
    finally:
        delete_sandbox(daemon, s)
    assert snapshot_tree(base) == before


@needs_root
def test_row_18_no_host_chown_chmod_via_links(daemon, sentinel):
    base, secret, before = sentinel
    st = os.stat(secret)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 4321, 0o666)
    s = sid()
    try:
        _plant(daemon, s, base)
        _symlink_ops(daemon, s, base)
        # Files the API creates belong to the jail user, not root.
        status, body = files(daemon, s, op="write", path="mine", content="x")
        assert status == 200
        ls = files(daemon, s, op="list", path="/workspace")[1]["files"]
        assert next(f for f in ls if f["name"] == "mine")["mode"] == "-rw-r--r--"
        owner = value(sbx(daemon, s, "import os\nst = os.stat('/workspace/mine')\n[st.st_uid, st.st_gid]"))
        assert owner == [65534, 65534], owner
    finally:
        delete_sandbox(daemon, s)
    after = snapshot_tree(base)
    assert after == before
    st = os.stat(secret)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 4321, 0o666)


def test_row_19_hard_link_to_host_file(daemon):
    code = """
import os
r = {}
for src, dst in [('/etc/passwd', '/workspace/pw'), ('/usr/bin/python3', '/tmp/py'),
                 ('/opt/sandboxd/kernels/python_kernel.py', '/workspace/k'), ('/etc/ssl/openssl.cnf', '/tmp/o'),
                 ('/proc/self/environ', '/tmp/env')]:
    try:
        os.link(src, dst); r[src] = 'linked'
    except OSError as e:
        r[src] = e.errno
r
"""
    out = value(run(daemon, code))
    assert all(v != "linked" for v in out.values()), out
    assert out["/etc/passwd"] == EXDEV and out["/usr/bin/python3"] == EXDEV, out
    s = sid()
    try:
        out = value(sbx(daemon, s, code))
        assert all(v != "linked" for v in out.values()), out
        # The files API has no link op at all.
        for op in ("link", "hardlink", "symlink"):
            status, body = files(daemon, s, op=op, path="x", newPath="/etc/passwd")
            assert status == 400 and body["code"] == "VALIDATION_FAILED", body
    finally:
        delete_sandbox(daemon, s)


def test_row_20_tar_slip():
    pytest.skip("no archive (tar/zip) API yet: nothing extracts archives on the host")


def test_row_21_archive_bomb():
    pytest.skip("no archive (tar/zip) API yet: nothing decompresses on the host")


def test_row_22_archive_name_collisions():
    pytest.skip("no archive (tar/zip) API yet: no archive entry names are ever written")
