"""Bridge /persist and /hydrate: the tar format (./-prefixed, symlinks as
links, the sandbox user), excludes, persist → hydrate into a fresh sandbox,
merging, gzip, the limits, and hostile archives built with tarfile (slip,
absolute paths, links out of the tree, writing through a link, devices,
FIFOs, set-id bits, huge sizes, many entries, a gzip bomb, duplicates,
long names, truncated and garbage data): refused before anything is written,
with the host and the workspace untouched."""
import gzip
import io
import os
import re
import socket
import tarfile
import time

import pytest

from bridge_common import FAST_LIMITS, Daemon, exec_sse, new_sandbox

MiB = 1024 * 1024

# The daemon's own warm runtime sandboxes (sandbox.warm_runtime) come and go
# in mnt/ by themselves (a refill after a take): not what an archive made.
WARM_RUNTIME_DIR = re.compile(r"wrt-[0-9a-f]{32}")


def mnt_dirs(d):
    return sorted(n for n in os.listdir(os.path.join(d.data_dir, "mnt")) if not WARM_RUNTIME_DIR.fullmatch(n))


def announce_body(d, path, length):
    """Sends only the headers of a POST with this Content-Length → the raw reply."""
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {length}\r\n\r\n".encode())
    reply = b""
    while not reply.endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    return reply


def persist(d, sid, excludes=None):
    q = "" if excludes is None else "?excludes=" + excludes
    # (status, the tar's bytes or the error object, headers)
    return d.request("POST", f"/v1/sandbox/{sid}/persist{q}")


def hydrate(d, sid, data):
    status, body, _ = d.request("POST", f"/v1/sandbox/{sid}/hydrate", raw=data)
    return status, body


def sh(d, sid, script):
    status, _, _, out, err, code = exec_sse(d, sid, ["bash", "-c", script])
    assert status == 200 and code == 0, (out, err)
    return out.decode()


# type, octal mode, size, path, link target, and a hash of every file.
TREE = "find . -printf '%y %m %s %p %l\\n' | LC_ALL=C sort; find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum"


def tree(d, sid):
    return sh(d, sid, TREE)


class Tar:
    """A tar built in memory with tarfile (any header the format allows)."""

    def __init__(self, fmt=tarfile.PAX_FORMAT):
        self.buf = io.BytesIO()
        self.t = tarfile.open(fileobj=self.buf, mode="w", format=fmt)

    def add(self, name, data=b"", type=tarfile.REGTYPE, mode=0o644, linkname="", uid=0, uname="root", **kw):
        ti = tarfile.TarInfo(name)
        ti.type, ti.mode, ti.linkname, ti.uid, ti.uname = type, mode, linkname, uid, uname
        for k, v in kw.items():
            setattr(ti, k, v)
        if type == tarfile.REGTYPE:
            ti.size = len(data)
            self.t.addfile(ti, io.BytesIO(data))
        else:
            self.t.addfile(ti)
        return self

    def dir(self, name, mode=0o755):
        return self.add(name, type=tarfile.DIRTYPE, mode=mode)

    def bytes(self):
        self.t.close()
        return self.buf.getvalue()


@pytest.fixture
def sentinel(tmp_path):
    """A host directory with one file: must be byte-for-byte unchanged."""
    d = tmp_path / "host"
    d.mkdir()
    (d / "keep").write_bytes(b"host file\n")
    os.chmod(d, 0o777)
    yield d
    assert sorted(os.listdir(d)) == ["keep"]
    assert (d / "keep").read_bytes() == b"host file\n"


# ---- persist ---------------------------------------------------------------


def test_persist_is_a_dot_slash_tar_with_links_stored_as_links(bridge):
    sid = new_sandbox(bridge)
    sh(bridge, sid, "mkdir -p a/b && printf hi > a/b/f && ln -s a/b/f lnk && ln -s /etc/passwd out "
                    "&& mkfifo fifo && printf x > .hidden")
    status, body, h = persist(bridge, sid)
    assert status == 200 and h["content-type"] == "application/x-tar"
    assert h["content-length"] == str(len(body))
    t = tarfile.open(fileobj=io.BytesIO(body))
    names = t.getnames()
    assert names[0] == "." and all(n == "." or n.startswith("./") for n in names), names
    m = {x.name: x for x in t.getmembers()}
    assert sorted(m) == [".", "./.hidden", "./a", "./a/b", "./a/b/f", "./lnk", "./out"], names  # no FIFO
    assert m["./lnk"].issym() and m["./lnk"].linkname == "a/b/f"
    assert m["./out"].issym() and m["./out"].linkname == "/etc/passwd"  # stored, never followed
    assert t.extractfile("./a/b/f").read() == b"hi"
    assert all(x.uid == 65534 and x.uname == "sandbox" for x in m.values())


def test_persist_excludes(bridge):
    sid = new_sandbox(bridge)
    sh(bridge, sid, "mkdir -p node_modules/x build/out src && touch node_modules/x/y build/out/z src/m.py "
                    "src/debug.log keep.txt")
    status, body, _ = persist(bridge, sid, "node_modules,,./build/,*.log")
    assert status == 200
    names = tarfile.open(fileobj=io.BytesIO(body)).getnames()
    assert sorted(names) == [".", "./keep.txt", "./src", "./src/m.py"], names


def test_persist_of_an_unreadable_file_is_502(bridge):
    # The tar is read as the sandbox user, as GNU tar in the container would.
    sid = new_sandbox(bridge)
    sh(bridge, sid, "printf x > secret && chmod 000 secret")
    status, body, _ = persist(bridge, sid)
    assert status == 502 and body["code"] == "workspace_archive_read_error", body
    assert "secret" in body["error"]


@pytest.mark.parametrize("bad", ["..", "../etc", "a/../../b", "ok,a..b"])
def test_persist_exclude_with_dotdot_is_400(bridge, bad):
    sid = new_sandbox(bridge)
    status, body, _ = persist(bridge, sid, bad)
    assert status == 400 and body["code"] == "invalid_request"


def test_persist_then_hydrate_reproduces_the_tree(bridge):
    src = new_sandbox(bridge)
    sh(bridge, src, """
mkdir -p proj/src proj/empty ro .cfg
printf 'print(1)\\n' > proj/src/main.py
head -c 100000 /dev/urandom > proj/blob.bin
printf '#!/bin/sh\\necho ok\\n' > proj/run.sh && chmod 755 proj/run.sh
printf secret > proj/private && chmod 600 proj/private
printf x > .cfg/.rc
ln -s src/main.py proj/link
ln -s nowhere dangling
printf r > ro/file && chmod 555 ro
chmod 700 proj/empty
touch -d '2001-02-03 04:05:06' proj/src/main.py
""")
    before = tree(bridge, src)
    status, body, _ = persist(bridge, src)
    assert status == 200
    dst = new_sandbox(bridge)
    assert hydrate(bridge, dst, body) == (200, {"ok": True})
    assert tree(bridge, dst) == before
    assert sh(bridge, dst, "stat -c %Y proj/src/main.py; stat -c '%u %g' proj/run.sh ro") == \
        sh(bridge, src, "stat -c %Y proj/src/main.py") + "65534 65534\n65534 65534\n"
    assert sh(bridge, dst, "./proj/run.sh") == "ok\n"


# ---- hydrate -----------------------------------------------------------------


def test_hydrate_merges_and_overwrites(bridge):
    sid = new_sandbox(bridge)
    sh(bridge, sid, "mkdir d && printf old > d/f && printf stays > other && ln -s other was_link")
    tar = Tar().dir("d").add("d/f", b"new").add("d/g", b"g").add("./was_link", b"now a file").bytes()
    assert hydrate(bridge, sid, tar) == (200, {"ok": True})
    assert sh(bridge, sid, "cat d/f d/g other; echo; cat was_link; test ! -L was_link") == "newgstays\nnow a file"
    assert sh(bridge, sid, "ls -A d") == "f\ng\n"  # no temp file left


def test_hydrate_accepts_gzip(bridge):
    sid = new_sandbox(bridge)
    tar = Tar().add("z/a.txt", b"zipped").bytes()
    assert hydrate(bridge, sid, gzip.compress(tar)) == (200, {"ok": True})
    assert sh(bridge, sid, "cat z/a.txt") == "zipped"


def test_hydrate_ownership_and_setid_bits(bridge):
    sid = new_sandbox(bridge)
    tar = (Tar().dir("s", mode=0o3777).add("s/suid", b"#!/bin/sh\n", mode=0o4755)
           .add("s/sgid", b"x", mode=0o2750).add("s/sticky", b"x", mode=0o1644, uid=0, uname="root")
           .add("s/lnk", type=tarfile.SYMTYPE, linkname="suid").bytes())
    assert hydrate(bridge, sid, tar) == (200, {"ok": True})
    assert sh(bridge, sid, "stat -c '%a %u %g %n' s s/suid s/sgid s/sticky") == \
        "777 65534 65534 s\n755 65534 65534 s/suid\n750 65534 65534 s/sgid\n644 65534 65534 s/sticky\n"


def test_hydrate_hardlink_inside_the_tree(bridge):
    sid = new_sandbox(bridge)
    tar = Tar().add("a", b"shared").add("sub/b", type=tarfile.LNKTYPE, linkname="a").bytes()
    assert hydrate(bridge, sid, tar) == (200, {"ok": True})
    assert sh(bridge, sid, "cat sub/b; stat -c %h a; ls -A sub") == "shared2\nb\n"


def test_hydrate_read_only_directory_gets_its_mode_last(bridge):
    sid = new_sandbox(bridge)
    tar = Tar().dir("ro", mode=0o555).add("ro/f", b"in").bytes()
    assert hydrate(bridge, sid, tar) == (200, {"ok": True})
    assert sh(bridge, sid, "stat -c %a ro; cat ro/f") == "555\nin"
    # Again over the read-only result (a restore on top of itself).
    tar = Tar().dir("ro", mode=0o555).add("ro/f", b"again").add("ro/g", b"new").bytes()
    assert hydrate(bridge, sid, tar) == (200, {"ok": True})
    assert sh(bridge, sid, "stat -c %a ro; cat ro/f ro/g") == "555\nagainnew"


def test_empty_garbage_truncated_and_oversized_bodies(bridge):
    sid = new_sandbox(bridge)
    sh(bridge, sid, "printf keep > k")
    before = tree(bridge, sid)
    assert hydrate(bridge, sid, b"") == (400, {"error": "Empty tar payload", "code": "invalid_request"})
    for data in (b"garbage" * 300, os.urandom(4096), gzip.compress(b"not a tar" * 100),
                 Tar().add("a", b"x" * 5000).add("b", b"y").bytes()[:3000],  # truncated in a's data
                 gzip.compress(Tar().add("a", b"x" * 5000).bytes())[:-30]):  # truncated gzip
        status, body = hydrate(bridge, sid, data)
        assert status == 400 and body["code"] == "invalid_request", body
    assert tree(bridge, sid) == before
    # Over 32 MiB: 413 from Content-Length, before the body is read.
    reply = announce_body(bridge, f"/v1/sandbox/{sid}/hydrate", 32 * MiB + 1)
    assert reply.startswith(b"HTTP/1.1 413") and b'"code":"payload_too_large"' in reply, reply
    # A valid empty archive (two zero blocks) is fine.
    assert hydrate(bridge, sid, Tar().bytes()) == (200, {"ok": True})


def hostile(sentinel):
    """name → archive bytes; each must be refused as a whole."""
    h = str(sentinel)
    up = "../" * 12 + h.lstrip("/")
    return {
        "slip": Tar().add("ok", b"1").add("../x", b"2").bytes(),
        "slip-deep": Tar().add("a/../../" + up + "/pwn", b"2").bytes(),
        "slip-dot": Tar().add("./../x", b"2").bytes(),
        "absolute": Tar().add(h + "/pwn", b"2").bytes(),
        "absolute-etc": Tar().add("/etc/sandboxd-pwn", b"2").bytes(),
        "pax-path-slip": Tar().add("safe", b"2", pax_headers={"path": "../../pax-pwn"}).bytes(),
        "gnu-longname-slip": Tar(tarfile.GNU_FORMAT).add("../" * 40 + "x" * 120, b"2").bytes(),
        "symlink-out-then-through": Tar().add("l", type=tarfile.SYMTYPE, linkname=h).add("l/pwn", b"2").bytes(),
        "symlink-up": Tar().add("l", type=tarfile.SYMTYPE, linkname=up).bytes(),
        "symlink-abs": Tar().add("l", type=tarfile.SYMTYPE, linkname="/etc/passwd").bytes(),
        "symlink-in-then-through": Tar().dir("real").add("l", type=tarfile.SYMTYPE, linkname="real")
                                        .add("l/f", b"2").bytes(),
        "file-then-beneath": Tar().add("f", b"1").add("f/g", b"2").bytes(),
        "hardlink-out": Tar().add("h", type=tarfile.LNKTYPE, linkname=up + "/keep").bytes(),
        "hardlink-passwd": Tar().add("h", type=tarfile.LNKTYPE, linkname="/etc/passwd").bytes(),
        "hardlink-missing": Tar().add("h", type=tarfile.LNKTYPE, linkname="nothing").bytes(),
        "hardlink-to-symlink": Tar().add("s", type=tarfile.SYMTYPE, linkname="x")
                                    .add("h", type=tarfile.LNKTYPE, linkname="s").bytes(),
        "hardlink-to-dir": Tar().dir("d").add("h", type=tarfile.LNKTYPE, linkname="d").bytes(),
        "chardev": Tar().add("null", type=tarfile.CHRTYPE, devmajor=1, devminor=3).bytes(),
        "blockdev": Tar().add("sda", type=tarfile.BLKTYPE, devmajor=8, devminor=0).bytes(),
        "fifo": Tar().add("ok", b"1").add("p", type=tarfile.FIFOTYPE).bytes(),
        "duplicate": Tar().add("a", b"1").add("./a", b"2").bytes(),
        "duplicate-dir-file": Tar().dir("a").add("a/", b"", type=tarfile.REGTYPE).bytes(),
        "long-segment": Tar().add("n" * 300, b"1").bytes(),
        "long-path": Tar().add("/".join(["d" * 200] * 25), b"1").bytes(),
        "not-utf8": Tar(tarfile.GNU_FORMAT).add("caf\udce9", b"1").bytes(),
    }


# What each refusal must say (so it was refused for the right reason).
REASONS = {
    "slip": ["'..'"], "slip-deep": ["'..'"], "slip-dot": ["'..'"], "pax-path-slip": ["'..'"],
    "gnu-longname-slip": ["'..'"], "absolute": ["absolute"], "absolute-etc": ["absolute"],
    "symlink-out-then-through": ["leaves /workspace"], "symlink-up": ["leaves /workspace"],
    "symlink-abs": ["leaves /workspace"], "symlink-in-then-through": ["beneath a link"],
    "file-then-beneath": ["beneath a file"], "hardlink-out": ["'..'"], "hardlink-passwd": ["absolute"],
    "hardlink-missing": ["hardlink must name"], "hardlink-to-symlink": ["hardlink must name"],
    "hardlink-to-dir": ["hardlink must name"], "chardev": ["not a file, directory or link"],
    "blockdev": ["not a file, directory or link"], "fifo": ["not a file, directory or link"],
    "duplicate": ["duplicate"], "duplicate-dir-file": ["duplicate"], "long-segment": ["too long"],
    "long-path": ["too long"], "not-utf8": ["UTF-8"],
}


def test_hostile_archives_are_refused_whole(bridge, sentinel):
    sid = new_sandbox(bridge)
    sh(bridge, sid, "mkdir real && printf keep > real/k")
    before = tree(bridge, sid)
    mnt = mnt_dirs(bridge)
    with open("/etc/passwd", "rb") as f:
        passwd = f.read()
    for name, data in hostile(sentinel).items():
        for body in (data, gzip.compress(data)):
            status, err = hydrate(bridge, sid, body)
            assert status == 400 and err["code"] == "invalid_request", (name, status, err)
            assert any(w in err["error"] for w in REASONS[name]), (name, err)
        assert tree(bridge, sid) == before, name
    assert mnt_dirs(bridge) == mnt
    assert not os.path.exists("/etc/sandboxd-pwn")
    with open("/etc/passwd", "rb") as f:
        assert f.read() == passwd


def test_entries_through_a_guest_planted_symlink_are_refused(bridge, sentinel):
    sid = new_sandbox(bridge)
    sh(bridge, sid, f"ln -s {sentinel} out && mkdir real && ln -s real in && printf f > file")
    before = tree(bridge, sid)
    for tar in (Tar().add("out/pwn", b"x").bytes(), Tar().add("in/x", b"x").bytes(),
                Tar().dir("out").bytes(), Tar().add("file/x", b"x").bytes(),
                Tar().add("real", b"file over a directory").bytes()):
        status, err = hydrate(bridge, sid, tar)
        assert status == 400 and err["code"] == "invalid_request", err
    assert tree(bridge, sid) == before


def test_huge_declared_size_and_gzip_bomb_are_refused_at_the_header(bridge):
    sid = new_sandbox(bridge)
    # A 10 GiB header with no data behind it.
    ti = tarfile.TarInfo("huge")
    ti.size = 10 * 1024 * MiB
    huge = ti.tobuf(tarfile.GNU_FORMAT) + b"\0" * 1024
    status, err = hydrate(bridge, sid, huge)
    assert status == 413 and err["code"] == "payload_too_large", err
    # 300 MiB of zeros (over the 256 MiB file limit), gzip'd to about 300
    # KiB: refused at its header, before it is inflated.
    t0 = time.monotonic()
    bomb = io.BytesIO()
    with gzip.GzipFile(fileobj=bomb, mode="wb", compresslevel=1) as g:
        ti = tarfile.TarInfo("zeros")
        ti.size = 300 * MiB
        g.write(ti.tobuf(tarfile.GNU_FORMAT))
        chunk = b"\0" * MiB
        for _ in range(300):
            g.write(chunk)
        g.write(b"\0" * 1024)
    status, err = hydrate(bridge, sid, bomb.getvalue())
    assert status == 413, err
    assert time.monotonic() - t0 < 30
    assert sh(bridge, sid, "ls -A") == ""


def test_over_the_workspace_quota_is_refused_before_writing():
    d = Daemon(sets=FAST_LIMITS + ["bridge.workspace_bytes=4M", "bridge.file_bytes=3M",
                                   "bridge.workspace_inodes=4096"])
    try:
        sid = new_sandbox(d)
        tar = Tar().add("a", b"a" * (2 * MiB)).add("b", b"b" * (2 * MiB) + b"!").bytes()
        status, err = hydrate(d, sid, tar)
        assert status == 502 and err["code"] == "workspace_archive_write_error", err
        assert "exceed" in err["error"]
        assert sh(d, sid, "ls -A") == ""
        # Replacing a file is counted as the size difference.
        assert hydrate(d, sid, Tar().add("a", b"a" * MiB).add("b", b"b" * MiB).bytes())[0] == 200
        assert hydrate(d, sid, Tar().add("a", b"A" * MiB).bytes())[0] == 200
        assert sh(d, sid, "head -c 1 a; rm b") == "A"
        # Too many entries for the inode quota (4096 by default).
        many = Tar(tarfile.USTAR_FORMAT)
        for i in range(4200):
            many.add(f"m/{i}")
        status, err = hydrate(d, sid, gzip.compress(many.bytes()))
        assert status == 502 and "entries" in err["error"], err
        assert sh(d, sid, "ls -A") == "a\n"
        # The file system itself full in the middle (the temp file of an
        # atomic replace needs room beside the old file): a clear error
        # and no temp file.
        sh(d, sid, "rm a")
        assert hydrate(d, sid, Tar().add("a", b"1" * (3 * MiB)).bytes())[0] == 200
        status, err = hydrate(d, sid, Tar().add("a", b"2" * (3 * MiB)).bytes())
        assert status == 502 and "No space left" in err["error"], err
        assert sh(d, sid, "ls -A; head -c 1 a") == "a\n1"
    finally:
        d.cleanup()


def test_more_than_100000_entries_is_refused(bridge):
    sid = new_sandbox(bridge)
    block = tarfile.TarInfo("e").tobuf(tarfile.USTAR_FORMAT)  # one empty file
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb") as g:
        for i in range(100001):
            ti = tarfile.TarInfo(f"d/{i}")
            g.write(ti.tobuf(tarfile.USTAR_FORMAT))
        g.write(b"\0" * 1024)
    assert len(block) == 512
    status, err = hydrate(bridge, sid, out.getvalue())
    assert status == 400 and "100000 entries" in err["error"], err
    assert sh(bridge, sid, "ls -A") == ""
