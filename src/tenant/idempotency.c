/* Idempotency-Key records (seed 003, "Idempotency"): the reply of a POST
 * kept for 24 h under (org, key, route) with a keyed hash of its body, so a
 * retry gets the same reply and a different body under the same key is
 * told apart. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "tenant/internal.h"

/* HMAC-SHA256 under the secrets key, not a bare SHA-256: a body may hold
 * a secret's value (POST /secrets), and a plain hash in the store would let
 * anyone with the database try guesses offline. */
static void body_hash(const struct tenant *t, const char *body, size_t len, char out[65])
{
        uint8_t d[SHA256_DIGEST_LENGTH];
        unsigned int dlen = 0;
        HMAC(EVP_sha256(), t->secrets_key, sizeof(t->secrets_key), (const unsigned char *)body, len, d, &dlen);
        for (size_t i = 0; i < sizeof(d); i++)
                snprintf(out + 2 * i, 3, "%02x", d[i]);
}

bool tenant_idem_key_ok(const char *key)
{
        size_t n = key ? strlen(key) : 0;
        if (n < 1 || n > TENANT_IDEM_KEY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)key[i] < 0x21 || (unsigned char)key[i] > 0x7e)
                        return false;
        return true;
}

int tenant_idem_find(struct tenant *t, const char *org_id, const char *key, const char *route, const char *body,
                     size_t len, struct tenant_idem *ret)
{
        struct idem_row row = {};
        char hash[65];
        uint64_t now = wall_ms();
        if (!tenant_idem_key_ok(key))
                return -EINVAL;
        int r = store_idem_get(t->store, org_id, key, route, now > TENANT_IDEM_TTL_MS ? now - TENANT_IDEM_TTL_MS : 0,
                               &row);
        if (r < 0)
                return r;
        body_hash(t, body, len, hash);
        if (strcmp(hash, row.body_hash) != 0) {
                idem_row_done(&row);
                return -EEXIST;
        }
        ret->status = row.status;
        ret->response = TAKE_PTR(row.response);
        return 0;
}

int tenant_idem_save(struct tenant *t, const char *org_id, const char *key, const char *route, const char *body,
                     size_t len, int status, const char *response)
{
        struct idem_row row = { .status = status, .created_at = wall_ms(), .response = (char *)response };
        if (!tenant_idem_key_ok(key) || strlen(route) >= sizeof(row.route))
                return -EINVAL;
        snprintf(row.org_id, sizeof(row.org_id), "%s", org_id);
        snprintf(row.key, sizeof(row.key), "%s", key);
        snprintf(row.route, sizeof(row.route), "%s", route);
        body_hash(t, body, len, row.body_hash);
        uint64_t not_before = row.created_at > TENANT_IDEM_TTL_MS ? row.created_at - TENANT_IDEM_TTL_MS : 0;
        return store_idem_put(t->store, &row, not_before);
}
