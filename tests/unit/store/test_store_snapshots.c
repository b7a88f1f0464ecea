/* The store contract for snapshot profiles and warm classes (issue 15):
 * a profile put again is a new version, profiles list newest first, a
 * missing one is -ENOENT; a sandbox row keeps its warm class and the ids
 * of one class come oldest first. Public store.h functions only, so it
 * runs against any backend (STORE_URL). */
#include "store_fixture.h"

static void make_profile(struct snapshot_profile_row *p, const char *key, uint64_t mib, uint64_t at)
{
        *p = (struct snapshot_profile_row){ .vcpu_count = 1, .mem_size_mib = mib, .created_at = at };
        snprintf(p->key, sizeof(p->key), "%s", id(key));
        snprintf(p->kernel_path, sizeof(p->kernel_path), "/k/%s", key);
}

static void on_profile(const struct snapshot_profile_row *p, void *userdata)
{
        const char *name = unid(p->key);
        if (name)
                seen_add(userdata, name);
}

TEST(snapshot_profiles_versions_order_delete)
{
        struct store *s = open_store();
        struct snapshot_profile_row p, got;
        make_profile(&p, "pa", 64, 10);
        ASSERT_OK(store_snapshot_profile_put(s, &p, &got));
        ASSERT_U64_EQ(got.version, 1);
        ASSERT_STREQ(got.kernel_path, "/k/pa");
        make_profile(&p, "pb", 128, 30);
        ASSERT_OK(store_snapshot_profile_put(s, &p, NULL));
        make_profile(&p, "pa", 256, 20);
        p.rootfs_path[0] = '\0';
        ASSERT_OK(store_snapshot_profile_put(s, &p, &got));
        ASSERT_U64_EQ(got.version, 2);
        ASSERT_U64_EQ(got.mem_size_mib, 256);
        ASSERT_U64_EQ(got.created_at, 20);
        ASSERT_OK(store_snapshot_profile_get(s, id("pa"), &got));
        ASSERT_U64_EQ(got.version, 2);

        struct seen v = { 0 };
        ASSERT_OK(store_snapshot_profile_each(s, on_profile, &v));
        ASSERT_STREQ(v.buf, "pb,pa");
        ASSERT_OK(store_snapshot_profile_delete(s, id("pa")));
        ASSERT_ERR(store_snapshot_profile_delete(s, id("pa")), ENOENT);
        ASSERT_ERR(store_snapshot_profile_get(s, id("pa"), &got), ENOENT);
        ASSERT_ERR(store_snapshot_profile_put(s, NULL, NULL), EINVAL);
        store_close(s);
}

static void put_classed(struct store *s, const char *name, const char *cls, uint64_t created)
{
        struct sandbox_row row = { .created_at = created };
        snprintf(row.id, sizeof(row.id), "%s", id(name));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("pool"));
        snprintf(row.warm_class, sizeof(row.warm_class), "%s", cls);
        ASSERT_OK(store_sandbox_put(s, &row));
}

TEST(sandbox_warm_class_kept_and_listed_oldest_first)
{
        struct store *s = open_store();
        ASSERT_OK(store_org_ensure(s, id("pool"), "pool"));
        put_classed(s, "s3", "c1", 30);
        put_classed(s, "s1", "c1", 10);
        put_classed(s, "s2", "", 20);
        put_classed(s, "s4", "c2", 5);
        struct sandbox_row row = { 0 };
        ASSERT_OK(store_sandbox_get(s, id("s3"), &row));
        ASSERT_STREQ(row.warm_class, "c1");
        sandbox_row_done(&row);

        struct seen v = { 0 };
        ASSERT_OK(store_sandbox_each_in_class(s, id("pool"), "c1", on_id, &v));
        ASSERT_STREQ(v.buf, "s1,s3");
        v = (struct seen){ 0 };
        ASSERT_OK(store_sandbox_each_in_class(s, id("pool"), "", on_id, &v));
        ASSERT_STREQ(v.buf, "s2");
        v = (struct seen){ 0 };
        ASSERT_OK(store_sandbox_each_in_org(s, id("pool"), on_id, &v));
        ASSERT_STREQ(v.buf, "s1,s2,s3,s4");
        /* Re-labelled (taken): out of its class. */
        put_classed(s, "s1", "", 10);
        v = (struct seen){ 0 };
        ASSERT_OK(store_sandbox_each_in_class(s, id("pool"), "c1", on_id, &v));
        ASSERT_STREQ(v.buf, "s3");
        store_close(s);
}
