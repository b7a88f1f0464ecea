/* The sandbox domain's shell sessions without HTTP (src/sandbox/session.c,
 * shell.c): create, state, delete, and a command's cd/export/unset carried
 * into the session's state, as a terminal (sbx_session_state) sees it.
 * Each TEST runs in its own process. Needs root (skips otherwise). */
#include <poll.h>

#include "engine/proc.h"
#include "sandbox_fixture.h"

/* Runs script in session sid to its end; returns its stdout (static). */
static const char *shell(const char *sbx, const char *sid, const char *script)
{
        static char out[4096];
        size_t len = 0;
        struct sbx_shell *sh = NULL;
        struct err e = { 0 };
        ASSERT_OK(sbx_shell_open(g.mgr, sbx, sid, script, NULL, &sh, &e));
        ASSERT_OK(sbx_shell_start(g.mgr, sh, -1, &e));
        struct proc *p = sbx_shell_proc(sh);
        struct proc_fds fds;
        proc_fds(p, &fds);
        bool open = true;
        while (open) {
                struct pollfd pf[2] = { { fds.stdout_fd, POLLIN, 0 }, { fds.side_fd, POLLIN, 0 } };
                ASSERT_TRUE(poll(pf, 2, 10000) > 0);
                if (pf[1].revents && !sbx_shell_pump_state(sh))
                        fds.side_fd = -1;
                ssize_t n = pf[0].revents ? proc_read(p, 1, out + len, sizeof(out) - 1 - len) : -EAGAIN;
                if (n > 0)
                        len += (size_t)n;
                open = n > 0 || n == -EAGAIN;
        }
        out[len] = '\0';
        struct proc_status st;
        ASSERT_OK(proc_wait(p, 10000, &st));
        sbx_shell_end(g.mgr, sh);
        return out;
}

static void state(const char *sbx, const char *sid, char *cwd, json_t **env)
{
        struct err e = { 0 };
        int r = sbx_session_state(g.mgr, sbx, sid, false, cwd, 4096, env, &e);
        if (r < 0)
                TAP_FAIL("sbx_session_state: %d %s", r, e.msg);
}

TEST(session_create_state_delete)
{
        mgr(8);
        struct err e = { 0 };
        json_t *env = json_pack("{s:s}", "A", "1");
        ASSERT_OK(sbx_session_create(g.mgr, "s1", "one", "sub/../sub", env, &e));
        json_decref(env);
        char cwd[4096];
        state("s1", "one", cwd, &env);
        ASSERT_STREQ(cwd, "/workspace/sub");
        ASSERT_STREQ(json_string_value(json_object_get(env, "A")), "1");
        json_decref(env);

        ASSERT_ERR(sbx_session_create(g.mgr, "s1", "one", NULL, NULL, &e), EEXIST);
        ASSERT_EQ(e.reason, ERR_EXISTS);
        ASSERT_ERR(sbx_session_create(g.mgr, "s1", SBX_SESSION_DISABLED, NULL, NULL, &e), EINVAL);
        ASSERT_EQ(e.reason, ERR_INVALID);
        ASSERT_ERR(sbx_session_create(g.mgr, "s1", "two", "/etc", NULL, &e), EPERM);
        ASSERT_EQ(e.reason, ERR_PERMISSION);

        ASSERT_ERR(sbx_session_state(g.mgr, "s1", "new", false, cwd, sizeof(cwd), &env, &e), ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        ASSERT_OK(sbx_session_state(g.mgr, "s1", "new", true, cwd, sizeof(cwd), &env, &e));
        ASSERT_STREQ(cwd, "/workspace");
        ASSERT_EQ(json_object_size(env), 0);
        json_decref(env);

        ASSERT_OK(sbx_session_delete(g.mgr, "s1", "one", &e));
        ASSERT_ERR(sbx_session_delete(g.mgr, "s1", "one", &e), ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        ASSERT_STREQ(e.msg, "Session 'one' not found");
        err_done(&e);
}

TEST(session_command_state_carries_over)
{
        mgr(8);
        struct err e = { 0 };
        json_t *env = json_pack("{s:s}", "A", "1");
        ASSERT_OK(sbx_session_create(g.mgr, "s2", "w", NULL, env, &e));
        json_decref(env);
        ASSERT_STREQ(shell("s2", "w", "mkdir -p d && cd d; export B='two words'; unset A; f() { echo fn; }\n"), "");
        char cwd[4096];
        state("s2", "w", cwd, &env);
        ASSERT_STREQ(cwd, "/workspace/d");
        ASSERT_STREQ(json_string_value(json_object_get(env, "B")), "two words");
        ASSERT_TRUE(json_is_null(json_object_get(env, "A"))); /* an unset is kept */
        ASSERT_TRUE(json_object_get(env, "PWD") == NULL);
        json_decref(env);
        ASSERT_STREQ(shell("s2", "w", "echo \"$PWD|$B|${A:-unset}\"; f\n"), "/workspace/d|two words|unset\nfn\n");
        /* Sessionless: none of it. */
        ASSERT_STREQ(shell("s2", NULL, "echo \"$PWD|${B:-unset}\"\n"), "/workspace|unset\n");
        err_done(&e);
}
