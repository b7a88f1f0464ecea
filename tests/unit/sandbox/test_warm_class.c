/* Warm classes (src/sandbox/warm_class.c): warm sandboxes with limits of
 * their own, made on request, taken oldest first with their limits (or
 * made cold when none is warm), dropped, never touched by the default
 * pool (not taken by sbx_pool_take, not adopted by a new manager), and
 * kept within the service's caps. Each TEST runs in its own process.
 * Needs root (skips otherwise). */
#include <time.h>

#include "sandbox_fixture.h"

/* pool_opts with ids for the classes even without a default pool. */
static struct sandbox_options opts(uint64_t target, uint64_t max_sandboxes)
{
        struct sandbox_options o = pool_opts(target, max_sandboxes);
        o.pool.new_id = seq_id;
        return o;
}

static const struct sbx_warm_class C1 = { .name = "c1", .cpu_millis = 500, .memory_bytes = 64 * MiB };

static uint64_t warm_count(const char *name)
{
        uint64_t n = 0;
        struct err e = { 0 };
        ASSERT_OK(sbx_warm_count(g.mgr, name, &n, &e));
        return n;
}

static void fill(const struct sbx_warm_class *c, uint64_t count, uint64_t expect_made)
{
        uint64_t made = 99;
        struct err e = { 0 };
        ASSERT_OK(sbx_warm_fill(g.mgr, c, count, &made, &e));
        ASSERT_U64_EQ(made, expect_made);
}

static void take(const struct sbx_warm_class *c, char id[STORE_ID_MAX], bool expect_warm)
{
        bool warm = !expect_warm;
        struct err e = { 0 };
        ASSERT_OK(sbx_warm_take(g.mgr, c, id, &warm, &e));
        ASSERT_EQ(warm, expect_warm);
        struct sbx_info info;
        ASSERT_OK(sbx_info(g.mgr, id, &info, &e));
        ASSERT_STREQ(info.org_id, SBX_DEFAULT_ORG);
        ASSERT_U64_EQ(info.cpu_millis, c->cpu_millis);
        ASSERT_U64_EQ(info.memory_bytes, c->memory_bytes);
        sbx_info_done(&info);
}

TEST(class_fill_take_drop)
{
        struct sandbox_options o = opts(0, 10);
        mgr_start(&o, false);
        fill(&C1, 2, 2);
        fill(&C1, 2, 0); /* topped up already */
        ASSERT_U64_EQ(warm_count("c1"), 2);
        ASSERT_U64_EQ(warm_count("other"), 0);
        ASSERT_TRUE(image_exists("warm1") && image_exists("warm2"));
        /* Invisible to tenants, not the default pool's, no tenant counted. */
        struct sbx_info info;
        struct err e = { 0 };
        ASSERT_ERR(sbx_info(g.mgr, "warm1", &info, &e), ENOENT);
        err_done(&e);
        char id[STORE_ID_MAX];
        ASSERT_ERR(sbx_pool_take(g.mgr, id, &e), ENOENT);
        ASSERT_U64_EQ(stats().warm, 0);
        ASSERT_U64_EQ(stats().assigned, 0);

        take(&C1, id, true);
        ASSERT_STREQ(id, "warm1"); /* oldest first */
        ASSERT_U64_EQ(warm_count("c1"), 1);
        ASSERT_U64_EQ(stats().assigned, 1);
        uint64_t dropped = 0;
        ASSERT_OK(sbx_warm_drop(g.mgr, "c1", &dropped, &e));
        ASSERT_U64_EQ(dropped, 1);
        ASSERT_FALSE(image_exists("warm2"));
        ASSERT_TRUE(image_exists("warm1")); /* the taken one is a tenant's now */
        take(&C1, id, false);            /* none warm: made now, same limits */
        ASSERT_TRUE(image_exists(id));
        ASSERT_U64_EQ(stats().assigned, 2);
}

TEST(class_is_not_adopted_by_the_default_pool)
{
        struct sandbox_options o = opts(0, 10);
        mgr_start(&o, false);
        fill(&C1, 2, 2);
        sbx_mgr_free(g.mgr);
        g.mgr = NULL;
        o.pool.target = 1; /* the default pool wants one: it makes its own */
        ASSERT_OK(sbx_mgr_new(&o, g.engine, g.store, &g.mgr));
        for (int i = 0; i < 400 && stats().warm != 1; i++)
                nanosleep(&(struct timespec){ 0, 25 * 1000000 }, NULL);
        ASSERT_U64_EQ(stats().warm, 1);
        ASSERT_TRUE(image_exists("warm3"));
        ASSERT_U64_EQ(warm_count("c1"), 2);
        ASSERT_TRUE(image_exists("warm1") && image_exists("warm2"));
        char id[STORE_ID_MAX];
        take(&C1, id, true); /* prepared again when taken */
        ASSERT_STREQ(id, "warm1");
        struct err e = { 0 };
        ASSERT_OK(sbx_pool_take(g.mgr, id, &e));
        ASSERT_STREQ(id, "warm3");
}

TEST(class_stays_within_the_caps)
{
        struct sandbox_options o = opts(0, 2);
        mgr_start(&o, false);
        fill(&C1, 4, 2); /* two sandboxes at most, warm or not */
        ASSERT_U64_EQ(warm_count("c1"), 2);
        char id[STORE_ID_MAX];
        take(&C1, id, true);
        take(&C1, id, true);
        /* Two tenants' sandboxes: the cap. No room to warm, none to take. */
        fill(&C1, 1, 0);
        bool warm;
        struct err e = { 0 };
        ASSERT_ERR(sbx_warm_take(g.mgr, &C1, id, &warm, &e), EUSERS);
        ASSERT_EQ(e.reason, ERR_QUOTA);
        err_done(&e);
}
