/* Every test of test_jail.c again, with each jail cloned by the spawner
 * (src/jail/spawner.c, as the daemon does) instead of by the test process,
 * plus the spawner's own tests there. */
#define JAIL_TEST_SPAWNER 1
#include "test_jail.c"

/* A spawner that died is noticed at the next spawn, which (like every later
 * one) clones from this process instead: jails keep starting. */
TEST(jail_spawner_gone_falls_back_to_cloning_here)
{
        require_jail();
        struct run res;
        run_sh("t-sp-a", "echo a=1", &res);
        ASSERT_FIELD(&res, "a", "1");
        pid_t spawner = g_ctx.spawner_pid;
        ASSERT_OK(kill(spawner, SIGKILL));
        run_sh("t-sp-b", "echo b=1", &res);
        ASSERT_FIELD(&res, "b", "1");
        ASSERT_EQ(g_ctx.spawner_fd, -1);
        ASSERT_TRUE(kill(spawner, 0) < 0 && errno == ESRCH); /* reaped */
        run_sh("t-sp-c", "echo c=1", &res);
        ASSERT_FIELD(&res, "c", "1");
}

/* The jail is the caller's child (CLONE_PARENT), not the spawner's: its
 * init's parent is this process, which alone can reap it. */
TEST(jail_spawned_by_the_spawner_is_the_callers_child)
{
        require_jail();
        static struct jail_proc p;
        int in_w, out, err;
        spawn_waiting("t-sp-parent", &p, &in_w, &out, &err);
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)p.pid);
        ASSERT_OK(read_file_small(path, buf, sizeof(buf), NULL));
        int ppid = 0;
        ASSERT_EQ(sscanf(strrchr(buf, ')'), ") %*c %d", &ppid), 1);
        ASSERT_EQ(ppid, getpid());
        finish_waiting(&p, in_w, out, err);
}
