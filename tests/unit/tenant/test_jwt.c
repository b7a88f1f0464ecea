/* tenant/jwt.c: HS256 sign and verify, and every way a token must fail. */
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "tap.h"
#include "tenant/jwt.h"

static const uint8_t KEY[32] = "0123456789abcdef0123456789abcdef";

static struct jwt_claims claims(uint64_t exp)
{
        struct jwt_claims c = { .iat = 1000, .exp = exp };
        snprintf(c.sub, sizeof(c.sub), "usr_1");
        snprintf(c.org, sizeof(c.org), "org_1");
        snprintf(c.sid, sizeof(c.sid), "ses_1");
        return c;
}

/* header.payload signed with key (any JSON texts: for the type checks). */
static char *craft(const char *header, const char *payload, const uint8_t *key)
{
        static char out[8192];
        uint8_t mac[32];
        unsigned int len;
        size_t n = b64url_encode((const uint8_t *)header, strlen(header), out);
        out[n++] = '.';
        n += b64url_encode((const uint8_t *)payload, strlen(payload), out + n);
        HMAC(EVP_sha256(), key, 32, (const unsigned char *)out, n, mac, &len);
        out[n++] = '.';
        b64url_encode(mac, sizeof(mac), out + n);
        return out;
}

#define HS256 "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
#define GOOD_PAYLOAD "{\"sub\":\"u\",\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":5000}"

TEST(jwt_round_trip)
{
        struct jwt_claims c = claims(5000), got = {};
        _cleanup_free_ char *tok = NULL;
        ASSERT_OK(jwt_sign(KEY, sizeof(KEY), &c, &tok));
        ASSERT_EQ(strchr(strchr(tok, '.') + 1, '.') != NULL, 1);
        ASSERT_OK(jwt_verify(KEY, sizeof(KEY), tok, 4999, &got));
        ASSERT_STREQ(got.sub, "usr_1");
        ASSERT_STREQ(got.org, "org_1");
        ASSERT_STREQ(got.sid, "ses_1");
        ASSERT_U64_EQ(got.iat, 1000);
        ASSERT_U64_EQ(got.exp, 5000);
        /* Expiry: exp itself is already too late. */
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), tok, 5000, &got), EKEYEXPIRED);
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), tok, 99999, &got), EKEYEXPIRED);
}

TEST(jwt_wrong_key_and_tampering)
{
        struct jwt_claims c = claims(5000), got;
        _cleanup_free_ char *tok = NULL;
        uint8_t other[32];
        memcpy(other, KEY, sizeof(other));
        other[31] ^= 1;
        ASSERT_OK(jwt_sign(KEY, sizeof(KEY), &c, &tok));
        ASSERT_ERR(jwt_verify(other, sizeof(other), tok, 1, &got), EPERM);
        /* Every single-character change of the token is refused. */
        size_t n = strlen(tok);
        for (size_t i = 0; i < n; i++) {
                char saved = tok[i];
                tok[i] = saved == 'A' ? 'B' : 'A';
                ASSERT_TRUE(jwt_verify(KEY, sizeof(KEY), tok, 1, &got) < 0);
                tok[i] = saved;
        }
        ASSERT_OK(jwt_verify(KEY, sizeof(KEY), tok, 1, &got));
}

TEST(jwt_refuses_other_algorithms)
{
        struct jwt_claims got;
        const char *headers[] = { "{\"alg\":\"none\",\"typ\":\"JWT\"}", "{\"alg\":\"HS512\"}", "{\"alg\":\"hs256\"}",
                                  "{\"alg\":\"HS256\",\"typ\":\"JWS\"}" };
        for (size_t i = 0; i < 4; i++)
                ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), craft(headers[i], GOOD_PAYLOAD, KEY), 1, &got), EPERM);
        /* alg none with an empty signature: the classic forgery. */
        char none[512];
        size_t n = b64url_encode((const uint8_t *)"{\"alg\":\"none\"}", 14, none);
        none[n++] = '.';
        n += b64url_encode((const uint8_t *)GOOD_PAYLOAD, strlen(GOOD_PAYLOAD), none + n);
        snprintf(none + n, sizeof(none) - n, ".");
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), none, 1, &got), EPERM);
        /* A header that is not an object, or alg not a string. */
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), craft("[1]", GOOD_PAYLOAD, KEY), 1, &got), EINVAL);
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), craft("{\"alg\":1}", GOOD_PAYLOAD, KEY), 1, &got), EINVAL);
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), craft("{}", GOOD_PAYLOAD, KEY), 1, &got), EINVAL);
        ASSERT_OK(jwt_verify(KEY, sizeof(KEY), craft(HS256, GOOD_PAYLOAD, KEY), 1, &got));
        ASSERT_OK(jwt_verify(KEY, sizeof(KEY), craft("{\"alg\":\"HS256\"}", GOOD_PAYLOAD, KEY), 1, &got));
}

TEST(jwt_refuses_wrong_claim_types)
{
        struct jwt_claims got;
        const char *bad[] = {
                "{\"sub\":1,\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":5000}",
                "{\"sub\":\"u\",\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":\"5000\"}",
                "{\"sub\":\"u\",\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":5000.5}",
                "{\"sub\":\"u\",\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":-1}",
                "{\"sub\":\"u\",\"org\":\"o\",\"iat\":1,\"exp\":5000}",
                "{\"sub\":\"\",\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":5000}",
                "{\"sub\":\"u\\u0000x\",\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":5000}",
                "{\"sub\":\"u\",\"sub\":\"v\",\"org\":\"o\",\"sid\":\"s\",\"iat\":1,\"exp\":5000}",
                "[\"sub\"]",
                "not json",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), craft(HS256, bad[i], KEY), 1, &got), EINVAL);
}

TEST(jwt_refuses_malformed_tokens)
{
        struct jwt_claims c = claims(5000), got;
        _cleanup_free_ char *tok = NULL;
        char buf[8192];
        ASSERT_OK(jwt_sign(KEY, sizeof(KEY), &c, &tok));
        const char *bad[] = { "", ".", "..", "...", "a.b", "a.b.c.d", "!!.!!.!!" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ASSERT_TRUE(jwt_verify(KEY, sizeof(KEY), bad[i], 1, &got) < 0);
        snprintf(buf, sizeof(buf), "%s=", tok);   /* padding */
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), buf, 1, &got), EINVAL);
        snprintf(buf, sizeof(buf), "%sAA", tok);  /* a longer signature */
        ASSERT_TRUE(jwt_verify(KEY, sizeof(KEY), buf, 1, &got) < 0);
        snprintf(buf, sizeof(buf), "%.*s", (int)strlen(tok) - 1, tok); /* a shorter one */
        ASSERT_TRUE(jwt_verify(KEY, sizeof(KEY), buf, 1, &got) < 0);
        snprintf(buf, sizeof(buf), " %s", tok);
        ASSERT_TRUE(jwt_verify(KEY, sizeof(KEY), buf, 1, &got) < 0);
        memset(buf, 'a', JWT_MAX_LEN + 1);
        buf[JWT_MAX_LEN + 1] = '\0';
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), buf, 1, &got), EINVAL);
        ASSERT_ERR(jwt_verify(KEY, sizeof(KEY), NULL, 1, &got), EINVAL);
}

TEST(b64url_strict)
{
        uint8_t out[16];
        size_t n;
        char enc[32];
        ASSERT_EQ(b64url_encode((const uint8_t *)"\xfb\xff", 2, enc), 3);
        ASSERT_STREQ(enc, "-_8");
        ASSERT_OK(b64url_decode("-_8", 3, out, sizeof(out), &n));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(out[0], 0xfb);
        ASSERT_ERR(b64url_decode("-_9", 3, out, sizeof(out), &n), EINVAL);  /* non-zero spare bits */
        ASSERT_ERR(b64url_decode("+/8", 3, out, sizeof(out), &n), EINVAL);  /* standard alphabet */
        ASSERT_ERR(b64url_decode("abcde", 5, out, sizeof(out), &n), EINVAL); /* length 1 mod 4 */
        ASSERT_ERR(b64url_decode("AAAAAAAAAAAAAAAAAAAAAAAA", 24, out, sizeof(out), &n), ENOBUFS);
        ASSERT_OK(b64url_decode("", 0, out, sizeof(out), &n));
        ASSERT_EQ(n, 0);
}
