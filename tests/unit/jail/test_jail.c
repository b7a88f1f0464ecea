/* End-to-end tests of src/jail/jail.c: each TEST (its own forked process)
 * builds a jail context on a temp run dir, spawns /bin/sh or perl inside a
 * jail and checks what the workload sees and what is left afterwards. Needs
 * root (skips otherwise). Only the public API: cgroup_root_path() says
 * where the groups live, so a test can check that nothing is left behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "base/util.h"
#include "jail/jail.h"
#include "tap.h"

static struct jail_ctx g_ctx;
static bool g_ctx_live;
static struct jail_proc *g_proc; /* a live jail to kill if an ASSERT fails */
static char g_run[64];
static char g_ws[64];
static char g_kernels[PATH_MAX];

static void cleanup(void)
{
        if (g_proc && g_proc->pid > 0) {
                jail_kill(g_proc);
                jail_reap(g_proc, NULL);
        }
        if (g_proc)
                jail_proc_release(g_proc);
        g_proc = NULL;
        if (g_ctx_live)
                jail_ctx_done(&g_ctx);
        g_ctx_live = false;
        if (g_run[0])
                rm_rf(g_run);
        if (g_ws[0])
                rm_rf(g_ws);
}

/* The repo's kernels directory, from this file's path (the Makefile
 * compiles it relative to the repo root) or else the working directory. */
static bool find_kernels_dir(void)
{
        const char *me = __FILE__;
        const char *tail = strstr(me, "tests/unit/jail/test_jail.c");
        char guess[PATH_MAX + 64];
        if (tail && tail > me) {
                snprintf(guess, sizeof(guess), "%.*ssrc/runtimes/kernels", (int)(tail - me), me);
                if (realpath(guess, g_kernels))
                        return true;
        }
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
                return false;
        snprintf(guess, sizeof(guess), "%s/src/runtimes/kernels", cwd);
        return realpath(guess, g_kernels) != NULL;
}

static void require_jail(void)
{
        if (geteuid() != 0)
                SKIP("needs root");
        if (!find_kernels_dir())
                SKIP("src/runtimes/kernels not found (run from the repo root)");
        atexit(cleanup);
        snprintf(g_run, sizeof(g_run), "/tmp/sbx-jail-XXXXXX");
        ASSERT_TRUE(mkdtemp(g_run) != NULL);
        struct err err = { 0 };
        int r = jail_ctx_init(&g_ctx, g_run, g_kernels, -1, &err);
        g_ctx_live = true;
        if (r == -EPERM || r == -EACCES || r == -ENOSYS || r == -EOPNOTSUPP)
                SKIP("namespaces or cgroups not available here");
        if (r < 0)
                TAP_FAIL("jail_ctx_init: %d (%s)", r, err.msg);
        ASSERT_STREQ(g_ctx.kernels_dir, g_kernels);
        ASSERT_TRUE(g_ctx.netns_fd >= 0);
        ASSERT_TRUE(g_ctx.seccomp != NULL);
        ASSERT_TRUE(g_ctx.cgroot != NULL);
#ifdef JAIL_TEST_SPAWNER
        ASSERT_OK(jail_ctx_start_spawner(&g_ctx));
        ASSERT_TRUE(g_ctx.spawner_fd >= 0 && g_ctx.spawner_pid > 0);
#endif
}

static struct jail_limits sane_limits(void)
{
        return (struct jail_limits){
                .memory_bytes = 256 * MiB, .pids = 64, .cpu_seconds = 5, .file_bytes = 1 * MiB,
                .nofile = 256, .tmp_bytes = 16 * MiB, .tmp_inodes = 1024,
                .workspace_bytes = 16 * MiB, .workspace_inodes = 1024,
        };
}

static void base_spec(struct jail_spec *s, const char *cgroup_name)
{
        memset(s, 0, sizeof(*s));
        s->envp[0] = "PATH=/usr/bin:/bin";
        s->envp[1] = "HOME=/tmp";
        s->envp[2] = "LANG=C";
        s->cgroup_name = cgroup_name;
        s->limits = sane_limits();
        s->ctl_fd = -1;
        s->replay_fd = -1;
}

struct run {
        char out[32768];
        size_t out_len;
        char err[8192];
        size_t err_len;
        int status;
};

/* Spawns spec with fresh stdout/stderr pipes; returns our read ends. */
static int spawn(struct jail_spec *spec, struct jail_proc *p, int *ret_out, int *ret_errfd, struct err *e)
{
        int out[2], err[2];
        ASSERT_OK(pipe2(out, O_CLOEXEC));
        ASSERT_OK(pipe2(err, O_CLOEXEC));
        spec->stdout_fd = out[1];
        spec->stderr_fd = err[1];
        err_done(e);
        int r = jail_spawn(&g_ctx, spec, p, e);
        close(out[1]);
        close(err[1]);
        if (r == 0)
                g_proc = p;
        *ret_out = out[0];
        *ret_errfd = err[0];
        return r;
}

/* Reads both pipes to EOF (20 s at most), then reaps the jail. */
static void collect(struct jail_proc *p, int out_fd, int err_fd, struct run *res)
{
        uint64_t deadline = now_ms() + 20000;
        bool out_eof = false, err_eof = false;
        res->out_len = res->err_len = 0;
        while (!out_eof || !err_eof) {
                struct pollfd pfd[2] = { { out_eof ? -1 : out_fd, POLLIN, 0 },
                                         { err_eof ? -1 : err_fd, POLLIN, 0 } };
                uint64_t now = now_ms();
                if (now >= deadline)
                        TAP_FAIL("jail output did not reach EOF in 20 s; stdout so far:\n%.*s",
                                 (int)res->out_len, res->out);
                if (poll(pfd, 2, (int)(deadline - now)) < 0 && errno != EINTR)
                        TAP_FAIL("poll: %s", strerror(errno));
                if (pfd[0].revents) {
                        ssize_t n = read(out_fd, res->out + res->out_len, sizeof(res->out) - 1 - res->out_len);
                        ASSERT_TRUE(n >= 0);
                        out_eof = n == 0 || res->out_len + (size_t)n >= sizeof(res->out) - 1;
                        res->out_len += (size_t)n;
                }
                if (pfd[1].revents) {
                        ssize_t n = read(err_fd, res->err + res->err_len, sizeof(res->err) - 1 - res->err_len);
                        ASSERT_TRUE(n >= 0);
                        err_eof = n == 0 || res->err_len + (size_t)n >= sizeof(res->err) - 1;
                        res->err_len += (size_t)n;
                }
        }
        res->out[res->out_len] = '\0';
        res->err[res->err_len] = '\0';
        close(out_fd);
        close(err_fd);
        ASSERT_OK(jail_reap(p, &res->status));
        ASSERT_EQ(p->pid, 0);
        ASSERT_EQ(p->pidfd, -1);
}

/* Runs "/bin/sh -c script" in a jail and collects everything. */
/* Spawns spec, collects its output into res and releases the jail. */
static void run_spec(struct jail_spec *spec, struct run *res)
{
        static struct jail_proc p;
        int out, err;
        struct err e = { 0 };
        int r = spawn(spec, &p, &out, &err, &e);
        if (r < 0)
                TAP_FAIL("jail_spawn: %d (%s)", r, e.msg);
        collect(&p, out, err, res);
        jail_proc_release(&p);
        g_proc = NULL;
}

static void run_sh(const char *cgroup_name, const char *script, struct run *res)
{
        struct jail_spec spec;
        base_spec(&spec, cgroup_name);
        spec.argv[0] = "/bin/sh";
        spec.argv[1] = "-c";
        spec.argv[2] = script;
        run_spec(&spec, res);
}

/* The value of "key=" on its own line in text, or NULL. */
static const char *field(const struct run *res, const char *key)
{
        static char val[4][256];
        static int next;
        size_t kl = strlen(key);
        for (const char *line = res->out; line && *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                if (len > kl && strncmp(line, key, kl) == 0 && line[kl] == '=') {
                        char *v = val[next++ % 4];
                        snprintf(v, sizeof(val[0]), "%.*s", (int)(len - kl - 1), line + kl + 1);
                        return v;
                }
                line = nl ? nl + 1 : NULL;
        }
        return NULL;
}

#define ASSERT_FIELD(res, key, want)                                                              \
        do {                                                                                      \
                const char *_v = field(res, key);                                                 \
                if (!_v || strcmp(_v, want) != 0)                                                 \
                        TAP_FAIL("%s=%s, want %s\nstdout:\n%s\nstderr:\n%s", key, _v ? _v : "(missing)", \
                                 want, (res)->out, (res)->err);                                   \
        } while (0)

TEST(jail_identity_and_namespaces)
{
        require_jail();
        struct run res;
        run_sh("t-identity",
               "echo uid=$(id -u); echo gid=$(id -g); echo groups=$(id -G);"
               "echo host=$(uname -n); echo etc_hostname=$(cat /etc/hostname);"
               "echo pwd=$(pwd); echo self=$$;"
               "echo caps=$(grep '^CapEff:' /proc/self/status | tr -d ' \\t' | cut -d: -f2);"
               "echo bnd=$(grep '^CapBnd:' /proc/self/status | tr -d ' \\t' | cut -d: -f2);"
               "echo nnp=$(grep '^NoNewPrivs:' /proc/self/status | tr -d ' \\t' | cut -d: -f2);"
               "echo seccomp=$(grep '^Seccomp:' /proc/self/status | tr -d ' \\t' | cut -d: -f2);"
               "echo nofile=$(ulimit -n); echo fsize=$(ulimit -f); echo cpu=$(ulimit -t);"
               "echo user=$(id -un)",
               &res);
        ASSERT_TRUE(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
        ASSERT_FIELD(&res, "uid", "65534");
        ASSERT_FIELD(&res, "gid", "65534");
        ASSERT_FIELD(&res, "groups", "65534");
        ASSERT_FIELD(&res, "host", "sandbox");
        ASSERT_FIELD(&res, "etc_hostname", "sandbox");
        ASSERT_FIELD(&res, "pwd", "/workspace");
        ASSERT_FIELD(&res, "self", "2"); /* pid 1 is the jail's init */
        ASSERT_FIELD(&res, "caps", "0000000000000000");
        ASSERT_FIELD(&res, "bnd", "0000000000000000");
        ASSERT_FIELD(&res, "nnp", "1");
        ASSERT_FIELD(&res, "seccomp", "2");
        ASSERT_FIELD(&res, "nofile", "256");
        ASSERT_FIELD(&res, "fsize", "2048"); /* 1 MiB in 512-byte blocks */
        ASSERT_FIELD(&res, "cpu", "5");
        ASSERT_FIELD(&res, "user", "sandbox");
}

TEST(jail_proc_shows_only_the_jail)
{
        require_jail();
        struct run res;
        /* glob and loop are shell built-ins: no extra process while listing */
        run_sh("t-proc",
               "n=0; list=; for d in /proc/[0-9]*; do n=$((n+1)); list=\"$list${list:+ }${d#/proc/}\"; done;"
               "echo count=$n; echo list=$list;"
               "test -e /proc/kcore && echo kcore=$(wc -c < /proc/kcore) || echo kcore=absent",
               &res);
        ASSERT_TRUE(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
        ASSERT_FIELD(&res, "count", "2");
        ASSERT_FIELD(&res, "list", "1 2");
        /* kcore is masked with /dev/null */
        const char *kcore = field(&res, "kcore");
        ASSERT_TRUE(kcore && (strcmp(kcore, "0") == 0 || strcmp(kcore, "absent") == 0));
}

TEST(jail_filesystem_view)
{
        require_jail();
        struct run res;
        run_sh("t-fs",
               "w() { if touch \"$1\" 2>/dev/null; then echo rw; else echo ro; fi; };"
               "echo root=$(w /newfile); echo usr=$(w /usr/newfile); echo etc=$(w /etc/newfile);"
               "echo proc=$(w /proc/newfile); echo kernels=$(w /opt/sandboxd/kernels/newfile);"
               "echo dev=$(w /dev/newfile);"
               "echo hi > /workspace/f && echo ws=$(cat /workspace/f);"
               "echo hi > /tmp/f && echo tmp=$(cat /tmp/f);"
               "test -e /etc/shadow && echo shadow=present || echo shadow=absent;"
               "test -e /etc/gshadow && echo gshadow=present || echo gshadow=absent;"
               "test -e /root && echo rootdir=present || echo rootdir=absent;"
               "test -e /home && echo home=present || echo home=absent;"
               "echo passwd_lines=$(wc -l < /etc/passwd);"
               "test -r /opt/sandboxd/kernels/python_kernel.py && echo kernel=readable || echo kernel=missing;"
               "echo null=$(echo x > /dev/null && echo ok);"
               "head -c 2000000 /dev/zero > /tmp/big 2>/dev/null; echo big=$(wc -c < /tmp/big);"
               "echo old=$(ls -a / | grep -c '^\\.old$')",
               &res);
        ASSERT_FIELD(&res, "root", "ro");
        ASSERT_FIELD(&res, "usr", "ro");
        ASSERT_FIELD(&res, "etc", "ro");
        ASSERT_FIELD(&res, "proc", "ro");
        ASSERT_FIELD(&res, "kernels", "ro");
        ASSERT_FIELD(&res, "dev", "ro");
        ASSERT_FIELD(&res, "ws", "hi");
        ASSERT_FIELD(&res, "tmp", "hi");
        ASSERT_FIELD(&res, "shadow", "absent");
        ASSERT_FIELD(&res, "gshadow", "absent");
        ASSERT_FIELD(&res, "rootdir", "absent");
        ASSERT_FIELD(&res, "home", "absent");
        ASSERT_FIELD(&res, "passwd_lines", "2");
        ASSERT_FIELD(&res, "kernel", "readable");
        ASSERT_FIELD(&res, "null", "ok");
        ASSERT_FIELD(&res, "big", "1048576"); /* RLIMIT_FSIZE */
        ASSERT_FIELD(&res, "old", "0");       /* the host tree is detached */
}

/* Opens AF_INET (tries 1.1.1.1:80), AF_INET6 and AF_UNIX sockets and
 * counts interfaces: "afN=open [connected]" or "afN=<errno>", "ifaces=N".
 * AF_INET=2, AF_INET6=10, AF_UNIX=1, SOCK_STREAM=1; no modules needed. */
static const char NET_PROBE[] =
        "for my $f (2, 10, 1) {"
        "  if (socket(my $s, $f, 1, 0)) {"
        "    my $ok = $f == 2 ? connect($s, pack('S n C4 x8', 2, 80, 1, 1, 1, 1)) : 0;"
        "    print \"af$f=open\", ($ok ? ' connected' : ''), \"\\n\";"
        "  } else { printf \"af%d=%d\\n\", $f, $! + 0 }"
        "}"
        "open(my $r, '<', '/proc/net/dev') or die; my @l = <$r>; print 'ifaces=', scalar(grep { /:/ } @l), \"\\n\";";

static void run_net_probe(const char *cgroup_name, bool allow_inet, int netns_fd, struct run *res)
{
        struct jail_spec spec;
        base_spec(&spec, cgroup_name);
        spec.argv[0] = "/usr/bin/perl";
        spec.argv[1] = "-e";
        spec.argv[2] = NET_PROBE;
        spec.allow_inet = allow_inet;
        spec.has_netns = netns_fd >= 0;
        spec.netns_fd = netns_fd;
        run_spec(&spec, res);
        ASSERT_TRUE(WIFEXITED(res->status) && WEXITSTATUS(res->status) == 0);
}

TEST(jail_no_network)
{
        require_jail();
        struct run res;
        run_net_probe("t-net", false, -1, &res);
        char eafnosupport[16];
        snprintf(eafnosupport, sizeof(eafnosupport), "%d", EAFNOSUPPORT);
        ASSERT_FIELD(&res, "af2", eafnosupport);
        ASSERT_FIELD(&res, "af10", eafnosupport);
        ASSERT_FIELD(&res, "af1", "open"); /* AF_UNIX still works */
        ASSERT_FIELD(&res, "ifaces", "1");  /* only lo, in the empty netns */
}

static void *make_netns(void *arg)
{
        int *fd = arg;
        /* This thread ends right after: its switch dies with it. */
        *fd = unshare(CLONE_NEWNET) == 0 ? open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC) : -errno;
        return NULL;
}

/* allow_inet opens the inet families only for a jail in a namespace of its
 * own; in the context's shared one (has_netns unset) it is ignored. */
TEST(jail_allow_inet_needs_its_own_netns)
{
        require_jail();
        if (g_ctx.userns)
                SKIP("rootless: no namespace to join");
        struct run res;
        char eafnosupport[16];
        snprintf(eafnosupport, sizeof(eafnosupport), "%d", EAFNOSUPPORT);
        run_net_probe("t-inet-shared", true, -1, &res);
        ASSERT_FIELD(&res, "af2", eafnosupport);
        ASSERT_FIELD(&res, "af10", eafnosupport);
        int ns = -1;
        pthread_t t;
        ASSERT_EQ(pthread_create(&t, NULL, make_netns, &ns), 0);
        pthread_join(t, NULL);
        ASSERT_TRUE(ns >= 0);
        run_net_probe("t-inet-own", true, ns, &res);
        close(ns);
        ASSERT_FIELD(&res, "af2", "open"); /* not connected: no route out */
        ASSERT_FIELD(&res, "af10", "open");
        ASSERT_FIELD(&res, "af1", "open");
        ASSERT_FIELD(&res, "ifaces", "1");
}

static bool host_has_cmdline(const char *want, size_t want_len)
{
        DIR *d = opendir("/proc");
        ASSERT_TRUE(d != NULL);
        bool found = false;
        struct dirent *de;
        while (!found && (de = readdir(d))) {
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                char path[300], buf[128];
                size_t len = 0;
                snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
                if (read_file_small(path, buf, sizeof(buf), &len) == 0 && len == want_len &&
                    memcmp(buf, want, len) == 0)
                        found = true;
        }
        closedir(d);
        return found;
}

static const char SLEEP_CMD[] = "sleep\0" "31.4159";

/* A background process, even one that has closed its stdio, does not
 * outlive the workload: init's exit tears down the pid namespace. */
TEST(jail_background_process_killed)
{
        require_jail();
        /* fd 3 (ctl) holds the workload until the host has seen the sleep */
        int ctl[2];
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl));
        struct jail_spec spec;
        base_spec(&spec, "t-bg");
        spec.argv[0] = "/bin/sh";
        spec.argv[1] = "-c";
        spec.argv[2] = "sleep 31.4159 </dev/null >/dev/null 2>&1 3>&- & echo bg=$!;"
                       "test -d /proc/$! && echo running=yes; read x <&3; echo released=$x";
        spec.ctl_fd = ctl[1];
        static struct jail_proc p;
        int out, err;
        struct err e = { 0 };
        int r = spawn(&spec, &p, &out, &err, &e);
        close(ctl[1]);
        if (r < 0)
                TAP_FAIL("jail_spawn: %d (%s)", r, e.msg);

        /* the sleep shows up on the host, in the jail's cgroup */
        bool seen = false;
        for (int i = 0; i < 500 && !seen; i++) {
                seen = host_has_cmdline(SLEEP_CMD, sizeof(SLEEP_CMD));
                if (!seen)
                        usleep(10000);
        }
        ASSERT_TRUE(seen);
        ASSERT_TRUE(!cgroup_is_empty(p.cg));

        ASSERT_EQ(write(ctl[0], "go\n", 3), 3);
        struct run res;
        collect(&p, out, err, &res);
        close(ctl[0]);
        ASSERT_TRUE(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
        ASSERT_FIELD(&res, "running", "yes");
        ASSERT_FIELD(&res, "released", "go");

        /* after the reap: nothing left, on the host or in the group */
        bool empty = false;
        for (int i = 0; i < 200 && !empty; i++) {
                empty = cgroup_is_empty(p.cg);
                if (!empty)
                        usleep(10000);
        }
        ASSERT_TRUE(empty);
        ASSERT_TRUE(!host_has_cmdline(SLEEP_CMD, sizeof(SLEEP_CMD)));
        jail_proc_release(&p);
        g_proc = NULL;
}

TEST(jail_exit_status_propagates)
{
        require_jail();
        struct run res;
        run_sh("t-exit7", "echo before; exit 7", &res);
        ASSERT_TRUE(WIFEXITED(res.status));
        ASSERT_EQ(WEXITSTATUS(res.status), 7);
        ASSERT_STREQ(res.out, "before\n");

        run_sh("t-kill9", "echo >&2 dying; kill -9 $$", &res);
        ASSERT_TRUE(WIFEXITED(res.status));
        ASSERT_EQ(WEXITSTATUS(res.status), 128 + SIGKILL); /* init reports 128+signal */
        ASSERT_STREQ(res.err, "dying\n");
}

TEST(jail_cwd_and_workspace_dir)
{
        require_jail();
        snprintf(g_ws, sizeof(g_ws), "/tmp/sbx-jail-ws-XXXXXX");
        ASSERT_TRUE(mkdtemp(g_ws) != NULL);
        ASSERT_OK(chown(g_ws, JAIL_UID, JAIL_GID));
        struct jail_spec spec;
        base_spec(&spec, "t-ws");
        spec.argv[0] = "/bin/sh";
        spec.argv[1] = "-c";
        spec.argv[2] = "echo pwd=$(pwd); echo from-jail > /workspace/out.txt; echo ok=1";
        spec.cwd = "/tmp";
        spec.workspace_dir = g_ws;
        struct run res;
        run_spec(&spec, &res);
        ASSERT_FIELD(&res, "pwd", "/tmp");
        ASSERT_FIELD(&res, "ok", "1");
        char path[PATH_MAX], buf[64];
        snprintf(path, sizeof(path), "%s/out.txt", g_ws);
        ASSERT_OK(read_file_small(path, buf, sizeof(buf), NULL));
        ASSERT_STREQ(buf, "from-jail\n");
        struct stat st;
        ASSERT_OK(stat(path, &st));
        ASSERT_EQ(st.st_uid, JAIL_UID);
}

/* "<root hierarchy dir>/<name>" exists in any hierarchy? */
static bool group_dir_exists(const char *name)
{
        const char *root;
        for (size_t i = 0; (root = cgroup_root_path(g_ctx.cgroot, i)); i++) {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s/%s", root, name);
                if (access(p, F_OK) == 0)
                        return true;
        }
        return false;
}

TEST(jail_failed_exec_leaves_nothing)
{
        require_jail();
        struct jail_spec spec;
        base_spec(&spec, "t-noexec");
        spec.argv[0] = "/nonexistent";
        struct jail_proc p;
        memset(&p, 0x5A, sizeof(p));
        struct jail_proc before = p;
        int out, err;
        struct err e = { 0 };
        int r = spawn(&spec, &p, &out, &err, &e);
        ASSERT_EQ(r, -ENOENT);
        ASSERT_STREQ(e.msg, "jail setup failed at exec: No such file or directory");
        ASSERT_EQ(e.reason, ERR_UNAVAILABLE);
        ASSERT_EQ(e.errnum, ENOENT);
        ASSERT_TRUE(memcmp(&p, &before, sizeof(p)) == 0); /* ret untouched on failure */
        g_proc = NULL;

        /* no child of ours is left, not even a zombie (but the spawner) */
        errno = 0;
#ifdef JAIL_TEST_SPAWNER
        ASSERT_EQ(waitpid(-1, NULL, WNOHANG | __WALL), 0);
        char kids[64], want[32], path[64];
        snprintf(want, sizeof(want), "%d ", (int)g_ctx.spawner_pid);
        snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid()); /* single-threaded */
        ASSERT_OK(read_file_small(path, kids, sizeof(kids), NULL));
        ASSERT_STREQ(kids, want);
#else
        ASSERT_EQ(waitpid(-1, NULL, WNOHANG | __WALL), -1);
        ASSERT_EQ(errno, ECHILD);
#endif
        /* no process holds the jail's stdout/stderr any more: immediate EOF */
        struct pollfd pfd = { out, POLLIN, 0 };
        ASSERT_EQ(poll(&pfd, 1, 2000), 1);
        char c;
        ASSERT_EQ(read(out, &c, 1), 0);
        pfd.fd = err;
        ASSERT_EQ(poll(&pfd, 1, 2000), 1);
        ASSERT_EQ(read(err, &c, 1), 0);
        close(out);
        close(err);
        /* and its cgroup is gone */
        ASSERT_TRUE(!group_dir_exists("t-noexec"));

        /* a non-executable file fails the same way, with its own errno */
        base_spec(&spec, "t-noexec2");
        spec.argv[0] = "/etc/passwd";
        r = spawn(&spec, &p, &out, &err, &e);
        ASSERT_EQ(r, -EACCES);
        ASSERT_STREQ(e.msg, "jail setup failed at exec: Permission denied");
        close(out);
        close(err);
        ASSERT_TRUE(!group_dir_exists("t-noexec2"));

        /* the context is still usable */
        struct run res;
        run_sh("t-after", "echo alive=yes", &res);
        ASSERT_FIELD(&res, "alive", "yes");
}

/* Spawns spec deferred (pre-spawned: waiting for its command). */
static void spawn_deferred(struct jail_spec *spec, struct jail_proc *p, int *out, int *err)
{
        struct err e = { 0 };
        spec->deferred = true;
        if (spawn(spec, p, out, err, &e) < 0)
                TAP_FAIL("jail_spawn (deferred): %s", e.msg);
}

/* A deferred (pre-spawned) jail: jail_spawn returns with the workload
 * confined and waiting; jail_start_command gives it argv, env and cwd,
 * once; what it then runs sees what a spawned one sees. */
TEST(jail_deferred_runs_one_command)
{
        require_jail();
        struct jail_spec spec;
        base_spec(&spec, "t-deferred");
        static struct jail_proc p;
        int out, err;
        struct err e = { 0 };
        spawn_deferred(&spec, &p, &out, &err);
        ASSERT_TRUE(p.cmd_fd > 0 && p.report_fd > 0);
        struct pollfd pfd = { p.pidfd, POLLIN, 0 };
        ASSERT_EQ(poll(&pfd, 1, 200), 0); /* waits: nothing ran, nothing exited */
        const char *argv[] = { "/bin/sh", "-c",
                               "echo arg=$0; echo v=$V; echo env=$(env | wc -l); echo pwd=$(pwd);"
                               "echo uid=$(id -u); echo fds=$(ls /proc/self/fd | tr '\\n' ' ');"
                               "echo seccomp=$(grep '^Seccomp:' /proc/self/status | tr -d ' \\t' | cut -d: -f2)",
                               "zero", NULL };
        const char *envp[] = { "PATH=/usr/bin:/bin", "V=with space", NULL };
        if (jail_start_command(&p, argv, envp, "/tmp", &e) < 0)
                TAP_FAIL("jail_start_command: %s", e.msg);
        ASSERT_EQ(p.cmd_fd, -1);
        ASSERT_EQ(p.report_fd, -1);
        /* once: the pipe is gone */
        ASSERT_EQ(jail_start_command(&p, argv, envp, NULL, &e), -EINVAL);
        err_done(&e);
        struct run res;
        collect(&p, out, err, &res);
        jail_proc_release(&p);
        g_proc = NULL;
        ASSERT_TRUE(WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0);
        ASSERT_FIELD(&res, "arg", "zero");
        ASSERT_FIELD(&res, "v", "with space");
        ASSERT_FIELD(&res, "env", "3"); /* PATH, V and the shell's PWD: nothing else */
        ASSERT_FIELD(&res, "pwd", "/tmp");
        ASSERT_FIELD(&res, "uid", "65534");
        ASSERT_FIELD(&res, "fds", "0 1 2 3"); /* 3: ls's own directory */
        ASSERT_FIELD(&res, "seccomp", "2");
}

TEST(jail_deferred_failures)
{
        require_jail();
        struct jail_spec spec;
        base_spec(&spec, "t-deferred-bad");
        static struct jail_proc p;
        int out, err;
        struct err e = { 0 };
        /* a command that cannot exec fails there, as a spawn would */
        spawn_deferred(&spec, &p, &out, &err);
        const char *bad[] = { "/nonexistent", NULL }, *envp[] = { NULL };
        ASSERT_EQ(jail_start_command(&p, bad, envp, NULL, &e), -ENOENT);
        ASSERT_STREQ(e.msg, "jail setup failed at exec: No such file or directory");
        struct run res;
        collect(&p, out, err, &res);
        jail_proc_release(&p);
        ASSERT_EQ(WEXITSTATUS(res.status), 127);
        /* no argv at all is refused before anything is sent */
        spawn_deferred(&spec, &p, &out, &err);
        ASSERT_EQ(jail_start_command(&p, envp, envp, NULL, &e), -E2BIG);
        collect(&p, out, err, &res);
        jail_proc_release(&p);
        /* a jail dropped without a command just ends: nothing ran */
        spawn_deferred(&spec, &p, &out, &err);
        close(p.cmd_fd);
        p.cmd_fd = -1;
        collect(&p, out, err, &res);
        jail_proc_release(&p);
        g_proc = NULL;
        ASSERT_EQ(WEXITSTATUS(res.status), 127);
        ASSERT_EQ(res.out_len + res.err_len, 0);
        /* and a terminal cannot be deferred */
        spec.pty = true;
        ASSERT_EQ(spawn(&spec, &p, &out, &err, &e), -EINVAL);
        g_proc = NULL;
        close(out);
        close(err);
        err_done(&e);
        ASSERT_TRUE(!group_dir_exists("t-deferred-bad"));
}

TEST(jail_bad_cwd_fails_at_chdir)
{
        require_jail();
        struct jail_spec spec;
        base_spec(&spec, "t-cwd");
        spec.argv[0] = "/bin/sh";
        spec.argv[1] = "-c";
        spec.argv[2] = "true";
        spec.cwd = "/no/such/dir";
        struct jail_proc p;
        int out, err;
        struct err e = { 0 };
        ASSERT_EQ(spawn(&spec, &p, &out, &err, &e), -ENOENT);
        ASSERT_STREQ(e.msg, "jail setup failed at chdir: No such file or directory");
        err_done(&e);
        close(out);
        close(err);
        ASSERT_TRUE(!group_dir_exists("t-cwd"));
}

/* A spec that cannot work is the caller's mistake: ERR_INVALID, and the
 * group taken for it is given back. */
TEST(jail_bad_spec_is_invalid)
{
        require_jail();
        struct jail_spec spec;
        base_spec(&spec, "t-badspec");
        spec.argv[0] = "/bin/true";
        spec.pty = true; /* a terminal without a control socket */
        struct jail_proc p;
        int out, err;
        struct err e = { 0 };
        ASSERT_EQ(spawn(&spec, &p, &out, &err, &e), -EINVAL);
        ASSERT_EQ(e.reason, ERR_INVALID);
        ASSERT_TRUE(strstr(e.msg, "terminal") != NULL);
        err_done(&e);
        close(out);
        close(err);
        ASSERT_TRUE(!group_dir_exists("t-badspec"));
}

/* A missing kernels directory is a configuration mistake, named with its path. */
TEST(jail_ctx_init_names_the_missing_kernels_dir)
{
        struct jail_ctx ctx;
        struct err e = { 0 };
        ASSERT_EQ(jail_ctx_init(&ctx, "/tmp", "/nonexistent/kernels-dir", -1, &e), -ENOENT);
        ASSERT_EQ(e.reason, ERR_INVALID);
        ASSERT_EQ(e.errnum, ENOENT);
        ASSERT_STREQ(e.msg, "jail setup failed: kernels directory not found: /nonexistent/kernels-dir: "
                            "No such file or directory");
        err_done(&e);
        jail_ctx_done(&ctx);
}

/* Released groups are pooled for reuse and jail_ctx_done removes them all,
 * down to the per-process root. */
TEST(jail_ctx_done_frees_everything)
{
        require_jail();
        struct run res;
        run_sh("t-pool-a", "echo a=1", &res);
        ASSERT_FIELD(&res, "a", "1");
        ASSERT_EQ(g_ctx.cg_nfree, 1);
        /* same limits: the pooled group is reused, no second directory */
        run_sh("t-pool-b", "echo b=1", &res);
        ASSERT_FIELD(&res, "b", "1");
        ASSERT_EQ(g_ctx.cg_nfree, 1);
        ASSERT_TRUE(group_dir_exists("t-pool-a"));
        ASSERT_TRUE(!group_dir_exists("t-pool-b"));

        char roots[8][PATH_MAX];
        size_t n = 0;
        for (const char *r; n < 8 && (r = cgroup_root_path(g_ctx.cgroot, n)); n++)
                snprintf(roots[n], PATH_MAX, "%s", r);
        ASSERT_TRUE(n >= 1);
        for (size_t i = 0; i < n; i++)
                ASSERT_TRUE(access(roots[i], F_OK) == 0);
        int netns = g_ctx.netns_fd;
        ASSERT_TRUE(fcntl(netns, F_GETFD) >= 0);
        pid_t spawner = g_ctx.spawner_pid;

        jail_ctx_done(&g_ctx);
        g_ctx_live = false;
        ASSERT_EQ(g_ctx.spawner_fd, -1);
        if (spawner > 0) /* reaped, not left as a zombie */
                ASSERT_TRUE(kill(spawner, 0) < 0 && errno == ESRCH);
        ASSERT_EQ(g_ctx.cg_nfree, 0);
        ASSERT_TRUE(g_ctx.cgroot == NULL && g_ctx.seccomp == NULL);
        ASSERT_EQ(g_ctx.netns_fd, -1);
        ASSERT_TRUE(fcntl(netns, F_GETFD) < 0 && errno == EBADF);
        for (size_t i = 0; i < n; i++)
                if (access(roots[i], F_OK) == 0)
                        TAP_FAIL("cgroup root %s left behind", roots[i]);
}

/* A template's executor is not our child (jail_adopt): releasing it kills
 * it by pidfd and sweeps its group only when someone outlived it there.
 * Here the "executor" is a forked child of the test; with a straggler, it
 * first forks a grandchild that holds a pipe open until it dies. */
TEST(jail_foreign_release_sweeps_the_group_only_when_someone_is_left)
{
        require_jail();
        struct jail_limits lim = sane_limits();
        for (int straggler = 0; straggler < 2; straggler++) {
                int p[2], go[2];
                char c;
                ASSERT_OK(pipe2(p, O_CLOEXEC));
                ASSERT_OK(pipe2(go, O_CLOEXEC));
                pid_t pid = fork();
                ASSERT_TRUE(pid >= 0);
                if (pid == 0) {
                        close(p[0]);
                        close(go[1]);
                        if (read(go[0], &c, 1) != 1) /* in its group now */
                                _exit(1);
                        if (straggler && fork() == 0) {
                                (void)!write(p[1], "s", 1);
                                for (;;)
                                        pause();
                        }
                        close(p[1]);
                        for (;;)
                                pause();
                }
                close(p[1]);
                close(go[0]);
                static struct jail_proc jp;
                ASSERT_OK(jail_adopt(&g_ctx, pid, &lim, straggler ? "t-foreign-s" : "t-foreign", &jp));
                g_proc = &jp;
                ASSERT_EQ(write(go[1], "g", 1), 1);
                close(go[1]);
                if (straggler)
                        ASSERT_EQ(read(p[0], &c, 1), 1);
                size_t free_before = g_ctx.cg_nfree;
                ASSERT_OK(jail_kill_reap(&jp, NULL));
                ASSERT_EQ(jp.pid, 0);
                ASSERT_EQ(jp.cg_empty, !straggler);
                /* Every writer is dead: the straggler too (swept). */
                struct pollfd pf = { p[0], POLLIN, 0 };
                ASSERT_EQ(poll(&pf, 1, 5000), 1);
                ASSERT_EQ(read(p[0], &c, 1), 0);
                close(p[0]);
                jail_proc_release(&jp);
                g_proc = NULL;
                if (!straggler) /* seen empty: recycled, not removed */
                        ASSERT_EQ(g_ctx.cg_nfree, free_before + 1);
                ASSERT_EQ(waitpid(pid, NULL, 0), pid);
        }
}

static long minor_faults(void)
{
        struct rusage ru;
        ASSERT_OK(getrusage(RUSAGE_SELF, &ru));
        return ru.ru_minflt;
}

/* Why the spawner exists: a jail cloned from this process write-protects
 * its private memory, so every page it writes next takes a fault even
 * once the jail has exec'd; cloned by the spawner, this process's memory
 * is never shared and no page faults. */
TEST(jail_spawn_write_protects_the_caller_only_without_a_spawner)
{
        require_jail();
        const size_t npages = 256, page = 4096;
        char *mem = mmap(NULL, npages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_TRUE(mem != MAP_FAILED);
        madvise(mem, npages * page, MADV_NOHUGEPAGE);
        memset(mem, 1, npages * page);
        struct run res;
        run_sh("t-wp", "echo wp=1", &res);
        ASSERT_FIELD(&res, "wp", "1");
        long before = minor_faults();
        for (size_t i = 0; i < npages; i++)
                mem[i * page] = 2;
        long faults = minor_faults() - before;
        munmap(mem, npages * page);
#ifdef JAIL_TEST_SPAWNER
        ASSERT_LT(faults, (long)npages / 8);
#else
        ASSERT_GE(faults, (long)npages / 2);
#endif
}

/* Spawns a jail whose workload waits for EOF on its stdin (*in_w). */
static void spawn_waiting(const char *cgroup_name, struct jail_proc *p, int *in_w, int *out, int *err)
{
        struct jail_spec spec;
        base_spec(&spec, cgroup_name);
        spec.argv[0] = "/bin/sh";
        spec.argv[1] = "-c";
        spec.argv[2] = "read x";
        int in[2];
        ASSERT_OK(pipe2(in, O_CLOEXEC));
        spec.has_stdin = true;
        spec.stdin_fd = in[0];
        struct err e = { 0 };
        ASSERT_OK(spawn(&spec, p, out, err, &e));
        close(in[0]);
        *in_w = in[1];
}

/* Lets spawn_waiting's workload exit, then reaps and releases its jail. */
static void finish_waiting(struct jail_proc *p, int in_w, int out, int err)
{
        close(in_w);
        struct run res;
        collect(p, out, err, &res);
        jail_proc_release(p);
        g_proc = NULL;
}

/* A jail runs under the scheduling policy of the thread that spawned it,
 * spawner or not: the pool filler's jails are SCHED_BATCH like the filler
 * (base/thread.c), a request's are not. */
TEST(jail_inherits_the_spawning_threads_scheduling_policy)
{
        require_jail();
        struct sched_param sp = { 0 };
        static struct jail_proc p;
        int in_w, out, err;
        for (int i = 0; i < 2; i++) {
                int policy = i == 0 ? SCHED_BATCH : SCHED_OTHER;
                ASSERT_OK(sched_setscheduler(0, policy, &sp));
                spawn_waiting(i == 0 ? "t-sched-b" : "t-sched-o", &p, &in_w, &out, &err);
                ASSERT_EQ(sched_getscheduler(p.pid), policy);
                finish_waiting(&p, in_w, out, err);
        }
}
