/* The cloned child's side of a jail: namespaces and the root (mount.c),
 * then pid 1 of the jail (our tiny init), which forks the workload, drops
 * its own privileges and reaps. No allocation, no stdio: see internal.h. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/internal.h"
#include "jail/landlock.h"
#include "jail/privs.h"
#include "jail/seccomp.h"

void jail_child_fail(const struct child_args *a, int step, int err)
{
        struct child_report rep = { step, err };
        if (a->report_fd >= 0)
                (void)!write(a->report_fd, &rep, sizeof(rep));
        _exit(127);
}


/* The program for this jail: init and workload must install the same one
 * (filters stack, the stricter verdict wins). */
static const struct seccomp_prog *jail_seccomp(const struct child_args *a)
{
        if (a->spec->allow_inet && a->spec->has_netns && a->ctx->seccomp_inet)
                return a->ctx->seccomp_inet;
        return a->ctx->seccomp;
}

/* issue 10 row 15: the workload's filter comes with a listener, which goes
 * to the daemon (engine/notify.c answers and counts refusals) and is never
 * kept: whoever holds it could answer its own notifications. */
static int apply_seccomp_listener(const struct child_args *a)
{
        if (a->spec->ctl_fd < 0)
                return seccomp_prog_apply(jail_seccomp(a));
        int fd = seccomp_prog_apply_listener(jail_seccomp(a));
        if (fd < 0)
                return fd;
        int r = io_send_byte(3, 'N', SCM_RIGHTS, &fd, sizeof(fd));
        close(fd);
        if (a->spec->ctl_only_seccomp)
                close(3);
        return r < 0 ? -EPIPE : 0;
}

static void confine(const struct child_args *a, bool workload)
{
        if (a->ctx->landlock) {
                int r = landlock_restrict_scopes();
                if (r < 0 && r != -EOPNOTSUPP)
                        jail_child_fail(a, STEP_LANDLOCK, -r);
        }
        if (a->ctx->seccomp) {
                int r = workload ? apply_seccomp_listener(a) : seccomp_prog_apply(jail_seccomp(a));
                if (r < 0)
                        jail_child_fail(a, STEP_SECCOMP, -r);
        }
}

/* fds 0..3 for the workload, the report pipe at 4 (close-on-exec, so the
 * parent sees EOF once the workload has exec'd), a deferred jail's command
 * pipe at 5 (closed once read) and JAIL_INIT_BIN at 6 (its launcher),
 * everything else closed. */
static void setup_fds(struct child_args *a)
{
        const struct jail_spec *s = a->spec;
        /* Move sources above the target range first so that dup2 order cannot
         * clobber them. */
        /* A terminal takes 0-2 later (open_terminal): /dev/null until then. */
        int out = fcntl(s->pty ? a->devnull_fd : s->stdout_fd, F_DUPFD_CLOEXEC, 10);
        int err = fcntl(s->pty ? a->devnull_fd : s->stderr_fd, F_DUPFD_CLOEXEC, 10);
        int ctl = s->ctl_fd >= 0 ? fcntl(s->ctl_fd, F_DUPFD_CLOEXEC, 10) : -1;
        int in = fcntl(a->devnull_fd, F_DUPFD_CLOEXEC, 10);
        int rep = fcntl(a->report_fd, F_DUPFD_CLOEXEC, 10);
        int cmd = a->cmd_fd >= 0 ? fcntl(a->cmd_fd, F_DUPFD_CLOEXEC, 10) : -1;
        int launcher = cmd >= 0 && a->ctx->init_fd >= 0 ? fcntl(a->ctx->init_fd, F_DUPFD_CLOEXEC, 10) : -1;
        if (out < 0 || err < 0 || in < 0 || rep < 0 || (s->ctl_fd >= 0 && ctl < 0) || (a->cmd_fd >= 0 && cmd < 0))
                jail_child_fail(a, STEP_FDS, errno);
        a->report_fd = rep;
        CHECK(a, STEP_FDS, dup2(in, 0));
        CHECK(a, STEP_FDS, dup2(out, 1));
        CHECK(a, STEP_FDS, dup2(err, 2));
        if (ctl >= 0)
                CHECK(a, STEP_FDS, dup2(ctl, 3));
        CHECK(a, STEP_FDS, dup3(rep, 4, O_CLOEXEC));
        a->report_fd = 4;
        if (cmd >= 0) {
                CHECK(a, STEP_FDS, dup3(cmd, 5, O_CLOEXEC));
                a->cmd_fd = 5;
        }
        a->launcher_fd = -1;
        if (launcher >= 0 && dup3(launcher, 6, O_CLOEXEC) == 6)
                a->launcher_fd = 6;
        CHECK(a, STEP_FDS, (int)syscall(SYS_close_range, cmd >= 0 ? 7U : 5U, ~0U, 0U));
}

/* The workload's terminal, as the jail user (the slave is then its own):
 * a new session whose controlling terminal is a fresh pair of the jail's
 * devpts; the master goes to the daemon over fd 3, which is then closed. */
static void open_terminal(const struct child_args *a)
{
        const struct jail_spec *s = a->spec;
        int unlock = 0;
        struct winsize ws = { .ws_row = s->pty_rows ? s->pty_rows : 24, .ws_col = s->pty_cols ? s->pty_cols : 80 };
        CHECK(a, STEP_TTY, setsid());
        int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                jail_child_fail(a, STEP_TTY, errno);
        CHECK(a, STEP_TTY, ioctl(m, TIOCSPTLCK, &unlock));
        CHECK(a, STEP_TTY, ioctl(m, TIOCSWINSZ, &ws));
        int slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                jail_child_fail(a, STEP_TTY, errno);
        CHECK(a, STEP_TTY, ioctl(slave, TIOCSCTTY, 0));
        CHECK_R(a, STEP_TTY, io_send_byte(3, 'T', SCM_RIGHTS, &m, sizeof(m)));
        close(m);
        close(3);
        CHECK(a, STEP_TTY, dup2(slave, 0));
        CHECK(a, STEP_TTY, dup2(slave, 1));
        CHECK(a, STEP_TTY, dup2(slave, 2));
        close(slave);
}

/* The workload starts like a login would start it: nothing blocked and
 * every disposition at its default. The daemon blocks SIGTERM/SIGINT (for
 * its signal thread) and ignores SIGPIPE, and both survive execve. */
static void reset_signals(void)
{
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        for (int sig = 1; sig < NSIG; sig++)
                (void)sigaction(sig, &dfl, NULL); /* SIGKILL, SIGSTOP, glibc's own: EINVAL */
        sigset_t none;
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Per-namespace ceilings of the workload's own user namespace (written
 * through the jail's /proc/sys/user as the namespace's root): no nested
 * namespaces and no fanotify. Per-user counts such as inotify instances
 * need no ceiling here: the kernel charges them, level by level, to the
 * owner of each namespace, so a sandbox spends only its own host id's
 * share. A template keeps the namespaces it makes for every execution
 * (mount, pid, ipc, uts, net, and cgroup: each executor roots its own cgroup
 * namespace in its execution's group): NULL there. Entries the kernel lacks are skipped. */
static const struct {
        const char *name, *value, *template_value;
} userns_limits[] = {
        { "max_user_namespaces", "0", "0" },  { "max_net_namespaces", "0", NULL },
        { "max_cgroup_namespaces", "0", NULL }, { "max_time_namespaces", "0", "0" },
        { "max_mnt_namespaces", "0", NULL },  { "max_pid_namespaces", "0", NULL },
        { "max_ipc_namespaces", "0", NULL },  { "max_uts_namespaces", "0", NULL },
        { "max_fanotify_groups", "0", "0" },  { "max_fanotify_marks", "0", "0" },
};

/* dir: a /proc/sys/user of a writable procfs; names resolve in our own
 * user namespace. */
static void set_userns_limits(const struct child_args *a, int dir, bool template)
{
        for (size_t i = 0; dir >= 0 && i < ARRAY_SIZE(userns_limits); i++) {
                const char *value = template ? userns_limits[i].template_value : userns_limits[i].value;
                if (!value)
                        continue;
                int fd = openat(dir, userns_limits[i].name, O_WRONLY | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT)
                        continue;
                if (fd < 0)
                        jail_child_fail(a, STEP_PRIVS, errno);
                size_t len = strlen(value);
                ssize_t n = write(fd, value, len);
                int e = errno;
                close(fd);
                if (n != (ssize_t)len)
                        jail_child_fail(a, STEP_PRIVS, n < 0 ? e : EIO);
        }
}

/* Root mode: the workload leaves the jail's (root-owned) namespaces for a
 * user namespace of its own, owned by the sandbox's host id, where the jail
 * user maps to that id. Its processes, files and per-user kernel counts on
 * the host are that id's, not a uid every sandbox shares. */
static void enter_sandbox_userns(const struct child_args *a)
{
        CHECK_R(a, STEP_PRIVS, privs_enter_userns(a->host_id, JAIL_UID));
        set_userns_limits(a, a->sysuser_fd, false);
}

/* A deferred jail's workload, confined like any other: says it is ready,
 * then waits for its command on fd 5. A daemon that drops the pool
 * member closes the pipe: the jail then just exits. */
static void wait_command(struct child_args *a, const char **argv, const char **envp, const char **cwd)
{
        struct child_report ready = { STEP_COMMAND, 0 };
        if (write(a->report_fd, &ready, sizeof(ready)) != (ssize_t)sizeof(ready))
                _exit(127);
        int r = jail_cmd_read(a->cmd_fd, argv, envp, cwd);
        close(a->cmd_fd);
        a->cmd_fd = -1;
        if (r == -EIO)
                _exit(127); /* EOF: no command ever comes */
        CHECK_R(a, STEP_COMMAND, r);
}

/* A deferred jail's workload, confined, becomes JAIL_INIT_BIN's launcher
 * (init_main.c), which reads the command from fd 5 and execs it: the
 * request then execs from a small static binary, not from this copy of
 * the daemon (whose mappings would be torn down on the request path), and
 * no copy of the daemon's memory waits in the jail. The report and
 * command pipes stay open through this exec; the launcher closes them.
 * Returns only if the exec failed (the caller then waits itself). */
static void exec_launcher(const struct child_args *a)
{
        if (a->launcher_fd < 0 || fcntl(4, F_SETFD, 0) < 0 || fcntl(5, F_SETFD, 0) < 0)
                return;
        char *const argv[] = { (char *)JAIL_LAUNCHER_ARG0, NULL };
        char *const envp[] = { NULL };
        execve("/proc/self/fd/6", argv, envp);
        (void)!fcntl(4, F_SETFD, FD_CLOEXEC);
        (void)!fcntl(5, F_SETFD, FD_CLOEXEC);
}

static __attribute__((noreturn)) void exec_workload(struct child_args *a)
{
        const struct jail_spec *s = a->spec;
        const char *argv[JAIL_MAX_ARGS + 1], *envp[JAIL_MAX_ENV + 1];
        const char *const *run_argv = s->argv, *const *run_envp = s->envp, *cwd = s->cwd;
        if (!s->template && !a->ctx->userns)
                enter_sandbox_userns(a);
        setup_fds(a);
        reset_signals();
        CHECK(a, STEP_PRIVS, prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0));
        CHECK_R(a, STEP_RLIMIT, privs_apply_limits(&s->limits));
        if (s->template) {
                /* Namespaced capabilities stay (uid 0 of its own user
                 * namespace); no_new_privs and Landlock scoping still apply.
                 * Its procfs is not masked (its executors mount their own),
                 * so its /proc/sys/user is writable here. */
                int dir = open("/proc/sys/user", O_PATH | O_DIRECTORY | O_CLOEXEC);
                set_userns_limits(a, dir, true);
                if (dir >= 0)
                        close(dir);
                CHECK(a, STEP_PRIVS, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
                if (a->ctx->landlock && landlock_restrict_scopes() < 0)
                        jail_child_fail(a, STEP_LANDLOCK, EPERM);
        } else {
                CHECK_R(a, STEP_PRIVS, privs_drop(JAIL_UID, JAIL_GID, PRIVS_SETID));
                confine(a, true); /* before the terminal: its 'N' precedes 'T' */
                if (s->pty)
                        open_terminal(a);
        }
        if (s->deferred) {
                exec_launcher(a);
                wait_command(a, argv, envp, &cwd);
                run_argv = argv;
                run_envp = envp;
        }
        CHECK(a, STEP_CHDIR, chdir(cwd ? cwd : JAIL_WORKSPACE));
        execve(run_argv[0], (char *const *)run_argv, (char *const *)run_envp);
        jail_child_fail(a, STEP_EXEC, errno);
}

/* Becomes JAIL_INIT_BIN (fd 0, close-on-exec, kept by run_init; fd 1 is
 * the workload's gate, which the binary closes once it is not dumpable):
 * pid 1 then maps nothing of the daemon while guest code runs. Privileges,
 * the seccomp filter and Landlock are already set and survive the exec. On
 * failure init simply goes on as it is. */
static void exec_init_binary(pid_t workload)
{
        char pid[16], tmp[16];
        size_t n = 0, k = 0;
        unsigned v = (unsigned)workload;
        do
                tmp[k++] = (char)('0' + v % 10);
        while ((v /= 10) && k < sizeof(tmp));
        while (k)
                pid[n++] = tmp[--k];
        pid[n] = '\0';
        char *const argv[] = { (char *)"init", pid, NULL };
        char *const envp[] = { NULL };
        /* execve, not execveat: the one every seccomp policy must allow. */
        execve("/proc/self/fd/0", argv, envp);
}

static pid_t raw_fork(void)
{
        return (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
}

static int exit_code_of(int status)
{
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return 255;
}

/* Pid 1 of the jail: starts the workload, reaps everything, and exits with
 * the workload's status as soon as the workload itself has exited. Exiting
 * makes the kernel SIGKILL every other process of the pid namespace, so no
 * background process, daemonised or not, outlives the execution. */
/* The workload waits here until init holds nothing (EOF on the gate). */
static void wait_gate(const struct child_args *a, int gate[2])
{
        char c;
        ssize_t n;
        close(gate[1]);
        do
                n = read(gate[0], &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 0)
                jail_child_fail(a, STEP_SYNC, n < 0 ? errno : EPROTO);
        close(gate[0]);
}

static __attribute__((noreturn)) void run_init(struct child_args *a)
{
        int gate[2];
        CHECK(a, STEP_FORK, pipe2(gate, O_CLOEXEC));
        pid_t child = raw_fork();
        if (child < 0)
                jail_child_fail(a, STEP_FORK, errno);
        if (child == 0) {
                wait_gate(a, gate);
                exec_workload(a);
        }

        /* Before any guest code can run (the workload waits for the gate
         * to close), init becomes the sandbox's unprivileged host id (root
         * mode) with no capabilities, not dumpable (its memory and /proc
         * files stay closed to the guest, who could otherwise share its
         * uid), under the same seccomp filter, and then execs
         * JAIL_INIT_BIN, which maps nothing of the daemon: it only reaps.
         * The gate (fd 1) stays open through that exec until the new binary
         * is not dumpable either. The replay swap is done from the daemon's
         * side (jail_swap_workspace). */
        close(gate[0]);
        if (dup2(gate[1], 1) < 0 || fcntl(1, F_SETFD, 0) < 0)
                _exit(127);
        bool exec_init = a->ctx->init_fd >= 0 && dup3(a->ctx->init_fd, 0, O_CLOEXEC) == 0;
        if (!exec_init)
                close(0);
        syscall(SYS_close_range, 2U, ~0U, 0U);
        a->report_fd = -1;
        a->sysuser_fd = -1;
        if (!a->spec->template && !a->ctx->userns)
                CHECK_R(a, STEP_PRIVS, privs_drop(a->host_id, a->host_id, PRIVS_SETID | PRIVS_SETGROUPS));
        else
                CHECK_R(a, STEP_PRIVS, privs_drop(0, 0, 0));
        CHECK(a, STEP_PRIVS, prctl(PR_SET_DUMPABLE, 0, 0, 0, 0));
        confine(a, false);
        if (exec_init)
                exec_init_binary(child);
        close(0);
        close(1); /* opens the gate */
        for (;;) {
                int status;
                pid_t p = waitpid(-1, &status, __WALL);
                if (p == child)
                        _exit(exit_code_of(status));
                if (p < 0 && errno != EINTR)
                        _exit(255);
        }
}

/* Where the daemon's argv and environment strings live (fields 48-51 of
 * /proc/self/stat), found once by jail_ctx_init. A jail's init is a clone of
 * the daemon that never execs, and /proc/1/cmdline (unlike environ) is
 * readable by every process of the jail: it would show the daemon's command
 * line (binary path, listen address, data dir, --set values such as an
 * api_key). The child blanks both areas in its private copy of the memory. */
static struct {
        unsigned long arg_start, arg_end, env_start, env_end;
} host_strings;

void jail_find_host_strings(void)
{
        char buf[4096];
        if (read_file_small("/proc/self/stat", buf, sizeof(buf), NULL) < 0)
                return;
        /* comm (field 2) may hold spaces and parentheses: count from the last ')'. */
        char *p = strrchr(buf, ')');
        unsigned long v[4];
        int field = 2, got = 0;
        while (p && *p && got < 4) {
                p = strchr(p, ' ');
                if (!p)
                        break;
                p++;
                field++;
                if (field >= 48 && field <= 51)
                        v[got++] = strtoul(p, NULL, 10);
        }
        if (got == 4 && v[0] <= v[1] && v[2] <= v[3]) {
                host_strings.arg_start = v[0];
                host_strings.arg_end = v[1];
                host_strings.env_start = v[2];
                host_strings.env_end = v[3];
        }
}

static void blank_host_strings(void)
{
        if (host_strings.arg_end > host_strings.arg_start)
                memset((void *)host_strings.arg_start, 0, host_strings.arg_end - host_strings.arg_start);
        if (host_strings.env_end > host_strings.env_start)
                memset((void *)host_strings.env_start, 0, host_strings.env_end - host_strings.env_start);
        prctl(PR_SET_NAME, "init", 0, 0, 0);
}

void jail_child_main(struct child_args *a)
{
        char go;
        /* Die with the daemon thread that spawned us (house style R7). */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        blank_host_strings();
        if (read(a->sync_fd, &go, 1) != 1)
                jail_child_fail(a, STEP_SYNC, EPIPE);
        close(a->sync_fd);
        if (a->spec->template) {
                /* Our host uid (0) is not mapped in the template's user
                 * namespace; become its root (JAIL_TEMPLATE_UID outside) or
                 * every file we create would fail with EOVERFLOW. */
                CHECK_R(a, STEP_SYNC, privs_become_root());
        }
        /* A session and process group of its own: otherwise every process
         * of the jail is in the daemon's (kill(0, …) from the guest would aim
         * at the daemon's group, which only the uid check and Landlock's
         * signal scope stop, and in rootless mode the uid is the daemon's),
         * and in its terminal session when started from a shell. */
        CHECK(a, STEP_SYNC, setsid());
        CHECK(a, STEP_SYNC, unshare(CLONE_NEWCGROUP));
        int netns = a->spec->has_netns ? a->spec->netns_fd : a->ctx->netns_fd;
        if (netns >= 0 && !a->spec->template)
                CHECK(a, STEP_NETNS, setns(netns, CLONE_NEWNET));
        CHECK(a, STEP_HOSTNAME, sethostname("sandbox", 7));
        /* Opened on the host's (writable) procfs before the jail's /proc/sys
         * is made read-only: names looked up through it later resolve in the
         * looking process's user namespace (the workload's own). */
        if (!a->spec->template && !a->ctx->userns)
                a->sysuser_fd = open("/proc/sys/user", O_PATH | O_DIRECTORY | O_CLOEXEC);
        jail_setup_root(a);
        run_init(a);
}
