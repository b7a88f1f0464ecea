/* The warm pool at the domain level (src/sandbox/pool.c, the warm rules of
 * registry.c): what a prepared sandbox has, that tenants cannot see or
 * touch it, that a take over the tenants' caps leaves it warm, and that a
 * new manager on the same data adopts or removes what the last one left.
 * Each TEST runs in its own process. Needs root (skips otherwise). */
#include <sys/stat.h>
#include <time.h>

#include "sandbox_fixture.h"
#include "sandbox/internal.h"

static bool is_mountpoint(const char *id)
{
        char path[256], parent[300];
        snprintf(path, sizeof(path), "%s/mnt/%s", g.dir, id);
        snprintf(parent, sizeof(parent), "%s/..", path);
        struct stat a, b;
        return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

static void wait_warm(uint64_t n)
{
        for (int i = 0; i < 400 && stats().warm != n; i++)
                nanosleep(&(struct timespec){ 0, 25 * 1000000 }, NULL);
        ASSERT_U64_EQ(stats().warm, n);
}

/* Makes id warm by hand (no refill thread: target 0) and offers it. */
static void offer(const char *id)
{
        struct err e = { 0 };
        ASSERT_OK(sbx_prepare(g.mgr, id, &e));
        bg_thread_lock(&g.mgr->pool.bg);
        id_list_add(id, &g.mgr->pool.ready);
        bg_thread_unlock(&g.mgr->pool.bg);
}

/* A manager without a refill thread, w1 and w2 offered by hand, and one
 * take (of w1, the oldest) into id. */
static void two_offered_one_taken(uint64_t max_sandboxes, char id[STORE_ID_MAX])
{
        struct sandbox_options o = pool_opts(0, max_sandboxes);
        mgr_start(&o, false);
        offer("w1");
        offer("w2");
        struct err e = { 0 };
        ASSERT_OK(sbx_pool_take(g.mgr, id, &e));
        ASSERT_STREQ(id, "w1");
}

TEST(pool_empty_take_is_enoent)
{
        struct sandbox_options o = pool_opts(0, 10);
        mgr_start(&o, false);
        char id[STORE_ID_MAX];
        struct err e = { 0 };
        ASSERT_ERR(sbx_pool_take(g.mgr, id, &e), ENOENT);
        ASSERT_EQ(e.reason, ERR_OK);
        struct sbx_pool_stats st = stats();
        ASSERT_U64_EQ(st.warm, 0);
        ASSERT_U64_EQ(st.assigned, 0);
        ASSERT_U64_EQ(st.limit, 10);
}

TEST(pool_warm_sandbox_is_prepared_and_invisible)
{
        struct sandbox_options o = pool_opts(0, 10);
        mgr_start(&o, false);
        struct err e = { 0 };
        ASSERT_OK(sbx_prepare(g.mgr, "w1", &e));
        ASSERT_TRUE(image_exists("w1"));
        ASSERT_TRUE(is_mountpoint("w1"));
        /* Every tenant call: not found, and nothing done to it. */
        struct sbx_info info;
        ASSERT_ERR(sbx_info(g.mgr, "w1", &info, &e), ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        err_done(&e);
        struct sbx_workspace ws;
        ASSERT_ERR(sbx_workspace_acquire(g.mgr, "w1", &ws, &e), ENOENT);
        err_done(&e);
        ASSERT_OK(sbx_destroy(g.mgr, "w1", &e));
        ASSERT_TRUE(image_exists("w1"));
        ASSERT_U64_EQ(stats().assigned, 0);
        /* And the pool never takes a tenant's sandbox. */
        ASSERT_OK(sbx_info(g.mgr, "t1", &info, &e));
        sbx_info_done(&info);
        ASSERT_U64_EQ(stats().assigned, 1);
        ASSERT_ERR(sbx_prepare(g.mgr, "t1", &e), EEXIST);
        ASSERT_EQ(e.reason, ERR_EXISTS);
        err_done(&e);
}

TEST(pool_take_assigns_and_over_the_caps_stays_warm)
{
        char id[STORE_ID_MAX];
        two_offered_one_taken(1, id);
        struct err e = { 0 };
        struct sbx_info info;
        ASSERT_OK(sbx_info(g.mgr, "w1", &info, &e));
        ASSERT_STREQ(info.org_id, SBX_DEFAULT_ORG);
        ASSERT_TRUE(info.expires_at > info.created_at);
        sbx_info_done(&info);
        struct sbx_pool_stats st = stats();
        ASSERT_U64_EQ(st.warm, 1);
        ASSERT_U64_EQ(st.assigned, 1);
        /* One tenant sandbox is the cap: the next take is refused, and the
         * warm one stays warm and unseen. */
        ASSERT_ERR(sbx_pool_take(g.mgr, id, &e), EUSERS);
        ASSERT_EQ(e.reason, ERR_QUOTA);
        err_done(&e);
        ASSERT_U64_EQ(stats().warm, 1);
        ASSERT_ERR(sbx_info(g.mgr, "w2", &info, &e), ENOENT);
        err_done(&e);
        ASSERT_OK(sbx_destroy(g.mgr, "w1", &e));
        ASSERT_OK(sbx_pool_take(g.mgr, id, &e));
        ASSERT_STREQ(id, "w2");
}

TEST(pool_shutdown_destroys_the_warm_ones_only)
{
        char id[STORE_ID_MAX];
        two_offered_one_taken(10, id);
        struct err e = { 0 };
        ASSERT_OK(sbx_pool_shutdown_prewarmed(g.mgr, &e));
        ASSERT_U64_EQ(stats().warm, 0);
        ASSERT_FALSE(image_exists("w2"));
        ASSERT_TRUE(image_exists("w1"));
        ASSERT_U64_EQ(stats().assigned, 1);
}

TEST(pool_refills_and_a_new_manager_adopts_or_removes)
{
        struct sandbox_options o = pool_opts(2, 10);
        mgr_start(&o, false);
        wait_warm(2);
        ASSERT_TRUE(image_exists("warm1") && image_exists("warm2"));
        char id[STORE_ID_MAX];
        struct err e = { 0 };
        ASSERT_OK(sbx_pool_take(g.mgr, id, &e));
        ASSERT_STREQ(id, "warm1");
        wait_warm(2); /* refilled: warm3 */
        ASSERT_TRUE(image_exists("warm3"));
        /* A restart that wants one: one adopted (no new id), one removed. */
        sbx_mgr_free(g.mgr);
        g.mgr = NULL;
        o.pool.target = 1;
        ASSERT_OK(sbx_mgr_new(&o, g.engine, g.store, &g.mgr));
        wait_warm(1);
        for (int i = 0; i < 400 && image_exists("warm2") + image_exists("warm3") != 1; i++)
                nanosleep(&(struct timespec){ 0, 25 * 1000000 }, NULL);
        ASSERT_EQ(image_exists("warm2") + image_exists("warm3"), 1);
        ASSERT_FALSE(image_exists("warm4"));
        ASSERT_TRUE(image_exists("warm1"));
        struct sbx_pool_stats st = stats();
        ASSERT_U64_EQ(st.assigned, 1);
        ASSERT_U64_EQ(st.warm, 1);
}
