/* Each TEST runs in a fork of the runner; the restricted side is always a
 * further child, so the test process itself stays outside the domain and
 * plays "another execution". */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/landlock.h"
#include "tap.h"

static void require_scopes(void)
{
        int abi = landlock_abi_version();
        if (abi < 0)
                SKIP("landlock unavailable");
        if (abi < 6)
                SKIP("landlock ABI < 6: no scoping");
}

static socklen_t abstract_addr(struct sockaddr_un *sa, const char *tag)
{
        *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "sbx-landlock-%s-%d", tag,
                         (int)getpid());
        return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int listen_abstract(const struct sockaddr_un *sa, socklen_t len)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (const struct sockaddr *)sa, len) < 0 || listen(fd, 4) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* Returns 0 when a connect succeeded, else -errno. */
static int try_connect(const struct sockaddr_un *sa, socklen_t len)
{
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        return connect(fd, (const struct sockaddr *)sa, len) < 0 ? -errno : 0;
}

static void restrict_self(void)
{
        ASSERT_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
        ASSERT_OK(landlock_restrict_scopes());
}

/* Forks fn into a child and asserts it exited 0 (its own ASSERTs exit 1). */
static void run_child(void (*fn)(void *), void *arg)
{
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                fn(arg);
                _exit(0);
        }
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 0);
}

TEST(landlock_abi_version_reported)
{
        int abi = landlock_abi_version();
        if (abi == -ENOSYS || abi == -EOPNOTSUPP)
                SKIP("landlock unavailable");
        ASSERT_TRUE(abi >= 1);
}

struct sock_case {
        struct sockaddr_un sa, dgram_sa;
        socklen_t len, dgram_len;
};

static int send_dgram(const struct sockaddr_un *sa, socklen_t len)
{
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        return sendto(fd, "x", 1, 0, (const struct sockaddr *)sa, len) < 0 ? -errno : 0;
}

static void child_abstract(void *arg)
{
        const struct sock_case *outer = arg;
        /* Control: reachable before the restriction. */
        ASSERT_OK(try_connect(&outer->sa, outer->len));
        ASSERT_OK(send_dgram(&outer->dgram_sa, outer->dgram_len));
        restrict_self();
        ASSERT_EQ(try_connect(&outer->sa, outer->len), -EPERM);
        /* Datagrams to the outside are scoped too. */
        ASSERT_EQ(send_dgram(&outer->dgram_sa, outer->dgram_len), -EPERM);

        /* A socket created inside the domain stays usable from inside. */
        struct sockaddr_un own;
        socklen_t own_len = abstract_addr(&own, "own");
        int lfd = listen_abstract(&own, own_len);
        ASSERT_TRUE(lfd >= 0);
        ASSERT_OK(try_connect(&own, own_len));
        close(lfd);
}

TEST(landlock_scopes_abstract_unix_sockets)
{
        require_scopes();
        struct sock_case c;
        c.len = abstract_addr(&c.sa, "outer");
        int lfd = listen_abstract(&c.sa, c.len);
        ASSERT_TRUE(lfd >= 0);
        c.dgram_len = abstract_addr(&c.dgram_sa, "outer-dgram");
        int dfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bind(dfd, (const struct sockaddr *)&c.dgram_sa, c.dgram_len));
        run_child(child_abstract, &c);
        close(dfd);
        close(lfd);
}

static void child_signal(void *arg)
{
        pid_t outside = *(pid_t *)arg;
        restrict_self();
        ASSERT_EQ(kill(outside, SIGTERM), -1);
        ASSERT_EQ(errno, EPERM);
        ASSERT_EQ(kill(getppid(), 0), -1);
        ASSERT_EQ(errno, EPERM);

        /* Processes inside the same domain can still be signalled. */
        pid_t inner = fork();
        ASSERT_TRUE(inner >= 0);
        if (inner == 0) {
                pause();
                _exit(0);
        }
        ASSERT_OK(kill(inner, SIGKILL));
        int st = 0;
        ASSERT_EQ(waitpid(inner, &st, 0), inner);
        ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        ASSERT_OK(kill(getpid(), 0));
}

TEST(landlock_scopes_signals)
{
        require_scopes();
        pid_t victim = fork();
        ASSERT_TRUE(victim >= 0);
        if (victim == 0) {
                pause();
                _exit(0);
        }
        run_child(child_signal, &victim);
        /* The victim must have survived the restricted child's SIGTERM. */
        int st = 0;
        ASSERT_EQ(waitpid(victim, &st, WNOHANG), 0);
        ASSERT_OK(kill(victim, SIGKILL));
        ASSERT_EQ(waitpid(victim, &st, 0), victim);
}
