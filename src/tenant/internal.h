/* Shared by the files of src/tenant/ only. */
#pragma once

#include <errno.h>
#include <pthread.h>

#include "tenant/seal.h"
#include "tenant/tenant.h"

#define TENANT_SESSION_KEY_BYTES 32

struct login_limiter;

struct tenant {
        struct store *store;
        struct tenant_options opt;
        uint8_t key[TENANT_SESSION_KEY_BYTES];
        struct login_limiter *limiter;
        char dummy_hash[128];   /* checked for unknown emails, so they cost as much */
        uint8_t secrets_key[SEAL_KEY_BYTES];   /* seals the orgs' secrets (secrets.c) */
        char secrets_key_id[SEAL_KEY_ID_LEN + 1];
};

/* ---- tenant.c ---- */
/* Lower-cased copy of an address of the form local@domain (ERR_INVALID). */
int email_normalize(const char *in, char out[256], struct err *err);
/* "Example Co" → "example-co"; "org" when nothing is left. */
void slugify(const char *name, char *out, size_t cap);
/* A new org and its first user (with ident, an SSO identity too,
 * atomically); the slug gets a random suffix after a clash. ERR_EXISTS:
 * the email is taken. */
int account_insert(struct tenant *t, struct org_row *org, struct user_row *user, const struct sso_identity_row *ident,
                   struct err *err);
/* Blanks what an account view never shows (the password hash). */
void account_view(struct tenant_account *a);

/* ---- password.c ---- */
/* Argon2id of password into out (an encoded "$argon2id$v=19$…" string). */
int password_hash(const char *password, char *out, size_t outlen);
/* true when password matches the encoded hash. */
bool password_verify(const char *encoded, const char *password);

/* ---- ratelimit.c: fixed-window counters of failures by name ---- */
struct login_limiter *limiter_new(void);
void limiter_free(struct login_limiter *l);
/* 0 when name may try again, else the seconds until it may. */
uint64_t limiter_blocked(struct login_limiter *l, const char *name, unsigned max, uint64_t window_ms, uint64_t now);
void limiter_fail(struct login_limiter *l, const char *name, uint64_t window_ms, uint64_t now);
void limiter_reset(struct login_limiter *l, const char *name);

/* ---- session.c ---- */
int session_key_load(struct tenant *t, struct err *err);
/* A 32-byte key in <data_dir>/<name> (0600): read, or made (make_new, or
 * when absent) by writing a temporary file and renaming it. */
int key_file_load(const char *data_dir, const char *name, bool make_new, uint8_t key[TENANT_SESSION_KEY_BYTES],
                  struct err *err);

/* ---- secrets.c ---- */
/* The secrets key: opt.secrets_key when given, else <data_dir>/secrets.key. */
int secrets_key_load(struct tenant *t, struct err *err);
int session_issue(struct tenant *t, const struct user_row *user, struct tenant_session *ret);

/* ---- keys.c ---- */
/* sha256 hex of s into out[65]. */
void sha256_hex(const char *s, char out[65]);
