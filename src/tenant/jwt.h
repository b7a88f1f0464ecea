/* JSON Web Tokens (RFC 7519) as the controller's sessions use them: HS256
 * only (RFC 7515 JWS compact form, HMAC-SHA-256), with the claims below.
 * Pure functions (no store, no clock of their own): the unit tests and the
 * fuzzer drive them directly. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define JWT_MAX_LEN 4096      /* longer tokens are refused unread */
#define JWT_CLAIM_MAX 130     /* each string claim, with its NUL */

struct jwt_claims {
        char sub[JWT_CLAIM_MAX];   /* user id */
        char org[JWT_CLAIM_MAX];   /* org id */
        char sid[JWT_CLAIM_MAX];   /* session id (the store's row) */
        uint64_t iat, exp;         /* epoch seconds */
};

/* Signs claims with key into a new NUL-terminated token (free()).
 * 0, -EINVAL (a claim too long / empty key) or -ENOMEM. */
int jwt_sign(const uint8_t *key, size_t keylen, const struct jwt_claims *c, char **ret);
/* Checks token and fills *ret only when it is sound: exactly three
 * base64url parts (no padding, no other byte), a header that is a JSON
 * object whose "alg" is the string "HS256" ("none" and every other
 * algorithm refused) and whose "typ", if any, is "JWT"; a signature equal
 * to HMAC-SHA-256(key, header.payload) compared in constant time; then a
 * payload object with string sub, org, sid and integer iat, exp.
 * Returns 0; -EINVAL for a malformed token or wrong types; -EPERM for a
 * wrong signature or algorithm; -EKEYEXPIRED when now_s >= exp. */
int jwt_verify(const uint8_t *key, size_t keylen, const char *token, uint64_t now_s, struct jwt_claims *ret);

/* base64url without padding (RFC 4648 §5), as JWS uses it. encode: out
 * must hold 4 * ceil(len / 3) + 1 bytes; returns the length written.
 * decode: strict (alphabet only, no '=', no length ≡ 1 mod 4); 0 with
 * *ret_len, or -EINVAL / -ENOBUFS when out (size cap) is too small. */
size_t b64url_encode(const uint8_t *in, size_t len, char *out);
int b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap, size_t *ret_len);

/* A base64url JWS part holding a JSON object (*ret owned): 0 or -EINVAL
 * (not base64url, not an object, duplicate members), -ENOMEM. */
int jwt_part_object(const char *part, size_t len, json_t **ret);
