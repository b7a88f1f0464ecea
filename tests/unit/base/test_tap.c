/* Tests of the harness itself (tests/unit/tap.h): a failing assertion
 * evaluates its operands once and prints both values. Each case runs the
 * assertion in a child whose stderr is captured. */
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

static int g_calls_fd = -1;

/* Counts its calls on a pipe (the child's memory dies with it). */
static int failing_call(void)
{
        (void)!write(g_calls_fd, "x", 1);
        return -ENOENT;
}

static long long counted(long long v)
{
        (void)!write(g_calls_fd, "x", 1);
        return v;
}

/* Runs fn in a child; returns its exit status, the number of counted
 * calls, and what it printed on stderr. */
static int run_child(void (*fn)(void), int *ret_calls, char *err, size_t errlen)
{
        int calls[2], errp[2];
        if (pipe(calls) < 0 || pipe(errp) < 0)
                TAP_FAIL("pipe: %s", strerror(errno));
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
                close(calls[0]);
                close(errp[0]);
                g_calls_fd = calls[1];
                dup2(errp[1], 2);
                fn();
                exit(0);
        }
        close(calls[1]);
        close(errp[1]);
        int status;
        waitpid(pid, &status, 0);
        char buf[64];
        ssize_t n = read(calls[0], buf, sizeof(buf));
        *ret_calls = n > 0 ? (int)n : 0;
        n = read(errp[0], err, errlen - 1);
        err[n > 0 ? n : 0] = '\0';
        close(calls[0]);
        close(errp[0]);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void ok_fails(void)
{
        ASSERT_OK(failing_call());
}

static void eq_fails(void)
{
        ASSERT_EQ(counted(41), counted(42));
}

static void u64_fails(void)
{
        ASSERT_U64_EQ(counted(-1), 7);
}

static void err_fails(void)
{
        ASSERT_ERR(counted(0), EEXIST);
}

static void ok_passes(void)
{
        ASSERT_OK(counted(3));
        ASSERT_ERR(counted(-EEXIST), EEXIST);
}

TEST(tap_assert_ok_evaluates_once_and_names_the_errno)
{
        char err[512];
        int calls;
        ASSERT_EQ(run_child(ok_fails, &calls, err, sizeof(err)), 1);
        ASSERT_EQ(calls, 1);
        ASSERT_TRUE(strstr(err, "failing_call()") != NULL);
        ASSERT_TRUE(strstr(err, "-2") != NULL);
        ASSERT_TRUE(strstr(err, strerror(ENOENT)) != NULL);
}

TEST(tap_typed_asserts_print_both_operands_once)
{
        char err[512];
        int calls;
        ASSERT_EQ(run_child(eq_fails, &calls, err, sizeof(err)), 1);
        ASSERT_EQ(calls, 2);
        ASSERT_TRUE(strstr(err, "41 vs 42") != NULL);
        ASSERT_EQ(run_child(u64_fails, &calls, err, sizeof(err)), 1);
        ASSERT_EQ(calls, 1);
        ASSERT_TRUE(strstr(err, "18446744073709551615 vs 7") != NULL);
        ASSERT_EQ(run_child(err_fails, &calls, err, sizeof(err)), 1);
        ASSERT_EQ(calls, 1);
        ASSERT_TRUE(strstr(err, strerror(EEXIST)) != NULL);
}

TEST(tap_passing_asserts_evaluate_once_and_stay_quiet)
{
        char err[512];
        int calls;
        ASSERT_EQ(run_child(ok_passes, &calls, err, sizeof(err)), 0);
        ASSERT_EQ(calls, 2);
        ASSERT_STREQ(err, "");
}
