/* Fuzzes the session-token parser (jwt_verify in src/tenant/jwt.c).
 *
 * First byte even: the rest is a whole token, checked against a fixed key;
 * only a token this harness could have signed may pass, so it must never
 * verify (the fuzzer cannot forge HMAC-SHA-256). First byte odd: the rest
 * is a payload, signed here with a valid HS256 header, so the fuzzer
 * reaches the claim parser; when it verifies, every claim is a non-empty
 * NUL-terminated string below JWT_CLAIM_MAX, exp > now, and signing the
 * parsed claims again gives a token that verifies to the same claims. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tenant/jwt.h"

static const uint8_t KEY[32] = "fuzz-key-fuzz-key-fuzz-key-fuzz!";
#define NOW 1000

static void check_claims(const struct jwt_claims *c)
{
        CHECK(strnlen(c->sub, JWT_CLAIM_MAX) < JWT_CLAIM_MAX && c->sub[0]);
        CHECK(strnlen(c->org, JWT_CLAIM_MAX) < JWT_CLAIM_MAX && c->org[0]);
        CHECK(strnlen(c->sid, JWT_CLAIM_MAX) < JWT_CLAIM_MAX && c->sid[0]);
        CHECK(c->exp > NOW);
}

static void signed_payload(const uint8_t *data, size_t size)
{
        static const char hdr[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
        size_t cap = 64 + (size + 2) / 3 * 4 + 64;
        char *tok = malloc(cap);
        uint8_t mac[32];
        unsigned int len;
        size_t n = b64url_encode((const uint8_t *)hdr, sizeof(hdr) - 1, tok);
        tok[n++] = '.';
        n += b64url_encode(data, size, tok + n);
        HMAC(EVP_sha256(), KEY, sizeof(KEY), (const unsigned char *)tok, n, mac, &len);
        tok[n++] = '.';
        b64url_encode(mac, sizeof(mac), tok + n);
        struct jwt_claims c, again;
        if (jwt_verify(KEY, sizeof(KEY), tok, NOW, &c) == 0) {
                check_claims(&c);
                char *resigned = NULL;
                CHECK(jwt_sign(KEY, sizeof(KEY), &c, &resigned) == 0);
                CHECK(jwt_verify(KEY, sizeof(KEY), resigned, NOW, &again) == 0);
                CHECK(memcmp(&c, &again, sizeof(c)) == 0 || (strcmp(c.sub, again.sub) == 0 &&
                                                             strcmp(c.org, again.org) == 0 &&
                                                             strcmp(c.sid, again.sid) == 0 &&
                                                             c.exp == again.exp && c.iat == again.iat));
                free(resigned);
        }
        free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        if (data[0] & 1) {
                signed_payload(data + 1, size - 1);
                return 0;
        }
        char *tok = malloc(size);
        memcpy(tok, data + 1, size - 1);
        tok[size - 1] = '\0';
        struct jwt_claims c;
        CHECK(jwt_verify(KEY, sizeof(KEY), tok, NOW, &c) != 0);
        free(tok);
        return 0;
}
