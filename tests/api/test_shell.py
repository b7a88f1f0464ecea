"""POST /execute/shell: `bash -c CODE` in a fresh jail per request (the
process model, no kernel), answered as an ExecutionResult like every other
language. A non-zero exit is the guest's error ("ExitError")."""
import pytest


def sh(daemon, code, **extra):
    res = daemon.execute("shell", code, **extra)
    assert res["language"] == "shell"
    assert res["results"] == []
    return res


def out(res):
    return res["logs"]["stdout"]


def test_echo_hi(daemon):
    res = sh(daemon, "echo hi")
    assert out(res) == ["hi"]
    assert res["logs"]["stderr"] == []
    assert "error" not in res
    assert res["engine"].startswith("Bash 5")
    assert res["code"] == "echo hi"
    assert res["usage"]["fuelConsumed"] > 0 and res["usage"]["memoryBytes"] > 0


def test_stderr_and_exit_status(daemon):
    res = sh(daemon, "echo before; echo oops >&2; exit 3")
    assert out(res) == ["before"]
    assert res["logs"]["stderr"] == ["oops"]
    assert res["error"]["name"] == "ExitError"
    assert res["error"]["message"] == "exit status 3"
    assert res["error"]["exitCode"] == 3
    # A failing command without exit is the same thing.
    res = sh(daemon, "false")
    assert res["error"]["exitCode"] == 1


def test_killed_by_signal(daemon):
    res = sh(daemon, "kill -TERM $$")
    assert res["error"]["name"] == "ExitError"
    assert res["error"]["message"] == "killed by signal 15"
    assert res["error"]["signal"] == 15


def test_aliases_and_unknown_language(daemon):
    status, res, _ = daemon.post("/execute/bash", {"code": "echo $0"})
    assert status == 200 and res["language"] == "shell" and res["logs"]["stdout"] == ["/bin/bash"]
    status, res, _ = daemon.post("/execute/zsh", {"code": "echo hi"})
    assert status == 400
    assert res["code"] == "VALIDATION_FAILED" and res["message"] == "Unsupported language: zsh"
    # Sandboxes hold kernels; a shell has none.
    status, res, _ = daemon.post("/languages/shell/sandboxes/shell1/execute", {"code": "echo hi"})
    assert status == 400 and res["message"] == "Unsupported language: shell"


def test_stdin_is_not_the_hosts(daemon):
    res = sh(daemon, "readlink /proc/self/fd/0; stat -L -c '%t:%T' /proc/self/fd/0; "
                     "[ -t 0 ] && echo tty; cat; echo rc=$?")
    # /dev/null (char device 1:3): EOF at once, no terminal.
    assert out(res) == ["/dev/null", "1:3", "rc=0"]


def test_runs_as_nobody(daemon):
    res = sh(daemon, "id -u; id -g; id -G; cat /proc/self/status | grep -E '^Cap(Eff|Prm):'")
    lines = out(res)
    assert lines[:3] == ["65534", "65534", "65534"]
    assert all(l.split()[1] == "0000000000000000" for l in lines[3:]), lines
    assert len(lines) == 5


def test_no_network(daemon):
    res = sh(daemon, f"""
for a in 1.1.1.1/53 127.0.0.1/{daemon.port}; do
  if (exec 3<>/dev/tcp/$a) 2>/dev/null; then echo connected $a; else echo refused $a; fi
done
awk 'NR>2 {{print $1}}' /proc/net/dev
""")
    assert out(res) == ["refused 1.1.1.1/53", f"refused 127.0.0.1/{daemon.port}", "lo:"]


def test_cannot_see_host_processes(daemon):
    res = sh(daemon, "for d in /proc/[0-9]*; do echo ${d#/proc/}; done; cat /proc/1/cmdline | tr -d '\\0'; echo")
    pids = [int(p) for p in out(res)[:-1]]
    # Only the jail's own tree: its init (1), bash, and bash's subshells.
    assert 1 in pids and max(pids) < 20, pids
    assert len(pids) <= 5, pids
    assert "sandboxd" not in "".join(out(res))


def test_fresh_jail_per_request(daemon):
    res = sh(daemon, "echo secret > /tmp/f; echo keep > /workspace/f; ls /tmp /workspace")
    assert "error" not in res, res
    res = sh(daemon, "ls -A /tmp /workspace; cat /tmp/f /workspace/f 2>&1; true")
    assert "secret" not in out(res) and "keep" not in out(res)
    assert "/tmp:" in out(res) and "/workspace:" in out(res)


def test_env_vars(daemon):
    res = sh(daemon, 'echo "$GREETING, $WHO"; echo $HOME', envVars={"GREETING": "hello", "WHO": "world"})
    assert out(res) == ["hello, world", "/tmp"]


def test_output_limits(daemon):
    res = sh(daemon, "yes x")
    assert res["error"]["name"] == "ExecutionLimitError"
    assert "Output limit" in res["error"]["message"]
    assert sum(len(l) + 1 for l in out(res)) <= 32 * 1024 + 1
    # limits.output_entries = 200 lines of stdout+stderr, as for kernels.
    res = sh(daemon, "seq 1 199; echo last >&2")
    assert "error" not in res and len(out(res)) == 199 and res["logs"]["stderr"] == ["last"]
    res = sh(daemon, "seq 1 200; echo last >&2")
    assert res["error"]["name"] == "ExecutionLimitError"
    assert "Output limit" in res["error"]["message"]


def test_wall_limit(daemon):
    res = sh(daemon, "echo start; sleep 30")
    assert out(res) == ["start"]
    assert res["error"]["name"] == "ExecutionLimitError"
    assert "Wall-clock" in res["error"]["message"]
    assert res["durationMs"] < 10000


def test_languages_lists_shell(daemon):
    status, body, _ = daemon.get("/languages")
    assert status == 200
    ids = [l["id"] for l in body["languages"]]
    assert "shell" in ids and ids[0] == "javascript"
    shell = next(l for l in body["languages"] if l["id"] == "shell")
    assert shell["enabled"] is True and shell["contexts"] is False
    assert shell["package"] == "bash" and shell["engine"].startswith("Bash")
    status, body, _ = daemon.get("/runtimes/shell/interpreter")
    assert status == 200 and body["language"] == "shell" and body["contexts"] is False


def test_pool_keys_are_checked_against_runtimes():
    """pool.<lang> is a table in the config: any well-formed id parses, and
    the daemon refuses to start on one that names no runtime (shell is one:
    its pool holds pre-spawned jails, each for one fresh bash)."""
    import subprocess
    import tempfile
    from conftest import BIN, Daemon
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([BIN, "--data-dir", tmp, "--set", "pool.cobol=1"], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and "pool.cobol: unknown language" in r.stderr
    d = Daemon(sets=["pool.size=0", "pool.shell=3", "pool.perl=1"])
    try:
        status, body, _ = d.get("/ready")
        assert status == 200
        assert body["pools"]["shell"]["target"] == 3
        assert body["pools"]["perl"]["target"] == 1 and body["pools"]["python"]["target"] == 0
        assert d.execute("shell", "echo ok")["logs"]["stdout"] == ["ok"]
    finally:
        d.cleanup()
