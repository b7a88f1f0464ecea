/* API keys: "sk_" + 43 base64url characters (32 random bytes, no '.', so
 * clients send it as "ApiKey"); stored as the SHA-256 of the whole key,
 * with its first 11 characters kept for display. */
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "base/util.h"
#include "tenant/internal.h"
#include "tenant/jwt.h"

#define KEY_RANDOM_BYTES 32
#define KEY_PREFIX_CHARS 11

void sha256_hex(const char *s, char out[65])
{
        uint8_t d[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)s, strlen(s), d);
        for (size_t i = 0; i < sizeof(d); i++)
                snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int tenant_id_new(const char *prefix, char out[STORE_ID_MAX])
{
        uint8_t b[16];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        int n = snprintf(out, STORE_ID_MAX, "%s_", prefix);
        for (size_t i = 0; i < sizeof(b); i++)
                n += snprintf(out + n, STORE_ID_MAX - (size_t)n, "%02x", b[i]);
        return 0;
}

/* A fresh secret into k->key, its hash and prefix into k->row. */
static int key_secret_new(struct tenant_new_key *k)
{
        uint8_t b[KEY_RANDOM_BYTES];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        memcpy(k->key, "sk_", 3);
        b64url_encode(b, sizeof(b), k->key + 3);
        sha256_hex(k->key, k->row.hash);
        snprintf(k->row.prefix, sizeof(k->row.prefix), "%.*s", KEY_PREFIX_CHARS, k->key);
        return 0;
}

int tenant_key_authenticate(struct tenant *t, const char *key, struct tenant_principal *ret)
{
        char hash[65];
        struct apikey_row row;
        if (!key || strncmp(key, "sk_", 3) != 0 || strlen(key) >= TENANT_KEY_MAX)
                return -EPERM;
        sha256_hex(key, hash);
        int r = store_apikey_get_by_hash(t->store, hash, &row);
        if (r < 0)
                return r == -ENOENT ? -EPERM : r;
        *ret = (struct tenant_principal){};
        snprintf(ret->org_id, sizeof(ret->org_id), "%s", row.org_id);
        snprintf(ret->user_id, sizeof(ret->user_id), "%s", row.user_id);
        snprintf(ret->key_id, sizeof(ret->key_id), "%s", row.id);
        return 0;
}

static int store_failed(struct err *err, int r, const char *what)
{
        /* An id that cannot exist (too long, empty) is as absent as any. */
        if (r == -ENOENT || r == -ENAMETOOLONG || r == -EINVAL)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "API key not found");
        return err_set(err, ERR_INTERNAL, -r, "%s: %s", what, strerror(-r));
}

int tenant_key_create(struct tenant *t, const char *org_id, const char *user_id, const char *name,
                      struct tenant_new_key *ret, struct err *err)
{
        struct tenant_new_key k = { .row.created_at = wall_ms() };
        if (!name || !name[0] || strlen(name) >= sizeof(k.row.name))
                return err_set(err, ERR_INVALID, EINVAL, "name must be 1 to %zu bytes", sizeof(k.row.name) - 1);
        int r = tenant_id_new("key", k.row.id);
        if (r == 0)
                r = key_secret_new(&k);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot make a key");
        snprintf(k.row.org_id, sizeof(k.row.org_id), "%s", org_id);
        snprintf(k.row.user_id, sizeof(k.row.user_id), "%s", user_id ? user_id : "");
        snprintf(k.row.name, sizeof(k.row.name), "%s", name);
        if ((r = store_apikey_create(t->store, &k.row)) < 0)
                return store_failed(err, r, "cannot store the key");
        *ret = k;
        return 0;
}

int tenant_key_revoke(struct tenant *t, const char *org_id, const char *key_id, struct err *err)
{
        int r = store_apikey_delete(t->store, org_id, key_id);
        return r < 0 ? store_failed(err, r, "cannot revoke the key") : 0;
}

int tenant_key_regenerate(struct tenant *t, const char *org_id, const char *key_id, struct tenant_new_key *ret,
                          struct err *err)
{
        struct tenant_new_key k = {};
        int r = store_apikey_get(t->store, org_id, key_id, &k.row);
        if (r < 0)
                return store_failed(err, r, "cannot read the key");
        if ((r = key_secret_new(&k)) < 0)
                return err_set(err, ERR_INTERNAL, -r, "cannot make a key");
        if ((r = store_apikey_rehash(t->store, org_id, key_id, k.row.hash, k.row.prefix)) < 0)
                return store_failed(err, r, "cannot store the key");
        *ret = k;
        return 0;
}

int tenant_key_each(struct tenant *t, const char *org_id, uint64_t limit, uint64_t offset,
                    void (*fn)(const struct apikey_row *row, void *userdata), void *userdata, uint64_t *ret_total,
                    struct err *err)
{
        int r = store_apikey_each(t->store, org_id, limit, offset, fn, userdata, ret_total);
        return r < 0 ? store_failed(err, r, "cannot list keys") : 0;
}
