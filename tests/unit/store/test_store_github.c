/* The store contract for the GitHub integration (issue 15): installations
 * pending until linked (the link moves atomically, and claims the pending
 * deliveries), per-org settings, and the delivery log (unique delivery ids,
 * bounded, per-org pages and stats, a PR's sandboxes). Public store.h
 * functions only. */
#include "store_fixture.h"

static void make_install(struct gh_install_row *r, const char *iid, const char *login, const char *repos, uint64_t at)
{
        *r = (struct gh_install_row){ .created_at = at, .updated_at = at, .repos_json = (char *)repos };
        snprintf(r->id, sizeof(r->id), "%s", id(iid));
        snprintf(r->account_login, sizeof(r->account_login), "%s", login);
        snprintf(r->account_type, sizeof(r->account_type), "Organization");
        snprintf(r->status, sizeof(r->status), "active");
}

static void make_event(struct gh_event_row *e, const char *eid, const char *delivery, const char *org,
                       const char *iid, const char *status, uint64_t at)
{
        *e = (struct gh_event_row){ .received_at = at };
        snprintf(e->id, sizeof(e->id), "%s", id(eid));
        snprintf(e->delivery_id, sizeof(e->delivery_id), "%s", delivery[0] ? id(delivery) : "");
        snprintf(e->org_id, sizeof(e->org_id), "%s", org[0] ? id(org) : "");
        snprintf(e->installation_id, sizeof(e->installation_id), "%s", iid[0] ? id(iid) : "");
        snprintf(e->event, sizeof(e->event), "pull_request");
        snprintf(e->status, sizeof(e->status), "%s", status);
}

struct listing {
        char buf[512];
};

static void on_install(const struct gh_install_row *r, void *userdata)
{
        struct listing *l = userdata;
        size_t n = strlen(l->buf);
        if (!strcmp(r->id, id("i1")) || !strcmp(r->id, id("i2")))
                snprintf(l->buf + n, sizeof(l->buf) - n, "%s%s:%s:%s", n ? "," : "", r->account_login,
                         r->org_id[0] ? "linked" : "pending", r->repos_json);
}

static const char *installs(struct store *s, const char *org, bool pending)
{
        static struct listing l;
        l.buf[0] = '\0';
        ASSERT_OK(store_gh_install_each(s, id(org), pending, on_install, &l));
        return l.buf;
}

TEST(github_installations_pending_link_unlink)
{
        struct store *s = open_store();
        struct gh_install_row r, got;

        make_install(&r, "i1", "acme", "[\"acme/api\"]", 10);
        ASSERT_OK(store_gh_install_put(s, &r));
        make_install(&r, "i2", "octo", "[]", 20);
        ASSERT_OK(store_gh_install_put(s, &r));
        ASSERT_STREQ(installs(s, "ga", true), "acme:pending:[\"acme/api\"],octo:pending:[]");
        ASSERT_STREQ(installs(s, "ga", false), "");

        ASSERT_OK(store_gh_install_link(s, id("i1"), "", id("ga"), 30));
        /* Linked once: neither a second connect nor another org's unlink. */
        ASSERT_ERR(store_gh_install_link(s, id("i1"), "", id("gb"), 31), ENOENT);
        ASSERT_ERR(store_gh_install_link(s, id("i1"), id("gb"), "", 31), ENOENT);
        ASSERT_STREQ(installs(s, "ga", true), "acme:linked:[\"acme/api\"],octo:pending:[]");
        ASSERT_STREQ(installs(s, "gb", false), "");

        /* A webhook update keeps the link. */
        make_install(&r, "i1", "acme", "[\"acme/api\",\"acme/web\"]", 40);
        snprintf(r.status, sizeof(r.status), "suspended");
        ASSERT_OK(store_gh_install_put(s, &r));
        ASSERT_OK(store_gh_install_get(s, id("i1"), &got));
        ASSERT_STREQ(got.org_id, id("ga"));
        ASSERT_STREQ(got.status, "suspended");
        ASSERT_STREQ(got.repos_json, "[\"acme/api\",\"acme/web\"]");
        ASSERT_EQ(got.connected_at, 30);
        ASSERT_EQ(got.created_at, 10);
        ASSERT_EQ(got.updated_at, 40);
        gh_install_row_done(&got);

        ASSERT_OK(store_gh_install_link(s, id("i1"), id("ga"), "", 50));
        ASSERT_OK(store_gh_install_get(s, id("i1"), &got));
        ASSERT_STREQ(got.org_id, "");
        ASSERT_EQ(got.connected_at, 0);
        gh_install_row_done(&got);
        ASSERT_OK(store_gh_install_delete(s, id("i1")));
        ASSERT_ERR(store_gh_install_delete(s, id("i1")), ENOENT);
        ASSERT_ERR(store_gh_install_get(s, id("i1"), &got), ENOENT);
        store_close(s);
}

TEST(github_settings_per_org)
{
        struct store *s = open_store();
        char *json = NULL;
        uint64_t at = 0;

        ASSERT_ERR(store_gh_settings_get(s, id("ga"), &json, &at), ENOENT);
        ASSERT_OK(store_gh_settings_put(s, id("ga"), "{\"a\":true}", 5));
        ASSERT_OK(store_gh_settings_put(s, id("ga"), "{\"a\":false}", 6));
        ASSERT_OK(store_gh_settings_get(s, id("ga"), &json, &at));
        ASSERT_STREQ(json, "{\"a\":false}");
        ASSERT_EQ(at, 6);
        free(json);
        ASSERT_ERR(store_gh_settings_get(s, id("gb"), &json, &at), ENOENT);
        store_close(s);
}

struct events {
        char buf[512];
};

static void on_event(const struct gh_event_row *e, void *userdata)
{
        struct events *l = userdata;
        size_t n = strlen(l->buf);
        snprintf(l->buf + n, sizeof(l->buf) - n, "%s%llu", n ? "," : "", (unsigned long long)e->received_at);
}

static const char *event_page(struct store *s, const char *org, uint64_t limit, uint64_t offset, uint64_t *total)
{
        static struct events l;
        l.buf[0] = '\0';
        ASSERT_OK(store_gh_event_each(s, id(org), limit, offset, on_event, &l, total));
        return l.buf;
}

TEST(github_events_unique_delivery_pages_stats_and_claim)
{
        struct store *s = open_store();
        struct gh_event_row e;
        struct gh_event_stats st;
        uint64_t total = 0;

        make_event(&e, "e1", "d1", "", "i9", "success", 100);
        ASSERT_OK(store_gh_event_insert(s, &e, 1000));
        make_event(&e, "e2", "d1", "ga", "i9", "success", 101);
        ASSERT_ERR(store_gh_event_insert(s, &e, 1000), EEXIST);
        /* Refused deliveries carry no delivery id, any number of them. */
        make_event(&e, "e3", "", "", "", "failure", 102);
        ASSERT_OK(store_gh_event_insert(s, &e, 1000));
        make_event(&e, "e4", "", "", "", "failure", 103);
        ASSERT_OK(store_gh_event_insert(s, &e, 1000));
        ASSERT_STREQ(event_page(s, "ga", 10, 0, &total), "");

        /* Connecting claims the pending installation's deliveries. */
        struct gh_install_row r = { .created_at = 1, .updated_at = 1, .repos_json = (char *)"[]" };
        snprintf(r.id, sizeof(r.id), "%s", id("i9"));
        snprintf(r.status, sizeof(r.status), "active");
        ASSERT_OK(store_gh_install_put(s, &r));
        ASSERT_OK(store_gh_install_link(s, id("i9"), "", id("ga"), 2));
        ASSERT_STREQ(event_page(s, "ga", 10, 0, &total), "100");

        make_event(&e, "e5", "d5", "ga", "i9", "processing", 200);
        ASSERT_OK(store_gh_event_insert(s, &e, 1000));
        snprintf(e.status, sizeof(e.status), "failure");
        snprintf(e.error, sizeof(e.error), "boom");
        snprintf(e.sandbox_id, sizeof(e.sandbox_id), "sbx-1");
        snprintf(e.repo, sizeof(e.repo), "not/updated");
        ASSERT_OK(store_gh_event_update(s, &e));
        make_event(&e, "e6", "d6", "ga", "i9", "success", 300);
        ASSERT_OK(store_gh_event_insert(s, &e, 1000));

        ASSERT_STREQ(event_page(s, "ga", 2, 0, &total), "300,200");
        ASSERT_EQ(total, 3);
        ASSERT_STREQ(event_page(s, "ga", 2, 2, &total), "100");

        ASSERT_OK(store_gh_event_stats(s, id("ga"), 150, &st));
        ASSERT_EQ(st.success, 1);
        ASSERT_EQ(st.failure, 1);
        ASSERT_TRUE(st.has_latest && st.has_failure);
        ASSERT_EQ(st.latest.received_at, 300);
        ASSERT_STREQ(st.latest_failure.error, "boom");
        ASSERT_STREQ(st.latest_failure.sandbox_id, "sbx-1");
        ASSERT_STREQ(st.latest_failure.repo, "");
        ASSERT_OK(store_gh_event_stats(s, id("gb"), 0, &st));
        ASSERT_TRUE(!st.has_latest && !st.has_failure && st.success == 0);
        store_close(s);
}

static void count_sandbox(const struct gh_event_row *e, void *userdata)
{
        struct events *l = userdata;
        size_t n = strlen(l->buf);
        snprintf(l->buf + n, sizeof(l->buf) - n, "%s%s", n ? "," : "", e->sandbox_id);
}

TEST(github_events_pr_sandboxes_and_bound)
{
        struct store *s = open_store();
        struct gh_event_row e;
        struct events l = { "" };
        uint64_t total = 0;

        for (int i = 0; i < 3; i++) {
                char eid[16], did[16];
                snprintf(eid, sizeof(eid), "p%d", i);
                snprintf(did, sizeof(did), "pd%d", i);
                make_event(&e, eid, did, "ga", "i1", "success", 10 + (uint64_t)i);
                snprintf(e.repo, sizeof(e.repo), "%s", i == 2 ? "o/other" : "o/r");
                e.pr_number = 7;
                snprintf(e.sandbox_id, sizeof(e.sandbox_id), "sb%d", i);
                ASSERT_OK(store_gh_event_insert(s, &e, 1000));
        }
        ASSERT_OK(store_gh_event_sandboxes(s, id("ga"), "o/r", 7, count_sandbox, &l));
        ASSERT_STREQ(l.buf, "sb0,sb1");
        l.buf[0] = '\0';
        ASSERT_OK(store_gh_event_sandboxes(s, id("gb"), "o/r", 7, count_sandbox, &l));
        ASSERT_STREQ(l.buf, "");

        /* keep 2: the oldest goes. */
        make_event(&e, "p3", "pd3", "ga", "i1", "success", 20);
        ASSERT_OK(store_gh_event_insert(s, &e, 2));
        ASSERT_STREQ(event_page(s, "ga", 10, 0, &total), "20,12");
        ASSERT_ERR(store_gh_event_insert(s, &e, 0), EINVAL);
        store_close(s);
}
