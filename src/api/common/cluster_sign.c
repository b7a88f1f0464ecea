/* The signed identity one node hands another with a forwarded request
 * (cluster_route.h): an HMAC under the cluster's shared secret over the
 * time, the request line, the identity (the caller and its address) and
 * the SHA-256 of the body, so that a node accepts a caller only from a
 * peer, for that very request with that very body, and only for a minute. */
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/common/cluster_route.h"
#include "base/buf.h"
#include "tenant/jwt.h"

void api_cluster_body_digest(const void *body, size_t body_len, char out[API_CLUSTER_SIG_HEX + 1])
{
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256(body_len ? body : (const void *)"", body_len, md);
        for (unsigned i = 0; i < SHA256_DIGEST_LENGTH; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int api_cluster_sign(const char *secret, const struct api_cluster_msg *msg, char out[API_CLUSTER_SIG_HEX + 1])
{
        if (!secret || !secret[0])
                return -EINVAL;
        char empty[API_CLUSTER_SIG_HEX + 1];
        const char *digest = msg->body_sha256;
        if (!digest || !digest[0]) {
                api_cluster_body_digest(NULL, 0, empty);
                digest = empty;
        }
        struct buf b;
        buf_init(&b, SIZE_MAX);
        int r = buf_printf(&b, "%s\n%s\n%s\n%s\n%s", msg->time_ms, msg->method, msg->target, msg->identity, digest);
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned maclen = 0;
        if (r >= 0 && (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)b.data, b.len, mac,
                             &maclen) ||
                       maclen != 32))
                r = -EIO;
        buf_free(&b);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", mac[i]);
        return 0;
}

static int parse_ms(const char *s, uint64_t *ret)
{
        char *end;
        if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 19)
                return -EINVAL;
        *ret = strtoull(s, &end, 10);
        return 0;
}

int api_cluster_verify(const char *secret, uint64_t now_ms, const struct api_cluster_msg *msg, const char *sig)
{
        uint64_t t;
        if (parse_ms(msg->time_ms, &t) < 0 || !sig || strlen(sig) != API_CLUSTER_SIG_HEX || !msg->identity ||
            !msg->method || !msg->target)
                return -EINVAL;
        char want[API_CLUSTER_SIG_HEX + 1];
        int r = api_cluster_sign(secret, msg, want);
        if (r < 0)
                return r;
        if (CRYPTO_memcmp(want, sig, API_CLUSTER_SIG_HEX) != 0)
                return -EPERM;
        uint64_t skew = t > now_ms ? t - now_ms : now_ms - t;
        return skew > API_CLUSTER_SKEW_MS ? -EKEYEXPIRED : 0;
}

char *api_cluster_identity_encode(const struct tenant_principal *who, const char *facade, const char *addr)
{
        static const struct tenant_principal nobody;
        if (!who)
                who = &nobody;
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "facade", facade, "org", who->org_id, "user",
                              who->user_id, "key", who->key_id, "session", who->session_id, "exp",
                              (json_int_t)who->expires_at, "addr", addr ? addr : "");
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!text)
                return NULL;
        size_t n = strlen(text);
        char *out = malloc(4 * ((n + 2) / 3) + 1);
        if (out)
                b64url_encode((const uint8_t *)text, n, out);
        free(text);
        return out;
}

static int copy_field(json_t *j, const char *name, char *dst, size_t cap)
{
        const char *v = json_string_value(json_object_get(j, name));
        if (!v || strlen(v) >= cap)
                return -EINVAL;
        memcpy(dst, v, strlen(v) + 1);
        return 0;
}

int api_cluster_identity_decode(const char *value, struct tenant_principal *who, char *facade, size_t facadelen,
                                char *addr, size_t addrlen)
{
        json_t *j = NULL;
        if (!value || jwt_part_object(value, strlen(value), &j) < 0)
                return -EINVAL;
        struct tenant_principal p = { 0 };
        json_t *exp = json_object_get(j, "exp");
        int r = copy_field(j, "facade", facade, facadelen);
        if (r == 0)
                r = copy_field(j, "org", p.org_id, sizeof(p.org_id));
        if (r == 0)
                r = copy_field(j, "user", p.user_id, sizeof(p.user_id));
        if (r == 0)
                r = copy_field(j, "key", p.key_id, sizeof(p.key_id));
        if (r == 0)
                r = copy_field(j, "session", p.session_id, sizeof(p.session_id));
        if (r == 0)
                r = copy_field(j, "addr", addr, addrlen);
        if (r == 0 && (!json_is_integer(exp) || json_integer_value(exp) < 0))
                r = -EINVAL;
        if (r == 0)
                p.expires_at = (uint64_t)json_integer_value(exp);
        json_decref(j);
        if (r == 0)
                *who = p;
        return r;
}
