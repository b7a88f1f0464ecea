"""`sandboxd cp`: files and folders to and from a sandbox, black-box against
a real daemon; tar-slip protections also against a fake server that sends
a crafted archive (what a genuine daemon never would)."""
import base64
import http.server
import io
import json
import os
import stat
import tarfile
import threading

from term_util import env, run, sandbox  # noqa: F401 (env, sandbox: fixtures)

def remote_file(server, sid, path):
    status, body, _ = server.get(f"/v1/sandbox/{sid}/file/workspace/{path}")
    return status, body


def sh(server, sid, script):
    """Runs a bash script in the sandbox (bridge /exec); returns its stdout."""
    status, body, _ = server.post(f"/v1/sandbox/{sid}/exec", {"argv": ["bash", "-c", script]})
    assert status == 200, body
    out, event = b"", None
    for line in body.decode().splitlines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "stdout":
            out += base64.b64decode(line[6:])
        elif line.startswith("data: ") and event == "exit":
            assert json.loads(line[6:])["exit_code"] == 0, body
    return out.decode()


def make_tree(root):
    os.makedirs(root / "sub" / "deeper")
    os.makedirs(root / "empty")
    (root / "top.txt").write_bytes(b"top\n")
    (root / "sub" / "data.bin").write_bytes(bytes(range(256)) * 40)
    (root / "sub" / "deeper" / "run.sh").write_bytes(b"#!/bin/sh\necho ran\n")
    os.chmod(root / "sub" / "deeper" / "run.sh", 0o755)
    os.chmod(root / "top.txt", 0o600)
    os.chmod(root / "sub", 0o750)
    os.symlink("top.txt", root / "link")


def tree(root):
    """{relative path: (kind, mode, content or link target)}"""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", None, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), None)
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), open(p, "rb").read())
    return out


def test_file_up_and_down_byte_exact(env, server, sandbox, tmp_path):
    data = os.urandom(3 * 1024 * 1024)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    p = run(env, "cp", str(src), f"{sandbox}:in/a/big.bin", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"bytes": len(data), "files": 1, "path": "/workspace/in/a/big.bin"}
    status, body = remote_file(server, sandbox, "in/a/big.bin")
    assert status == 200 and body == data
    out = tmp_path / "back.bin"
    p = run(env, "cp", f"{sandbox}:/workspace/in/a/big.bin", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == data
    # Into an existing local folder: under the remote name.
    d = tmp_path / "dl"
    d.mkdir()
    assert run(env, "cp", f"{sandbox}:in/a/big.bin", str(d)).returncode == 0
    assert (d / "big.bin").read_bytes() == data
    # A remote PATH ending in '/' is a folder: the file lands inside.
    assert run(env, "cp", str(src), f"{sandbox}:in/b/").returncode == 0
    assert remote_file(server, sandbox, "in/b/big.bin") == (200, data)


def test_folder_up_and_down(env, server, sandbox, tmp_path):
    src = tmp_path / "proj"
    make_tree(src)
    p = run(env, "cp", "-r", str(src), f"{sandbox}:deep/nest/proj", "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["files"] == 3 and rep["path"] == "/workspace/deep/nest/proj"
    assert remote_file(server, sandbox, "deep/nest/proj/sub/deeper/run.sh") == (200, b"#!/bin/sh\necho ran\n")
    listing = sh(server, sandbox, "cd deep/nest/proj && stat -c '%n %a %F' top.txt sub sub/deeper/run.sh empty link")
    assert listing.splitlines() == ["top.txt 600 regular file", "sub 750 directory",
                                    "sub/deeper/run.sh 755 regular file", "empty 755 directory",
                                    "link 777 symbolic link"]
    # Down to a new name (detected as a folder without -r).
    out = tmp_path / "out"
    p = run(env, "cp", f"{sandbox}:deep/nest/proj", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["files"] == 3
    assert tree(out) == tree(src)
    # Into an existing folder: under the remote name.
    exist = tmp_path / "exist"
    exist.mkdir()
    assert run(env, "cp", "-r", f"{sandbox}:deep/nest/proj", str(exist)).returncode == 0
    assert tree(exist / "proj") == tree(src)


def test_folder_over_the_servers_body_cap_goes_in_parts(env, server, sandbox, tmp_path):
    # hydrate takes 32 MiB per body: 36 MiB go as two archives; the second
    # names the read-only folder again so that it takes its last file.
    src = tmp_path / "big"
    (src / "ro").mkdir(parents=True)
    for i in range(3):
        (src / "ro" / f"part{i}.bin").write_bytes(os.urandom(12 * 1024 * 1024))
    os.chmod(src / "ro", 0o555)
    p = run(env, "cp", str(src), f"{sandbox}:big", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["bytes"] == 36 * 1024 * 1024
    assert sh(server, sandbox, "stat -c %a big/ro; ls big/ro").split() == ["555", "part0.bin", "part1.bin", "part2.bin"]
    out = tmp_path / "big-back"
    assert run(env, "cp", f"{sandbox}:big", str(out)).returncode == 0
    try:
        assert tree(out) == tree(src)
    finally:
        os.chmod(src / "ro", 0o755)
        os.chmod(out / "ro", 0o755)


def test_folder_into_remote_folder_and_workspace_root(env, server, sandbox, tmp_path):
    src = tmp_path / "pkg"
    make_tree(src)
    assert run(env, "cp", str(src), f"{sandbox}:lib/").returncode == 0
    assert remote_file(server, sandbox, "lib/pkg/top.txt") == (200, b"top\n")
    assert run(env, "cp", str(src), f"{sandbox}:").returncode == 0
    assert remote_file(server, sandbox, "pkg/sub/deeper/run.sh")[0] == 200
    # SRC itself a symlink to a folder: followed (links below it are not).
    os.symlink(src, tmp_path / "pkglink")
    assert run(env, "cp", str(tmp_path / "pkglink"), f"{sandbox}:vialink").returncode == 0
    assert sh(server, sandbox, "stat -c %F vialink vialink/link").splitlines() == ["directory", "symbolic link"]


def test_tar_streams_on_stdin_and_stdout(env, server, sandbox, tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in (("a.txt", b"A"), ("d/b.txt", b"BB")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    p = run(env, "cp", "-", f"{sandbox}:streamed", stdin=buf.getvalue())
    assert p.returncode == 0, p.stderr
    assert remote_file(server, sandbox, "streamed/d/b.txt") == (200, b"BB")
    p = run(env, "cp", f"{sandbox}:streamed", "-")
    assert p.returncode == 0, p.stderr
    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as t:
        names = sorted(m.name.rstrip("/") for m in t.getmembers())
        assert names == ["streamed", "streamed/a.txt", "streamed/d", "streamed/d/b.txt"]
        assert t.extractfile("streamed/d/b.txt").read() == b"BB"


def test_symlinks_leaving_the_folder_are_refused(env, server, sandbox, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    sh(server, sandbox, f"mkdir -p trap/in && echo fine > trap/in/f && ln -s {outside} trap/abs && "
                        "ln -s ../../.. trap/up && ln -s ../.. trap/in/up2 && ln -s in/f trap/good")
    dst = tmp_path / "dst"
    p = run(env, "cp", f"{sandbox}:trap", str(dst))
    assert p.returncode == 1
    assert b"refused trap/abs" in p.stderr and b"refused trap/up" in p.stderr and b"refused trap/in/up2" in p.stderr
    assert (dst / "in" / "f").read_bytes() == b"fine\n"
    assert os.readlink(dst / "good") == "in/f"
    assert not os.path.lexists(dst / "abs") and not os.path.lexists(dst / "up")
    assert os.listdir(outside) == []


class FakeServer:
    """Answers GET /sandboxes (one sandbox "fake") and POST …/persist with
    a crafted tar."""

    def __init__(self, tar_bytes):
        body = tar_bytes

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def send(self, code, ctype, data):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.startswith("/sandboxes"):
                    self.send(200, "application/json", json.dumps({"sandboxes": [{"id": "fake"}], "total": 1}).encode())
                else:
                    self.send(400, "application/json", b'{"error":"Is a directory: /workspace/x","code":"invalid_request"}')

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send(200, "application/x-tar", body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def crafted_tar(outside):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        def add(name, data=b"x", **kw):
            info = tarfile.TarInfo(name)
            for k, v in kw.items():
                setattr(info, k, v)
            if info.type == tarfile.REGTYPE:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            else:
                t.addfile(info)
        add("./x/", type=tarfile.DIRTYPE, mode=0o755)
        add("./x/ok.txt", b"ok")
        add("./x/../../escape-dotdot.txt")
        add(f"{outside}/escape-abs.txt")
        add("./x/l", type=tarfile.SYMTYPE, linkname=str(outside))
        add("./x/l/through-link.txt")
        add("./x/self", type=tarfile.SYMTYPE, linkname=".")
        add("./x/self/via-self.txt")
        add("./x/d/", type=tarfile.DIRTYPE, mode=0o755)
        add("./x/d/s", type=tarfile.SYMTYPE, linkname=".")
        add("./x/d/esc", type=tarfile.SYMTYPE, linkname="s/../../..")
        add("./x/hard", type=tarfile.LNKTYPE, linkname="/etc/passwd")
        add("./x/planted/pwn.txt")
        add("./x/setuid", b"s", mode=0o4755)
        add("./x/fifo", type=tarfile.FIFOTYPE)
    return buf.getvalue()


def test_crafted_archive_cannot_write_outside(env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    fake = FakeServer(crafted_tar(outside))
    try:
        e = dict(env, SANDBOXD_URL=f"http://127.0.0.1:{fake.port}")
        dst = tmp_path / "dst"
        dst.mkdir()
        # A symlink already in the destination, pointing out: not followed.
        (dst / "x").mkdir()
        os.symlink(outside, dst / "x" / "planted")
        p = run(e, "cp", "-r", "fake:x", str(dst), cwd=str(tmp_path))
        assert p.returncode == 1, p.stderr
        assert os.listdir(outside) == [], os.listdir(outside)
        assert not (tmp_path / "escape-dotdot.txt").exists()
        assert (dst / "x" / "ok.txt").read_bytes() == b"ok"
        assert not os.path.lexists(dst / "x" / "hard")
        assert not os.path.lexists(dst / "x" / "fifo")
        assert stat.S_IMODE(os.stat(dst / "x" / "setuid").st_mode) == 0o755
        err = p.stderr.decode()
        assert "refused x/l:" in err and "refused x/hard:" in err and "refused x/fifo:" in err
        assert "refused x/d/esc:" in err and "refused x/d/s" not in err
        assert os.readlink(dst / "x" / "d" / "s") == "."
    finally:
        fake.close()


def stderr_on_a_pty(env, *args):
    """Runs the CLI with stderr on a pseudo-terminal; returns what it drew."""
    master, slave = os.openpty()
    try:
        p = run(env, *args, stderr=slave)
        assert p.returncode == 0
        os.close(slave)
        slave = -1
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        return seen
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def test_progress_bar_on_a_terminal_only(env, sandbox, tmp_path):
    src = tmp_path / "p.bin"
    src.write_bytes(os.urandom(2 * 1024 * 1024))
    seen = stderr_on_a_pty(env, "cp", str(src), f"{sandbox}:p.bin")
    assert b"upload [" in seen and b"100% 2.0 MiB/2.0 MiB" in seen and b"\r" in seen, seen
    seen = stderr_on_a_pty(env, "cp", f"{sandbox}:p.bin", str(tmp_path / "pd.bin"))
    assert b"download [" in seen and b"100% 2.0 MiB/2.0 MiB" in seen, seen
    # A folder: its archive, upload; then download and extract.
    (tmp_path / "pf").mkdir()
    (tmp_path / "pf" / "x.bin").write_bytes(os.urandom(1024 * 1024))
    seen = stderr_on_a_pty(env, "cp", str(tmp_path / "pf"), f"{sandbox}:pf")
    assert b"archive " in seen and b"upload [" in seen and b"100%" in seen, seen
    seen = stderr_on_a_pty(env, "cp", f"{sandbox}:pf", str(tmp_path / "pf2"))
    assert b"download [" in seen and b"extract [" in seen and b"100%" in seen, seen
    # Piped stderr: nothing at all; --quiet on a terminal: nothing either.
    p = run(env, "cp", f"{sandbox}:p.bin", str(tmp_path / "q.bin"))
    assert p.returncode == 0 and p.stderr == b""
    master, slave = os.openpty()
    try:
        p = run(env, "cp", "-q", str(src), f"{sandbox}:p2.bin", stderr=slave)
        assert p.returncode == 0
        os.set_blocking(master, False)
        try:
            assert os.read(master, 65536) == b""
        except BlockingIOError:
            pass
    finally:
        os.close(master)
        os.close(slave)


def test_errors(env, server, sandbox, tmp_path):
    p = run(env, "cp", str(tmp_path / "missing.txt"), f"{sandbox}:x")
    assert p.returncode == 1 and b"No such file or directory" in p.stderr
    (tmp_path / "f").write_bytes(b"f")
    p = run(env, "cp", str(tmp_path / "f"), "nosuchbox:x")
    assert p.returncode == 1 and b"no sandbox 'nosuchbox'" in p.stderr
    status, body, _ = server.get("/sandboxes")
    assert all(s["id"] != "nosuchbox" for s in body["sandboxes"])
    # The server's own message.
    p = run(env, "cp", f"{sandbox}:not/there.txt", str(tmp_path / "y"))
    assert p.returncode == 1 and b"No such file or directory: /workspace/not/there.txt" in p.stderr
    assert not (tmp_path / "y").exists()
    p = run(env, "cp", str(tmp_path / "f"), f"{sandbox}:../etc/x")
    assert p.returncode == 2
    assert run(env, "cp", str(tmp_path / "f"), str(tmp_path / "g")).returncode == 2
    p = run(env, "cp", "--help")
    assert p.returncode == 0 and b"Usage: sandboxd cp" in p.stdout
