/* End-to-end tests of the sandbox domain without HTTP (src/sandbox/
 * registry.c, context.c, journal.c, lru.c): a real engine (jails), a real
 * SQLite store in a temp dir, and the sbx_* calls the facades make. Each
 * TEST runs in its own process. Needs root (skips otherwise). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "sandbox/sandbox.h"
#include "tap.h"

#include "sandbox_fixture.h"

/* Runs code in the PYTHON binding's default context (or cid); returns the
 * first result's text (static buffer) or the error name. */
static const char *run(const char *sbx, const char *cid, const char *code, struct sbx_exec_result *keep)
{
        static char out[256];
        struct sbx_exec_result r;
        struct err e = { 0 };
        int rc = sbx_execute(g.mgr, sbx, runtime_find("python"), "PYTHON", code, cid, NULL, &r, &e);
        if (rc < 0)
                TAP_FAIL("sbx_execute '%s': %d %s (%s)", code, rc, err_reason_name(e.reason), e.msg);
        snprintf(out, sizeof(out), "%s", cell_answer(&r.outcome));
        if (keep)
                *keep = r;
        else
                sbx_exec_result_done(&r);
        return out;
}

TEST(context_keeps_state_and_journals_cells)
{
        mgr(8);
        struct sbx_exec_result r;
        ASSERT_STREQ(run("s1", NULL, "x = 41", &r), "");
        ASSERT_EQ(r.executions, 1);
        ASSERT_TRUE(r.snapshot_ms >= 0);
        ASSERT_STREQ(r.cwd, "/workspace");
        char cid[STORE_ID_MAX];
        snprintf(cid, sizeof(cid), "%s", r.context_id);
        sbx_exec_result_done(&r);
        ASSERT_STREQ(run("s1", cid, "x + 1", NULL), "42");
        struct sbx_info info;
        struct err e = { 0 };
        ASSERT_OK(sbx_info(g.mgr, "s1", &info, &e));
        ASSERT_EQ(info.ncontexts, 1);
        ASSERT_STREQ(info.contexts[0].id, cid);
        ASSERT_EQ(info.contexts[0].snap.cells, 2);
        ASSERT_EQ(info.contexts[0].snap.bytes, strlen("x = 41") + strlen("x + 1"));
        ASSERT_TRUE(strncmp(info.contexts[0].snap.build, "python:CPython", 14) == 0);
        ASSERT_TRUE(info.contexts[0].resident);
        sbx_info_done(&info);
}

TEST(evicted_context_is_restored_from_its_journal)
{
        mgr(1); /* one resident interpreter for everyone */
        ASSERT_STREQ(run("a", NULL, "v = 'alpha'", NULL), "");
        ASSERT_STREQ(run("b", NULL, "v = 'beta'", NULL), "");  /* evicts one (its own: fair) */
        ASSERT_EQ(sbx_resident_count(g.mgr), 1);
        ASSERT_STREQ(run("a", NULL, "v", NULL), "'alpha'");      /* replayed */
        ASSERT_STREQ(run("b", NULL, "v", NULL), "'beta'");
        struct sbx_info info;
        struct err e = { 0 };
        ASSERT_OK(sbx_info(g.mgr, "a", &info, &e));
        ASSERT_FALSE(info.contexts[0].snap.stale);
        sbx_info_done(&info);
}

/* Fair eviction (issue 10 row 7): with room for one interpreter, a second
 * sandbox holding no more than the first gives back its own, and each
 * answer says whether the interpreter was rebuilt and why. */
TEST(eviction_is_fair_and_restores_are_said)
{
        mgr(1);
        struct sbx_exec_result r;
        ASSERT_STREQ(run("a", NULL, "v = 'alpha'", NULL), "");
        ASSERT_STREQ(run("b", NULL, "v = 'beta'", NULL), "");
        ASSERT_STREQ(run("a", NULL, "v", &r), "'alpha'");
        ASSERT_FALSE(r.restore.restored); /* a kept its interpreter */
        sbx_exec_result_done(&r);
        ASSERT_STREQ(run("b", NULL, "v", &r), "'beta'");
        ASSERT_TRUE(r.restore.restored);
        ASSERT_STREQ(r.restore.reason, "evicted_own");
        ASSERT_FALSE(r.restore.fresh);
        sbx_exec_result_done(&r);
        struct sbx_info info;
        struct err e = { 0 };
        ASSERT_OK(sbx_info(g.mgr, "b", &info, &e));
        ASSERT_TRUE(info.contexts[0].last_restore.restored);
        ASSERT_STREQ(info.contexts[0].last_restore.reason, "evicted_own");
        sbx_info_done(&info);
}

TEST(failed_cell_is_not_journaled)
{
        mgr(8);
        ASSERT_STREQ(run("s", NULL, "n = 1", NULL), "");
        ASSERT_STREQ(run("s", NULL, "n = 2\nraise ValueError('x')", NULL), "error:ValueError");
        struct sbx_info info;
        struct err e = { 0 };
        ASSERT_OK(sbx_info(g.mgr, "s", &info, &e));
        ASSERT_EQ(info.contexts[0].executions, 2);
        ASSERT_EQ(info.contexts[0].snap.cells, 2); /* a guest exception still ran cleanly */
        sbx_info_done(&info);
}

TEST(context_errors_are_domain_errors)
{
        mgr(8);
        struct err e = { 0 };
        struct sbx_exec_result r;
        ASSERT_ERR(sbx_execute(g.mgr, "s", runtime_find("python"), "PYTHON", "1", "no-such", NULL, &r, &e), ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        ASSERT_STREQ(e.op, "context.execute");
        ASSERT_STREQ(err_detail_get(&e, "contextId"), "no-such");
        err_done(&e);
        ASSERT_ERR(sbx_context_delete(g.mgr, "s", "nope", &e), ENOENT);
        ASSERT_STREQ(e.op, "context.delete");
        err_done(&e);
        struct sbx_info info;
        ASSERT_ERR(sbx_info(g.mgr, "bad/id", &info, &e), EINVAL);
        ASSERT_EQ(e.reason, ERR_INVALID);
        err_done(&e);
        struct sbx_context_info ci;
        for (int i = 0; i < 3; i++)
                ASSERT_OK(sbx_context_create(g.mgr, "s", runtime_find("python"), "PYTHON", NULL, NULL, &ci, &e));
        ASSERT_TRUE(sbx_context_create(g.mgr, "s", runtime_find("python"), "PYTHON", NULL, NULL, &ci, &e) < 0);
        ASSERT_EQ(e.reason, ERR_LIMIT);
        err_done(&e);
        ASSERT_TRUE(sbx_context_create(g.mgr, "t", runtime_find("python"), "PYTHON", "/etc", NULL, &ci, &e) < 0);
        ASSERT_EQ(e.reason, ERR_INVALID);
        ASSERT_STREQ(err_detail_get(&e, "cwd"), "/etc");
        err_done(&e);
}

TEST(destroy_forgets_everything)
{
        mgr(8);
        ASSERT_STREQ(run("gone", NULL, "open('/workspace/f', 'w').write('x')\ny = 1", NULL), "");
        struct err e = { 0 };
        ASSERT_OK(sbx_destroy(g.mgr, "gone", &e));
        struct sbx_info info;
        ASSERT_OK(sbx_info(g.mgr, "gone", &info, &e)); /* recreated empty */
        ASSERT_EQ(info.ncontexts, 0);
        ASSERT_EQ(info.ws_files, 0);
        sbx_info_done(&info);
        ASSERT_STREQ(run("gone", NULL, "import os\nos.path.exists('/workspace/f')", NULL), "False");
}
