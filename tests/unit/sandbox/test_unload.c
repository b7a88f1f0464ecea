/* Idle sandboxes leave memory (src/sandbox/unload.c): one with nothing live
 * goes with its last reference and comes back from the store unchanged; one
 * that ran something stays; a late last_used is written by the reaper
 * before the sandbox goes. A real engine and SQLite store (root). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/time.h"
#include "base/util.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "tap.h"

#include "sandbox_fixture.h"

static uint64_t stored_last_used(const char *id)
{
        struct sandbox_row row = { 0 };
        ASSERT_OK(store_sandbox_get(g.store, id, &row));
        uint64_t v = row.last_used;
        sandbox_row_done(&row);
        return v;
}

TEST(idle_sandbox_is_unloaded_and_loads_back_unchanged)
{
        mgr(8);
        struct err e = { 0 };
        bool created = false;
        ASSERT_OK(sbx_create(g.mgr, "idle1", NULL, &created, &e));
        ASSERT_TRUE(created);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 0);
        json_t *env = json_pack("{s:s}", "A", "1");
        ASSERT_OK(sbx_set_env(g.mgr, "idle1", env, &e));
        json_decref(env);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 0);
        struct sbx_info info;
        ASSERT_OK(sbx_info(g.mgr, "idle1", &info, &e));
        ASSERT_STREQ(json_string_value(json_object_get(info.env, "A")), "1");
        ASSERT_EQ(info.ncontexts, 0);
        sbx_info_done(&info);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 0);
        /* Created again: the same sandbox, not a new one. */
        ASSERT_OK(sbx_create(g.mgr, "idle1", NULL, &created, &e));
        ASSERT_FALSE(created);
        ASSERT_OK(sbx_destroy(g.mgr, "idle1", &e));
        struct sandbox_row row = { 0 };
        ASSERT_EQ(store_sandbox_get(g.store, "idle1", &row), -ENOENT);
}

TEST(used_sandbox_stays_loaded_with_its_interpreter)
{
        mgr(8);
        struct sbx_exec_result r;
        struct err e = { 0 };
        ASSERT_OK(sbx_execute(g.mgr, "used1", runtime_find("python"), "PYTHON", "x = 41", NULL, NULL, &r, &e));
        sbx_exec_result_done(&r);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 1);
        ASSERT_EQ(sbx_resident_count(g.mgr), 1);
        ASSERT_OK(sbx_execute(g.mgr, "used1", runtime_find("python"), "PYTHON", "x + 1", NULL, NULL, &r, &e));
        ASSERT_STREQ(cell_answer(&r.outcome), "42");
        ASSERT_FALSE(r.restore.restored); /* the same interpreter: never unloaded */
        sbx_exec_result_done(&r);
}

TEST(late_last_used_is_written_before_the_sandbox_goes)
{
        /* An idle TTL, so that a touch does not write last_used itself
         * (without one every touch does). */
        struct sandbox_options opt = pool_opts(0, 100);
        mgr_start(&opt, false);
        struct err e = { 0 };
        ASSERT_OK(sbx_create(g.mgr, "late1", NULL, NULL, &e));
        ASSERT_EQ(sbx_loaded_count(g.mgr), 0);
        uint64_t first = stored_last_used("late1");
        usleep((SBX_UNLOAD_SLACK_MS + 200) * 1000);
        struct sbx_info info;
        ASSERT_OK(sbx_info(g.mgr, "late1", &info, &e));
        uint64_t used = info.last_used;
        sbx_info_done(&info);
        ASSERT_TRUE(used >= first + SBX_UNLOAD_SLACK_MS);
        /* Its last_used is not in the store yet: it stays until the reaper
         * has written it. */
        ASSERT_EQ(sbx_loaded_count(g.mgr), 1);
        ASSERT_U64_EQ(stored_last_used("late1"), first);
        uint64_t deadline = wall_ms() + 5000;
        while (sbx_loaded_count(g.mgr) && wall_ms() < deadline)
                usleep(50 * 1000);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 0);
        ASSERT_U64_EQ(stored_last_used("late1"), used);
        ASSERT_OK(sbx_info(g.mgr, "late1", &info, &e));
        ASSERT_TRUE(info.last_used >= used);
        sbx_info_done(&info);
}
