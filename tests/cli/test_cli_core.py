"""The command-line client's core commands, black-box: the binary under test
(SANDBOXD_BIN) run as `sandboxd run|exec|ls|rm|contexts|keys|completion|help`
against a real daemon of this module's own, with an isolated HOME and
XDG_CONFIG_HOME so no config of the machine leaks in."""
import json
import os
import select
import subprocess
import tempfile
import uuid

import pytest

from conftest import FAST_LIMITS, SANDBOXD_BIN, Daemon

LANGS = [
    ("python", "print(6 * 7)", "42"),
    ("javascript", "console.log(6 * 7)", "42"),
    ("perl", "print 6 * 7, \"\\n\"; undef", "42"),
    ("ruby", "puts 6 * 7", "42"),
    ("shell", "echo $((6 * 7))", "42"),
]


@pytest.fixture(scope="module")
def home():
    with tempfile.TemporaryDirectory(prefix="sandboxd-cli-home-") as d:
        yield d


def cli(server, *args, home, input=None, url=True, extra_env=None, timeout=90):
    """Runs `sandboxd ARGS…`; returns the CompletedProcess (text)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "XDG_CONFIG_HOME": os.path.join(home, ".config")}
    if url:
        env["SANDBOXD_URL"] = f"http://127.0.0.1:{server.port}"
    env.update(extra_env or {})
    return subprocess.run([SANDBOXD_BIN, *args], input=input, capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)


def bridge_id():
    """A fresh id of the bridge's form (^[a-z2-7]+$): made on first use."""
    return "cli" + "".join("abcdefghijklmnopqrstuvwxyz234567"[b % 32] for b in uuid.uuid4().bytes[:12])


# ---- run ----

def test_print_one(server, home):
    p = cli(server, "run", "python", "-c", "print(1)", home=home)
    assert (p.returncode, p.stdout, p.stderr) == (0, "1\n", "")


@pytest.mark.parametrize("lang,code,want", LANGS)
def test_run_each_language_code_file_stdin(server, home, lang, code, want):
    p = cli(server, "run", lang, "-c", code, home=home)
    assert (p.returncode, p.stdout) == (0, want + "\n"), p.stderr
    path = os.path.join(home, f"prog-{lang}")
    with open(path, "w") as f:
        f.write(code)
    p = cli(server, "run", lang, path, home=home)
    assert (p.returncode, p.stdout) == (0, want + "\n"), p.stderr
    p = cli(server, "run", lang, "-", home=home, input=code)
    assert (p.returncode, p.stdout) == (0, want + "\n"), p.stderr


def test_run_file_names_its_language(server, home):
    for name, code in (("hello.py", "print('hi from', 'python')"), ("hello.rb", "puts 'hi from ruby'")):
        path = os.path.join(home, name)
        with open(path, "w") as f:
            f.write(code)
        p = cli(server, "run", path, home=home)
        assert p.returncode == 0 and p.stdout.startswith("hi from"), p.stderr
    p = cli(server, "run", os.path.join(home, "missing.py"), home=home)
    assert p.returncode == 2 and "neither a language nor a readable file" in p.stderr


def test_run_streams_result_and_error(server, home):
    p = cli(server, "run", "python", "-c", "import sys\nprint('out')\nprint('err', file=sys.stderr)\n{'a': 1}",
            home=home)
    assert p.returncode == 0
    assert p.stdout == 'out\n{"a":1}\n'
    assert p.stderr == "err\n"
    p = cli(server, "run", "python", "-c", "print('before')\n1/0", home=home)
    assert p.returncode == 1
    assert p.stdout == "before\n"
    assert "Traceback" in p.stderr and p.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    p = cli(server, "run", "shell", "-c", "exit 3", home=home)
    assert p.returncode == 1 and "ExitError: exit status 3" in p.stderr


def test_run_json_and_env(server, home):
    p = cli(server, "run", "--json", "python", "-e", "GREETING=hi there", "-c",
            "import os\nos.environ['GREETING']", home=home)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["results"] == [{"text": "'hi there'"}] and res["language"] == "python"
    p = cli(server, "run", "python", "--json", "-c", "raise KeyError('k')", home=home)
    assert p.returncode == 1 and json.loads(p.stdout)["error"]["name"] == "KeyError"


def test_run_in_a_sandbox_context(server, home):
    box = "ctx-" + uuid.uuid4().hex[:8]
    assert cli(server, "run", "python", "--sandbox", box, "-c", "x = 41", home=home).returncode == 0
    p = cli(server, "run", "python", "--sandbox", box, "-c", "x + 1", home=home)
    assert (p.returncode, p.stdout) == (0, "42\n"), p.stderr
    cid = cli(server, "contexts", box, "create", "python", home=home).stdout.strip()
    p = cli(server, "run", "python", "-s", box, "--context", cid, "-c", "x", home=home)
    assert p.returncode == 1 and "NameError" in p.stderr  # a context of its own
    p = cli(server, "run", "python", "-s", box, "--context", "nope", "-c", "1", home=home)
    assert p.returncode == 1 and "CONTEXT_NOT_FOUND" in p.stderr


def test_run_usage_errors_exit_2(server, home):
    for args in (["run"], ["run", "python", "--bogus"], ["run", "python", "-c", "1", "file"],
                 ["run", "python", "--context", "c", "-c", "1"], ["run", "python", "-e", "NOEQUALS", "-c", "1"]):
        p = cli(server, *args, home=home)
        assert p.returncode == 2, (args, p.stderr)
        assert "sandboxd run:" in p.stderr
    p = cli(server, "run", "cobol", "-c", "x", home=home)
    assert p.returncode == 1 and "Unsupported language" in p.stderr


# ---- exec ----

def test_exec_exit_codes_env_cwd(server, home):
    box = bridge_id()
    p = cli(server, "exec", box, "--", "sh", "-c", "echo out; echo err >&2", home=home)
    assert (p.returncode, p.stdout, p.stderr) == (0, "out\n", "err\n")
    assert cli(server, "exec", box, "--", "sh", "-c", "exit 3", home=home).returncode == 3
    assert cli(server, "exec", box, "--", "sh", "-c", "kill -9 $$", home=home).returncode == 128 + 9
    assert cli(server, "exec", box, "--", "sh", "-c", "kill -TERM $$", home=home).returncode == 128 + 15
    assert cli(server, "exec", box, "--", "mkdir", "-p", "sub/dir", home=home).returncode == 0
    p = cli(server, "exec", box, "--cwd", "sub/dir", "-e", "A=1", "-e", "B=two words", "--",
            "sh", "-c", 'echo "$A|$B|$(pwd)"', home=home)
    assert (p.returncode, p.stdout) == (0, "1|two words|/workspace/sub/dir\n"), p.stderr
    # Without "--" the command starts at the second operand; its own
    # options are its own.
    p = cli(server, "exec", box, "ls", "-a", home=home)
    assert p.returncode == 0 and "sub" in p.stdout.split()
    p = cli(server, "exec", box, "--timeout", "300", "--", "sleep", "30", home=home)
    assert p.returncode == 124 and "timed out" in p.stderr


def test_exec_binary_output_and_json(server, home):
    box = bridge_id()
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "SANDBOXD_URL": f"http://127.0.0.1:{server.port}"}
    p = subprocess.run([SANDBOXD_BIN, "exec", box, "--", "printf", "a\\000b\\377"], capture_output=True, env=env,
                       timeout=60)
    assert (p.returncode, p.stdout) == (0, b"a\x00b\xff")
    p = cli(server, "exec", "--json", box, "--", "sh", "-c", "echo hi; exit 5", home=home)
    assert p.returncode == 5
    assert json.loads(p.stdout) == {"exit_code": 5, "stdout": "hi\n", "stderr": ""}


def test_exec_streams_as_it_comes(server, home):
    """The first line arrives while the command still runs: it waits for a
    file that only a second exec, started after we read that line, makes."""
    box = bridge_id()
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "SANDBOXD_URL": f"http://127.0.0.1:{server.port}"}
    script = "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second; exit 7"
    proc = subprocess.Popen([SANDBOXD_BIN, "exec", box, "--", "sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no output while the command runs"
        assert proc.stdout.readline() == b"first\n"
        assert proc.poll() is None
        assert cli(server, "exec", box, "--", "touch", "go", home=home).returncode == 0
        out, _ = proc.communicate(timeout=60)
        assert out == b"second\n" and proc.returncode == 7
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_exec_usage_and_server_errors(server, home):
    assert cli(server, "exec", home=home).returncode == 2
    assert cli(server, "exec", bridge_id(), home=home).returncode == 2
    assert cli(server, "exec", "x", "--timeout", "abc", "--", "true", home=home).returncode == 2
    p = cli(server, "exec", "Not_A_Bridge_Id", "--", "true", home=home)
    assert p.returncode == 1 and "Invalid sandbox ID format" in p.stderr


# ---- ls, rm, contexts ----

def test_global_options_before_the_command(server, home):
    sid = bridge_id()
    assert cli(server, "exec", sid, "--", "true", home=home).returncode == 0
    before = cli(server, "--json", "--url", f"http://127.0.0.1:{server.port}", "ls", home=home, url=False)
    after = cli(server, "ls", "--json", home=home)
    assert before.returncode == after.returncode == 0, before.stderr
    assert sid in [s["id"] for s in json.loads(before.stdout)["sandboxes"]]
    assert json.loads(before.stdout)["sandboxes"] == json.loads(after.stdout)["sandboxes"]


def test_ls_rm_round_trip(server, home):
    box = bridge_id()
    assert cli(server, "exec", box, "--", "sh", "-c", "mkdir -p d/e && echo hello > d/a.txt && touch .hid",
               home=home).returncode == 0
    p = cli(server, "ls", home=home)
    assert p.returncode == 0 and p.stdout.splitlines()[0].split()[:2] == ["ID", "CREATED"]
    assert any(line.split()[0] == box for line in p.stdout.splitlines()[1:])
    assert box in cli(server, "ls", "--ids", home=home).stdout.split()
    listing = json.loads(cli(server, "ls", "--json", home=home).stdout)
    assert set(listing) == {"sandboxes", "total"} and listing["total"] == len(listing["sandboxes"])
    mine = [s for s in listing["sandboxes"] if s["id"] == box]
    assert len(mine) == 1 and {"id", "createdAt", "lastUsed", "contexts"} <= set(mine[0])
    for lang in ("python", "python", "javascript"):
        assert cli(server, "contexts", box, "create", lang, home=home).returncode == 0
    row = [line for line in cli(server, "ls", home=home).stdout.splitlines() if line.startswith(box)]
    assert row[0].endswith("  3 (python, javascript)")

    p = cli(server, "ls", box, home=home)
    assert p.returncode == 0 and [line.split()[-1] for line in p.stdout.splitlines()] == ["d/"]
    assert ".hid" in cli(server, "ls", "-a", box + ":", home=home).stdout
    p = cli(server, "ls", box + ":d", home=home)
    assert sorted(line.split()[-1] for line in p.stdout.splitlines()) == ["a.txt", "e/"]
    p = cli(server, "ls", box + ":d/a.txt", home=home)
    assert p.returncode == 0 and p.stdout.split()[1] == "6" and p.stdout.split()[-1] == "a.txt"
    files = json.loads(cli(server, "ls", "--json", box + ":d", home=home).stdout)
    assert files["count"] == 2 and {f["name"]: f["type"] for f in files["files"]} == {"a.txt": "file", "e": "directory"}
    p = cli(server, "ls", box + ":nope", home=home)
    assert p.returncode == 1 and "FILE_NOT_FOUND" in p.stderr

    p = cli(server, "rm", box + ":d", home=home)
    assert p.returncode == 1 and "rm -r" in p.stderr
    assert cli(server, "rm", box + ":d/a.txt", home=home).returncode == 0
    assert cli(server, "rm", box + ":nope", home=home).returncode == 1
    assert cli(server, "rm", "-f", box + ":nope", home=home).returncode == 0
    p = cli(server, "rm", "--json", box + ":d", "-r", home=home)
    assert p.returncode == 0 and json.loads(p.stdout) == {"deleted": [box + ":d"], "failed": []}
    assert cli(server, "ls", box, home=home).stdout == ""

    p = cli(server, "rm", box, "nosuchbox", home=home)
    assert p.returncode == 1 and "no sandbox 'nosuchbox'" in p.stderr
    assert box not in cli(server, "ls", "--ids", home=home).stdout.split()
    p = cli(server, "ls", box, home=home)
    assert p.returncode == 1 and "no sandbox" in p.stderr
    assert cli(server, "rm", "-f", box, home=home).returncode == 0
    assert cli(server, "rm", home=home).returncode == 2


def test_rm_a_gateway_sandbox(server, home):
    box = "Gw_" + uuid.uuid4().hex[:8]
    assert cli(server, "run", "python", "--sandbox", box, "-c", "1", home=home).returncode == 0
    assert box in cli(server, "ls", "--ids", home=home).stdout.split()
    assert cli(server, "rm", box, home=home).returncode == 0
    assert box not in cli(server, "ls", "--ids", home=home).stdout.split()


def test_contexts_round_trip(server, home):
    box = bridge_id()
    p = cli(server, "contexts", box, home=home)
    assert p.returncode == 1 and "no sandbox" in p.stderr
    py = cli(server, "contexts", box, "create", "python", home=home)
    assert py.returncode == 0, py.stderr
    js = cli(server, "contexts", "--json", box, "create", "javascript", "--cwd", ".", home=home)
    assert js.returncode == 0, js.stderr
    js = json.loads(js.stdout)
    assert js["language"] == "javascript" and js["cwd"] == "/workspace"
    p = cli(server, "contexts", box, home=home)
    rows = [line.split() for line in p.stdout.splitlines()]
    assert rows[0][:2] == ["ID", "LANGUAGE"]
    assert sorted((r[0], r[1]) for r in rows[1:]) == sorted([(py.stdout.strip(), "python"), (js["id"], "javascript")])
    listed = json.loads(cli(server, "contexts", "--json", box, home=home).stdout)
    assert {c["id"] for c in listed["contexts"]} == {py.stdout.strip(), js["id"]}
    p = cli(server, "contexts", box, "rm", js["id"], "--json", home=home)
    assert p.returncode == 0 and json.loads(p.stdout) == {"deleted": [js["id"]]}
    p = cli(server, "contexts", box, "rm", js["id"], home=home)
    assert p.returncode == 1 and "no context" in p.stderr
    assert [c["id"] for c in json.loads(cli(server, "contexts", "--json", box, home=home).stdout)["contexts"]] == \
        [py.stdout.strip()]
    for bad in (["contexts"], ["contexts", box, "frob"], ["contexts", box, "create"], ["contexts", box, "rm"]):
        assert cli(server, *bad, home=home).returncode == 2, bad
    p = cli(server, "contexts", box, "create", "cobol", home=home)
    assert p.returncode == 1 and "Unsupported language" in p.stderr


# ---- keys (the controller API) ----

def register(server):
    body = {"first_name": "Ada", "last_name": "Lovelace", "organization_name": "CLI Co",
            "email": f"cli-{uuid.uuid4().hex[:10]}@example.com", "password": "SecurePassword123!",
            "use_case": "tests"}
    status, res, _ = server.post("/api/v1/register", body)
    assert status == 201, res
    return res


def test_keys_round_trip(server, home):
    acct = register(server)
    key = acct["api_key"]["key"]
    p = cli(server, "keys", "--key", key, home=home)
    assert p.returncode == 0, p.stderr
    assert acct["api_key"]["id"] in p.stdout and key not in p.stdout
    p = cli(server, "keys", "--key", key, "create", "ci", home=home)
    assert p.returncode == 0 and p.stdout.startswith("sk_")
    new = p.stdout.strip()
    listing = json.loads(cli(server, "keys", "--json", "--key", new, home=home).stdout)
    assert [k["name"] for k in listing["data"]] == ["Default API Key", "ci"]
    ci = listing["data"][1]["id"]
    p = cli(server, "keys", "--key", key, "regenerate", ci, home=home)
    assert p.returncode == 0 and p.stdout.startswith("sk_") and p.stdout.strip() != new
    regenerated = p.stdout.strip()
    p = cli(server, "keys", "--key", new, home=home)  # the old secret is dead
    assert p.returncode == 1 and "not a controller credential" in p.stderr
    p = cli(server, "keys", "--json", "--key", regenerated, "rm", ci, home=home)
    assert p.returncode == 0 and json.loads(p.stdout) == {"id": ci, "revoked": True}
    assert cli(server, "keys", "--key", regenerated, home=home).returncode == 1
    # A session token is a controller credential too.
    assert cli(server, "keys", "--key", acct["token"], home=home).returncode == 0
    p = cli(server, "keys", home=home)
    assert p.returncode == 1 and "needs a controller credential" in p.stderr
    assert cli(server, "keys", "--key", key, "frob", "x", home=home).returncode == 2


# ---- configuration: flag > env > config file > default ----

@pytest.fixture(scope="module")
def keyed():
    d = Daemon(sets=list(FAST_LIMITS) + ["api_key=cli-right-key", "pool.size=0"])
    yield d
    d.cleanup()


def write_config(home, text):
    os.makedirs(os.path.join(home, ".config", "sandboxd"), exist_ok=True)
    with open(os.path.join(home, ".config", "sandboxd", "client.conf"), "w") as f:
        f.write(text)


def test_config_precedence(keyed, home):
    conf_home = tempfile.mkdtemp(prefix="sandboxd-cli-conf-", dir=home)
    url = f"http://127.0.0.1:{keyed.port}"
    dead = "http://127.0.0.1:1"

    def ok(*extra, env=None):
        p = cli(keyed, "ls", "--ids", *extra, home=conf_home, url=False, extra_env=env)
        return p.returncode == 0, p.stderr

    # No key: the daemon refuses; the message is the server's.
    p = cli(keyed, "ls", home=conf_home)
    assert p.returncode == 1 and "UNAUTHORIZED" in p.stderr
    # The config file alone: url and key.
    write_config(conf_home, f"# client\nurl = {url}\nkey = cli-right-key\n")
    assert ok() == (True, "")
    # env beats the config file, for the url and for the key.
    assert not ok(env={"SANDBOXD_URL": dead})[0]
    assert not ok(env={"SANDBOXD_API_KEY": "wrong"})[0]
    assert ok(env={"SANDBOX_API_KEY": "cli-right-key", "SANDBOXD_URL": url})[0]
    # flags beat env.
    assert ok("--url", url, env={"SANDBOXD_URL": dead})[0]
    assert ok("--key", "cli-right-key", env={"SANDBOXD_API_KEY": "wrong"})[0]
    assert not ok("--key", "wrong", env={"SANDBOXD_API_KEY": "cli-right-key"})[0]
    assert not ok("--url=" + dead)[0]
    # SANDBOXD_CLIENT_CONFIG names another file.
    other = os.path.join(conf_home, "other.conf")
    with open(other, "w") as f:
        f.write(f"url = {dead}\n")
    assert not ok(env={"SANDBOXD_CLIENT_CONFIG": other})[0]
    # A config file that is wrong is an error, not ignored.
    write_config(conf_home, "colour = blue\n")
    p = cli(keyed, "ls", home=conf_home, url=False)
    assert p.returncode == 2 and "unknown key 'colour'" in p.stderr
    # Nothing at all: the local server at its default address.
    os.remove(os.path.join(conf_home, ".config", "sandboxd", "client.conf"))
    p = cli(keyed, "ls", "--ids", home=conf_home, url=False)
    assert p.returncode == 0 or "127.0.0.1:8787" in p.stderr, p.stderr


def test_no_server_is_said_clearly(server, home):
    p = cli(server, "run", "python", "-c", "1", "--url", "http://127.0.0.1:1", home=home)
    assert p.returncode == 1 and "is the server running" in p.stderr
    p = cli(server, "ls", "--url", "ftp://x", home=home)
    assert p.returncode == 2 and "http://" in p.stderr


# ---- help and completion ----

@pytest.mark.parametrize("cmd", ["run", "exec", "ls", "rm", "contexts", "keys", "completion"])
def test_help_of_every_command(server, home, cmd):
    for args in ([cmd, "--help"], [cmd, "-h"], ["help", cmd]):
        p = cli(server, *args, home=home, url=False)
        assert p.returncode == 0, (args, p.stderr)
        assert p.stdout.startswith(f"Usage: sandboxd {cmd}") and "--json" in p.stdout, args
    assert "Examples:" in cli(server, cmd, "--help", home=home).stdout


def test_help_lists_the_commands(server, home):
    p = cli(server, "help", home=home)
    assert p.returncode == 0
    for cmd in ("run", "exec", "cp", "shell", "ls", "rm", "contexts", "keys", "completion"):
        assert f"  {cmd} " in p.stdout


def test_bash_completion(server, home):
    script = cli(server, "completion", "bash", home=home)
    assert script.returncode == 0
    assert cli(server, "completion", "zsh", home=home).returncode == 2
    box = bridge_id()
    assert cli(server, "exec", box, "--", "true", home=home).returncode == 0
    bindir = tempfile.mkdtemp(prefix="bin-", dir=home)
    os.symlink(SANDBOXD_BIN, os.path.join(bindir, "sandboxd"))
    probe = (
        "source <(sandboxd completion bash) && complete -p sandboxd\n"
        't() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _sandboxd;'
        ' echo "${COMPREPLY[*]}"; }\n'
        "t sandboxd con\n"
        "t sandboxd exec --t\n"
        f"t sandboxd exec {box[:12]}\n"
        "t sandboxd run pe\n"
        "t sandboxd contexts x create ru\n"
        "t sandboxd keys re\n"
    )
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": home, "SANDBOXD_URL": f"http://127.0.0.1:{server.port}"}
    p = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "complete -o default -F _sandboxd sandboxd"
    assert lines[1:] == ["contexts", "--timeout", box, "perl", "ruby", "regenerate"]
