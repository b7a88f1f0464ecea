/* Webhooks' secrets, signatures, URL rules and message bodies (see
 * webhooks.h). The signing secret must be readable again to sign, so it is
 * sealed (AES-256-GCM under the secrets key, tenant/seal.h) rather than
 * hashed; the associated data is "webhook" + org + webhook id, so a sealed
 * secret copied to another row (or read as an org's secret) fails to open. */
#include "tenant/webhooks.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/b64.h"
#include "base/time.h"
#include "base/util.h"
#include "tenant/internal.h"
#include "tenant/jwt.h"
#include "tenant/webhook_net.h"

#define SECRET_RANDOM_BYTES 32

static size_t aad_of(const struct webhook_row *row, char out[2 * STORE_ID_MAX + 16])
{
        return (size_t)snprintf(out, 2 * STORE_ID_MAX + 16, "webhook%c%s%c%s", 0, row->org_id, 0, row->id);
}

int webhook_secret_new(struct tenant *t, struct webhook_row *row, char ret[WEBHOOK_SECRET_MAX])
{
        uint8_t b[SECRET_RANDOM_BYTES];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        memcpy(ret, "whsec_", 6);
        b64url_encode(b, sizeof(b), ret + 6);
        OPENSSL_cleanse(b, sizeof(b));
        size_t len = strlen(ret);
        uint8_t sealed[WEBHOOK_SECRET_MAX + SEAL_OVERHEAD];
        char aad[2 * STORE_ID_MAX + 16];
        int r = seal_encrypt(t->secrets_key, aad, aad_of(row, aad), ret, len, sealed);
        if (r < 0)
                return r;
        char *text = b64_encode(sealed, len + SEAL_OVERHEAD);
        if (!text)
                return -ENOMEM;
        free(row->sealed_secret);
        row->sealed_secret = text;
        snprintf(row->key_id, sizeof(row->key_id), "%s", t->secrets_key_id);
        return 0;
}

int webhook_secret_open(struct tenant *t, const struct webhook_row *row, char ret[WEBHOOK_SECRET_MAX])
{
        if (strcmp(row->key_id, t->secrets_key_id) != 0)
                return -EKEYREJECTED;
        _cleanup_free_ unsigned char *raw = NULL;
        size_t rawlen = 0, len = 0;
        if (b64_decode(row->sealed_secret, strlen(row->sealed_secret), &raw, &rawlen) < 0 || rawlen < SEAL_OVERHEAD ||
            rawlen - SEAL_OVERHEAD >= WEBHOOK_SECRET_MAX)
                return -EBADMSG;
        char aad[2 * STORE_ID_MAX + 16];
        int r = seal_decrypt(t->secrets_key, aad, aad_of(row, aad), raw, rawlen, (uint8_t *)ret, &len);
        if (r < 0)
                return r;
        ret[len] = '\0';
        return 0;
}

int webhook_sign(const char *secret, uint64_t t, const char *body, size_t len, char out[WEBHOOK_SIGNATURE_MAX])
{
        char stamp[24];
        int n = snprintf(stamp, sizeof(stamp), "%llu.", (unsigned long long)t);
        uint8_t mac[EVP_MAX_MD_SIZE];
        unsigned maclen = 0;
        _cleanup_free_ char *msg = malloc((size_t)n + len);
        if (!msg)
                return -ENOMEM;
        memcpy(msg, stamp, (size_t)n);
        memcpy(msg + n, body, len);
        if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg, (size_t)n + len, mac, &maclen) ||
            maclen != 32)
                return -EIO;
        int o = snprintf(out, WEBHOOK_SIGNATURE_MAX, "t=%llu,v1=", (unsigned long long)t);
        for (unsigned i = 0; i < maclen; i++)
                o += snprintf(out + o, (size_t)(WEBHOOK_SIGNATURE_MAX - o), "%02x", mac[i]);
        return 0;
}

int webhook_url_check(const char *url, bool allow_private, struct err *err)
{
        struct webhook_target tg;
        int r = webhook_target_parse(url, &tg, err);
        if (r < 0 || allow_private)
                return r;
        /* The name is resolved now so an obviously internal target is
         * refused at once; delivery resolves again (the answer may change)
         * and connects only to the address it checked. */
        r = webhook_target_resolve(&tg, false, err);
        if (r == -EHOSTUNREACH)
                err_done(err);
        return r == -EHOSTUNREACH ? 0 : r;
}

json_t *webhook_time_json(uint64_t ms)
{
        char at[32];
        if (!ms)
                return json_null();
        iso8601_ms(ms, at);
        return json_string(at);
}

char *webhook_event_body(const struct event_row *row)
{
        char at[32], id[32];
        iso8601_ms(row->created_at, at);
        snprintf(id, sizeof(id), "evt_%llu", (unsigned long long)row->id);
        json_t *data = json_loads(row->payload, 0, NULL);
        if (!json_is_object(data)) {
                json_decref(data);
                data = json_object();
        }
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "id", id, "event", row->name, "created_at", at, "org_id",
                              row->org_id, "sandbox_id", row->sandbox_id[0] ? json_string(row->sandbox_id) : json_null(),
                              "data", data);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return text;
}

int webhook_delivery_new(const struct webhook_row *hook, const char *origin, uint64_t event_id, const char *event,
                         char *payload, struct webhook_delivery_row *ret)
{
        *ret = (struct webhook_delivery_row){ .payload = payload, .event_id = event_id, .last_error = strdup(""),
                                              .log_json = strdup("[]") };
        if (!payload || !ret->last_error || !ret->log_json)
                return -ENOMEM;
        int r = tenant_id_new("whd", ret->id);
        if (r < 0)
                return r;
        snprintf(ret->webhook_id, sizeof(ret->webhook_id), "%s", hook->id);
        snprintf(ret->org_id, sizeof(ret->org_id), "%s", hook->org_id);
        snprintf(ret->origin, sizeof(ret->origin), "%s", origin);
        snprintf(ret->event, sizeof(ret->event), "%s", event);
        snprintf(ret->status, sizeof(ret->status), "pending");
        ret->created_at = ret->next_attempt_at = wall_ms();
        return 0;
}
