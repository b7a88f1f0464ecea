/* Sandboxes of an org (src/sandbox/orgs.c, registry.c): the single-key
 * APIs (no org argument: SBX_DEFAULT_ORG) never see, create over or
 * destroy another org's sandbox; the *_org calls see only their own and
 * never create; a fixed lifetime is not renewed by activity and the reaper
 * takes the sandbox after it. Needs root (skips otherwise). */
#include <time.h>

#include "sandbox_fixture.h"

static void org(const char *id)
{
        ASSERT_OK(store_org_ensure(g.store, id, id));
}

static void sleep_ms(long ms)
{
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

TEST(org_sandbox_is_invisible_to_the_default_org)
{
        mgr(2);
        org("org_a");
        org("org_b");
        struct err e = { 0 };
        bool created = false;
        const struct sbx_create_options oa = { .org_id = "org_a" };
        ASSERT_OK(sbx_create(g.mgr, "sa", &oa, &created, &e));
        ASSERT_TRUE(created);
        struct sbx_info info;
        ASSERT_OK(sbx_find(g.mgr, "org_a", "sa", &info, &e));
        ASSERT_STREQ(info.org_id, "org_a");
        ASSERT_FALSE(info.expiry_fixed);
        sbx_info_done(&info);
        /* Another org, and the default one: not found, never created. */
        ASSERT_EQ(sbx_find(g.mgr, "org_b", "sa", &info, &e), -ENOENT);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        ASSERT_EQ(sbx_find(g.mgr, "org_a", "nothing", &info, &e), -ENOENT);
        struct sbx_info none;
        ASSERT_TRUE(sbx_info(g.mgr, "sa", &none, &e) < 0);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        ASSERT_TRUE(sbx_create(g.mgr, "sa", NULL, NULL, &e) < 0);
        ASSERT_EQ(e.reason, ERR_NOT_FOUND);
        struct sbx_workspace ws;
        ASSERT_TRUE(sbx_workspace_acquire(g.mgr, "sa", &ws, &e) < 0);
        ASSERT_TRUE(sbx_workspace_acquire_org(g.mgr, "org_b", "sa", &ws, &e) < 0);
        ASSERT_OK(sbx_workspace_acquire_org(g.mgr, "org_a", "sa", &ws, &e));
        sbx_workspace_release(g.mgr, &ws);
        /* The default org's destroy is a no-op on it; org_b's a 404. */
        ASSERT_OK(sbx_destroy(g.mgr, "sa", &e));
        ASSERT_EQ(sbx_destroy_org(g.mgr, "org_b", "sa", &e), -ENOENT);
        ASSERT_OK(sbx_find(g.mgr, "org_a", "sa", &info, &e));
        sbx_info_done(&info);
        ASSERT_OK(sbx_destroy_org(g.mgr, "org_a", "sa", &e));
        ASSERT_EQ(sbx_find(g.mgr, "org_a", "sa", &info, &e), -ENOENT);
        err_done(&e);
}

static void count(const struct sbx_info *info, void *userdata)
{
        (void)info;
        (*(int *)userdata)++;
}

TEST(fixed_lifetime_is_absolute)
{
        mgr(2);
        org("org_t");
        struct err e = { 0 };
        const struct sbx_create_options o = { .org_id = "org_t", .lifetime_ms = 600 };
        ASSERT_OK(sbx_create(g.mgr, "st", &o, NULL, &e));
        struct sbx_info info;
        ASSERT_OK(sbx_find(g.mgr, "org_t", "st", &info, &e));
        uint64_t deadline = info.expires_at;
        ASSERT_TRUE(info.expiry_fixed);
        ASSERT_EQ(deadline - info.created_at, 600);
        sbx_info_done(&info);
        sleep_ms(300);
        struct sbx_workspace ws;
        ASSERT_OK(sbx_workspace_acquire_org(g.mgr, "org_t", "st", &ws, &e)); /* activity */
        sbx_workspace_release(g.mgr, &ws);
        ASSERT_OK(sbx_find(g.mgr, "org_t", "st", &info, &e));
        ASSERT_EQ(info.expires_at, deadline);
        sbx_info_done(&info);
        sleep_ms(400);
        /* Past it: gone for its org even before the reaper runs. */
        ASSERT_EQ(sbx_find(g.mgr, "org_t", "st", &info, &e), -ENOENT);
        sbx_reap_expired(g.mgr);
        int n = 0;
        uint64_t total = 9;
        ASSERT_OK(sbx_list_org(g.mgr, "org_t", 10, 0, count, &n, &total, &e));
        ASSERT_EQ(n, 0);
        ASSERT_EQ(total, 0);
        err_done(&e);
}
