"""Attack suite, rows 23-32: kernel surfaces (the security checklist of peers.md section 6;
one test per row, split by area: test_attacks_*.py).

The suite's method and conventions: attack_common.py."""

from attack_common import *  # noqa: F401,F403 (the suite's shared helpers)


# ---- 23-32: kernel surfaces -------------------------------------------


def _mountinfo_clean(text, daemon):
    for host_path in (ROOT, daemon.data_dir, "/work/", os.path.dirname(daemon.data_dir) + "/sandboxd-",
                      "process_api", "jailroot"):
        assert host_path not in text, (host_path, text)


def test_row_23_proc_leaks(daemon):
    probe = """
import os
r = {}
for p in ['/proc/kcore', '/proc/kallsyms', '/proc/sched_debug', '/proc/keys', '/proc/timer_list',
          '/proc/sysrq-trigger', '/proc/kmsg', '/proc/modules', '/proc/iomem', '/proc/1/environ']:
    try:
        r[p] = len(open(p, 'rb').read(4096))
    except OSError as e:
        r[p] = e.errno
envs = []
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            envs.append(open(f'/proc/{p}/environ', 'rb').read().replace(b'\\0', b'\\n').decode(errors='replace'))
        except OSError:
            pass
r['envs'] = envs
try:
    open('/proc/sys/kernel/hostname', 'w').write('x'); r['procsys'] = 'written'
except OSError as e:
    r['procsys'] = e.errno
try:
    st = os.stat('/proc/sysrq-trigger')
    r['sysrq_is_null'] = os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3
    open('/proc/sysrq-trigger', 'w').write('h')  # 'h' (help) is harmless even if it got through
    r['sysrq'] = 'written'
except OSError as e:
    r['sysrq'] = e.errno
r['mountinfo'] = open('/proc/self/mountinfo').read()
r['cgroup'] = open('/proc/self/cgroup').read()
r
"""
    out = value(run(daemon, probe))
    for p in ("/proc/kcore", "/proc/kallsyms", "/proc/sched_debug", "/proc/keys", "/proc/timer_list",
              "/proc/kmsg", "/proc/modules", "/proc/iomem"):
        assert out[p] in (0, ENOENT, EACCES, EPERM), (p, out[p])  # masked, absent or unreadable
    assert out["/proc/1/environ"] == EACCES
    assert not any(DAEMON_SECRET in e for e in out["envs"])
    assert out["procsys"] in (EROFS, EACCES), out["procsys"]
    # Absent, refused, or masked by /dev/null (where a write goes nowhere).
    assert out["sysrq"] in (ENOENT, EACCES, EROFS) or out.get("sysrq_is_null") is True, out["sysrq"]
    _mountinfo_clean(out["mountinfo"], daemon)
    # cgroup namespace: the job sees paths relative to its own namespace
    # root ("/", or "/../<sibling>" when moved after the unshare), never the
    # host hierarchy.
    for line in out["cgroup"].splitlines():
        path = line.split(":", 2)[2]
        assert path == "/" or path.startswith("/.."), out["cgroup"]
        assert "sandboxd" not in path and "process_api" not in path, out["cgroup"]

    # The same from a sandbox context, and from a cell that runs while the
    # context's journal is replayed into a fresh interpreter (the replay
    # overlay): it stores what it saw in /tmp for the next cell to read.
    s = sid()
    try:
        res = sbx(daemon, s, "import os\nx = 1\nopen('/tmp/mi', 'w').write(open('/proc/self/mountinfo').read())\n"
                             "open('/proc/self/mountinfo').read()")
        _mountinfo_clean(value(res), daemon)
        # A limit kill discards the interpreter; the next cell replays.
        limit_error(sbx(daemon, s, "x = bytearray(1 << 30)\nx[::4096] = b'a' * (len(x) // 4096)"), "Memory limit")
        res = sbx(daemon, s, "[x, open('/tmp/mi').read()]")
        x, replayed = value(res)
        assert x == 1
        _mountinfo_clean(replayed, daemon)
    finally:
        delete_sandbox(daemon, s)


@needs_x86_64
def test_row_24_sys_and_cgroupfs(daemon):
    out = value(run(daemon, SYSCALLS + """
r = {'sys': os.path.exists('/sys'), 'sysfs_cgroup': os.path.exists('/sys/fs/cgroup')}
os.makedirs('/tmp/m', exist_ok=True)
r['mount_sysfs'] = sc(165, b'sysfs', b'/tmp/m', b'sysfs', 0, 0)
r['mount_cgroup2'] = sc(165, b'cgroup2', b'/tmp/m', b'cgroup2', 0, 0)
r['mount_cgroup1'] = sc(165, b'cgroup', b'/tmp/m', b'cgroup', 0, b'memory')
r['fsopen_cgroup2'] = sc(430, b'cgroup2', 0)
r['tmp_m'] = os.listdir('/tmp/m')
for p in ['/proc/sys/vm/overcommit_memory', '/proc/sys/kernel/pid_max', '/proc/self/oom_score_adj']:
    try:
        with open(p, 'w') as f:
            f.write('-1000' if 'oom' in p else '1')
        r[p] = 'written'
    except OSError as e:
        r[p] = e.errno
r
"""))
    assert out["sys"] is False and out["sysfs_cgroup"] is False, out
    for k in ("mount_sysfs", "mount_cgroup2", "mount_cgroup1", "fsopen_cgroup2"):
        assert out[k] == [-1, EPERM], (k, out)
    assert out["tmp_m"] == []
    assert out["/proc/sys/vm/overcommit_memory"] in (EROFS, EACCES)
    assert out["/proc/sys/kernel/pid_max"] in (EROFS, EACCES)
    # Lowering oom_score_adj below 0 needs CAP_SYS_RESOURCE.
    assert out["/proc/self/oom_score_adj"] == EACCES


@needs_x86_64
def test_row_25_dev_minimal(daemon):
    out = value(run(daemon, SYSCALLS + """
import stat
r = {'dev': sorted(os.listdir('/dev'))}
r['mknod'] = sc(133, b'/tmp/mem', stat.S_IFCHR | 0o666, os.makedev(1, 1))
r['mknod_ws'] = sc(133, b'/workspace/sda', stat.S_IFBLK | 0o666, os.makedev(8, 0))
try:
    open('/dev/evil', 'w'); r['devwrite'] = 'created'
except OSError as e:
    r['devwrite'] = e.errno
opened = {}
for d in ['mem', 'kmem', 'port', 'kmsg', 'vda', 'sda', 'nvme0n1', 'kvm', 'vsock', 'vhost-vsock', 'loop0',
          'loop-control', 'net/tun', 'fuse', 'console', 'tty0', 'ptmx', 'tty', 'mapper/control', 'dri/card0', 'cpu/0/msr']:
    try:
        os.close(os.open('/dev/' + d, os.O_RDONLY)); opened[d] = 'opened'
    except OSError as e:
        opened[d] = e.errno
r['opened'] = opened
r['null'] = open('/dev/null', 'w').write('x')
r['urandom'] = len(open('/dev/urandom', 'rb').read(8))
r
"""))
    allowed = {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "fd", "stdin", "stdout",
               "stderr", "shm", "core", "mqueue"}
    assert set(out["dev"]) <= allowed, out["dev"]
    assert out["mknod"] == [-1, EPERM] and out["mknod_ws"] == [-1, EPERM], out
    assert out["devwrite"] in (EROFS, EACCES)
    assert all(v != "opened" for v in out["opened"].values()), out["opened"]
    assert out["null"] == 1 and out["urandom"] == 8


@needs_x86_64
def test_row_26_ptrace_and_process_vm(daemon):
    out = value(run(daemon, SYSCALLS + """
import time
r = {}
child = os.fork()
if child == 0:
    time.sleep(5)
    os._exit(0)
buf = ctypes.create_string_buffer(64)
class iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)   # same address in the forked child
r['attach_child'] = sc(101, 16, child, 0, 0)            # PTRACE_ATTACH: same uid, only seccomp stops it
r['seize_child'] = sc(101, 0x4206, child, 0, 0)
r['attach_init'] = sc(101, 16, 1, 0, 0)
r['traceme'] = sc(101, 0, 0, 0, 0)
r['vm_readv'] = sc(310, child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
r['vm_writev'] = sc(311, child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
r['vm_readv_init'] = sc(310, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
r['kcmp'] = sc(312, os.getpid(), child, 0, 0, 0)
r['pidfd_getfd'] = sc(438, sc(434, child, 0)[0], 0, 0)
try:
    open('/proc/1/mem', 'rb').read(1); r['init_mem'] = 'read'
except OSError as e:
    r['init_mem'] = e.errno
os.kill(child, 9)
os.waitpid(child, 0)
r
"""))
    for k in ("attach_child", "seize_child", "attach_init", "traceme", "vm_readv", "vm_writev", "vm_readv_init",
              "kcmp", "pidfd_getfd"):
        assert out[k] == [-1, EPERM], (k, out)
    assert out["init_mem"] == EACCES


@needs_x86_64
def test_row_27_mount_family(daemon):
    out = value(run(daemon, SYSCALLS + """
r = {}
os.makedirs('/tmp/m', exist_ok=True)
r['mount'] = sc(165, b'tmpfs', b'/tmp/m', b'tmpfs', 0, 0)
r['bind'] = sc(165, b'/proc', b'/tmp/m', 0, 0x1000, 0)           # MS_BIND
r['remount_rw'] = sc(165, 0, b'/usr', 0, 0x20 | 0x1000, 0)        # MS_REMOUNT|MS_BIND
r['umount2'] = sc(166, b'/proc', 2)                                # MNT_DETACH
r['umount_ws'] = sc(166, b'/workspace', 0)
r['pivot_root'] = sc(155, b'/tmp', b'/tmp/m')
r['chroot'] = sc(161, b'/tmp')
r['open_tree'] = sc(428, -100, b'/', 1)                            # OPEN_TREE_CLONE
r['move_mount'] = sc(429, -100, b'/tmp', -100, b'/tmp/m', 0)
r['fsopen'] = sc(430, b'tmpfs', 0)
r['fsconfig'] = sc(431, 3, 6, 0, 0, 0)
r['fsmount'] = sc(432, 3, 0, 0)
r['fspick'] = sc(433, -100, b'/tmp', 0)
r['mount_setattr'] = sc(442, -100, b'/usr', 0, 0, 0)
r['open_tree_attr'] = sc(467, -100, b'/', 1, 0, 0)
r['mount_bin'] = os.system('/usr/bin/mount -t tmpfs none /tmp/m 2>/dev/null') >> 8
r['umount_bin'] = os.system('/usr/bin/umount /proc 2>/dev/null') >> 8
r['ls'] = os.listdir('/tmp/m')
r['usr_ro'] = os.access('/usr/bin', os.W_OK)
r
"""))
    for k in ("mount", "bind", "remount_rw", "umount2", "umount_ws", "pivot_root", "chroot", "open_tree",
              "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr"):
        assert out[k] == [-1, EPERM], (k, out)
    assert out["mount_bin"] != 0 and out["umount_bin"] != 0
    assert out["ls"] == [] and out["usr_ro"] is False


@needs_x86_64
def test_row_28_namespaces_and_clone3(daemon):
    out = value(run(daemon, SYSCALLS + """
r = {}
CLONE = {'user': 0x10000000, 'ns': 0x00020000, 'pid': 0x20000000, 'net': 0x40000000,
         'uts': 0x04000000, 'ipc': 0x08000000, 'cgroup': 0x02000000}
for name, flag in CLONE.items():
    r['unshare_' + name] = sc(272, flag)
    res = sc(56, flag | 17, 0, 0, 0, 0)        # raw clone(flag | SIGCHLD)
    if res[0] == 0:
        os._exit(0)                            # (only if the attack worked)
    if res[0] > 0:
        os.waitpid(res[0], 0)
    r['clone_' + name] = res
    # garbage in the upper half must not slip past the flag check
    res = sc(56, (1 << 40) | flag | 17, 0, 0, 0, 0)
    if res[0] == 0:
        os._exit(0)
    r['clone_hi_' + name] = [min(res[0], 0), res[1]]
for ns in ('net', 'mnt', 'user', 'pid', 'uts', 'ipc', 'cgroup'):
    fd = os.open('/proc/self/ns/' + ns, os.O_RDONLY)
    r['setns_' + ns] = sc(308, fd, 0)
    os.close(fd)
r['clone3'] = sc(435, 0, 0)
r['unshare_bin'] = os.system('/usr/bin/unshare -Ur true 2>/dev/null') >> 8
r['fork_ok'] = os.system('true') == 0
r
"""))
    for name in ("user", "ns", "pid", "net", "uts", "ipc", "cgroup"):
        assert out["unshare_" + name] == [-1, EPERM], (name, out)
        assert out["clone_" + name] == [-1, EPERM], (name, out)
        assert out["clone_hi_" + name][0] == -1, (name, out)
    for ns in ("net", "mnt", "user", "pid", "uts", "ipc", "cgroup"):
        assert out["setns_" + ns] == [-1, EPERM], (ns, out)
    assert out["clone3"] == [-1, ENOSYS]
    assert out["unshare_bin"] != 0 and out["fork_ok"] is True


@needs_x86_64
def test_row_29_kernel_keyring(daemon):
    out = value(run(daemon, SYSCALLS + """
r = {}
r['keyctl_get'] = sc(250, 0, -3, 1)                               # KEYCTL_GET_KEYRING_ID session, create
r['keyctl_join'] = sc(250, 1, b'atk')                             # KEYCTL_JOIN_SESSION_KEYRING
r['add_key'] = sc(248, b'user', b'atk', b'data', 4, -2)
r['request_key'] = sc(249, b'user', b'atk', 0, -2)
r['proc_keys'] = open('/proc/keys').read()
r
"""))
    for k in ("keyctl_get", "keyctl_join", "add_key", "request_key"):
        assert out[k] == [-1, EPERM], (k, out)
    assert out["proc_keys"] == ""


def test_row_30_setuid_and_file_caps(daemon):
    out = value(run(daemon, """
import os, subprocess, time
st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)
r = {k: st[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Uid', 'Gid')}
r['groups'] = os.getgroups()
r['usr_mount'] = [l for l in open('/proc/self/mountinfo') if ' /usr ' in l][0]
ids = {}
for argv in (['/usr/bin/su', 'root', '-c', 'id -u'], ['/usr/bin/passwd', 'root'], ['/usr/bin/newgrp', 'root']):
    if not os.path.exists(argv[0]):
        continue
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(0.15)
    try:
        ids[argv[0]] = [l for l in open(f'/proc/{p.pid}/status') if l.startswith('Uid')][0].split()[1:]
    except (OSError, IndexError):
        ids[argv[0]] = 'exited'
    try:
        out, _ = p.communicate(b'\\n', timeout=0.3)
    except subprocess.TimeoutExpired:
        p.kill(); out, _ = p.communicate()
    ids[argv[0] + ':out'] = [p.returncode, out.decode(errors='replace')]
r['ids'] = ids
r
"""))
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(out[k], 16) == 0, (k, out)
    assert out["NoNewPrivs"] == "1"
    assert out["Uid"].split() == [JAIL_UID] * 4 and out["Gid"].split() == [JAIL_UID] * 4
    assert out["groups"] in ([], [65534])
    assert "nosuid" in out["usr_mount"].split()[5]
    ids = out["ids"]
    for exe in ("/usr/bin/su", "/usr/bin/passwd", "/usr/bin/newgrp"):
        if exe in ids:
            assert ids[exe] == "exited" or ids[exe] == [JAIL_UID] * 4, (exe, ids)  # setuid bit inert
            rc, text = ids[exe + ":out"]
            assert rc != 0 and "uid=0" not in text and not text.strip().endswith("0"), (exe, ids)


@needs_x86_64
def test_row_31_dangerous_kernel_surfaces(daemon):
    out = value(run(daemon, SYSCALLS + """
# Arguments are harmless or invalid where possible: EPERM (not EINVAL) shows
# that the filter, not the kernel's argument checks, refused the call.
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 128), 8)     # PERF_TYPE_SOFTWARE, size
params = ctypes.create_string_buffer(120)
calls = {
    'bpf': (321, 5, ctypes.byref(attr), 128), 'bpf_map': (321, 0, ctypes.byref(attr), 128),
    'perf_event_open': (298, ctypes.byref(attr), 0, -1, -1, 0),
    'userfaultfd': (323, 0), 'io_uring_setup': (425, 8, ctypes.byref(params)),
    'io_uring_enter': (426, 0, 0, 0, 0, 0, 0), 'io_uring_register': (427, 0, 0, 0, 0),
    'kexec_load': (246, 0, 0, 0, 0), 'kexec_file_load': (320, -1, -1, 0, 0, 0),
    'init_module': (175, 0, 0, b''), 'finit_module': (313, 0, b'', 0), 'delete_module': (176, b'loop', 0),
    'swapon': (167, b'/tmp/swap', 0), 'swapoff': (168, b'/tmp/swap'),
    'reboot': (169, 0xfee1dead, 672274793, 0, 0),                # LINUX_REBOOT_CMD_CAD_OFF: harmless
    'settimeofday': (164, 0, 0), 'clock_settime': (227, -1, ctypes.byref(params)),
    'adjtimex': (159, ctypes.byref(params)), 'clock_adjtime': (305, 0, ctypes.byref(params)),
    'syslog': (103, 3, ctypes.byref(params), 100), 'acct': (163, b'/tmp/acct'),
    'iopl': (172, 3), 'ioperm': (173, 0, 1024, 1), 'modify_ldt': (154, 0, ctypes.byref(params), 16),
    'name_to_handle_at': (303, -100, b'/usr', ctypes.byref(params), ctypes.byref(params), 0),
    'open_by_handle_at': (304, -100, ctypes.byref(params), 0),
    'fanotify_init': (300, 0, 0), 'memfd_secret': (447, 0), 'quotactl': (179, 0, b'/', 0, 0),
    'lookup_dcookie': (212, 0, 0, 0), 'uselib': (134, b'/usr/lib/x'), 'vhangup': (153,),
}
r = {k: sc(*v) for k, v in calls.items()}
r['dmesg'] = os.system('dmesg >/dev/null 2>&1') >> 8
r
"""))
    dmesg = out.pop("dmesg")
    for k, v in out.items():
        assert v == [-1, EPERM], (k, v)
    assert dmesg != 0


@needs_x86_64
def test_row_32_tiocsti_terminal_injection(daemon):
    out = value(run(daemon, SYSCALLS + """
r = {}
c = ctypes.c_char(b'x')
for fd in (0, 1, 2):
    r['tiocsti_%d' % fd] = sc(16, fd, 0x5412, ctypes.byref(c))
    r['tiocsti_hi_%d' % fd] = sc(16, fd, (1 << 32) | 0x5412, ctypes.byref(c))
    r['tioclinux_%d' % fd] = sc(16, fd, 0x541C, ctypes.byref(c))
    r['isatty_%d' % fd] = os.isatty(fd)
try:
    os.open('/dev/tty', os.O_RDWR); r['devtty'] = 'opened'
except OSError as e:
    r['devtty'] = e.errno
r
"""))
    for fd in (0, 1, 2):
        assert out[f"tiocsti_{fd}"] == [-1, EPERM], out
        assert out[f"tiocsti_hi_{fd}"] == [-1, EPERM], out
        assert out[f"tioclinux_{fd}"] == [-1, EPERM], out
        assert out[f"isatty_{fd}"] is False, out  # no host tty is passed in
    assert out["devtty"] != "opened"
    if IS_ROOT:
        # A session and process group of the jail's own, not the daemon's
        # (which may own a terminal, and which kill(0, ...) would aim at).
        marker = f"{uuid.uuid4().int % 10**6}.4321"
        s = sid()
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:
            stateless = pool.submit(run, daemon, f"import subprocess, time\n"
                                                 f"subprocess.Popen(['sleep', '{marker}0'])\ntime.sleep(2)\n1")
            assert value(sbx(daemon, s, f"import subprocess\nsubprocess.Popen(['sleep', '{marker}1'])\n1")) == "1"
            deadline = time.time() + 3
            while len(jail_procs(marker)) < 2 and time.time() < deadline:
                time.sleep(0.05)
            procs = jail_procs(marker)
            assert len(procs) == 2, procs

            def sess(pid):
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                return int(fields[2]), int(fields[3])  # pgrp, session

            daemon_pgrp, daemon_sid = sess(daemon.proc.pid)
            for pid, _ in procs:
                pgrp, session = sess(pid)
                assert pgrp != daemon_pgrp and session != daemon_sid, (pid, pgrp, session)
            assert value(stateless.result()) == "1"
        finally:
            pool.shutdown()
            delete_sandbox(daemon, s)
