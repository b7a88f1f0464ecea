/* The seccomp listener thread (engine/notify.c) and the policy's errno
 * evaluator (seccomp_prog_refusal): a forked child installs the notify
 * program with a listener, sends it over a socketpair as the jail does, and
 * makes refused calls; the notifier must answer each with the policy's
 * errno and count it. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/audit.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "engine/notify.h"
#include "jail/seccomp.h"
#include "shim/forkserver.h"
#include "tap.h"

static struct seccomp_data data_for(int nr, uint64_t a0, uint64_t a1)
{
        struct seccomp_data d = { .nr = nr, .arch = AUDIT_ARCH_X86_64 };
        d.args[0] = a0;
        d.args[1] = a1;
        return d;
}

TEST(refusal_errno_matches_policy)
{
#ifndef __x86_64__
        SKIP("x86_64 numbers");
#endif
        struct seccomp_prog *p = NULL;
        ASSERT_OK(seccomp_prog_build(false, &p));
        struct seccomp_data d = data_for(SYS_getpid, 0, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), 0);
        d = data_for(SYS_io_setup, 1, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), ENOSYS);
        d = data_for(SYS_mount, 0, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), EPERM);
        d = data_for(SYS_socket, AF_INET, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), EAFNOSUPPORT);
        d = data_for(SYS_socket, AF_UNIX, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), 0);
        d = data_for(SYS_chmod, 0, 04755);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), EPERM);
        d = data_for(SYS_chmod, 0, 0755);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), 0);
        d = data_for(SYS_unshare, CLONE_NEWUSER, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), EPERM);
        d = data_for(458 /* listmount */, 0, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), ENOSYS);
        d = data_for(SYS_clone3, 0, 0);
        ASSERT_EQ(seccomp_prog_refusal(p, &d), ENOSYS);
        /* Another ABI: the policy kills; the listener answers ENOSYS. */
        d = data_for(SYS_getpid, 0, 0);
        d.arch = AUDIT_ARCH_I386;
        ASSERT_EQ(seccomp_prog_refusal(p, &d), ENOSYS);
        /* The notify variant differs only in the refusal returns. */
        ASSERT_EQ(p->notify.len, p->fprog.len);
        seccomp_prog_free(p);
}

/* As the jail's workload sends it: one byte 'N' with SCM_RIGHTS. */
static int send_fd(int sock, int fd)
{
        return io_send_byte(sock, NOTIFY_TAG, SCM_RIGHTS, &fd, sizeof(fd)) == 0 ? 0 : -1;
}

/* In the child: 3 refused calls with their errnos, 1 quiet one, 1 allowed. */
static int child_calls(void)
{
        int bad = 0;
        errno = 0;
        bad += syscall(SYS_io_setup, 1, NULL) != -1 || errno != ENOSYS;
        errno = 0;
        bad += syscall(SYS_mount, "none", "/nonexistent", "tmpfs", 0, NULL) != -1 || errno != EPERM;
        errno = 0;
        bad += socket(AF_INET, SOCK_STREAM, 0) != -1 || errno != EAFNOSUPPORT;
        errno = 0;
        bad += syscall(SYS_clone3, NULL, 0) != -1 || errno != ENOSYS; /* quiet: not counted */
        bad += getpid() <= 0;
        return bad;
}

/* Runs calls() in a child under the notify program, with the listener
 * watched by n; returns the child's exit code and the count. */
static int run_watched(struct seccomp_prog *p, struct notifier *n, int (*calls)(void), uint64_t *ret_count)
{
        int sv[2];
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 });
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        _exit(100);
                int fd = seccomp_prog_apply_listener(p);
                if (fd < 0 || send_fd(sv[1], fd) < 0)
                        _exit(101);
                close(fd);
                char go;
                if (read(sv[1], &go, 1) != 1) /* the parent watches first */
                        _exit(102);
                _exit(calls());
        }
        close(sv[1]);
        int fd = notify_recv_tagged_fd(sv[0], NOTIFY_TAG, 2000);
        ASSERT_TRUE(fd >= 0);
        struct notify_watch *w = NULL;
        ASSERT_OK(notifier_watch(n, fd, "test", &w));
        ASSERT_EQ(write(sv[0], "g", 1), 1);
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT_TRUE(WIFEXITED(st));
        *ret_count = notify_watch_count(w);
        notifier_unwatch(n, w);
        close(sv[0]);
        return WEXITSTATUS(st);
}

/* EPERM while counted, ENOSYS once the cap closed the listener. */
static int calls_past_cap(void)
{
        for (int i = 0; i < NOTIFY_MAX_PER_PROC + 3; i++) {
                errno = 0;
                long r = syscall(SYS_mount, "none", "/nonexistent", "tmpfs", 0, NULL);
                int want = i < NOTIFY_MAX_PER_PROC ? EPERM : ENOSYS;
                if (r != -1 || errno != want)
                        return 1;
        }
        return 0;
}

/* calls() under the notify program with a fresh notifier: its count. */
static uint64_t count_refusals(int (*calls)(void))
{
        struct seccomp_prog *p = NULL;
        struct notifier *n = NULL;
        ASSERT_OK(seccomp_prog_build(false, &p));
        ASSERT_OK(notifier_start(p, &n));
        uint64_t count = 0;
        ASSERT_EQ(run_watched(p, n, calls, &count), 0);
        notifier_free(n);
        seccomp_prog_free(p);
        return count;
}

TEST(notifier_caps_one_process)
{
        ASSERT_U64_EQ(count_refusals(calls_past_cap), NOTIFY_MAX_PER_PROC);
}

TEST(notifier_answers_and_counts)
{
        ASSERT_U64_EQ(count_refusals(child_calls), 3);
}

TEST(refusals_without_listener_are_enosys)
{
        /* The daemon gone (listener closed): still refused, never allowed. */
        struct seccomp_prog *p = NULL;
        ASSERT_OK(seccomp_prog_build(false, &p));
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        _exit(100);
                int fd = seccomp_prog_apply_listener(p);
                if (fd < 0)
                        _exit(101);
                close(fd);
                errno = 0;
                long r = syscall(SYS_mount, "none", "/nonexistent", "tmpfs", 0, NULL);
                _exit(r == -1 && errno == ENOSYS ? 0 : 1);
        }
        seccomp_prog_free(p);
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 0);
}
