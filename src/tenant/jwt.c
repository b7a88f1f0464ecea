/* HS256 JSON Web Tokens. The header is checked before the signature (so
 * an "alg": "none" token is refused whatever it carries) and the payload
 * is parsed only after the signature matched: nothing an attacker wrote
 * is interpreted beyond the header until the token is known to be ours. */
#include "tenant/jwt.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"

static const char b64url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t b64url_encode(const uint8_t *in, size_t len, char *out)
{
        size_t n = 0;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16;
                size_t left = len - i;
                if (left > 1)
                        v |= (uint32_t)in[i + 1] << 8;
                if (left > 2)
                        v |= in[i + 2];
                out[n++] = b64url_alphabet[(v >> 18) & 63];
                out[n++] = b64url_alphabet[(v >> 12) & 63];
                if (left > 1)
                        out[n++] = b64url_alphabet[(v >> 6) & 63];
                if (left > 2)
                        out[n++] = b64url_alphabet[v & 63];
        }
        out[n] = '\0';
        return n;
}

static int b64url_value(char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '-')
                return 62;
        if (c == '_')
                return 63;
        return -1;
}

int b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap, size_t *ret_len)
{
        if (len % 4 == 1)
                return -EINVAL;
        size_t need = len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
        if (need > cap)
                return -ENOBUFS;
        uint32_t acc = 0;
        unsigned bits = 0;
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
                int v = b64url_value(in[i]);
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (uint8_t)(acc >> bits);
                }
        }
        /* Leftover bits must be zero: one token has one spelling, so a
         * tampered-but-equivalent signature is not accepted. */
        if (acc & ((1u << bits) - 1))
                return -EINVAL;
        *ret_len = n;
        return 0;
}

static int hs256(const uint8_t *key, size_t keylen, const char *data, size_t len, uint8_t mac[32])
{
        unsigned int maclen = 0;
        if (!HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)data, len, mac, &maclen) || maclen != 32)
                return -EIO;
        return 0;
}

/* Base64url of a JSON text, appended to out at *pos. */
static int append_b64_json(json_t *j, char *out, size_t cap, size_t *pos)
{
        _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!text)
                return -ENOMEM;
        size_t len = strlen(text);
        if (*pos + (len + 2) / 3 * 4 + 1 > cap)
                return -EINVAL;
        *pos += b64url_encode((const uint8_t *)text, len, out + *pos);
        return 0;
}

int jwt_sign(const uint8_t *key, size_t keylen, const struct jwt_claims *c, char **ret)
{
        if (!keylen || strnlen(c->sub, JWT_CLAIM_MAX) >= JWT_CLAIM_MAX ||
            strnlen(c->org, JWT_CLAIM_MAX) >= JWT_CLAIM_MAX || strnlen(c->sid, JWT_CLAIM_MAX) >= JWT_CLAIM_MAX)
                return -EINVAL;
        _cleanup_free_ char *out = malloc(JWT_MAX_LEN);
        json_t *hdr = json_pack("{s:s, s:s}", "alg", "HS256", "typ", "JWT");
        json_t *pl = json_pack("{s:s, s:s, s:s, s:I, s:I}", "sub", c->sub, "org", c->org, "sid", c->sid, "iat",
                               (json_int_t)c->iat, "exp", (json_int_t)c->exp);
        size_t pos = 0;
        int r = (!out || !hdr || !pl) ? -ENOMEM : 0;
        if (r == 0)
                r = append_b64_json(hdr, out, JWT_MAX_LEN, &pos);
        if (r == 0) {
                out[pos++] = '.';
                r = append_b64_json(pl, out, JWT_MAX_LEN, &pos);
        }
        json_decref(hdr);
        json_decref(pl);
        uint8_t mac[32];
        if (r == 0 && pos + 45 > JWT_MAX_LEN)
                r = -EINVAL;
        if (r == 0)
                r = hs256(key, keylen, out, pos, mac);
        if (r < 0)
                return r;
        out[pos++] = '.';
        b64url_encode(mac, sizeof(mac), out + pos);
        *ret = TAKE_PTR(out);
        return 0;
}

int jwt_part_object(const char *part, size_t len, json_t **ret)
{
        _cleanup_free_ uint8_t *buf = malloc(len + 1);
        size_t n;
        if (!buf)
                return -ENOMEM;
        int r = b64url_decode(part, len, buf, len, &n);
        if (r < 0)
                return -EINVAL;
        json_t *j = json_loadb((const char *)buf, n, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return -EINVAL;
        }
        *ret = j;
        return 0;
}

static int check_header(const char *part, size_t len)
{
        json_t *h = NULL;
        int r = jwt_part_object(part, len, &h);
        if (r < 0)
                return r;
        json_t *alg = json_object_get(h, "alg"), *typ = json_object_get(h, "typ");
        if (!json_is_string(alg) || (typ && !json_is_string(typ)))
                r = -EINVAL;
        else if (strcmp(json_string_value(alg), "HS256") != 0 || (typ && strcmp(json_string_value(typ), "JWT") != 0))
                r = -EPERM;
        json_decref(h);
        return r;
}

static int claim_string(json_t *pl, const char *name, char dst[JWT_CLAIM_MAX])
{
        json_t *v = json_object_get(pl, name);
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= JWT_CLAIM_MAX ||
            strlen(json_string_value(v)) != json_string_length(v))
                return -EINVAL;
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

static int claim_time(json_t *pl, const char *name, uint64_t *dst)
{
        json_t *v = json_object_get(pl, name);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return -EINVAL;
        *dst = (uint64_t)json_integer_value(v);
        return 0;
}

static int parse_claims(const char *part, size_t len, struct jwt_claims *c)
{
        json_t *pl = NULL;
        int r = jwt_part_object(part, len, &pl);
        if (r < 0)
                return r;
        if ((r = claim_string(pl, "sub", c->sub)) < 0 || (r = claim_string(pl, "org", c->org)) < 0 ||
            (r = claim_string(pl, "sid", c->sid)) < 0 || (r = claim_time(pl, "iat", &c->iat)) < 0 ||
            (r = claim_time(pl, "exp", &c->exp)) < 0)
                r = -EINVAL;
        json_decref(pl);
        return r;
}

int jwt_verify(const uint8_t *key, size_t keylen, const char *token, uint64_t now_s, struct jwt_claims *ret)
{
        if (!token || !keylen)
                return -EINVAL;
        size_t len = strnlen(token, JWT_MAX_LEN + 1);
        if (len > JWT_MAX_LEN)
                return -EINVAL;
        const char *dot1 = memchr(token, '.', len);
        const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
        if (!dot1 || !dot2 || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)))
                return -EINVAL;
        int r = check_header(token, (size_t)(dot1 - token));
        if (r < 0)
                return r;
        uint8_t sig[33], mac[32];
        size_t siglen;
        const char *s = dot2 + 1;
        if (b64url_decode(s, len - (size_t)(s - token), sig, sizeof(sig), &siglen) < 0)
                return -EINVAL;
        if ((r = hs256(key, keylen, token, (size_t)(dot2 - token), mac)) < 0)
                return r;
        if (siglen != sizeof(mac) || CRYPTO_memcmp(sig, mac, sizeof(mac)) != 0)
                return -EPERM;
        struct jwt_claims c = {};
        if ((r = parse_claims(dot1 + 1, (size_t)(dot2 - dot1 - 1), &c)) < 0)
                return r;
        if (now_s >= c.exp)
                return -EKEYEXPIRED;
        *ret = c;
        return 0;
}
