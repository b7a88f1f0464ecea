/* Single sign-on accounts: which user an OpenID Connect login is, and the
 * links that decide which org a new one joins (the rule is in tenant.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "tenant/internal.h"
#include "tenant/oidc.h"

static int store_failed(struct err *err, int r, const char *what)
{
        return err_set(err, ERR_INTERNAL, -r, "cannot %s: %s", what, strerror(-r));
}

/* The org a new SSO user joins by the links ("" when none). */
static int linked_org(struct tenant *t, const struct oidc_identity *id, const char *email, char org_id[STORE_ID_MAX],
                      struct err *err)
{
        struct sso_link_row link;
        const char *at = strchr(email, '@');
        int r = -ENOENT;
        org_id[0] = '\0';
        if (id->org_id[0])
                r = store_sso_link_find(t->store, id->org_id, false, &link);
        if (r == -ENOENT && id->email_verified && at)
                r = store_sso_link_find(t->store, at + 1, true, &link);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return store_failed(err, r, "read the single sign-on links");
        snprintf(org_id, STORE_ID_MAX, "%s", link.org_id);
        return 0;
}

static int sso_new_user(struct tenant *t, const struct oidc_identity *id, const char *email, const char *org_id,
                        struct tenant_account *a, struct err *err)
{
        struct sso_identity_row ident = { .created_at = wall_ms() };
        int r;
        *a = (struct tenant_account){ .org.created_at = wall_ms(), .user.created_at = wall_ms() };
        if (tenant_id_new("usr", a->user.id) < 0 || (!org_id[0] && tenant_id_new("org", a->org.id) < 0))
                return err_set(err, ERR_INTERNAL, EIO, "no randomness");
        snprintf(a->user.email, sizeof(a->user.email), "%s", email);
        snprintf(a->user.first_name, sizeof(a->user.first_name), "%s", id->given_name);
        snprintf(a->user.last_name, sizeof(a->user.last_name), "%s", id->family_name);
        snprintf(ident.issuer, sizeof(ident.issuer), "%s", id->issuer);
        snprintf(ident.subject, sizeof(ident.subject), "%s", id->subject);
        snprintf(ident.user_id, sizeof(ident.user_id), "%s", a->user.id);
        if (org_id[0]) {   /* a member of the linked org */
                snprintf(a->user.org_id, sizeof(a->user.org_id), "%s", org_id);
                snprintf(a->user.role, sizeof(a->user.role), "member");
                snprintf(ident.org_id, sizeof(ident.org_id), "%s", org_id);
                if ((r = store_sso_user_create(t->store, NULL, &a->user, &ident)) == -EEXIST)
                        return err_set(err, ERR_EXISTS, EEXIST, "Email already registered");
                if (r < 0 || (r = store_org_get(t->store, org_id, &a->org)) < 0)
                        return store_failed(err, r, "create the user");
                return 0;
        }
        snprintf(a->org.name, sizeof(a->org.name), "%.200s's organization", id->given_name[0] ? id->given_name : email);
        snprintf(a->org.plan, sizeof(a->org.plan), "hobby");
        snprintf(a->user.org_id, sizeof(a->user.org_id), "%s", a->org.id);
        snprintf(a->user.role, sizeof(a->user.role), "owner");
        snprintf(ident.org_id, sizeof(ident.org_id), "%s", a->org.id);
        return account_insert(t, &a->org, &a->user, &ident, err);
}

/* An existing user with the login's email: linked only when the provider
 * verified the email and the links put the login in that user's org. */
static int sso_link_existing(struct tenant *t, const struct oidc_identity *id, const char *org_id,
                             const struct user_row *user, struct err *err)
{
        struct sso_identity_row ident = { .created_at = wall_ms() };
        if (!id->email_verified || !org_id[0] || strcmp(org_id, user->org_id) != 0)
                return err_set(err, ERR_EXISTS, EEXIST,
                               "An account with this email exists; sign in with its password");
        snprintf(ident.issuer, sizeof(ident.issuer), "%s", id->issuer);
        snprintf(ident.subject, sizeof(ident.subject), "%s", id->subject);
        snprintf(ident.user_id, sizeof(ident.user_id), "%s", user->id);
        snprintf(ident.org_id, sizeof(ident.org_id), "%s", user->org_id);
        int r = store_sso_identity_create(t->store, &ident);
        return r == -EEXIST ? err_set(err, ERR_EXISTS, EEXIST, "This identity is linked already")
               : r < 0      ? store_failed(err, r, "link the identity")
                            : 0;
}

/* Who (issuer, subject) is, creating the user (and org) on first login. */
static int sso_account(struct tenant *t, const struct oidc_identity *id, struct tenant_account *a, struct err *err)
{
        struct sso_identity_row ident;
        char email[256], org_id[STORE_ID_MAX];
        int r = store_sso_identity_get(t->store, id->issuer, id->subject, &ident);
        if (r == 0) {
                if ((r = store_user_get(t->store, ident.user_id, &a->user)) < 0 ||
                    (r = store_org_get(t->store, a->user.org_id, &a->org)) < 0)
                        return store_failed(err, r, "read the account");
                return 0;
        }
        if (r != -ENOENT)
                return store_failed(err, r, "read the identity");
        struct err bad = {};
        if (email_normalize(id->email, email, &bad) < 0) {
                err_done(&bad);
                return err_set(err, ERR_INVALID, EINVAL, "The provider gave no usable email address");
        }
        if ((r = linked_org(t, id, email, org_id, err)) < 0)
                return r;
        r = store_user_get_by_email(t->store, email, &a->user);
        if (r == 0) {
                if ((r = sso_link_existing(t, id, org_id, &a->user, err)) < 0 ||
                    (r = store_org_get(t->store, a->user.org_id, &a->org)) < 0)
                        return r < 0 && err->reason == ERR_OK ? store_failed(err, r, "read the org") : r;
                return 0;
        }
        if (r != -ENOENT)
                return store_failed(err, r, "read the user");
        return sso_new_user(t, id, email, org_id, a, err);
}

int tenant_sso_login(struct tenant *t, const struct oidc_identity *id, struct tenant_account *ret_account,
                     struct tenant_session *ret_session, struct err *err)
{
        struct tenant_account a = {};
        int r = sso_account(t, id, &a, err);
        if (r < 0)
                return r;
        if ((r = session_issue(t, &a.user, ret_session)) < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot start a session");
        account_view(&a);
        *ret_account = a;
        return 0;
}

int tenant_sso_link_get(struct tenant *t, const char *org_id, struct sso_link_row *ret, struct err *err)
{
        int r = store_sso_link_get(t->store, org_id, ret);
        if (r == -ENOENT)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "This organization is not linked to single sign-on");
        return r < 0 ? store_failed(err, r, "read the link") : 0;
}

/* A DNS name of letters, digits, '-' and '.', lower-cased into out. */
static bool domain_ok(const char *in, char *out, size_t cap)
{
        size_t n = strlen(in);
        if (n < 3 || n >= cap || !strchr(in, '.') || in[0] == '.' || in[0] == '-' || in[n - 1] == '.')
                return false;
        for (size_t i = 0; i <= n; i++) {
                unsigned char c = (unsigned char)in[i];
                if (c && !isalnum(c) && c != '-' && c != '.')
                        return false;
                out[i] = (char)tolower(c);
        }
        return !strstr(out, "..");
}

/* A provider organization id: 1 to 255 printable ASCII bytes. */
static bool provider_org_ok(const char *v)
{
        size_t n = strlen(v);
        for (size_t i = 0; i < n; i++)
                if (v[i] <= ' ' || v[i] > '~')
                        return false;
        return n > 0 && n < 256;
}

int tenant_sso_link_set(struct tenant *t, const char *org_id, const char *provider_org_id, const char *domain,
                        struct sso_link_row *ret, struct err *err)
{
        struct sso_link_row row = { .created_at = wall_ms(), .updated_at = wall_ms() }, old;
        bool has_org = provider_org_id && provider_org_id[0], has_domain = domain && domain[0];
        if (!has_org && !has_domain)
                return err_set(err, ERR_INVALID, EINVAL, "workos_organization_id or domain is required");
        if (has_org && !provider_org_ok(provider_org_id))
                return err_set(err, ERR_INVALID, EINVAL, "workos_organization_id must be 1 to 255 printable characters");
        if (has_domain && !domain_ok(domain, row.domain, sizeof(row.domain)))
                return err_set(err, ERR_INVALID, EINVAL, "domain must be a DNS name like example.com");
        snprintf(row.org_id, sizeof(row.org_id), "%s", org_id);
        snprintf(row.provider_org_id, sizeof(row.provider_org_id), "%s", has_org ? provider_org_id : "");
        if (store_sso_link_get(t->store, org_id, &old) == 0)
                row.created_at = old.created_at;
        int r = store_sso_link_put(t->store, &row);
        if (r == -EEXIST)
                return err_set(err, ERR_EXISTS, EEXIST, "Another organization is linked to that id or domain");
        if (r < 0)
                return store_failed(err, r, "save the link");
        *ret = row;
        return 0;
}

int tenant_sso_unlink(struct tenant *t, const char *org_id, struct err *err)
{
        int r = store_sso_link_delete(t->store, org_id);
        if (r == -ENOENT)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "This organization is not linked to single sign-on");
        return r < 0 ? store_failed(err, r, "remove the link") : 0;
}
