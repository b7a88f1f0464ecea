/* Spare jails (sandbox/spare.c): after a command the sandbox's next command
 * jail is built in the background and the next sbx_spawn of the same shape
 * takes it; a terminal or a command of another shape does not; deleting the
 * sandbox or adding a bucket mount drops it; a warm sandbox is ready with
 * one. Needs root (skips otherwise). */
#include <time.h>

#include "sandbox_fixture.h"

static struct sbx_spare_stats spare_stats(void)
{
        struct sbx_spare_stats st;
        sbx_spare_stats(g.mgr, &st);
        return st;
}

static void wait_held(uint64_t n)
{
        for (int i = 0; i < 800 && spare_stats().held < n; i++)
                nanosleep(&(struct timespec){ 0, 10 * 1000000 }, NULL);
        ASSERT_U64_EQ(spare_stats().held, n);
}

static void start(uint64_t pool_target)
{
        struct sandbox_options o = pool_opts(pool_target, 10);
        mgr_start(&o, false);
}

TEST(spare_takes_the_next_command_and_sees_its_files)
{
        start(0);
        ASSERT_U64_EQ(spare_stats().held, 0);
        ASSERT_STREQ(run_command("sp1", NULL, "echo one > f; echo ok", NULL), "ok\n");
        wait_held(1);
        ASSERT_U64_EQ(spare_stats().hits, 0);
        json_t *env = json_pack("{s:s}", "CALL", "v");
        ASSERT_STREQ(run_command("sp1", NULL, "cat f; echo $CALL; pwd", env), "one\nv\n/workspace\n");
        json_decref(env);
        ASSERT_U64_EQ(spare_stats().hits, 1);
        /* Used once: the next one is a new jail, built after that command. */
        wait_held(1);
        ASSERT_STREQ(run_command("sp1", NULL, "cat f", NULL), "one\n");
        ASSERT_U64_EQ(spare_stats().hits, 2);
}

TEST(spare_is_not_for_another_shape)
{
        start(0);
        run_command("sp2", NULL, "true", NULL);
        wait_held(1);
        /* A stdin pipe: another shape, so a miss; the spare is dropped and
         * the next one has the new shape. */
        const char *argv[] = { "/bin/true", NULL };
        struct sbx_command cmd = { .argv = argv, .stdin_pipe = true };
        struct proc *p = NULL;
        struct err e = { 0 };
        ASSERT_OK(sbx_spawn(g.mgr, "sp2", &cmd, &p, &e));
        struct proc_status st;
        ASSERT_OK(proc_wait(p, 10000, &st));
        proc_free(p);
        ASSERT_U64_EQ(spare_stats().hits, 0);
        ASSERT_U64_EQ(spare_stats().misses, 2); /* the first command's too */
        wait_held(1);
        ASSERT_OK(sbx_spawn(g.mgr, "sp2", &cmd, &p, &e));
        ASSERT_OK(proc_wait(p, 10000, &st));
        proc_free(p);
        ASSERT_U64_EQ(spare_stats().hits, 1);
        /* A terminal never takes one (deferred jails have no pty). */
        wait_held(1);
        struct sbx_command tty = { .argv = argv, .pty = true };
        ASSERT_OK(sbx_spawn(g.mgr, "sp2", &tty, &p, &e));
        ASSERT_OK(proc_wait(p, 10000, &st));
        proc_free(p);
        ASSERT_U64_EQ(spare_stats().hits, 1);
        ASSERT_U64_EQ(spare_stats().held, 1);
}

TEST(spare_goes_with_its_sandbox)
{
        start(0);
        run_command("sp3", NULL, "true", NULL);
        wait_held(1);
        struct err e = { 0 };
        ASSERT_OK(sbx_destroy(g.mgr, "sp3", &e));
        ASSERT_U64_EQ(spare_stats().held, 0);
        /* And at shutdown: the manager frees the held ones. */
        run_command("sp4", NULL, "true", NULL);
        wait_held(1);
        sbx_mgr_free(g.mgr);
        g.mgr = NULL;
}

TEST(spare_warm_sandbox_is_ready_with_one)
{
        start(2);
        for (int i = 0; i < 800 && stats().warm < 2; i++)
                nanosleep(&(struct timespec){ 0, 10 * 1000000 }, NULL);
        ASSERT_U64_EQ(stats().warm, 2);
        /* Ready means with its spare: the /exec shape (a stdin pipe). */
        ASSERT_U64_EQ(spare_stats().held, 2);
        char id[STORE_ID_MAX];
        struct err e = { 0 };
        ASSERT_OK(sbx_pool_take(g.mgr, id, &e));
        const char *argv[] = { "/bin/sh", "-c", "ls -A /workspace | wc -l", NULL };
        struct sbx_command cmd = { .argv = argv, .stdin_pipe = true };
        struct proc *p = NULL;
        ASSERT_OK(sbx_spawn(g.mgr, id, &cmd, &p, &e));
        struct proc_status st;
        ASSERT_OK(proc_wait(p, 10000, &st));
        ASSERT_EQ(st.code, 0);
        proc_free(p);
        ASSERT_U64_EQ(spare_stats().hits, 1);
}
