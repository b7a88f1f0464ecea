/* The store contract for secrets (issue 12): sealed values kept as opaque
 * text, scoped by org, listed by name a page at a time. Public store.h
 * functions only, so it runs against any backend (STORE_URL). */
#include "store_fixture.h"

static void make_secret(struct secret_row *r, const char *org, const char *name, const char *sealed, uint64_t at)
{
        *r = (struct secret_row){ .created_at = at, .updated_at = at, .sealed = (char *)sealed };
        snprintf(r->org_id, sizeof(r->org_id), "%s", id(org));
        snprintf(r->name, sizeof(r->name), "%s", name);
        snprintf(r->key_id, sizeof(r->key_id), "k1");
}

struct listing {
        char buf[512];
};

static void on_secret(const struct secret_row *r, void *userdata)
{
        struct listing *l = userdata;
        size_t n = strlen(l->buf);
        snprintf(l->buf + n, sizeof(l->buf) - n, "%s%s=%s@%llu/%llu", n ? "," : "", r->name, r->sealed,
                 (unsigned long long)r->created_at, (unsigned long long)r->updated_at);
}

static const char *list(struct store *s, const char *org, uint64_t limit, uint64_t offset, uint64_t *total)
{
        static struct listing l;
        l.buf[0] = '\0';
        ASSERT_OK(store_secret_each(s, id(org), limit, offset, on_secret, &l, total));
        return l.buf;
}

TEST(secrets_crud_scoped_by_org)
{
        struct store *s = open_store();
        struct secret_row r;
        uint64_t total = 0;

        ASSERT_OK(store_org_ensure(s, id("so1"), "one"));
        ASSERT_OK(store_org_ensure(s, id("so2"), "two"));
        make_secret(&r, "so1", "B_KEY", "sealed-b", 10);
        ASSERT_OK(store_secret_create(s, &r));
        ASSERT_ERR(store_secret_create(s, &r), EEXIST);
        make_secret(&r, "so1", "A_KEY", "sealed-a", 20);
        ASSERT_OK(store_secret_create(s, &r));
        /* The same name in another org is another secret. */
        make_secret(&r, "so2", "A_KEY", "sealed-other", 30);
        ASSERT_OK(store_secret_create(s, &r));

        ASSERT_STREQ(list(s, "so1", 100, 0, &total), "A_KEY=sealed-a@20/20,B_KEY=sealed-b@10/10");
        ASSERT_U64_EQ(total, 2);
        ASSERT_STREQ(list(s, "so1", 1, 1, &total), "B_KEY=sealed-b@10/10");
        ASSERT_U64_EQ(total, 2);

        /* Update keeps created_at; another org's row is untouched. */
        make_secret(&r, "so1", "A_KEY", "sealed-a2", 99);
        ASSERT_OK(store_secret_update(s, &r));
        ASSERT_STREQ(list(s, "so1", 100, 0, &total), "A_KEY=sealed-a2@20/99,B_KEY=sealed-b@10/10");
        ASSERT_STREQ(list(s, "so2", 100, 0, &total), "A_KEY=sealed-other@30/30");
        make_secret(&r, "so1", "NOPE", "x", 1);
        ASSERT_ERR(store_secret_update(s, &r), ENOENT);

        /* Delete is scoped: org 2 cannot delete org 1's B_KEY. */
        ASSERT_ERR(store_secret_delete(s, id("so2"), "B_KEY"), ENOENT);
        ASSERT_OK(store_secret_delete(s, id("so1"), "B_KEY"));
        ASSERT_ERR(store_secret_delete(s, id("so1"), "B_KEY"), ENOENT);
        ASSERT_STREQ(list(s, "so1", 100, 0, &total), "A_KEY=sealed-a2@20/99");
        ASSERT_U64_EQ(total, 1);
        store_close(s);
}

TEST(secrets_bad_arguments)
{
        struct store *s = open_store();
        struct secret_row r;
        uint64_t total;

        make_secret(&r, "so3", "X", "", 1);
        ASSERT_ERR(store_secret_create(s, &r), EINVAL);    /* empty sealed */
        r.sealed = NULL;
        ASSERT_ERR(store_secret_update(s, &r), EINVAL);
        make_secret(&r, "so3", "", "v", 1);
        ASSERT_ERR(store_secret_create(s, &r), EINVAL);    /* empty name */
        ASSERT_ERR(store_secret_create(s, NULL), EINVAL);
        ASSERT_ERR(store_secret_delete(s, "", "X"), EINVAL);
        ASSERT_ERR(store_secret_each(s, id("so3"), 1, 0, NULL, NULL, &total), EINVAL);
        ASSERT_ERR(store_secret_each(NULL, id("so3"), 1, 0, on_secret, NULL, &total), EINVAL);
        store_close(s);
}
