/* tenant/oidc.c: ID tokens signed by a key made here (RS256 through a JWKS,
 * HS256 with the client secret), each claim check, and PKCE S256. */
#include <errno.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "tenant/jwt.h"
#include "tenant/oidc.h"

#define ISS "https://idp.example"
#define AUD "client-1"
#define NONCE "n-0123456789"
#define NOW 1700000000ULL
#define SECRET "client-secret-0123456789"

static const struct oidc_expect EXPECT = {
        .issuer = ISS, .client_id = AUD, .nonce = NONCE, .hs_key = (const uint8_t *)SECRET,
        .hs_keylen = sizeof(SECRET) - 1, .org_claim = "org_id", .now_s = NOW, .leeway_s = 60, .max_age_s = 600,
};

static EVP_PKEY *rsa_key(unsigned bits)
{
        EVP_PKEY *k = EVP_RSA_gen(bits);
        ASSERT_NOT_NULL(k);
        return k;
}

static json_t *b64_bn(EVP_PKEY *k, const char *param)
{
        BIGNUM *bn = NULL;
        uint8_t buf[1024];
        char out[1400];
        ASSERT_TRUE(EVP_PKEY_get_bn_param(k, param, &bn) == 1);
        int n = BN_bn2bin(bn, buf);
        BN_free(bn);
        b64url_encode(buf, (size_t)n, out);
        return json_string(out);
}

/* {"keys": [jwk(k, kid)]} */
static json_t *jwks_of(EVP_PKEY *k, const char *kid)
{
        json_t *jwk = json_pack("{s:s, s:s, s:s, s:o, s:o}", "kty", "RSA", "use", "sig", "alg", "RS256", "n",
                                b64_bn(k, OSSL_PKEY_PARAM_RSA_N), "e", b64_bn(k, OSSL_PKEY_PARAM_RSA_E));
        if (kid)
                json_object_set_new(jwk, "kid", json_string(kid));
        return json_pack("{s:[o]}", "keys", jwk);
}

/* header.payload signed: RS256 with key, HS256 with hs, "none" unsigned. */
static const char *token(const char *header, const char *payload, EVP_PKEY *key, const char *hs)
{
        static char out[16384];
        uint8_t sig[1024];
        size_t n = b64url_encode((const uint8_t *)header, strlen(header), out), siglen = 0;
        out[n++] = '.';
        n += b64url_encode((const uint8_t *)payload, strlen(payload), out + n);
        if (key) {
                EVP_MD_CTX *md = EVP_MD_CTX_new();
                siglen = sizeof(sig);
                ASSERT_TRUE(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1);
                ASSERT_TRUE(EVP_DigestSign(md, sig, &siglen, (const uint8_t *)out, n) == 1);
                EVP_MD_CTX_free(md);
        } else if (hs) {
                unsigned int len = 0;
                HMAC(EVP_sha256(), hs, (int)strlen(hs), (const uint8_t *)out, n, sig, &len);
                siglen = len;
        }
        out[n++] = '.';
        b64url_encode(sig, siglen, out + n);
        return out;
}

#define RS_K1 "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}"
#define HS "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"

/* A payload with the good claims, then extra members (JSON text). */
static const char *claims(const char *extra)
{
        static char out[2048];
        snprintf(out, sizeof(out),
                 "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"user-1\",\"nonce\":\"" NONCE "\","
                 "\"iat\":%llu,\"exp\":%llu,\"email\":\"ada@corp.example\",\"email_verified\":true,"
                 "\"given_name\":\"Ada\",\"org_id\":\"idp_org_1\"%s%s}",
                 NOW - 5, NOW + 300, extra[0] ? "," : "", extra);
        return out;
}

static int verify(const char *tok, json_t *jwks)
{
        struct oidc_identity id;
        char why[160];
        return oidc_id_token_verify(tok, jwks, &EXPECT, &id, why, sizeof(why));
}

TEST(oidc_rs256_good_token)
{
        EVP_PKEY *k = rsa_key(2048);
        json_t *jwks = jwks_of(k, "k1");
        struct oidc_identity id;
        ASSERT_OK(oidc_id_token_verify(token(RS_K1, claims(""), k, NULL), jwks, &EXPECT, &id, NULL, 0));
        ASSERT_STREQ(id.issuer, ISS);
        ASSERT_STREQ(id.subject, "user-1");
        ASSERT_STREQ(id.email, "ada@corp.example");
        ASSERT_TRUE(id.email_verified);
        ASSERT_STREQ(id.given_name, "Ada");
        ASSERT_STREQ(id.org_id, "idp_org_1");
        /* A header without kid uses the only key there is. */
        ASSERT_OK(verify(token("{\"alg\":\"RS256\"}", claims(""), k, NULL), jwks));
        /* A token without aud is not for us. */
        char p[2048];
        snprintf(p, sizeof(p), "%s", claims(""));
        memcpy(strstr(p, "\"aud\""), "\"xud\"", 5);
        ASSERT_ERR(verify(token(RS_K1, p, k, NULL), jwks), EPERM);
        json_decref(jwks);
        EVP_PKEY_free(k);
}

TEST(oidc_rs256_refusals)
{
        EVP_PKEY *k = rsa_key(2048), *other = rsa_key(2048), *small = rsa_key(1024);
        json_t *jwks = jwks_of(k, "k1"), *small_jwks = jwks_of(small, "k1");
        /* Another key under the same kid; a kid we do not have. */
        ASSERT_ERR(verify(token(RS_K1, claims(""), other, NULL), jwks), EPERM);
        ASSERT_ERR(verify(token("{\"alg\":\"RS256\",\"kid\":\"k9\"}", claims(""), k, NULL), jwks), ENOKEY);
        ASSERT_ERR(verify(token(RS_K1, claims(""), k, NULL), NULL), ENOKEY);
        /* A payload changed after signing. */
        char tok[16384];
        snprintf(tok, sizeof(tok), "%s", token(RS_K1, claims(""), k, NULL));
        const char *evil = token(RS_K1, claims("\"x\":1"), NULL, NULL);
        char *dot = strchr(tok, '.'), *dot2 = strchr(dot + 1, '.');
        char mixed[16384];
        snprintf(mixed, sizeof(mixed), "%.*s%.*s%s", (int)(dot - tok), tok,
                 (int)(strchr(strchr(evil, '.') + 1, '.') - strchr(evil, '.')), strchr(evil, '.'), dot2);
        ASSERT_ERR(verify(mixed, jwks), EPERM);
        /* Keys under 2048 bits are not trusted. */
        ASSERT_ERR(verify(token(RS_K1, claims(""), small, NULL), small_jwks), EPERM);
        json_decref(jwks);
        json_decref(small_jwks);
        EVP_PKEY_free(k);
        EVP_PKEY_free(other);
        EVP_PKEY_free(small);
}

TEST(oidc_algorithms)
{
        ASSERT_OK(verify(token(HS, claims(""), NULL, SECRET), NULL));
        ASSERT_ERR(verify(token(HS, claims(""), NULL, "wrong-secret"), NULL), EPERM);
        ASSERT_ERR(verify(token("{\"alg\":\"none\"}", claims(""), NULL, NULL), NULL), EPERM);
        ASSERT_ERR(verify(token("{\"alg\":\"RS512\"}", claims(""), NULL, SECRET), NULL), EPERM);
        ASSERT_ERR(verify(token("{\"typ\":\"JWT\"}", claims(""), NULL, SECRET), NULL), EPERM);
        /* No client secret: HS256 is refused whatever it carries. */
        struct oidc_expect x = EXPECT;
        struct oidc_identity id;
        x.hs_key = NULL;
        x.hs_keylen = 0;
        ASSERT_ERR(oidc_id_token_verify(token(HS, claims(""), NULL, ""), NULL, &x, &id, NULL, 0), EPERM);
        /* Malformed. */
        ASSERT_ERR(verify("a.b", NULL), EINVAL);
        ASSERT_ERR(verify("a.b.c.d", NULL), EINVAL);
        ASSERT_ERR(verify("", NULL), EINVAL);
        ASSERT_ERR(verify(NULL, NULL), EINVAL);
}

/* A payload of its own per case (duplicate members are refused, so
 * claims() cannot override one). */
static const char *payload(const char *iss, const char *aud, const char *nonce, long long iat, long long exp)
{
        static char out[1024];
        snprintf(out, sizeof(out),
                 "{\"iss\":\"%s\",\"aud\":%s,\"sub\":\"u\",\"nonce\":\"%s\",\"iat\":%lld,\"exp\":%lld,"
                 "\"email\":\"e@x.example\"}",
                 iss, aud, nonce, iat, exp);
        return out;
}

TEST(oidc_claims)
{
        long long now = (long long)NOW;
        ASSERT_OK(verify(token(HS, payload(ISS, "\"" AUD "\"", NONCE, now, now + 60), NULL, SECRET), NULL));
        ASSERT_ERR(verify(token(HS, payload("https://other", "\"" AUD "\"", NONCE, now, now + 60), NULL, SECRET), NULL),
                   EPERM);
        ASSERT_ERR(verify(token(HS, payload(ISS, "\"other\"", NONCE, now, now + 60), NULL, SECRET), NULL), EPERM);
        ASSERT_OK(verify(token(HS, payload(ISS, "[\"x\",\"" AUD "\"]", NONCE, now, now + 60), NULL, SECRET), NULL));
        ASSERT_ERR(verify(token(HS, payload(ISS, "[\"x\"]", NONCE, now, now + 60), NULL, SECRET), NULL), EPERM);
        ASSERT_ERR(verify(token(HS, payload(ISS, "\"" AUD "\"", "other", now, now + 60), NULL, SECRET), NULL), EPERM);
        /* exp: within the leeway still good, beyond it expired. */
        ASSERT_OK(verify(token(HS, payload(ISS, "\"" AUD "\"", NONCE, now - 100, now - 30), NULL, SECRET), NULL));
        ASSERT_ERR(verify(token(HS, payload(ISS, "\"" AUD "\"", NONCE, now - 100, now - 61), NULL, SECRET), NULL),
                   EKEYEXPIRED);
        /* iat in the future, or too old. */
        ASSERT_ERR(verify(token(HS, payload(ISS, "\"" AUD "\"", NONCE, now + 120, now + 600), NULL, SECRET), NULL),
                   EPERM);
        ASSERT_ERR(verify(token(HS, payload(ISS, "\"" AUD "\"", NONCE, now - 3600, now + 600), NULL, SECRET), NULL),
                   EPERM);
        /* azp, when present, must be us. */
        ASSERT_ERR(verify(token(HS, claims("\"azp\":\"other\""), NULL, SECRET), NULL), EPERM);
        ASSERT_OK(verify(token(HS, claims("\"azp\":\"" AUD "\""), NULL, SECRET), NULL));
}

TEST(oidc_pkce_and_random)
{
        /* RFC 7636 Appendix B. */
        char c[OIDC_CHALLENGE_LEN + 1], a[44], b[44];
        oidc_pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", c);
        ASSERT_STREQ(c, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        ASSERT_OK(oidc_random_text(32, a));
        ASSERT_OK(oidc_random_text(32, b));
        ASSERT_EQ(strlen(a), 43);
        ASSERT_TRUE(strcmp(a, b) != 0);
}
