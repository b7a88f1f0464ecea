/* Secrets: an org's named values, sealed at rest (seal.h) under one key.
 *
 * What is sealed is bound to where it is stored: the associated data is
 * "org_id NUL name", so a ciphertext copied into another org's row or
 * under another name does not open. Each row also records the
 * fingerprint of the key that sealed it, so a value sealed under an older
 * key is reported as such rather than as a corrupted row.
 *
 * Values never reach an error message or a log line from here; callers
 * get names only. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/utf8.h"
#include "base/util.h"
#include "tenant/internal.h"

int secrets_key_load(struct tenant *t, struct err *err)
{
        int r = 0;
        if (t->opt.secrets_key[0]) {
                if (seal_key_parse(t->opt.secrets_key, t->secrets_key) < 0)
                        return err_set(err, ERR_INTERNAL, EINVAL,
                                       "SANDBOXD_SECRETS_KEY must be 64 hex digits or the base64 of 32 bytes");
        } else {
                r = key_file_load(t->opt.data_dir, "secrets.key", false, t->secrets_key, err);
        }
        if (r == 0)
                seal_key_id(t->secrets_key, t->secrets_key_id);
        return r;
}

bool tenant_secret_name_ok(const char *name)
{
        size_t n = name ? strlen(name) : 0;
        if (n < 1 || n > TENANT_SECRET_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
                        return false;
        }
        return true;
}

static int name_check(const char *name, struct err *err)
{
        if (tenant_secret_name_ok(name))
                return 0;
        return err_set(err, ERR_INVALID, EINVAL,
                       "name must match ^[A-Z_][A-Z0-9_]{0,127}$ (an environment variable name)");
}

/* "org NUL name": the NUL keeps ("ab", "C") and ("a", "bC") apart. */
static size_t aad_of(const char *org_id, const char *name, char out[2 * STORE_ID_MAX])
{
        size_t o = strlen(org_id), n = strlen(name);
        memcpy(out, org_id, o + 1);
        memcpy(out + o + 1, name, n);
        return o + 1 + n;
}

/* The value sealed for (org, name), as base64 text into row->sealed. */
static int seal_value(struct tenant *t, struct secret_row *row, const char *value, size_t len, struct err *err)
{
        if (value && len > TENANT_SECRET_VALUE_MAX)
                return err_set(err, ERR_TOO_LARGE, EFBIG, "value must be at most %d bytes", TENANT_SECRET_VALUE_MAX);
        if (!value || memchr(value, '\0', len) || !utf8_valid(value, len))
                return err_set(err, ERR_INVALID, EINVAL, "value must be a string of valid UTF-8 without NUL");
        char aad[2 * STORE_ID_MAX];
        size_t aad_len = aad_of(row->org_id, row->name, aad);
        _cleanup_free_ uint8_t *sealed = malloc(len + SEAL_OVERHEAD);
        if (!sealed)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        int r = seal_encrypt(t->secrets_key, aad, aad_len, value, len, sealed);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot encrypt the secret");
        row->sealed = b64_encode(sealed, len + SEAL_OVERHEAD);
        if (!row->sealed)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        snprintf(row->key_id, sizeof(row->key_id), "%s", t->secrets_key_id);
        return 0;
}

static int row_prepare(struct tenant *t, const char *org_id, const char *name, const char *value, size_t len,
                       struct secret_row *row, struct err *err)
{
        int r = name_check(name, err);
        if (r < 0)
                return r;
        snprintf(row->org_id, sizeof(row->org_id), "%s", org_id);
        snprintf(row->name, sizeof(row->name), "%s", name);
        row->updated_at = wall_ms();
        return seal_value(t, row, value, len, err);
}

static void secret_out(const struct secret_row *row, struct tenant_secret *ret)
{
        if (!ret)
                return;
        *ret = (struct tenant_secret){ .created_at = row->created_at, .updated_at = row->updated_at };
        snprintf(ret->name, sizeof(ret->name), "%s", row->name);
}

static int store_failed(struct err *err, int r, const char *name)
{
        if (r == -ENOENT)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "Secret '%s' not found", name);
        if (r == -EEXIST)
                return err_set(err, ERR_EXISTS, EEXIST, "A secret named '%s' already exists", name);
        return err_set(err, ERR_INTERNAL, -r, "cannot store the secret");
}

/* The row as stored (for its created_at), or -ENOENT. */
static int secret_find(struct tenant *t, const char *org_id, const char *name, struct tenant_secret *ret);

/* Seals value for (org, name) and inserts it (create) or replaces it. */
static int secret_write(struct tenant *t, const char *org_id, const char *name, const char *value, size_t len,
                        bool create, struct tenant_secret *ret, struct err *err)
{
        _cleanup_(secret_row_done) struct secret_row row = {};
        int r = row_prepare(t, org_id, name, value, len, &row, err);
        if (r < 0)
                return r;
        row.created_at = row.updated_at;
        r = create ? store_secret_create(t->store, &row) : store_secret_update(t->store, &row);
        if (r < 0)
                return store_failed(err, r, name);
        if (ret && (create || secret_find(t, org_id, name, ret) < 0))
                secret_out(&row, ret);
        return 0;
}

int tenant_secret_create(struct tenant *t, const char *org_id, const char *name, const char *value, size_t len,
                         struct tenant_secret *ret, struct err *err)
{
        return secret_write(t, org_id, name, value, len, true, ret, err);
}

int tenant_secret_update(struct tenant *t, const char *org_id, const char *name, const char *value, size_t len,
                         struct tenant_secret *ret, struct err *err)
{
        return secret_write(t, org_id, name, value, len, false, ret, err);
}

int tenant_secret_delete(struct tenant *t, const char *org_id, const char *name, struct err *err)
{
        int r = name_check(name, err);
        if (r < 0)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "Secret not found");
        r = store_secret_delete(t->store, org_id, name);
        return r < 0 ? store_failed(err, r, name) : 0;
}

struct each_meta {
        void (*fn)(const struct tenant_secret *s, void *userdata);
        void *userdata;
};

static void on_meta(const struct secret_row *row, void *userdata)
{
        struct each_meta *m = userdata;
        struct tenant_secret s;
        secret_out(row, &s);
        m->fn(&s, m->userdata);
}

int tenant_secret_each(struct tenant *t, const char *org_id, uint64_t limit, uint64_t offset,
                       void (*fn)(const struct tenant_secret *s, void *userdata), void *userdata, uint64_t *ret_total,
                       struct err *err)
{
        struct each_meta m = { fn, userdata };
        int r = store_secret_each(t->store, org_id, limit, offset, on_meta, &m, ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "cannot list the secrets") : 0;
}

struct find {
        const char *name;
        struct tenant_secret *ret;
        bool found;
};

static void on_find(const struct tenant_secret *s, void *userdata)
{
        struct find *f = userdata;
        if (strcmp(s->name, f->name) == 0) {
                *f->ret = *s;
                f->found = true;
        }
}

static int secret_find(struct tenant *t, const char *org_id, const char *name, struct tenant_secret *ret)
{
        struct find f = { name, ret, false };
        uint64_t total;
        struct err err = {};
        int r = tenant_secret_each(t, org_id, INT64_MAX, 0, on_find, &f, &total, &err);
        err_done(&err);
        return r < 0 ? r : f.found ? 0 : -ENOENT;
}

/* ---- opening every value of an org ---- */

struct opening {
        struct tenant *t;
        void (*fn)(const char *name, const char *value, void *userdata);
        void *userdata;
        struct err *err;
        int r;
};

/* Opens one row into a NUL-terminated buffer that is wiped afterwards. */
static int open_row(struct opening *o, const struct secret_row *row)
{
        _cleanup_free_ unsigned char *raw = NULL;
        size_t rawlen = 0, len = 0;
        if (strcmp(row->key_id, o->t->secrets_key_id) != 0)
                return err_set(o->err, ERR_INTERNAL, EKEYREJECTED,
                               "secret '%s' cannot be decrypted: it was sealed with another key (%s, not %s)",
                               row->name, row->key_id, o->t->secrets_key_id);
        if (b64_decode(row->sealed, strlen(row->sealed), &raw, &rawlen) < 0 || rawlen < SEAL_OVERHEAD)
                return err_set(o->err, ERR_INTERNAL, EBADMSG, "secret '%s' cannot be decrypted: malformed", row->name);
        _cleanup_free_ char *value = malloc(rawlen - SEAL_OVERHEAD + 1);
        if (!value)
                return err_set(o->err, ERR_INTERNAL, ENOMEM, "out of memory");
        char aad[2 * STORE_ID_MAX];
        int r = seal_decrypt(o->t->secrets_key, aad, aad_of(row->org_id, row->name, aad), raw, rawlen,
                             (uint8_t *)value, &len);
        if (r < 0)
                return err_set(o->err, ERR_INTERNAL, -r,
                               "secret '%s' cannot be decrypted: authentication failed (changed or moved)",
                               row->name);
        value[len] = '\0';
        o->fn(row->name, value, o->userdata);
        OPENSSL_cleanse(value, len);
        return 0;
}

static void on_sealed(const struct secret_row *row, void *userdata)
{
        struct opening *o = userdata;
        if (o->r == 0)
                o->r = open_row(o, row);
}

int tenant_secret_values(struct tenant *t, const char *org_id, void (*fn)(const char *name, const char *value,
                                                                          void *userdata),
                         void *userdata, struct err *err)
{
        struct opening o = { t, fn, userdata, err, 0 };
        uint64_t total;
        int r = store_secret_each(t->store, org_id, INT64_MAX, 0, on_sealed, &o, &total);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot read the secrets");
        return o.r;
}
