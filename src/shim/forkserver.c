/* libsandboxd-forkserver.so: turns a booted, jailed once-mode kernel into a
 * fork server (a "template"), for interpreters that are single-threaded
 * (python, perl).
 *
 * Why a preloaded C library instead of fork-server code in each kernel:
 * every page a forked child writes costs a copy-on-write fault, and on a
 * virtual machine each one also flushes the TLB. The Python fork server this
 * replaces took ~900 faults per execution, most of them in interpreter code
 * doing namespace, mount and privilege set-up through ctypes. Here that work
 * is plain system calls on a small C stack, and the interpreter only wakes
 * up (in the child) to read its request, like any once-mode kernel.
 *
 * How: the kernel boots, warms up, announces {"ready":true} on fd 3 and then
 * blocks reading its request from fd 3. The shim interposes read(): the
 * first read of fd 3 in an armed process receives the configuration (see
 * forkserver.h) and becomes the fork loop. For each 'F' message it clones a
 * child into new mount, pid, ipc, uts and network namespaces. That child (pid 1 of
 * the execution) forks the executor and only reaps; the executor mounts a
 * private /tmp, /workspace and /proc, reports its pid to the daemon (which
 * moves it into the execution's cgroup), drops to the jail uid, applies
 * rlimits, Landlock and the seccomp policy, and finally returns from read()
 * with the request: the interpreter never knows it was forked.
 *
 * Everything here runs before any guest code, inside the template's jail
 * (its own user namespace, no_new_privs). Built without sanitizers: it is
 * loaded into the interpreters, not the daemon. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/io.h"
#include "jail/landlock.h"
#include "jail/privs.h"
#include "jail/procfs.h"
#include "shim/forkserver.h"

#define CTL_FD 3

static bool armed;

__attribute__((constructor)) static void forkserver_init(void)
{
        const char *v = getenv("SANDBOXD_FORKSERVER");
        armed = v && strcmp(v, "1") == 0;
        /* Neither the interpreter nor anything it starts should see us. */
        unsetenv("SANDBOXD_FORKSERVER");
        unsetenv("LD_PRELOAD");
}

static ssize_t sys_read(int fd, void *buf, size_t n)
{
        return syscall(SYS_read, fd, buf, n);
}

/* ---- in the executor ---- */

static void private_mounts(const struct forkserver_config *c)
{
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, c->tmp_opts) < 0 ||
            mount("tmpfs", "/workspace", "tmpfs", MS_NOSUID | MS_NODEV, c->ws_opts) < 0 ||
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                _exit(120);
        if (jail_mask_proc("/proc") < 0)
                _exit(121);
        /* The template's cwd is the /workspace under the new mount. */
        if (chdir("/workspace") < 0)
                _exit(123);
}

/* Sends "P" with SCM_CREDENTIALS: the kernel translates our pid into the
 * daemon's pid namespace, which is how the daemon finds (and cgroups) a
 * grandchild of a process in another pid namespace. Then waits for "G". */
static void report_pid_and_wait(void)
{
        struct ucred uc = { getpid(), getuid(), getgid() };
        char byte;
        if (io_send_byte(CTL_FD, 'P', SCM_CREDENTIALS, &uc, sizeof(uc)) < 0)
                _exit(124);
        if (read_all(CTL_FD, &byte, 1) < 0 || byte != 'G')
                _exit(125);
}

static void drop_privileges(const struct forkserver_config *c)
{
        for (uint32_t i = 0; i < c->nrlimits && i < FORKSERVER_MAX_RLIMITS; i++)
                if (privs_setrlimit(c->rlimits[i].resource, c->rlimits[i].soft, c->rlimits[i].hard) < 0)
                        _exit(126);
        if (privs_drop(c->uid, c->gid, PRIVS_SETID | PRIVS_SETGROUPS) < 0)
                _exit(128);
}

static void restrict_scopes(const struct forkserver_config *c)
{
        if (c->landlock) {
                int r = landlock_restrict_scopes();
                if (r < 0 && r != -EOPNOTSUPP)
                        _exit(130);
        }
}

/* Landlock scoping, then the daemon's notify program, installed with a
 * listener that goes to the daemon (engine/notify.c answers and counts
 * refusals); no copy is kept. Pid 1 has its own filter (confine_pid1). */
static void confine(const struct forkserver_config *c, const struct sock_filter *bpf)
{
        restrict_scopes(c);
        struct sock_fprog prog = { (unsigned short)(c->bpf_len / sizeof(struct sock_filter)),
                                   (struct sock_filter *)bpf };
        int listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        if (listener < 0)
                _exit(131);
        if (io_send_byte(CTL_FD, 'N', SCM_RIGHTS, &listener, sizeof(listener)) < 0)
                _exit(132);
        close(listener);
}

/* ---- in the execution's pid 1 ---- */

#if defined(__x86_64__)
#define SHIM_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SHIM_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define ALLOW_NR(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* Pid 1 only closes its gate, waits for the executor and exits: a filter
 * that allows exactly that, every other call plain ENOSYS (another
 * architecture's calls kill it). Stricter than the daemon's policy, and
 * about 20 instructions where the daemon's are hundreds: each install
 * converts and JIT-compiles its program, which at two installs per
 * execution was ~7% of the CPU of a stateless request. */
static void confine_pid1(void)
{
        static const struct sock_filter f[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SHIM_AUDIT_ARCH, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                ALLOW_NR(__NR_wait4),
                ALLOW_NR(__NR_close),
                ALLOW_NR(__NR_exit_group),
                ALLOW_NR(__NR_exit),
                ALLOW_NR(__NR_rt_sigreturn),
                ALLOW_NR(__NR_restart_syscall),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        };
        struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), (struct sock_filter *)f };
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                _exit(131);
}

/* fds 1, 2 and 3 of the execution; 3 is close-on-exec so that nothing the
 * guest starts can talk to the daemon. Everything else is closed. */
static void install_fds(const int fds[3])
{
        if (dup2(fds[0], 1) < 0 || dup2(fds[1], 2) < 0 || dup3(fds[2], CTL_FD, O_CLOEXEC) < 0)
                _exit(118);
        if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
                _exit(119);
}

/* Pid 1 only reaps: when the executor exits, so does pid 1, and the kernel
 * tears the namespace down, escaped descendants included. It touches as
 * little memory as possible, since every written page is a copy. Before
 * the executor can run guest code (it waits for the daemon's "G" first),
 * pid 1 holds nothing either: the jail user, no capabilities, not dumpable,
 * the same Landlock scopes and a seccomp filter that allows only waiting
 * and exiting (confine_pid1). */
static __attribute__((noreturn)) void reap_until(pid_t executor, const struct forkserver_config *c, int gate)
{
        if (gate > 0)
                syscall(SYS_close_range, 0U, (unsigned)gate - 1, 0U);
        syscall(SYS_close_range, (unsigned)gate + 1, ~0U, 0U);
        if (privs_drop(c->uid, c->gid, PRIVS_SETID | PRIVS_SETGROUPS) < 0 ||
            prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                _exit(112);
        restrict_scopes(c);
        confine_pid1();
        close(gate); /* the executor may run guest code now */
        for (;;) {
                int status;
                pid_t p = waitpid(-1, &status, 0);
                if (p == executor || (p < 0 && errno == ECHILD))
                        _exit(0);
        }
}

/* Runs in the clone()d child, pid 1 of fresh namespaces. Returns only in
 * the executor, fully confined. */
static void become_execution(const struct forkserver_config *c, const struct sock_filter *bpf, const int fds[3])
{
        /* The template ignores SIGCHLD (see serve()); the guest must not. */
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigaction(SIGCHLD, &dfl, NULL);
        /* Own session and process group: kill(0, ...) from the guest must
         * not reach the template or other executions. */
        setsid();
        install_fds(fds);
        /* The executor returns to the interpreter only once pid 1 holds
         * nothing (EOF on the gate). */
        int gate[2];
        if (pipe2(gate, O_CLOEXEC) < 0)
                _exit(117);
        /* glibc's fork, not a raw clone: it keeps the child's cached thread
         * id right, which raise() and abort() in the guest rely on. */
        pid_t executor = fork();
        if (executor < 0)
                _exit(117);
        if (executor > 0) {
                close(gate[0]);
                reap_until(executor, c, gate[1]);
        }
        close(gate[1]);
        private_mounts(c);
        report_pid_and_wait();
        /* Now in the execution's cgroup (the daemon moved us before 'G'):
         * make it our cgroup root, so /proc/self/cgroup shows "/" as in
         * every other jail, not the daemon's hierarchy. */
        if (unshare(CLONE_NEWCGROUP) < 0)
                _exit(132);
        drop_privileges(c);
        confine(c, bpf);
        char byte;
        if (sys_read(gate[0], &byte, 1) != 0)
                _exit(111);
        close(gate[0]);
}

/* ---- in the template ---- */

static int recv_fds(int sock, int fds[3])
{
        char byte;
        struct iovec iov = { &byte, 1 };
        union {
                char buf[CMSG_SPACE(3 * sizeof(int))];
                struct cmsghdr align;
        } u;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
        ssize_t n;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return -1; /* the daemon closed the template: done */
        int got = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (got < 3)
                                fds[got++] = fd;
                        else
                                close(fd);
                }
        }
        if (byte == 'F' && got == 3)
                return 0;
        for (int i = 0; i < got; i++)
                close(fds[i]);
        return 1; /* malformed: ignore */
}

static void read_config(struct forkserver_config *c, struct sock_filter **bpf)
{
        if (read_all(CTL_FD, c, sizeof(*c)) < 0 || c->magic != FORKSERVER_MAGIC ||
            c->version != FORKSERVER_VERSION || c->bpf_len == 0 || c->bpf_len > FORKSERVER_MAX_BPF ||
            c->bpf_len % sizeof(struct sock_filter) != 0)
                _exit(115);
        c->tmp_opts[sizeof(c->tmp_opts) - 1] = '\0';
        c->ws_opts[sizeof(c->ws_opts) - 1] = '\0';
        *bpf = malloc(c->bpf_len);
        if (!*bpf || read_all(CTL_FD, *bpf, c->bpf_len) < 0)
                _exit(116);
}

/* Returns only in an executor. */
static void serve(void)
{
        static struct forkserver_config cfg;
        static struct sock_filter *bpf;
        read_config(&cfg, &bpf);
        /* Nobody drains the template's own stdout/stderr pipes (every
         * execution gets fresh ones): a stray write must not block it. */
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                _exit(114);
        close(null);
        /* Pid 1 of each execution is our child; let the kernel reap them. */
        struct sigaction ign = { .sa_handler = SIG_IGN };
        sigaction(SIGCHLD, &ign, NULL);
        static const char ready[] = "{\"ready\":true}\n";
        if (write_all(CTL_FD, ready, sizeof(ready) - 1) < 0)
                _exit(0);
        for (;;) {
                int fds[3];
                int r = recv_fds(CTL_FD, fds);
                if (r < 0)
                        _exit(0);
                if (r > 0)
                        continue;
                /* CLONE_NEWNET: abstract unix socket names live in the
                 * network namespace; in the template's one, executions
                 * would see (/proc/net/unix) and squat each other's. */
                pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                                           CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, NULL);
                if (pid == 0) {
                        become_execution(&cfg, bpf, fds);
                        return;
                }
                for (int i = 0; i < 3; i++)
                        close(fds[i]);
        }
}

/* The one symbol the shim exports (it is built with hidden visibility). */
__attribute__((visibility("default"))) ssize_t read(int fd, void *buf, size_t n)
{
        if (armed && fd == CTL_FD) {
                armed = false;
                serve();
        }
        return sys_read(fd, buf, n);
}
