/* Idempotency-Key records (seed 003, "Idempotency"): the reply of a POST
 * kept for 24 h under (org, key, route) with a keyed hash of its body, so a
 * retry gets the same reply and a different body under the same key is
 * told apart. The reply is sealed (AES-256-GCM under the secrets key, bound
 * to its org, key and route): it may carry a new API key or a command's
 * output, and the database must not hand those out. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/util.h"
#include "tenant/internal.h"
#include "tenant/seal.h"

#define SEALED_PREFIX "sealed:"

/* org \0 key \0 route: a sealed reply opens only in its own row. */
static size_t reply_aad(const char *org_id, const char *key, const char *route, char *out, size_t cap)
{
        int n = snprintf(out, cap, "%s%c%s%c%s", org_id, 0, key, 0, route);
        return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* "sealed:" + base64(nonce || ciphertext || tag), or NULL. */
static char *reply_seal(const struct tenant *t, const char *aad, size_t aad_len, const char *response)
{
        size_t len = strlen(response);
        _cleanup_free_ uint8_t *sealed = malloc(len + SEAL_OVERHEAD);
        if (!sealed || seal_encrypt(t->secrets_key, aad, aad_len, response, len, sealed) < 0)
                return NULL;
        _cleanup_free_ char *b64 = b64_encode(sealed, len + SEAL_OVERHEAD);
        char *out = NULL;
        if (!b64 || asprintf(&out, SEALED_PREFIX "%s", b64) < 0)
                return NULL;
        return out;
}

/* The stored text back as the reply (malloc'd, NUL-terminated). -EBADMSG
 * when it does not open (another key, a moved or changed row). */
static int reply_open(const struct tenant *t, const char *aad, size_t aad_len, const char *stored, char **ret)
{
        size_t plen = strlen(SEALED_PREFIX);
        if (strncmp(stored, SEALED_PREFIX, plen) != 0)
                return -EBADMSG; /* every reply is sealed: anything else was not written here */
        _cleanup_free_ unsigned char *raw = NULL;
        size_t rlen = 0;
        int r = b64_decode(stored + plen, strlen(stored + plen), &raw, &rlen);
        if (r < 0)
                return -EBADMSG;
        _cleanup_free_ char *out = malloc(rlen + 1);
        size_t olen = 0;
        if (!out)
                return -ENOMEM;
        if ((r = seal_decrypt(t->secrets_key, aad, aad_len, raw, rlen, (uint8_t *)out, &olen)) < 0)
                return r;
        out[olen] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

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
        char aad[3 * 512];
        size_t aad_len = reply_aad(org_id, key, route, aad, sizeof(aad));
        r = reply_open(t, aad, aad_len, row.response, &ret->response);
        ret->status = row.status;
        idem_row_done(&row);
        /* A reply that does not open is as good as none: run the request. */
        return r < 0 ? -ENOENT : 0;
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
        char aad[3 * 512];
        size_t aad_len = reply_aad(org_id, key, route, aad, sizeof(aad));
        _cleanup_free_ char *sealed = reply_seal(t, aad, aad_len, response);
        if (!sealed)
                return -EIO;
        row.response = sealed;
        uint64_t not_before = row.created_at > TENANT_IDEM_TTL_MS ? row.created_at - TENANT_IDEM_TTL_MS : 0;
        return store_idem_put(t->store, &row, not_before);
}
