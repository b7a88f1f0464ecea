/* The store contract for tenants (issue 12): accounts (org + owner),
 * users by email, API keys scoped by org, login sessions. Public store.h
 * functions only, so it runs against any backend (STORE_URL). */
#include "store_fixture.h"

static void make_account(const char *org, const char *user, const char *email, const char *slug,
                         struct org_row *o, struct user_row *u)
{
        *o = (struct org_row){ .created_at = 1 };
        *u = (struct user_row){ .created_at = 2 };
        snprintf(o->id, sizeof(o->id), "%s", id(org));
        snprintf(o->name, sizeof(o->name), "Org %s", org);
        snprintf(o->slug, sizeof(o->slug), "%s", slug ? id(slug) : "");
        snprintf(u->id, sizeof(u->id), "%s", id(user));
        snprintf(u->org_id, sizeof(u->org_id), "%s", id(org));
        snprintf(u->email, sizeof(u->email), "%s@example.com", id(email));
        snprintf(u->role, sizeof(u->role), "owner");
        snprintf(u->password_hash, sizeof(u->password_hash), "$argon2id$fake");
}

static void make_key(struct apikey_row *k, const char *key, const char *org, const char *hash, uint64_t at)
{
        *k = (struct apikey_row){ .created_at = at };
        snprintf(k->id, sizeof(k->id), "%s", id(key));
        snprintf(k->org_id, sizeof(k->org_id), "%s", id(org));
        snprintf(k->name, sizeof(k->name), "key %s", key);
        snprintf(k->prefix, sizeof(k->prefix), "sk_%s", key);
        snprintf(k->hash, sizeof(k->hash), "%s", id(hash));
}

TEST(tenants_account_create_and_read)
{
        struct store *s = open_store();
        struct org_row o, got_o = {};
        struct user_row u, got_u = {};

        make_account("oa", "ua", "ada", "slug-a", &o, &u);
        ASSERT_OK(store_account_create(s, &o, &u));
        ASSERT_OK(store_org_get(s, o.id, &got_o));
        ASSERT_STREQ(got_o.name, o.name);
        ASSERT_STREQ(got_o.slug, o.slug);
        ASSERT_STREQ(got_o.plan, "hobby");
        ASSERT_OK(store_user_get(s, u.id, &got_u));
        ASSERT_STREQ(got_u.email, u.email);
        ASSERT_STREQ(got_u.password_hash, u.password_hash);
        memset(&got_u, 0, sizeof(got_u));
        ASSERT_OK(store_user_get_by_email(s, u.email, &got_u));
        ASSERT_STREQ(got_u.id, u.id);
        ASSERT_STREQ(got_u.org_id, o.id);
        ASSERT_ERR(store_user_get_by_email(s, "nobody@example.com", &got_u), ENOENT);
        store_close(s);
}

TEST(tenants_account_conflicts_write_nothing)
{
        struct store *s = open_store();
        struct org_row o, o2, got = {};
        struct user_row u, u2;

        make_account("ob", "ub", "bob", "slug-b", &o, &u);
        ASSERT_OK(store_account_create(s, &o, &u));
        /* Same email, new org: refused, and the new org is not left behind. */
        make_account("ob2", "ub2", "bob", "slug-b2", &o2, &u2);
        ASSERT_ERR(store_account_create(s, &o2, &u2), EEXIST);
        ASSERT_ERR(store_org_get(s, o2.id, &got), ENOENT);
        /* Same slug. */
        make_account("ob3", "ub3", "bob3", "slug-b", &o2, &u2);
        ASSERT_ERR(store_account_create(s, &o2, &u2), EEXIST);
        /* No slug twice is fine (orgs made by store_org_ensure have none). */
        make_account("ob4", "ub4", "bob4", NULL, &o2, &u2);
        ASSERT_OK(store_account_create(s, &o2, &u2));
        make_account("ob5", "ub5", "bob5", NULL, &o2, &u2);
        ASSERT_OK(store_account_create(s, &o2, &u2));
        /* The user's org must be the org. */
        make_account("ob6", "ub6", "bob6", NULL, &o2, &u2);
        snprintf(u2.org_id, sizeof(u2.org_id), "%s", o.id);
        ASSERT_ERR(store_account_create(s, &o2, &u2), EINVAL);
        store_close(s);
}

struct key_list {
        char ids[8][STORE_ID_MAX];
        size_t n;
};

static void on_key(const struct apikey_row *row, void *userdata)
{
        struct key_list *l = userdata;
        if (l->n < ARRAY_SIZE(l->ids))
                snprintf(l->ids[l->n++], STORE_ID_MAX, "%s", row->id);
}

TEST(tenants_apikeys_are_scoped_by_org)
{
        struct store *s = open_store();
        struct org_row o;
        struct user_row u;
        struct apikey_row k, got = {};
        struct key_list l = {};
        uint64_t total = 0;

        make_account("oc", "uc", "carol", NULL, &o, &u);
        ASSERT_OK(store_account_create(s, &o, &u));
        make_account("od", "ud", "dave", NULL, &o, &u);
        ASSERT_OK(store_account_create(s, &o, &u));
        make_key(&k, "k1", "oc", "h1", 10);
        ASSERT_OK(store_apikey_create(s, &k));
        make_key(&k, "k2", "oc", "h2", 20);
        ASSERT_OK(store_apikey_create(s, &k));
        make_key(&k, "k3", "oc", "h3", 30);
        ASSERT_OK(store_apikey_create(s, &k));
        make_key(&k, "k4", "od", "h4", 5);
        ASSERT_OK(store_apikey_create(s, &k));
        /* A duplicate hash is refused. */
        make_key(&k, "k5", "od", "h4", 6);
        ASSERT_ERR(store_apikey_create(s, &k), EEXIST);
        /* A key of a missing org is refused (foreign key). */
        make_key(&k, "k6", "nope", "h6", 6);
        ASSERT_TRUE(store_apikey_create(s, &k) < 0);

        ASSERT_OK(store_apikey_get_by_hash(s, id("h2"), &got));
        ASSERT_STREQ(got.id, id("k2"));
        ASSERT_STREQ(got.org_id, id("oc"));
        ASSERT_ERR(store_apikey_get_by_hash(s, id("zz"), &got), ENOENT);

        /* Pages in creation order, with the org's total. */
        ASSERT_OK(store_apikey_each(s, id("oc"), 2, 1, on_key, &l, &total));
        ASSERT_EQ(total, 3);
        ASSERT_EQ(l.n, 2);
        ASSERT_STREQ(l.ids[0], id("k2"));
        ASSERT_STREQ(l.ids[1], id("k3"));
        l.n = 0;
        ASSERT_OK(store_apikey_each(s, id("oc"), 10, 3, on_key, &l, &total));
        ASSERT_EQ(l.n, 0);
        ASSERT_EQ(total, 3);

        /* Another org's key is absent for every operation. */
        ASSERT_ERR(store_apikey_get(s, id("od"), id("k1"), &got), ENOENT);
        ASSERT_ERR(store_apikey_delete(s, id("od"), id("k1")), ENOENT);
        ASSERT_ERR(store_apikey_rehash(s, id("od"), id("k1"), "x", "sk_x"), ENOENT);
        ASSERT_OK(store_apikey_get(s, id("oc"), id("k1"), &got));

        /* Rehash: the old hash no longer finds it, the new one does. */
        ASSERT_OK(store_apikey_rehash(s, id("oc"), id("k1"), id("h1new"), "sk_new"));
        ASSERT_ERR(store_apikey_get_by_hash(s, id("h1"), &got), ENOENT);
        ASSERT_OK(store_apikey_get_by_hash(s, id("h1new"), &got));
        ASSERT_STREQ(got.prefix, "sk_new");
        ASSERT_OK(store_apikey_delete(s, id("oc"), id("k1")));
        ASSERT_ERR(store_apikey_get_by_hash(s, id("h1new"), &got), ENOENT);
        ASSERT_ERR(store_apikey_delete(s, id("oc"), id("k1")), ENOENT);
        store_close(s);
}

TEST(tenants_sessions_revoke)
{
        struct store *s = open_store();
        struct org_row o;
        struct user_row u;
        struct session_row row = { .created_at = 1, .expires_at = 99 }, got = {};

        make_account("oe", "ue", "erin", NULL, &o, &u);
        ASSERT_OK(store_account_create(s, &o, &u));
        snprintf(row.id, sizeof(row.id), "%s", id("s1"));
        snprintf(row.user_id, sizeof(row.user_id), "%s", u.id);
        snprintf(row.org_id, sizeof(row.org_id), "%s", o.id);
        ASSERT_OK(store_session_create(s, &row));
        ASSERT_ERR(store_session_create(s, &row), EEXIST);
        ASSERT_OK(store_session_get(s, row.id, &got));
        ASSERT_EQ(got.expires_at, 99);
        ASSERT_FALSE(got.revoked);
        ASSERT_OK(store_session_revoke(s, row.id));
        ASSERT_OK(store_session_revoke(s, row.id));
        ASSERT_OK(store_session_get(s, row.id, &got));
        ASSERT_TRUE(got.revoked);
        ASSERT_ERR(store_session_revoke(s, id("nope")), ENOENT);
        ASSERT_ERR(store_session_get(s, id("nope"), &got), ENOENT);
        store_close(s);
}

static void make_idem(struct idem_row *row, const char *org, const char *key, const char *route, uint64_t at)
{
        *row = (struct idem_row){ .status = 201, .created_at = at, .response = (char *)"{\"a\":1}" };
        snprintf(row->org_id, sizeof(row->org_id), "%s", id(org));
        snprintf(row->key, sizeof(row->key), "%s", key);
        snprintf(row->route, sizeof(row->route), "%s", route);
        snprintf(row->body_hash, sizeof(row->body_hash), "abc");
}

TEST(tenants_idempotency_rows)
{
        struct store *s = open_store();
        struct org_row o;
        struct user_row u;
        struct idem_row row, got = {};

        make_account("of", "uf", "fay", NULL, &o, &u);
        ASSERT_OK(store_account_create(s, &o, &u));
        make_account("og", "ug", "gus", NULL, &o, &u);
        ASSERT_OK(store_account_create(s, &o, &u));
        make_idem(&row, "of", "k1", "POST /a", 1000);
        ASSERT_OK(store_idem_put(s, &row, 0));
        ASSERT_ERR(store_idem_put(s, &row, 0), EEXIST);
        ASSERT_OK(store_idem_get(s, id("of"), "k1", "POST /a", 500, &got));
        ASSERT_EQ(got.status, 201);
        ASSERT_STREQ(got.response, "{\"a\":1}");
        ASSERT_STREQ(got.body_hash, "abc");
        idem_row_done(&got);
        /* Scoped by org, key and route. */
        ASSERT_ERR(store_idem_get(s, id("og"), "k1", "POST /a", 0, &got), ENOENT);
        ASSERT_ERR(store_idem_get(s, id("of"), "k2", "POST /a", 0, &got), ENOENT);
        ASSERT_ERR(store_idem_get(s, id("of"), "k1", "POST /b", 0, &got), ENOENT);
        make_idem(&row, "og", "k1", "POST /a", 1000);
        ASSERT_OK(store_idem_put(s, &row, 0));
        /* Too old: gone, and the key may be used again. */
        ASSERT_ERR(store_idem_get(s, id("of"), "k1", "POST /a", 1001, &got), ENOENT);
        make_idem(&row, "of", "k1", "POST /a", 5000);
        ASSERT_OK(store_idem_put(s, &row, 0));
        /* A put drops every row older than its not_before. */
        make_idem(&row, "of", "k9", "POST /a", 6000);
        ASSERT_OK(store_idem_put(s, &row, 2000));
        ASSERT_ERR(store_idem_get(s, id("og"), "k1", "POST /a", 0, &got), ENOENT);
        ASSERT_OK(store_idem_get(s, id("of"), "k1", "POST /a", 0, &got));
        idem_row_done(&got);
        store_close(s);
}
