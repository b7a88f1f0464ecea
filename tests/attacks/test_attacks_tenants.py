"""Attack suite, rows 33-39: network, secrets, other sandboxes, shared files (the security checklist of peers.md section 6;
one test per row, split by area: test_attacks_*.py).

The suite's method and conventions: attack_common.py."""

from attack_common import *  # noqa: F401,F403 (the suite's shared helpers)


# ---- 33-39: network, secrets, other sandboxes, shared files -------------


def test_row_33_egress_when_disabled(daemon):
    out = value(run(daemon, f"""
import socket, subprocess
r = {{}}
for name, fam, addr in [('dns', socket.AF_INET, ('1.1.1.1', 53)), ('daemon', socket.AF_INET, ('127.0.0.1', {daemon.port})),
                        ('v6', socket.AF_INET6, ('2606:4700:4700::1111', 53)), ('lo6', socket.AF_INET6, ('::1', {daemon.port}))]:
    for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        try:
            s = socket.socket(fam, typ)
            s.settimeout(1)
            s.connect(addr)
            s.send(b'x')
            r[name + str(int(typ))] = 'connected'
        except OSError as e:
            r[name + str(int(typ))] = e.errno
try:
    socket.getaddrinfo('example.com', 80); r['getaddrinfo'] = 'resolved'
except OSError as e:
    r['getaddrinfo'] = 'failed'
r['curl'] = subprocess.run(['/bin/sh', '-c', 'command -v curl >/dev/null && curl -s -m 2 http://1.1.1.1/ || exit 7'],
                           capture_output=True).returncode
r
"""))
    assert out.pop("getaddrinfo") == "failed"
    assert out.pop("curl") != 0
    assert all(v != "connected" for v in out.values()), out
    res = run(daemon, f"const net = require('net');\n"
                      f"await new Promise(ok => {{ const s = net.connect({daemon.port}, '127.0.0.1'); "
                      f"s.on('connect', () => ok('connected')); s.on('error', e => ok(e.code)); }})",
              lang="javascript")
    assert "connected" not in json.dumps(res["results"]), res


def test_row_34_metadata_and_internal_targets(daemon):
    out = value(run(daemon, f"""
import socket, os
r = {{}}
for addr in [('169.254.169.254', 80), ('169.254.170.2', 80), ('10.0.0.1', 80), ('192.168.0.1', 80),
             ('172.17.0.1', 2375), ('127.0.0.1', {daemon.port}), ('127.0.0.53', 53)]:
    try:
        s = socket.create_connection(addr, timeout=1); r[addr[0]] = 'connected'
    except OSError as e:
        r[addr[0]] = e.errno
socks = []
for top in ('/tmp', '/workspace', '/run', '/var', '/dev', '/etc', '/opt'):
    for dp, dn, fn in os.walk(top):
        for n in fn:
            try:
                if __import__('stat').S_ISSOCK(os.lstat(os.path.join(dp, n)).st_mode):
                    socks.append(os.path.join(dp, n))
            except OSError:
                pass
r['sockets'] = socks
r['run'] = os.path.exists('/run') or os.path.exists('/var/run')
r
"""))
    assert out.pop("sockets") == [] and out.pop("run") is False
    assert all(v != "connected" for v in out.values()), out


def test_row_35_allowlist_bypass():
    pytest.skip("no network-enabled mode yet: executions never have egress, so there is no allowlist to bypass")


def test_row_36_odd_socket_families(daemon):
    out = value(run(daemon, """
import socket
r = {}
for name, fam, typ, proto in [('vsock', 40, 1, 0), ('netlink_route', 16, 3, 0), ('netlink_audit', 16, 3, 9),
                              ('netlink_uevent', 16, 2, 15), ('packet', 17, 3, 768), ('raw_inet', 2, 3, 255),
                              ('raw_inet6', 10, 3, 58), ('alg', 38, 5, 0), ('tipc', 30, 5, 0), ('rds', 21, 5, 0),
                              ('can', 29, 3, 1), ('bluetooth', 31, 3, 0), ('xdp', 44, 3, 0), ('key', 15, 3, 2),
                              ('inet_dgram', 2, 2, 0), ('unix_pair', 1, 1, 0)]:
    try:
        socket.socket(fam, typ, proto).close(); r[name] = 'open'
    except OSError as e:
        r[name] = e.errno
for fam in (2, 10, 16, 40):
    try:
        socket.socketpair(fam, 1); r['pair_%d' % fam] = 'open'
    except OSError as e:
        r['pair_%d' % fam] = e.errno
r
"""))
    assert out.pop("unix_pair") == "open"
    for k, v in out.items():
        assert v == EAFNOSUPPORT, (k, v)


def test_row_37_secret_env_leakage(daemon):
    with open(f"/proc/{daemon.proc.pid}/environ", "rb") as f:
        assert DAEMON_SECRET.encode() in f.read()  # the daemon really has it
    probes = {
        "python": "import os, subprocess\n"
                  "def own_environ():\n"
                  "    try:\n"
                  "        return open('/proc/self/environ', 'rb').read().replace(b'\\0', b' ').decode()\n"
                  "    except OSError as e:\n"
                  "        return str(e.errno)\n"
                  "[dict(os.environ), own_environ(), "
                  "subprocess.run(['env'], capture_output=True, text=True).stdout, "
                  "subprocess.run(['/bin/sh', '-c', 'tr \"\\\\000\" \" \" < /proc/$$/environ; set'], capture_output=True, text=True).stdout]",
        "javascript": "JSON.stringify([process.env, require('child_process').execSync('env').toString()])",
        "perl": "join(';', map { \"$_=$ENV{$_}\" } sort keys %ENV) . `env`",
        "ruby": "ENV.to_h.to_s + `env`",
    }
    for lang, code in probes.items():
        res = run(daemon, code, lang=lang)
        dumped = json.dumps(res["results"]) + json.dumps(res["logs"])
        assert "error" not in res, res
        assert DAEMON_SECRET not in dumped and DAEMON_SECRET_NAME not in dumped, (lang, dumped[:500])
        assert "SANDBOXD" not in dumped, (lang, dumped[:500])
    # Nor through the daemon's command line (init is a clone of the daemon).
    out = value(run(daemon, "import os\n[open(f'/proc/{p}/{f}', 'rb').read().replace(b'\\0', b' ').decode(errors='replace') "
                            "for p in os.listdir('/proc') if p.isdigit() for f in ('cmdline', 'comm')]"))
    for c in out:
        assert daemon.data_dir not in c and "--set" not in c and ROOT not in c, out
    # Per-request env vars stay with their request.
    assert value(run(daemon, "import os\nos.environ['TOKEN']", envVars={"TOKEN": "t-123"})) == "'t-123'"
    assert value(run(daemon, "import os\nrepr(os.environ.get('TOKEN'))")) == "'None'"
    # Per-sandbox env vars stay with their sandbox.
    a, b = sid(), sid()
    try:
        status, _, _ = daemon.post(f"/languages/python/sandboxes/{a}/env", {"envVars": {"SBX_TOKEN": "only-a"}})
        assert status in (200, 201)
        assert value(sbx(daemon, a, "import os\nos.environ.get('SBX_TOKEN')")) == "'only-a'"
        assert value(sbx(daemon, b, "import os\nrepr(os.environ.get('SBX_TOKEN'))")) == "'None'"
    finally:
        delete_sandbox(daemon, a)
        delete_sandbox(daemon, b)


def test_row_38_cross_sandbox_access(daemon):
    a, b = sid(), sid()
    marker = f"crossprobe{uuid.uuid4().hex[:8]}"
    try:
        res = sbx(daemon, a, f"""
import subprocess
open('/workspace/secret.txt', 'w').write('{marker}')
open('/tmp/secret.txt', 'w').write('{marker}')
subprocess.Popen(['/bin/sh', '-c', 'sleep 20; : {marker}'])
1
""")
        assert value(res) == "1"
        if IS_ROOT:  # rootless jails run as the invoking user on the host
            assert wait_jail_procs(marker)
        probe = f"""
import os
r = {{'ws': os.listdir('/workspace'), 'tmp': os.listdir('/tmp')}}
hits = []
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            if b'{marker}' in open(f'/proc/{{p}}/cmdline', 'rb').read():
                hits.append(p)
        except OSError:
            pass
r['proc_hits'] = hits
r['uid'] = os.getuid()
found = []
for top in ('/workspace', '/tmp', '/opt', '/etc', '/dev'):
    for dp, dn, fn in os.walk(top):
        for n in fn:
            try:
                if b'{marker}' in open(os.path.join(dp, n), 'rb').read(4096):
                    found.append(os.path.join(dp, n))
            except OSError:
                pass
r['found'] = found
r
"""
        # Two stateless executions (which may fork from the same warm
        # template) share nothing either.
        value(run(daemon, f"open('/tmp/{marker}', 'w').write('{marker}')\n"
                          f"open('/workspace/{marker}', 'w').write('{marker}')\n"
                          f"open('/dev/shm/{marker}.shm', 'w').write('{marker}')\n1"))
        for res in (sbx(daemon, b, probe), run(daemon, probe)):
            out = value(res)
            assert "secret.txt" not in out["ws"] and "secret.txt" not in out["tmp"], out
            assert not any(marker in n for n in out["ws"] + out["tmp"]), out
            assert out["proc_hits"] == [] and out["found"] == [], out
        # B's files API cannot name A's workspace.
        for p in (f"../{a}/secret.txt", f"/workspace/../mnt/{a}/secret.txt", f"../../sandboxes/{a}/workspace.img"):
            status, body = files(daemon, b, op="read", path=p)
            assert status == 403 and marker not in json.dumps(body), body
        status, body = files(daemon, b, op="exists", path="secret.txt")
        assert status == 200 and body["exists"] is False
        if IS_ROOT:
            # On the host, a workspace is reachable only by root (0700 dirs).
            st = os.stat(os.path.join(daemon.data_dir, "sandboxes", a))
            assert stat.S_IMODE(st.st_mode) & 0o077 == 0, oct(st.st_mode)
    finally:
        delete_sandbox(daemon, a)
        delete_sandbox(daemon, b)
    assert_no_jail_procs(marker)


def test_row_38_abstract_unix_sockets_between_sandboxes(daemon):
    # Row 38 continued: every jail shares one empty network namespace, where
    # abstract unix sockets live; Landlock scoping must wall them off.
    a, b = sid(), sid()
    name = f"sbx-attack-{uuid.uuid4().hex[:8]}"
    try:
        res = sbx(daemon, a, f"""
import socket, threading
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind('\\0{name}')
srv.listen(8)
accepted = []
def loop():
    while True:
        c, _ = srv.accept()
        accepted.append(c.recv(64))
        c.close()
threading.Thread(target=loop, daemon=True).start()
# control: the same domain can connect
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect('\\0{name}')
c.send(b'self')
c.close()
'bound'
""")
        assert value(res) == "'bound'"
        attack = f"""
import socket
r = {{}}
for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    try:
        c = socket.socket(socket.AF_UNIX, typ)
        c.connect('\\0{name}')
        c.send(b'intruder')
        r[str(int(typ))] = 'connected'
    except OSError as e:
        r[str(int(typ))] = e.errno
r
"""
        for res in (sbx(daemon, b, attack), run(daemon, attack)):
            out = value(res)
            assert all(v != "connected" for v in out.values()), out
            # EPERM: Landlock's abstract-socket scope (shared network
            # namespace); ECONNREFUSED: the name does not exist in the
            # caller's own network namespace.
            assert out[str(int(socket.SOCK_STREAM))] in (EPERM, 111), out
        time.sleep(0.2)
        got = value(sbx(daemon, a, "accepted"))
        assert "intruder" not in str(got) and "self" in str(got), got
    finally:
        delete_sandbox(daemon, a)
        delete_sandbox(daemon, b)


def test_row_39_tampering_with_shared_runtimes(daemon):
    kernels = os.path.join(ROOT, "src", "runtimes", "kernels")
    before = {n: os.stat(os.path.join(kernels, n)).st_mtime_ns for n in os.listdir(kernels)}
    out = value(run(daemon, """
import os, glob
r = {}
pylib = glob.glob('/usr/lib/python3*/os.py')[0]
targets = [('append', pylib), ('create', os.path.dirname(pylib) + '/evil_sitecustomize.py'),
           ('append', '/opt/sandboxd/kernels/python_kernel.py'), ('create', '/opt/sandboxd/kernels/evil.py'),
           ('append', '/usr/bin/python3'), ('create', '/usr/lib/node_modules_evil'),
           ('append', '/etc/ld.so.cache'), ('create', '/etc/ld.so.preload'), ('create', '/usr/local/evil')]
for how, p in targets:
    try:
        open(p, 'a' if how == 'append' else 'x').write('# pwned')
        r[p] = 'written'
    except OSError as e:
        r[p] = e.errno
for p in ('/usr/bin/python3', '/opt/sandboxd/kernels/python_kernel.py'):
    try:
        os.chmod(p, 0o777); r['chmod ' + p] = 'changed'
    except OSError as e:
        r['chmod ' + p] = e.errno
    try:
        os.rename(p, '/tmp/x'); r['rename ' + p] = 'moved'
    except OSError as e:
        r['rename ' + p] = e.errno
    try:
        os.utime(p); r['utime ' + p] = 'touched'
    except OSError as e:
        r['utime ' + p] = e.errno
r['readonly'] = {m: bool(os.statvfs(m).f_flag & os.ST_RDONLY)
                 for m in ('/', '/usr', '/usr/lib', '/opt/sandboxd/kernels', '/etc/ssl', '/etc/ld.so.cache')}
r
"""))
    ro = out.pop("readonly")
    for k, v in out.items():
        # EACCES comes first for root-owned files (permission is checked
        # before the mount's read-only flag), EROFS where it is reached.
        assert v in (EROFS, EPERM, EACCES, EXDEV), (k, v)
    # And the trees are read-only mounts, not merely root-owned.
    assert all(ro.values()), ro
    after = {n: os.stat(os.path.join(kernels, n)).st_mtime_ns for n in os.listdir(kernels)}
    assert after == before
    # A runtime still works normally afterwards.
    assert value(run(daemon, "import os\nos.sep")) == "'/'"
