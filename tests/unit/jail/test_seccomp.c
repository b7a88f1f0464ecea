/* Each check runs in a forked child that installs the filter and leaves with
 * _exit(): LeakSanitizer needs ptrace at exit, which the filter denies, so
 * the policy is built and freed in the unfiltered parent where leaks are
 * still checked. Expected errnos are chosen to differ from what the call
 * returns without the filter, so a missing rule cannot pass by accident. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/openat2.h>
#include <seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/seccomp.h"
#include "jail/seccomp_table.h"
#include "tap.h"

#define X32_SYSCALL_BIT 0x40000000L

static struct seccomp_prog *g_prog;

/* Returns the wait status of a child that ran body under the policy. */
static int run_filtered_status(bool allow_inet, void (*body)(void))
{
        ASSERT_OK(seccomp_prog_build(allow_inet, &g_prog));
        ASSERT_TRUE(g_prog != NULL && g_prog->fprog.len > 0);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                /* SIGSYS from KILL_PROCESS would otherwise dump core. */
                setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 });
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_prog_apply(g_prog) < 0)
                        _exit(2);
                body();
                _exit(0);
        }
        seccomp_prog_free(g_prog);
        g_prog = NULL;
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        return st;
}

static void run_filtered(bool allow_inet, void (*body)(void))
{
        int st = run_filtered_status(allow_inet, body);
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 0);
}

/* Declares body_NAME and a TEST that runs it under the policy. */
#define FILTERED_TEST(name, inet)                                            \
        static void body_##name(void);                                       \
        TEST(name) { run_filtered(inet, body_##name); }                      \
        static void body_##name(void)

/* Runs syscall-returning expression and checks it failed with errno e. */
#define ASSERT_ERRNO(call, e)                                                \
        do {                                                                 \
                errno = 0;                                                   \
                long _r = (long)(call);                                      \
                ASSERT_EQ(_r, -1);                                           \
                ASSERT_EQ(errno, (e));                                       \
        } while (0)

TEST(seccomp_build_free_repeatedly)
{
        for (int i = 0; i < 3; i++) {
                struct seccomp_prog *p = NULL;
                ASSERT_OK(seccomp_prog_build(i % 2, &p));
                ASSERT_TRUE(p->fprog.len > 0 && p->fprog.len <= BPF_MAXINSNS);
                seccomp_prog_free(p);
        }
        seccomp_prog_free(NULL);
}

FILTERED_TEST(seccomp_denies_mount_family, false)
{
        /* Unfiltered this is ENOENT (no such target). */
        ASSERT_ERRNO(mount("none", "/nonexistent-sbx", "tmpfs", 0, NULL), EPERM);
        ASSERT_ERRNO(umount2("/nonexistent-sbx", 0), EPERM);
        ASSERT_ERRNO(chroot("/nonexistent-sbx"), EPERM);
        ASSERT_ERRNO(syscall(SYS_fsopen, "tmpfs", 0), EPERM);
        ASSERT_ERRNO(syscall(SYS_open_tree, AT_FDCWD, "/", 0), EPERM);
        ASSERT_ERRNO(syscall(467 /* open_tree_attr */, AT_FDCWD, "/", 0, NULL, 0), EPERM);
}

FILTERED_TEST(seccomp_denies_namespaces, false)
{
        ASSERT_ERRNO(unshare(CLONE_NEWUSER), EPERM);
        ASSERT_ERRNO(unshare(CLONE_NEWNS), EPERM);
        ASSERT_ERRNO(setns(0, 0), EPERM);
        static const unsigned long flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC,
                                               CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                               CLONE_NEWCGROUP };
        for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
                errno = 0;
                long r = syscall(SYS_clone, flags[i] | CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
                if (r == 0)
                        _exit(0); /* filter missing: keep the child out of the test */
                ASSERT_EQ(r, -1);
                ASSERT_EQ(errno, EPERM);
        }
        /* Unfiltered: EINVAL for a zero size. */
        ASSERT_ERRNO(syscall(SYS_clone3, NULL, 0), ENOSYS);
}

FILTERED_TEST(seccomp_allows_plain_fork, false)
{
        pid_t pid = fork(); /* glibc tries clone3 first, then clone */
        ASSERT_TRUE(pid >= 0);
        if (pid == 0)
                _exit(42);
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 42);
        ASSERT_TRUE(getpid() > 0);
        int fds[2];
        ASSERT_OK(pipe2(fds, O_CLOEXEC));
        ASSERT_EQ(write(fds[1], "x", 1), 1);
        close(fds[0]);
        close(fds[1]);
}

FILTERED_TEST(seccomp_socket_families_without_inet, false)
{
        ASSERT_ERRNO(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
        ASSERT_ERRNO(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
        ASSERT_ERRNO(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
        /* Upper-half garbage must not turn AF_INET into "AF_UNIX". */
        ASSERT_ERRNO(syscall(SYS_socket, 0x100000000L | AF_INET, SOCK_STREAM, 0), EAFNOSUPPORT);
        int sv[2];
        /* Unfiltered: EOPNOTSUPP. */
        ASSERT_ERRNO(socketpair(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), EAFNOSUPPORT);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(fd >= 0);
        close(fd);
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        close(sv[0]);
        close(sv[1]);
}

FILTERED_TEST(seccomp_socket_families_with_inet, true)
{
        static const int ok[] = { AF_UNIX, AF_INET, AF_INET6 };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                int fd = socket(ok[i], SOCK_DGRAM | SOCK_CLOEXEC, 0);
                ASSERT_TRUE(fd >= 0);
                close(fd);
        }
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */);
        ASSERT_TRUE(fd >= 0);
        close(fd);
        ASSERT_ERRNO(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
        ASSERT_ERRNO(socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
        ASSERT_ERRNO(socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
        ASSERT_ERRNO(socket(AF_AX25, SOCK_DGRAM | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
        ASSERT_ERRNO(socket(-1, SOCK_DGRAM | SOCK_CLOEXEC, 0), EAFNOSUPPORT);
}

FILTERED_TEST(seccomp_denies_introspection_and_kernel_surface, false)
{
        ASSERT_ERRNO(ptrace(PTRACE_TRACEME, 0, NULL, NULL), EPERM);
        /* Unfiltered: EINVAL / EFAULT. */
        ASSERT_ERRNO(syscall(SYS_bpf, BPF_PROG_LOAD, NULL, 0), EPERM);
        ASSERT_ERRNO(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), EPERM);
        ASSERT_ERRNO(syscall(SYS_add_key, "user", "x", "y", 1, KEY_SPEC_SESSION_KEYRING), EPERM);
        ASSERT_ERRNO(syscall(SYS_io_uring_setup, 0, NULL), EPERM);
        ASSERT_ERRNO(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
        ASSERT_ERRNO(syscall(SYS_userfaultfd, O_CLOEXEC), EPERM);
        ASSERT_ERRNO(syscall(SYS_kcmp, getpid(), getpid(), 0, 0, 0), EPERM);
        ASSERT_ERRNO(syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0), EPERM);
}

FILTERED_TEST(seccomp_denies_tty_injection, false)
{
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        char c = 'x';
        /* Unfiltered: ENOTTY. */
        ASSERT_ERRNO(ioctl(fd, TIOCSTI, &c), EPERM);
        ASSERT_ERRNO(ioctl(fd, TIOCLINUX, &c), EPERM);
        ASSERT_ERRNO(syscall(SYS_ioctl, fd, 0xabcd00000000UL | TIOCSTI, &c), EPERM);
        /* Other ioctls are untouched. */
        ASSERT_ERRNO(ioctl(fd, TIOCGPGRP, &c), ENOTTY);
        close(fd);
}

FILTERED_TEST(seccomp_personality_query_only, false)
{
        int cur = personality(0xffffffff);
        ASSERT_TRUE(cur >= 0);
        ASSERT_EQ(personality(PER_LINUX), cur);
        ASSERT_ERRNO(personality(ADDR_NO_RANDOMIZE), EPERM);
        ASSERT_ERRNO(personality(READ_IMPLIES_EXEC), EPERM);
        ASSERT_ERRNO(personality(PER_LINUX32), EPERM);
        ASSERT_ERRNO(personality(0xfffffffe), EPERM);
        ASSERT_ERRNO(personality(0x7fffffff), EPERM);
        ASSERT_ERRNO(syscall(SYS_personality, 0x100000000UL), EPERM);
        ASSERT_EQ(personality(0xffffffff), PER_LINUX);
}

static void body_x32_getpid(void)
{
        syscall(X32_SYSCALL_BIT | SYS_getpid);
}

TEST(seccomp_kills_foreign_abi)
{
        /* x32 numbers would bypass every rule: the process must die. */
        int st = run_filtered_status(false, body_x32_getpid);
        ASSERT_TRUE(WIFSIGNALED(st));
        ASSERT_EQ(WTERMSIG(st), SIGSYS);
}

FILTERED_TEST(seccomp_allows_stacking, false)
{
        /* g_prog is still valid here: the child has its own copy. */
        ASSERT_OK(seccomp_prog_apply(g_prog));
        ASSERT_ERRNO(unshare(CLONE_NEWUSER), EPERM);
        ASSERT_TRUE(getpid() > 0);
}

#ifdef __x86_64__
/* getpid through the i386 entry point (int 0x80, i386 __NR_getpid = 20). */
static long ia32_getpid(void)
{
        long ret;
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
        return ret;
}

static void body_ia32_getpid(void)
{
        ia32_getpid();
}

TEST(seccomp_kills_ia32_abi)
{
        /* Probe unfiltered first: kernels without IA32 emulation SIGSEGV. */
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }); /* no core file */
                _exit(ia32_getpid() == getpid() ? 0 : 1);
        }
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                SKIP("no IA32 emulation in this kernel");
        st = run_filtered_status(false, body_ia32_getpid);
        ASSERT_TRUE(WIFSIGNALED(st));
        ASSERT_EQ(WTERMSIG(st), SIGSYS);
}
#endif

/* --- the default-deny table (issue 10 rows 1, 5, 15) --- */

TEST(seccomp_table_names_resolve_once)
{
        /* Every allowed or refused name is a syscall of x86_64 (a typo would
         * silently leave it to the default), and none is in two lists. */
        if (seccomp_arch_native() != SCMP_ARCH_X86_64)
                SKIP("table numbers are reviewed for x86_64");
        static char seen[1024];
        const struct sc_group eperm = { "eperm", seccomp_deny_eperm, seccomp_n_deny_eperm };
        const struct sc_group enosys = { "enosys", seccomp_deny_enosys, seccomp_n_deny_enosys };
        for (size_t g = 0; g < seccomp_n_allow_groups + 2; g++) {
                const struct sc_group *grp = g < seccomp_n_allow_groups ? &seccomp_allow_groups[g]
                                             : g == seccomp_n_allow_groups ? &eperm : &enosys;
                for (size_t i = 0; i < grp->n; i++) {
                        int nr = seccomp_table_resolve(&grp->names[i]);
                        if (nr < 0 || nr >= 1024 || seen[nr])
                                TAP_FAIL("%s: %s resolves to %d (twice?)", grp->why, grp->names[i].name, nr);
                        seen[nr] = 1;
                }
        }
}

FILTERED_TEST(seccomp_default_denies_unlisted_with_enosys, false)
{
        /* AIO (row 5): unfiltered, io_setup(0, NULL) is EINVAL. */
        ASSERT_ERRNO(syscall(SYS_io_setup, 0, NULL), ENOSYS);
        ASSERT_ERRNO(syscall(SYS_io_submit, 0, 0, NULL), ENOSYS);
        ASSERT_ERRNO(syscall(SYS_io_getevents, 0, 0, 0, NULL, NULL), ENOSYS);
        ASSERT_ERRNO(syscall(SYS_io_destroy, 0), ENOSYS);
        ASSERT_ERRNO(syscall(SYS_io_cancel, 0, NULL, NULL), ENOSYS);
        ASSERT_ERRNO(syscall(SYS_io_pgetevents, 0, 0, 0, NULL, NULL, NULL), ENOSYS);
        /* Newer than the table (row 15): statmount, listmount, lsm_*
         * (EFAULT/EINVAL unfiltered on 6.18), and numbers no kernel has. */
        static const long newer[] = { 457, 458, 459, 460, 461, 468, 469, 470, 512, 1000 };
        for (size_t i = 0; i < ARRAY_SIZE(newer); i++)
                ASSERT_ERRNO(syscall(newer[i], 0, 0, 0, 0), ENOSYS);
        /* Left out on purpose. */
        ASSERT_ERRNO(syscall(SYS_vmsplice, -1, NULL, 0, 0), ENOSYS);
        ASSERT_ERRNO(syscall(SYS_process_madvise, -1, NULL, 0, 0, 0), ENOSYS);
        ASSERT_ERRNO(syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0), ENOSYS);
        /* Still refused with EPERM, not ENOSYS. */
        ASSERT_ERRNO(syscall(SYS_io_uring_setup, 0, NULL), EPERM);
}

/* Runs in a fresh directory; removes it afterwards. */
static void in_tmpdir(void (*fn)(void))
{
        char dir[] = "/tmp/sbx-seccomp-XXXXXX";
        ASSERT_TRUE(mkdtemp(dir) != NULL);
        ASSERT_OK(chdir(dir));
        fn();
        ASSERT_OK(chdir("/"));
        ASSERT_OK(syscall(SYS_unlinkat, AT_FDCWD, dir, AT_REMOVEDIR));
}

static void setid_body(void)
{
        int fd = open("f", O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(chmod("f", 0700));
        ASSERT_ERRNO(chmod("f", 04755), EPERM);
        ASSERT_ERRNO(chmod("f", 02755), EPERM);
        ASSERT_ERRNO(fchmod(fd, 04755), EPERM);
        ASSERT_ERRNO(fchmodat(AT_FDCWD, "f", 06755, 0), EPERM);
        ASSERT_ERRNO(syscall(452 /* fchmodat2 */, AT_FDCWD, "f", 04755, 0), EPERM);
        /* Upper bits of the mode are ignored by the kernel, not by us. */
        ASSERT_ERRNO(syscall(SYS_chmod, "f", 0xffff0000UL | 04755), EPERM);
        struct stat st;
        ASSERT_OK(stat("f", &st));
        ASSERT_EQ(st.st_mode & 07777, 0700);
        /* Creation with set-id bits. */
        ASSERT_ERRNO(open("g", O_CREAT | O_WRONLY | O_CLOEXEC, 04755), EPERM);
        ASSERT_ERRNO(openat(AT_FDCWD, "g", O_CREAT | O_EXCL | O_WRONLY, 02755), EPERM);
        ASSERT_ERRNO(syscall(SYS_open, "g", O_CREAT | O_WRONLY, 04755), EPERM);
        ASSERT_ERRNO(creat("g", 04755), EPERM);
        ASSERT_ERRNO(open(".", O_TMPFILE | O_WRONLY, 04755), EPERM);
        ASSERT_ERRNO(mkdir("d", 02755), EPERM);
        ASSERT_ERRNO(mknod("n", S_IFREG | 04755, 0), EPERM);
        ASSERT_ERRNO(mknodat(AT_FDCWD, "n", S_IFREG | 02755, 0), EPERM);
        ASSERT_ERRNO(access("g", F_OK), ENOENT);
        /* Opening without creating ignores the mode argument. */
        int fd2 = open("f", O_RDONLY | O_CLOEXEC, 04755);
        ASSERT_TRUE(fd2 >= 0);
        close(fd2);
        ASSERT_OK(mkdir("d", 0755));
        ASSERT_OK(rmdir("d"));
        /* File capabilities: every setxattr is refused. */
        ASSERT_ERRNO(setxattr("f", "security.capability", "x", 1, 0), EPERM);
        ASSERT_ERRNO(fsetxattr(fd, "user.x", "x", 1, 0), EPERM);
        ASSERT_ERRNO(lsetxattr("f", "trusted.x", "x", 1, 0), EPERM);
        close(fd);
        ASSERT_OK(unlink("f"));
}

FILTERED_TEST(seccomp_refuses_setid_bits, false)
{
        in_tmpdir(setid_body);
}

FILTERED_TEST(seccomp_allows_terminal_and_pidfd, false)
{
        int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return; /* no devpts here: nothing to check */
        int unlock = 0;
        struct winsize ws = { .ws_row = 30, .ws_col = 90 };
        ASSERT_OK(ioctl(m, TIOCSPTLCK, &unlock));
        ASSERT_OK(ioctl(m, TIOCSWINSZ, &ws));
        int slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        ASSERT_TRUE(slave >= 0);
        ASSERT_OK(ioctl(slave, TIOCGWINSZ, &ws));
        ASSERT_EQ(ws.ws_col, 90);
        close(slave);
        close(m);
        int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        ASSERT_TRUE(pfd >= 0);
        close(pfd);
        ASSERT_ERRNO(syscall(SYS_pidfd_open, 1, 0), EPERM);
        ASSERT_ERRNO(syscall(SYS_pidfd_open, 0xffffffff00000001UL, 0), EPERM);
}
