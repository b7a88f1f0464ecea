/* Tenants (issue 12): orgs, their users, API keys and login sessions, and
 * the rate limit on failed logins. The controller API's identity, with no
 * HTTP in it: callers hand in strings and get rows, a principal or a
 * struct err (reasons: ERR_INVALID bad input, ERR_EXISTS a taken email,
 * ERR_PERMISSION wrong credentials, ERR_BUSY rate limited with a
 * "retry_after" detail in seconds, ERR_NOT_FOUND an id not in the caller's
 * org, ERR_INTERNAL the store).
 *
 * Secrets: passwords are kept as Argon2id hashes (t=2, m=19 MiB, p=1, 16
 * bytes of salt, 32 bytes of hash: OWASP's minimum), API keys as the
 * SHA-256 of the key (keys carry 256 random bits, so a fast hash is
 * enough), sessions as HS256 JWTs signed with a 32-byte key kept in
 * <data_dir>/session.key (0600, made on first start; rotating it ends
 * every session). Thread-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "store/store.h"

struct tenant;

struct tenant_options {
        char data_dir[4096];
        uint64_t session_ttl_s;          /* a session's lifetime */
        unsigned login_account_failures; /* failed logins per account per window before 429 */
        unsigned login_addr_failures;    /* … per client address */
        uint64_t login_window_s;
        bool rotate_session_key;         /* make a new signing key at start */
        /* The secrets key as text (64 hex digits or base64 of 32 bytes;
         * SANDBOXD_SECRETS_KEY); "": <data_dir>/secrets.key, made on first
         * start. */
        char secrets_key[256];
};

/* Loads (or makes) the session key. err: ERR_INTERNAL with a message. */
int tenant_new(const struct tenant_options *o, struct store *store, struct tenant **ret, struct err *err);
void tenant_free(struct tenant *t);   /* NULL-safe */

/* Who a request is: an org always; a user for sessions (and for keys made
 * by a user); the key or the session that proved it. */
struct tenant_principal {
        char org_id[STORE_ID_MAX];
        char user_id[STORE_ID_MAX];
        char key_id[STORE_ID_MAX];      /* "" unless an API key */
        char session_id[STORE_ID_MAX];  /* "" unless a session */
        uint64_t expires_at;            /* a session's end (epoch ms); 0 for keys */
};

/* A key "sk_…" → its org. -EPERM when no such key (revoked included). */
int tenant_key_authenticate(struct tenant *t, const char *key, struct tenant_principal *ret);
/* A session JWT → its user and org. -EPERM (bad token, revoked, unknown
 * session), -EKEYEXPIRED (expired); -EINVAL (malformed). */
int tenant_session_authenticate(struct tenant *t, const char *token, struct tenant_principal *ret);

/* The CSRF token of a session: HMAC of its id under the session key, so it
 * needs no storage and dies with the session key. out: TENANT_CSRF_LEN+1. */
#define TENANT_CSRF_LEN 43
void tenant_csrf_token(struct tenant *t, const char *session_id, char out[TENANT_CSRF_LEN + 1]);
bool tenant_csrf_ok(struct tenant *t, const char *session_id, const char *given);

struct tenant_account {
        struct org_row org;
        struct user_row user;   /* password_hash is always "" here */
};

#define TENANT_KEY_MAX 64
struct tenant_new_key {
        struct apikey_row row;       /* hash included (never show it) */
        char key[TENANT_KEY_MAX];    /* the plaintext: shown once, then forgotten */
};

struct tenant_session {
        char id[STORE_ID_MAX];
        char *token;            /* owned: tenant_session_done() */
        uint64_t expires_at;    /* epoch ms */
};
void tenant_session_done(struct tenant_session *s);

struct tenant_registration {
        const char *first_name, *last_name, *organization_name, *email, *password;
};

/* Password rules: 12 to 256 bytes, at least one letter and one digit. */
#define TENANT_PASSWORD_MIN 12
#define TENANT_PASSWORD_MAX 256
int tenant_password_check(const char *password, struct err *err);

/* Org (slug from the name, made unique; plan hobby) + owner + first API
 * key ("Default API Key") + a session. ERR_EXISTS: email taken. */
int tenant_register(struct tenant *t, const struct tenant_registration *in, struct tenant_account *ret_account,
                    struct tenant_new_key *ret_key, struct tenant_session *ret_session, struct err *err);
/* Checks the password (rate limited per account and per client address;
 * unknown emails take as long as known ones). */
int tenant_login(struct tenant *t, const char *email, const char *password, const char *client_addr,
                 struct tenant_account *ret_account, struct tenant_session *ret_session, struct err *err);
/* Revokes the session (its token stops working at once). */
int tenant_logout(struct tenant *t, const char *session_id);
/* The org and user of a principal (user "" for a key without one). */
int tenant_account_get(struct tenant *t, const struct tenant_principal *p, struct tenant_account *ret,
                       struct err *err);

/* API keys, all scoped by org: another org's id is ERR_NOT_FOUND. */
int tenant_key_create(struct tenant *t, const char *org_id, const char *user_id, const char *name,
                      struct tenant_new_key *ret, struct err *err);
int tenant_key_revoke(struct tenant *t, const char *org_id, const char *key_id, struct err *err);
/* A new secret for the same key id; the old one stops working at once. */
int tenant_key_regenerate(struct tenant *t, const char *org_id, const char *key_id, struct tenant_new_key *ret,
                          struct err *err);
int tenant_key_each(struct tenant *t, const char *org_id, uint64_t limit, uint64_t offset,
                    void (*fn)(const struct apikey_row *row, void *userdata), void *userdata, uint64_t *ret_total,
                    struct err *err);

/* Idempotency-Key replies, 24 h per (org, key, route). A key is 1 to 255
 * printable ASCII characters. */
#define TENANT_IDEM_KEY_MAX 255
#define TENANT_IDEM_TTL_MS (24ULL * 3600 * 1000)
struct tenant_idem {
        int status;
        char *response;   /* owned: free() */
};
bool tenant_idem_key_ok(const char *key);
/* 0 with the stored reply; -ENOENT none (or expired); -EEXIST stored for
 * another body; -EINVAL a bad key. */
int tenant_idem_find(struct tenant *t, const char *org_id, const char *key, const char *route, const char *body,
                     size_t len, struct tenant_idem *ret);
/* -EEXIST when a concurrent request stored first (its reply stands). */
int tenant_idem_save(struct tenant *t, const char *org_id, const char *key, const char *route, const char *body,
                     size_t len, int status, const char *response);

/* "<prefix>_" + 32 hex digits of randomness (e.g. "org_…"). 0 or -EIO. */
int tenant_id_new(const char *prefix, char out[STORE_ID_MAX]);

/* Secrets (secrets.c): an org's named values, sealed with AES-256-GCM
 * (tenant/seal.h) under the secrets key, bound to (org id, name) as
 * associated data. Names are environment variable names,
 * ^[A-Z_][A-Z0-9_]{0,127}$; values are valid UTF-8 without NUL, at most
 * 64 KiB. No function here ever puts a value in an error message. All
 * scoped by org: another org's name is ERR_NOT_FOUND. */
#define TENANT_SECRET_NAME_MAX 128
#define TENANT_SECRET_VALUE_MAX (64 * 1024)
struct tenant_secret {
        char name[STORE_ID_MAX];          /* at most TENANT_SECRET_NAME_MAX */
        uint64_t created_at, updated_at;   /* epoch ms */
};
bool tenant_secret_name_ok(const char *name);
/* ERR_INVALID (name or value), ERR_TOO_LARGE (value), ERR_EXISTS (the org
 * has that name). */
int tenant_secret_create(struct tenant *t, const char *org_id, const char *name, const char *value, size_t len,
                         struct tenant_secret *ret, struct err *err);
/* A new value (sealed afresh); ERR_NOT_FOUND when absent. */
int tenant_secret_update(struct tenant *t, const char *org_id, const char *name, const char *value, size_t len,
                         struct tenant_secret *ret, struct err *err);
int tenant_secret_delete(struct tenant *t, const char *org_id, const char *name, struct err *err);
/* Names and dates only, ordered by name. */
int tenant_secret_each(struct tenant *t, const char *org_id, uint64_t limit, uint64_t offset,
                       void (*fn)(const struct tenant_secret *s, void *userdata), void *userdata, uint64_t *ret_total,
                       struct err *err);
/* Every secret of the org opened, for a jail's environment: fn gets the
 * name and a NUL-terminated value that is wiped when fn returns. A value
 * that does not open (another key, a changed byte, a row moved to another
 * org or name) fails the whole call: ERR_INTERNAL "secret NAME cannot be
 * decrypted …", nothing of it passed on. */
int tenant_secret_values(struct tenant *t, const char *org_id, void (*fn)(const char *name, const char *value,
                                                                          void *userdata),
                         void *userdata, struct err *err);

/* Single sign-on (sso.c; issue 15): a login whose ID token the caller has
 * verified (tenant/oidc.h) becomes a user and a session. Who the login is:
 *   1. the user already linked to (issuer, subject);
 *   2. else a new member ("member" role) of the org linked to the token's
 *      provider organization claim, else of the org linked to the email's
 *      domain (only when the provider says the email is verified);
 *   3. else the owner of a new org ("<name>'s organization").
 * A user who registered with a password and the same email is linked
 * (rule 2's org only, verified email only); any other clash with an
 * existing email is ERR_EXISTS. A login without an email is ERR_INVALID. */
struct oidc_identity;
int tenant_sso_login(struct tenant *t, const struct oidc_identity *id, struct tenant_account *ret_account,
                     struct tenant_session *ret_session, struct err *err);
/* The org's link (ERR_NOT_FOUND when none). */
int tenant_sso_link_get(struct tenant *t, const char *org_id, struct sso_link_row *ret, struct err *err);
/* Links the org to a provider organization id and/or an email domain
 * (either may be NULL or "", not both; replaces the org's link).
 * ERR_INVALID bad values; ERR_EXISTS another org holds one of them. */
int tenant_sso_link_set(struct tenant *t, const char *org_id, const char *provider_org_id, const char *domain,
                        struct sso_link_row *ret, struct err *err);
/* ERR_NOT_FOUND when the org has no link. */
int tenant_sso_unlink(struct tenant *t, const char *org_id, struct err *err);
