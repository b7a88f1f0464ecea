/* Accounts: registration (org + owner + first key + session), login with
 * its rate limit, and reading a principal's org and user. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "tenant/internal.h"

int tenant_new(const struct tenant_options *o, struct store *store, struct tenant **ret, struct err *err)
{
        struct tenant *t = calloc(1, sizeof(*t));
        if (!t || !(t->limiter = limiter_new())) {
                free(t);
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        }
        t->opt = *o;
        t->store = store;
        int r = session_key_load(t, err);
        if (r == 0)
                r = secrets_key_load(t, err);
        /* The hash an unknown email is checked against: same cost as a
         * real one, and no password matches it. */
        if (r == 0 && (r = password_hash("no password matches this 0", t->dummy_hash, sizeof(t->dummy_hash))) < 0)
                err_set(err, ERR_INTERNAL, -r, "cannot hash a password (libargon2)");
        if (r < 0) {
                tenant_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

void tenant_free(struct tenant *t)
{
        if (!t)
                return;
        limiter_free(t->limiter);
        explicit_bzero(t->key, sizeof(t->key));
        explicit_bzero(t->secrets_key, sizeof(t->secrets_key));
        free(t);
}

/* Lower-cased copy of an address of the form local@domain, without
 * spaces or control characters. */
int email_normalize(const char *in, char out[256], struct err *err)
{
        size_t n = in ? strlen(in) : 0;
        const char *at = in ? strchr(in, '@') : NULL;
        if (n < 3 || n > 254 || !at || at == in || !at[1] || strchr(at + 1, '@'))
                return err_set(err, ERR_INVALID, EINVAL, "email must be an address like name@example.com");
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)in[i];
                if (c <= ' ' || c == 0x7f)
                        return err_set(err, ERR_INVALID, EINVAL, "email must not contain spaces");
                out[i] = (char)tolower(c);
        }
        out[n] = '\0';
        return 0;
}

static int text_field(const char *v, const char *name, size_t cap, bool required, struct err *err)
{
        if ((required && (!v || !v[0])) || (v && strlen(v) >= cap))
                return err_set(err, ERR_INVALID, EINVAL, "%s must be 1 to %zu bytes", name, cap - 1);
        return 0;
}

/* "Example Co" → "example-co": lowercase letters and digits, one '-'
 * between runs; "org" when nothing is left. */
void slugify(const char *name, char *out, size_t cap)
{
        size_t n = 0;
        bool dash = false;
        for (const char *p = name; *p && n + 2 < cap && n < 48; p++) {
                unsigned char c = (unsigned char)*p;
                if (isalnum(c) && c < 0x80) {
                        if (dash && n)
                                out[n++] = '-';
                        out[n++] = (char)tolower(c);
                        dash = false;
                } else {
                        dash = true;
                }
        }
        out[n] = '\0';
        if (!n)
                snprintf(out, cap, "org");
}

static int check_registration(const struct tenant_registration *in, char email[256], struct err *err)
{
        int r;
        if ((r = text_field(in->organization_name, "organization_name", sizeof(((struct org_row *)0)->name), true,
                            err)) < 0 ||
            (r = text_field(in->first_name, "first_name", sizeof(((struct user_row *)0)->first_name), false, err)) <
                    0 ||
            (r = text_field(in->last_name, "last_name", sizeof(((struct user_row *)0)->last_name), false, err)) < 0 ||
            (r = email_normalize(in->email, email, err)) < 0 || (r = tenant_password_check(in->password, err)) < 0)
                return r;
        return 0;
}

void account_view(struct tenant_account *a)
{
        a->user.password_hash[0] = '\0';
}

int account_insert(struct tenant *t, struct org_row *org, struct user_row *user, const struct sso_identity_row *ident,
                   struct err *err)
{
        char base[64];
        int r = -EEXIST;
        slugify(org->name, base, sizeof(base));
        for (int attempt = 0; attempt < 5 && r == -EEXIST; attempt++) {
                char suffix[STORE_ID_MAX];
                if (tenant_id_new("x", suffix) < 0)
                        return err_set(err, ERR_INTERNAL, EIO, "no randomness");
                snprintf(org->slug, sizeof(org->slug), attempt ? "%s-%.6s" : "%s", base, suffix + 2);
                r = ident ? store_sso_user_create(t->store, org, user, ident) : store_account_create(t->store, org, user);
                struct user_row other;
                if (r == -EEXIST && store_user_get_by_email(t->store, user->email, &other) == 0)
                        return err_set(err, ERR_EXISTS, EEXIST, "Email already registered");
        }
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "cannot create the account: %s", strerror(-r)) : 0;
}

int tenant_register(struct tenant *t, const struct tenant_registration *in, struct tenant_account *ret_account,
                    struct tenant_new_key *ret_key, struct tenant_session *ret_session, struct err *err)
{
        struct tenant_account a = { .org.created_at = wall_ms(), .user.created_at = wall_ms() };
        struct user_row taken;
        int r = check_registration(in, a.user.email, err);
        if (r < 0)
                return r;
        if (store_user_get_by_email(t->store, a.user.email, &taken) == 0)
                return err_set(err, ERR_EXISTS, EEXIST, "Email already registered");
        if (tenant_id_new("org", a.org.id) < 0 || tenant_id_new("usr", a.user.id) < 0)
                return err_set(err, ERR_INTERNAL, EIO, "no randomness");
        snprintf(a.org.name, sizeof(a.org.name), "%s", in->organization_name);
        snprintf(a.org.plan, sizeof(a.org.plan), "hobby");
        snprintf(a.user.org_id, sizeof(a.user.org_id), "%s", a.org.id);
        snprintf(a.user.first_name, sizeof(a.user.first_name), "%s", in->first_name ? in->first_name : "");
        snprintf(a.user.last_name, sizeof(a.user.last_name), "%s", in->last_name ? in->last_name : "");
        snprintf(a.user.role, sizeof(a.user.role), "owner");
        if ((r = password_hash(in->password, a.user.password_hash, sizeof(a.user.password_hash))) < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot hash the password");
        if ((r = account_insert(t, &a.org, &a.user, NULL, err)) < 0)
                return r;
        if ((r = tenant_key_create(t, a.org.id, a.user.id, "Default API Key", ret_key, err)) < 0)
                return r;
        if ((r = session_issue(t, &a.user, ret_session)) < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot start a session");
        account_view(&a);
        *ret_account = a;
        return 0;
}

static int rate_limited(struct err *err, uint64_t wait)
{
        err_set(err, ERR_BUSY, EAGAIN, "Too many failed login attempts; retry later");
        err_detail_u64(err, "retry_after", wait);
        return -EAGAIN;
}

int tenant_login(struct tenant *t, const char *email, const char *password, const char *client_addr,
                 struct tenant_account *ret_account, struct tenant_session *ret_session, struct err *err)
{
        char norm[256], by_account[300], by_addr[300];
        struct tenant_account a = {};
        uint64_t now = now_ms(), window = t->opt.login_window_s * 1000, wait;
        struct err ignored = {};
        if (email_normalize(email, norm, &ignored) < 0 || !password)
                return err_set(err, ERR_PERMISSION, EACCES, "Invalid email or password");
        snprintf(by_account, sizeof(by_account), "account:%s", norm);
        snprintf(by_addr, sizeof(by_addr), "addr:%s", client_addr ? client_addr : "");
        if ((wait = limiter_blocked(t->limiter, by_account, t->opt.login_account_failures, window, now)) ||
            (wait = limiter_blocked(t->limiter, by_addr, t->opt.login_addr_failures, window, now)))
                return rate_limited(err, wait);
        int r = store_user_get_by_email(t->store, norm, &a.user);
        if (r < 0 && r != -ENOENT)
                return err_set(err, ERR_INTERNAL, -r, "cannot read the user");
        bool ok = password_verify(r == 0 ? a.user.password_hash : t->dummy_hash, password) && r == 0;
        if (!ok) {
                limiter_fail(t->limiter, by_account, window, now);
                limiter_fail(t->limiter, by_addr, window, now);
                return err_set(err, ERR_PERMISSION, EACCES, "Invalid email or password");
        }
        limiter_reset(t->limiter, by_account);
        if ((r = store_org_get(t->store, a.user.org_id, &a.org)) < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot read the org");
        if ((r = session_issue(t, &a.user, ret_session)) < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot start a session");
        account_view(&a);
        *ret_account = a;
        return 0;
}

int tenant_account_get(struct tenant *t, const struct tenant_principal *p, struct tenant_account *ret,
                       struct err *err)
{
        struct tenant_account a = {};
        int r = store_org_get(t->store, p->org_id, &a.org);
        if (r == 0 && p->user_id[0])
                r = store_user_get(t->store, p->user_id, &a.user);
        if (r == -ENOENT)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "Account not found");
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot read the account");
        account_view(&a);
        *ret = a;
        return 0;
}
