/* OpenID Connect ID token checks and PKCE. The header is judged first (an
 * algorithm we do not accept ends it), the signature next, and only a
 * payload whose signature held is parsed: nothing the sender wrote is
 * interpreted beyond the header until the provider is known to have
 * signed it. */
#include "tenant/oidc.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "tenant/jwt.h"

#define RSA_MIN_BITS 2048

static int fail(char *why, size_t whylen, int r, const char *reason)
{
        if (why && whylen)
                snprintf(why, whylen, "%s", reason);
        return r;
}

int oidc_random_text(size_t n, char *out)
{
        uint8_t buf[64];
        if (n > sizeof(buf) || RAND_bytes(buf, (int)n) != 1)
                return -EIO;
        b64url_encode(buf, n, out);
        explicit_bzero(buf, sizeof(buf));
        return 0;
}

void oidc_pkce_challenge(const char *verifier, char out[OIDC_CHALLENGE_LEN + 1])
{
        uint8_t md[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)verifier, strlen(verifier), md);
        b64url_encode(md, sizeof(md), out);
}

/* A JWK member that is base64url of a big-endian unsigned number. */
static BIGNUM *jwk_bignum(const json_t *jwk, const char *name)
{
        const char *v = json_string_value(json_object_get(jwk, name));
        if (!v || !v[0] || strlen(v) > 2048)
                return NULL;
        uint8_t buf[1600];
        size_t n;
        if (b64url_decode(v, strlen(v), buf, sizeof(buf), &n) < 0 || n == 0)
                return NULL;
        return BN_bin2bn(buf, (int)n, NULL);
}

static void bn_freep(BIGNUM **b)
{
        BN_free(*b);
}

/* The RSA public key of a JWK, NULL when it is not a sound one. */
static EVP_PKEY *jwk_rsa_key(const json_t *jwk)
{
        _cleanup_(bn_freep) BIGNUM *n = jwk_bignum(jwk, "n");
        _cleanup_(bn_freep) BIGNUM *e = jwk_bignum(jwk, "e");
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        OSSL_PARAM *params = NULL;
        EVP_PKEY_CTX *ctx = NULL;
        EVP_PKEY *key = NULL;
        if (n && e && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) &&
            OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) && (params = OSSL_PARAM_BLD_to_param(bld)) &&
            (ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL)) && EVP_PKEY_fromdata_init(ctx) == 1 &&
            EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) == 1 && EVP_PKEY_get_bits(key) < RSA_MIN_BITS) {
                EVP_PKEY_free(key);
                key = NULL;
        }
        EVP_PKEY_CTX_free(ctx);
        OSSL_PARAM_free(params);
        OSSL_PARAM_BLD_free(bld);
        return key;
}

static bool str_member_is(const json_t *o, const char *name, const char *want)
{
        const char *v = json_string_value(json_object_get(o, name));
        return v && strcmp(v, want) == 0;
}

/* The RSA signing key of jwks named kid (NULL: the only one there is). */
static const json_t *jwks_find(const json_t *jwks, const char *kid)
{
        const json_t *keys = json_object_get(jwks, "keys"), *found = NULL, *k;
        size_t i, candidates = 0;
        json_array_foreach(keys, i, k)
        {
                const json_t *use = json_object_get(k, "use"), *alg = json_object_get(k, "alg");
                if (!str_member_is(k, "kty", "RSA") || (use && !str_member_is(k, "use", "sig")) ||
                    (alg && !str_member_is(k, "alg", "RS256")))
                        continue;
                if (kid ? str_member_is(k, "kid", kid) : true) {
                        found = k;
                        candidates++;
                }
        }
        return candidates == 1 ? found : NULL;
}

static int verify_rs256(const json_t *jwks, const char *kid, const char *data, size_t len, const uint8_t *sig,
                        size_t siglen, char *why, size_t whylen)
{
        const json_t *jwk = jwks_find(jwks, kid);
        if (!jwk)
                return fail(why, whylen, -ENOKEY, "no signing key of the provider matches the token's kid");
        EVP_PKEY *key = jwk_rsa_key(jwk);
        if (!key)
                return fail(why, whylen, -EPERM, "the provider's key is not a usable RSA key");
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        bool ok = md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
                  EVP_DigestVerify(md, sig, siglen, (const unsigned char *)data, len) == 1;
        EVP_MD_CTX_free(md);
        EVP_PKEY_free(key);
        return ok ? 0 : fail(why, whylen, -EPERM, "bad signature");
}

static int verify_hs256(const struct oidc_expect *x, const char *data, size_t len, const uint8_t *sig, size_t siglen,
                        char *why, size_t whylen)
{
        uint8_t mac[32];
        unsigned int maclen = 0;
        if (!x->hs_key || !x->hs_keylen)
                return fail(why, whylen, -EPERM, "HS256 tokens need a client secret");
        if (!HMAC(EVP_sha256(), x->hs_key, (int)x->hs_keylen, (const unsigned char *)data, len, mac, &maclen) ||
            maclen != sizeof(mac) || siglen != sizeof(mac) || CRYPTO_memcmp(sig, mac, sizeof(mac)) != 0)
                return fail(why, whylen, -EPERM, "bad signature");
        return 0;
}

/* The header's alg and kid (kid_out "" when none): RS256 or HS256 only. */
static int read_header(const char *part, size_t len, char *alg, char *kid, size_t kidcap, char *why, size_t whylen)
{
        json_t *h = NULL;
        if (jwt_part_object(part, len, &h) < 0)
                return fail(why, whylen, -EINVAL, "malformed token header");
        const char *a = json_string_value(json_object_get(h, "alg"));
        const char *k = json_string_value(json_object_get(h, "kid"));
        int r = 0;
        if (!a || (strcmp(a, "RS256") != 0 && strcmp(a, "HS256") != 0))
                r = fail(why, whylen, -EPERM, "token algorithm not accepted (RS256 or HS256 only)");
        else if ((k && strlen(k) >= kidcap) || (json_object_get(h, "kid") && !k))
                r = fail(why, whylen, -EINVAL, "malformed kid");
        else {
                snprintf(alg, 8, "%s", a);
                snprintf(kid, kidcap, "%s", k ? k : "");
        }
        json_decref(h);
        return r;
}

static int copy_claim(const json_t *pl, const char *name, char *dst, size_t cap, bool required)
{
        const json_t *v = json_object_get(pl, name);
        if (!v && !required) {
                dst[0] = '\0';
                return 0;
        }
        if (!json_is_string(v) || json_string_length(v) >= cap || (required && json_string_length(v) == 0) ||
            strlen(json_string_value(v)) != json_string_length(v))
                return -EINVAL;
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

static bool aud_ok(const json_t *pl, const char *client_id)
{
        const json_t *aud = json_object_get(pl, "aud"), *v, *azp = json_object_get(pl, "azp");
        size_t i;
        bool found = json_is_string(aud) && strcmp(json_string_value(aud), client_id) == 0;
        json_array_foreach(aud, i, v) found = found || (json_is_string(v) && strcmp(json_string_value(v), client_id) == 0);
        return found && (!azp || str_member_is(pl, "azp", client_id));
}

static bool time_claim(const json_t *pl, const char *name, uint64_t *ret)
{
        const json_t *v = json_object_get(pl, name);
        double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
        if (d < 0 || d > 1e13)
                return false;
        *ret = (uint64_t)d;
        return true;
}

static int check_claims(const json_t *pl, const struct oidc_expect *x, char *why, size_t whylen)
{
        uint64_t exp, iat;
        if (!str_member_is(pl, "iss", x->issuer))
                return fail(why, whylen, -EPERM, "wrong issuer");
        if (!aud_ok(pl, x->client_id))
                return fail(why, whylen, -EPERM, "wrong audience");
        if (!time_claim(pl, "exp", &exp) || !time_claim(pl, "iat", &iat))
                return fail(why, whylen, -EINVAL, "exp and iat must be numbers");
        if (exp + x->leeway_s <= x->now_s)
                return fail(why, whylen, -EKEYEXPIRED, "token expired");
        if (iat > x->now_s + x->leeway_s || iat + x->max_age_s + x->leeway_s < x->now_s)
                return fail(why, whylen, -EPERM, "token issued at an unacceptable time");
        const char *nonce = json_string_value(json_object_get(pl, "nonce"));
        if (!nonce || !x->nonce || strlen(nonce) != strlen(x->nonce) ||
            CRYPTO_memcmp(nonce, x->nonce, strlen(nonce)) != 0)
                return fail(why, whylen, -EPERM, "wrong nonce");
        return 0;
}

static int read_identity(const json_t *pl, const struct oidc_expect *x, struct oidc_identity *id, char *why,
                         size_t whylen)
{
        const json_t *ev = json_object_get(pl, "email_verified");
        if (copy_claim(pl, "iss", id->issuer, sizeof(id->issuer), true) < 0 ||
            copy_claim(pl, "sub", id->subject, sizeof(id->subject), true) < 0 ||
            copy_claim(pl, "email", id->email, sizeof(id->email), false) < 0 ||
            copy_claim(pl, "given_name", id->given_name, sizeof(id->given_name), false) < 0 ||
            copy_claim(pl, "family_name", id->family_name, sizeof(id->family_name), false) < 0 ||
            (x->org_claim && x->org_claim[0] && copy_claim(pl, x->org_claim, id->org_id, sizeof(id->org_id), false) < 0))
                return fail(why, whylen, -EINVAL, "malformed identity claims");
        /* Some providers send the boolean as a string. */
        id->email_verified = json_is_true(ev) || (json_is_string(ev) && strcmp(json_string_value(ev), "true") == 0);
        return 0;
}

int oidc_id_token_verify(const char *token, const json_t *jwks, const struct oidc_expect *x,
                         struct oidc_identity *ret, char *why, size_t whylen)
{
        size_t len = token ? strnlen(token, OIDC_TOKEN_MAX + 1) : 0;
        if (!len || len > OIDC_TOKEN_MAX || !x || !x->issuer || !x->client_id)
                return fail(why, whylen, -EINVAL, "no token, or a token too long");
        const char *dot1 = memchr(token, '.', len);
        const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
        if (!dot1 || !dot2 || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)))
                return fail(why, whylen, -EINVAL, "a token has three dot-separated parts");
        char alg[8], kid[256];
        int r = read_header(token, (size_t)(dot1 - token), alg, kid, sizeof(kid), why, whylen);
        if (r < 0)
                return r;
        _cleanup_free_ uint8_t *sig = malloc(len);
        size_t siglen;
        if (!sig)
                return -ENOMEM;
        if (b64url_decode(dot2 + 1, len - (size_t)(dot2 + 1 - token), sig, len, &siglen) < 0)
                return fail(why, whylen, -EINVAL, "malformed signature");
        size_t signed_len = (size_t)(dot2 - token);
        r = strcmp(alg, "RS256") == 0
                    ? verify_rs256(jwks, kid[0] ? kid : NULL, token, signed_len, sig, siglen, why, whylen)
                    : verify_hs256(x, token, signed_len, sig, siglen, why, whylen);
        if (r < 0)
                return r;
        json_t *pl = NULL;
        if (jwt_part_object(dot1 + 1, (size_t)(dot2 - dot1 - 1), &pl) < 0)
                return fail(why, whylen, -EINVAL, "malformed token payload");
        struct oidc_identity id = {};
        if ((r = check_claims(pl, x, why, whylen)) == 0 && (r = read_identity(pl, x, &id, why, whylen)) == 0)
                *ret = id;
        json_decref(pl);
        return r;
}
