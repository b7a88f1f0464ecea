"""Attack suite, rows 15-22: the files API against a hostile workspace (the security checklist of peers.md section 6;
one test per row, split by area: test_attacks_*.py).

The suite's method and conventions: attack_common.py."""

import gzip
import io
import os
import re
import tarfile

from attack_common import *  # noqa: F401,F403 (the suite's shared helpers)


# The daemon's own warm runtime sandboxes (sandbox.warm_runtime) come and go
# in mnt/ by themselves (a refill after a take): not what an archive made.
WARM_RUNTIME_DIR = re.compile(r"wrt-[0-9a-f]{32}")


def mnt_dirs(d):
    return sorted(n for n in os.listdir(os.path.join(d.data_dir, "mnt")) if not WARM_RUNTIME_DIR.fullmatch(n))


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


# ---- 20-22: archives (the bridge's /hydrate) --------------------------------


def _tar(*members, fmt=tarfile.PAX_FORMAT):
    """A tar from (name, kind, data_or_linkname[, extra attrs]) tuples;
    kind is a tarfile type (REGTYPE, DIRTYPE, SYMTYPE, LNKTYPE, ...)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, kind, arg, *extra in members:
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode = kind, 0o644
            for k, v in (extra[0] if extra else {}).items():
                setattr(ti, k, v)
            if kind == tarfile.REGTYPE:
                ti.size = len(arg)
                t.addfile(ti, io.BytesIO(arg))
            else:
                ti.linkname = arg or ""
                t.addfile(ti)
    return buf.getvalue()


F, D, L, H = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE


def _bridge_sandbox(d):
    status, body, _ = d.post("/v1/sandbox")
    assert status == 200, body
    return body["id"]


def _hydrate(d, s, data):
    status, body, _ = d.request("POST", f"/v1/sandbox/{s}/hydrate", raw=data)
    return status, body


def _workspace(d, s):
    """Every entry of the workspace (hidden ones too): {relativePath: type}."""
    status, body = files(d, s, op="list", path="/workspace", recursive=True, includeHidden=True)
    assert status == 200, body
    return {f["relativePath"]: f["type"] for f in body["files"]}


def _refused_whole(d, s, tars, code=400):
    """Each archive (and its gzip) is refused with code and changes nothing."""
    before = _workspace(d, s)
    for name, data in tars.items():
        for body in (data, gzip.compress(data)):
            status, res = _hydrate(d, s, body)
            assert status == code, (name, status, res)
            assert _workspace(d, s) == before, name


def test_row_20_tar_slip(daemon, sentinel):
    base, secret, before = sentinel
    s = _bridge_sandbox(daemon)
    up = "../" * 16 + base.lstrip("/")
    res = sbx(daemon, s, f"import os; os.symlink({base!r}, '/workspace/planted'); os.mkdir('/workspace/real')")
    assert "error" not in res, res
    mnt = mnt_dirs(daemon)
    _refused_whole(daemon, s, {
        "dotdot": _tar((up + "/pwn", F, b"x")),
        "dotdot-after-a-dir": _tar(("real/../../../pwn", F, b"x")),
        "absolute": _tar((base + "/pwn", F, b"x")),
        "pax-path": _tar(("safe", F, b"x", {"pax_headers": {"path": up + "/pwn"}})),
        "gnu-longname": _tar((up + "/" + "n" * 150, F, b"x"), fmt=tarfile.GNU_FORMAT),
        "symlink-out-then-through": _tar(("l", L, base), ("l/pwn", F, b"x")),
        "symlink-up-then-through": _tar(("l", L, up), ("l/pwn", F, b"x")),
        "symlink-in-then-through": _tar(("l", L, "real"), ("l/pwn", F, b"x")),
        "through-planted-symlink": _tar(("planted/pwn", F, b"x")),
        "dir-over-planted-symlink": _tar(("planted", D, None), ("planted/pwn", F, b"x")),
        "hardlink-out": _tar(("h", H, up + "/secret")),
        "hardlink-absolute": _tar(("h", H, secret)),
        "hardlink-passwd": _tar(("h", H, "/etc/passwd")),
        "device": _tar(("null", tarfile.CHRTYPE, None, {"devmajor": 1, "devminor": 3})),
        "fifo": _tar(("p", tarfile.FIFOTYPE, None)),
    })
    assert snapshot_tree(base) == before
    assert mnt_dirs(daemon) == mnt
    # A legitimate archive still works, and its set-id bits are dropped.
    assert _hydrate(daemon, s, _tar(("ok/run", F, b"#!/bin/sh\n", {"mode": 0o6755})))[0] == 200
    res = sbx(daemon, s, "import os; os.stat('/workspace/ok/run').st_mode & 0o7777")
    assert value(res) in (0o755, str(0o755)), res
    assert snapshot_tree(base) == before
    assert_alive(daemon)


def test_row_21_archive_bomb(daemon):
    s = _bridge_sandbox(daemon)
    rss = daemon_rss_kib(daemon)
    # 300 MiB of zeros (over the 256 MiB file limit) in one entry, gzip'd
    # to about 300 KiB.
    bomb = io.BytesIO()
    with gzip.GzipFile(fileobj=bomb, mode="wb", compresslevel=1) as g:
        ti = tarfile.TarInfo("zeros")
        ti.size = 300 << 20
        g.write(ti.tobuf(tarfile.GNU_FORMAT))
        for _ in range(300):
            g.write(b"\0" * (1 << 20))
    t0 = time.monotonic()
    status, res = _hydrate(daemon, s, bomb.getvalue())
    assert status == 413 and res["code"] == "payload_too_large", res
    # Twice compressed: the same answer.
    status, res = _hydrate(daemon, s, gzip.compress(bomb.getvalue()))
    assert status in (400, 413), res
    assert time.monotonic() - t0 < 20
    # A header claiming 1 TiB with no data behind it.
    ti = tarfile.TarInfo("huge")
    ti.size = 1 << 40
    status, res = _hydrate(daemon, s, ti.tobuf(tarfile.GNU_FORMAT) + b"\0" * 1024)
    assert status == 413, res
    # Entry bombs: more than 100 000 entries, and more than the workspace's
    # 65 536 inodes (bridge.workspace_inodes).
    for count, code, word in ((100001, 400, "100000 entries"), (66000, 502, "entries")):
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb") as g:
            for i in range(count):
                g.write(tarfile.TarInfo(f"e/{i}").tobuf(tarfile.USTAR_FORMAT))
            g.write(b"\0" * 1024)
        status, res = _hydrate(daemon, s, out.getvalue())
        assert status == code and word in res["error"], (count, res)
    assert _workspace(daemon, s) == {}
    # Never the 300 MiB inflated: the bound leaves room for an ASan build,
    # whose quarantine keeps freed memory resident.
    assert daemon_rss_kib(daemon) - rss < 160 * 1024
    assert_alive(daemon)


def test_row_22_archive_name_collisions(daemon, sentinel):
    base, secret, before = sentinel
    s = _bridge_sandbox(daemon)
    res = sbx(daemon, s, f"""
import os
os.mkdir('/workspace/dir')
open('/workspace/file', 'w').write('file')
os.symlink({secret!r}, '/workspace/link')
""")
    assert "error" not in res, res
    _refused_whole(daemon, s, {
        "twice": _tar(("a", F, b"1"), ("a", F, b"2")),
        "dot-slash": _tar(("a", F, b"1"), ("./a", F, b"2")),
        "double-slash": _tar(("d/a", F, b"1"), ("d//a", F, b"2")),
        "dir-and-file": _tar(("a", D, None), ("a/", F, b"")),
        "file-then-child": _tar(("a", F, b"1"), ("a/b", F, b"2")),
        "link-then-child": _tar(("a", L, "dir"), ("a/b", F, b"2")),
        "file-over-dir": _tar(("dir", F, b"1")),
        "dir-over-file": _tar(("file", D, None)),
        "dir-over-link": _tar(("link", D, None)),
        "hardlink-before-target": _tar(("h", H, "a"), ("a", F, b"1")),
        "root-as-file": _tar((".", F, b"1")),
    })
    # Names that only look alike are distinct; an entry named like the
    # extractor's temp files is just a file; a file over a planted symlink
    # replaces the link itself and never writes through it.
    nfc, nfd = "\u00e9", "e\u0301"
    tmpname = ".sandboxd-0123456789abcdef.tmp"
    ok = _tar(("A", F, b"upper"), ("a", F, b"lower"), (nfc, F, b"nfc"), (nfd, F, b"nfd"),
              (tmpname, F, b"t"), ("link", F, b"replaced"))
    status, res = _hydrate(daemon, s, ok)
    assert status == 200, res
    ws = _workspace(daemon, s)
    assert ws == {"A": "file", "a": "file", nfc: "file", nfd: "file", tmpname: "file", "link": "file",
                  "dir": "directory", "file": "file"}, ws
    res = sbx(daemon, s, "import os; [open('/workspace/' + n).read() for n in ('A', 'a', 'link')] + "
                         "[os.path.islink('/workspace/link')]")
    assert value(res) == ["upper", "lower", "replaced", False], res
    assert snapshot_tree(base) == before
    assert_alive(daemon)
