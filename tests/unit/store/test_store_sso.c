/* The store contract for single sign-on (issue 15): identities ((issuer,
 * subject) → user) created with their user atomically, and org links
 * unique by provider organization id and by domain. Public store.h
 * functions only, so it runs against any backend (STORE_URL). */
#include "store_fixture.h"

static void make_user(const char *org, const char *user, const char *email, struct org_row *o, struct user_row *u)
{
        *o = (struct org_row){ .created_at = 1 };
        *u = (struct user_row){ .created_at = 2 };
        snprintf(o->id, sizeof(o->id), "%s", id(org));
        snprintf(o->name, sizeof(o->name), "Org %s", org);
        snprintf(u->id, sizeof(u->id), "%s", id(user));
        snprintf(u->org_id, sizeof(u->org_id), "%s", id(org));
        snprintf(u->email, sizeof(u->email), "%s@example.com", id(email));
        snprintf(u->role, sizeof(u->role), "owner");
}

static void make_ident(struct sso_identity_row *r, const char *sub, const char *user, const char *org)
{
        *r = (struct sso_identity_row){ .created_at = 7 };
        snprintf(r->issuer, sizeof(r->issuer), "https://idp.example");
        snprintf(r->subject, sizeof(r->subject), "%s", id(sub));
        snprintf(r->user_id, sizeof(r->user_id), "%s", id(user));
        snprintf(r->org_id, sizeof(r->org_id), "%s", id(org));
}

TEST(sso_user_create_is_atomic)
{
        struct store *s = open_store();
        struct org_row o, o2;
        struct user_row u, u2, got;
        struct sso_identity_row ident, ident2, back;

        /* A founder: org, user and identity together. */
        make_user("so1", "su1", "ssoa", &o, &u);
        make_ident(&ident, "sub1", "su1", "so1");
        ASSERT_OK(store_sso_user_create(s, &o, &u, &ident));
        ASSERT_OK(store_sso_identity_get(s, "https://idp.example", id("sub1"), &back));
        ASSERT_STREQ(back.user_id, id("su1"));
        ASSERT_STREQ(back.org_id, id("so1"));
        ASSERT_U64_EQ(back.created_at, 7);
        ASSERT_ERR(store_sso_identity_get(s, "https://other.example", id("sub1"), &back), ENOENT);
        /* A member of an existing org (no new org). */
        make_user("so1", "su2", "ssob", &o2, &u2);
        snprintf(u2.role, sizeof(u2.role), "member");
        make_ident(&ident2, "sub2", "su2", "so1");
        ASSERT_OK(store_sso_user_create(s, NULL, &u2, &ident2));
        ASSERT_OK(store_user_get(s, id("su2"), &got));
        ASSERT_STREQ(got.org_id, id("so1"));
        /* A taken identity writes nothing: neither the org nor the user. */
        make_user("so3", "su3", "ssoc", &o2, &u2);
        make_ident(&ident2, "sub1", "su3", "so3");
        ASSERT_ERR(store_sso_user_create(s, &o2, &u2, &ident2), EEXIST);
        ASSERT_ERR(store_user_get(s, id("su3"), &got), ENOENT);
        ASSERT_ERR(store_org_get(s, id("so3"), &o2), ENOENT);
        /* A taken email too. */
        make_user("so4", "su4", "ssoa", &o2, &u2);
        make_ident(&ident2, "sub4", "su4", "so4");
        ASSERT_ERR(store_sso_user_create(s, &o2, &u2, &ident2), EEXIST);
        ASSERT_ERR(store_sso_identity_get(s, "https://idp.example", id("sub4"), &back), ENOENT);
        /* An identity for an existing user. */
        make_ident(&ident2, "sub5", "su1", "so1");
        ASSERT_OK(store_sso_identity_create(s, &ident2));
        ASSERT_ERR(store_sso_identity_create(s, &ident2), EEXIST);
        ASSERT_ERR(store_sso_identity_get(s, "", "x", &back), EINVAL);
        store_close(s);
}

static void make_link(struct sso_link_row *l, const char *org, const char *provider_org, const char *domain)
{
        *l = (struct sso_link_row){ .created_at = 3, .updated_at = 4 };
        snprintf(l->org_id, sizeof(l->org_id), "%s", id(org));
        snprintf(l->provider_org_id, sizeof(l->provider_org_id), "%s", provider_org[0] ? id(provider_org) : "");
        snprintf(l->domain, sizeof(l->domain), "%s", domain[0] ? id(domain) : "");
}

TEST(sso_links_unique_across_orgs)
{
        struct store *s = open_store();
        struct sso_link_row l, got;

        ASSERT_OK(store_org_ensure(s, id("lo1"), "one"));
        ASSERT_OK(store_org_ensure(s, id("lo2"), "two"));
        ASSERT_ERR(store_sso_link_get(s, id("lo1"), &got), ENOENT);
        make_link(&l, "lo1", "porg1", "");
        ASSERT_OK(store_sso_link_put(s, &l));
        ASSERT_OK(store_sso_link_find(s, id("porg1"), false, &got));
        ASSERT_STREQ(got.org_id, id("lo1"));
        ASSERT_STREQ(got.domain, "");
        /* Two orgs without a domain do not clash on the empty one. */
        make_link(&l, "lo2", "porg2", "");
        ASSERT_OK(store_sso_link_put(s, &l));
        /* Another org cannot take porg1; the owner can replace its own link. */
        make_link(&l, "lo2", "porg1", "");
        ASSERT_ERR(store_sso_link_put(s, &l), EEXIST);
        make_link(&l, "lo1", "", "corp.example");
        ASSERT_OK(store_sso_link_put(s, &l));
        ASSERT_ERR(store_sso_link_find(s, id("porg1"), false, &got), ENOENT);
        ASSERT_OK(store_sso_link_find(s, id("corp.example"), true, &got));
        ASSERT_STREQ(got.org_id, id("lo1"));
        ASSERT_STREQ(got.provider_org_id, "");
        ASSERT_ERR(store_sso_link_find(s, id("corp.example"), false, &got), ENOENT);
        ASSERT_OK(store_sso_link_delete(s, id("lo1")));
        ASSERT_ERR(store_sso_link_delete(s, id("lo1")), ENOENT);
        ASSERT_ERR(store_sso_link_find(s, id("corp.example"), true, &got), ENOENT);
        ASSERT_OK(store_sso_link_get(s, id("lo2"), &got));
        ASSERT_STREQ(got.provider_org_id, id("porg2"));
        store_close(s);
}
