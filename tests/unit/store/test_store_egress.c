/* The egress tables through store.h: policies scoped by org (another
 * org's id is absent for update and delete, invisible in its list), the
 * every-org snapshot, audit records newest first with paging and the
 * org's total, and pruning by age. */
#include "store_fixture.h"

static void put_policy(struct store *s, const char *name, const char *org, const char *doc, uint64_t at)
{
        struct egress_policy_row row = { .doc = (char *)doc, .created_at = at, .updated_at = at };
        snprintf(row.id, sizeof(row.id), "%s", id(name));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id(org));
        ASSERT_OK(store_egress_policy_create(s, &row));
}

static void on_policy(const struct egress_policy_row *row, void *userdata)
{
        seen_add(userdata, unid(row->id));
        seen_add(userdata, row->doc);
}

TEST(egress_policies_scoped_by_org)
{
        struct store *s = open_store();
        ASSERT_OK(store_org_ensure(s, id("oa"), "A"));
        ASSERT_OK(store_org_ensure(s, id("ob"), "B"));
        put_policy(s, "p2", "oa", "{\"n\":2}", 20);
        put_policy(s, "p1", "oa", "{\"n\":1}", 10);
        put_policy(s, "p3", "ob", "{\"n\":3}", 5);
        struct egress_policy_row dup = { .doc = "{}" };
        snprintf(dup.id, sizeof(dup.id), "%s", id("p1"));
        snprintf(dup.org_id, sizeof(dup.org_id), "%s", id("oa"));
        ASSERT_ERR(store_egress_policy_create(s, &dup), EEXIST);
        struct seen a = {};
        ASSERT_OK(store_egress_policy_each(s, id("oa"), on_policy, &a));
        ASSERT_STREQ(a.buf, "p1,{\"n\":1},p2,{\"n\":2}");   /* oldest first, only A's */
        /* B cannot change or delete A's policy. */
        struct egress_policy_row up = { .doc = "{\"n\":9}", .updated_at = 30 };
        snprintf(up.id, sizeof(up.id), "%s", id("p1"));
        snprintf(up.org_id, sizeof(up.org_id), "%s", id("ob"));
        ASSERT_ERR(store_egress_policy_update(s, &up), ENOENT);
        ASSERT_ERR(store_egress_policy_delete(s, id("ob"), id("p1")), ENOENT);
        snprintf(up.org_id, sizeof(up.org_id), "%s", id("oa"));
        ASSERT_OK(store_egress_policy_update(s, &up));
        ASSERT_OK(store_egress_policy_delete(s, id("oa"), id("p2")));
        struct seen a2 = {};
        ASSERT_OK(store_egress_policy_each(s, id("oa"), on_policy, &a2));
        ASSERT_STREQ(a2.buf, "p1,{\"n\":9}");
        struct seen all = {};
        ASSERT_OK(store_egress_policy_each(s, NULL, on_policy, &all));
        ASSERT_TRUE(strstr(all.buf, "p3,{\"n\":3}") != NULL && strstr(all.buf, "p1,") != NULL);
        store_close(s);
}

static void on_audit(const struct egress_audit_row *row, void *userdata)
{
        char line[300];
        snprintf(line, sizeof(line), "%s/%u/%s/%d/%llu", row->host, row->port, row->decision, row->violation,
                 (unsigned long long)row->bytes_in);
        seen_add(userdata, line);
}

static void put_audit(struct store *s, const char *org, const char *host, uint64_t at)
{
        struct egress_audit_row row = { .at = at, .port = 443, .violation = true, .bytes_in = 7 };
        snprintf(row.org_id, sizeof(row.org_id), "%s", id(org));
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "sb");
        snprintf(row.host, sizeof(row.host), "%s", host);
        snprintf(row.protocol, sizeof(row.protocol), "connect");
        snprintf(row.decision, sizeof(row.decision), "denied");
        snprintf(row.mode, sizeof(row.mode), "enforce");
        ASSERT_OK(store_egress_audit_insert(s, &row));
}

TEST(egress_audit_pages_and_prunes)
{
        struct store *s = open_store();
        ASSERT_OK(store_org_ensure(s, id("oa"), "A"));
        ASSERT_OK(store_org_ensure(s, id("ob"), "B"));
        put_audit(s, "oa", "one.test", 100);
        put_audit(s, "ob", "other.test", 150);
        put_audit(s, "oa", "two.test", 200);
        put_audit(s, "oa", "three.test", 300);
        struct seen page = {};
        uint64_t total = 0;
        ASSERT_OK(store_egress_audit_each(s, id("oa"), 2, 0, on_audit, &page, &total));
        ASSERT_EQ(total, 3);
        ASSERT_STREQ(page.buf, "three.test/443/denied/1/7,two.test/443/denied/1/7");   /* newest first */
        ASSERT_OK(store_egress_audit_prune(s, 250));
        struct seen left = {};
        ASSERT_OK(store_egress_audit_each(s, id("oa"), 10, 0, on_audit, &left, &total));
        ASSERT_EQ(total, 1);
        ASSERT_STREQ(left.buf, "three.test/443/denied/1/7");
        store_close(s);
}
