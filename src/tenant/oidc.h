/* OpenID Connect relying-party checks (single sign-on, issue 15): the ID
 * token of an authorization-code login verified as OIDC Core §3.1.3.7
 * asks, and the PKCE (RFC 7636, S256) pair. Pure functions: no network,
 * no clock of their own (the caller fetches the JWKS and passes "now"), so
 * the unit tests drive them directly.
 *
 * What is accepted: a JWS compact token of at most OIDC_TOKEN_MAX bytes
 * signed RS256 with an RSA key (2048 bits or more) of the provider's JWKS
 * chosen by the header's "kid" (or the only RSA signing key when the
 * header names none), or HS256 with the client secret when one is given;
 * every other "alg" ("none" included) is refused before anything else is
 * read. Then: iss equal to the configured issuer, aud the client id (or
 * an array holding it, azp then equal to it when present), exp in the
 * future and iat not in the future nor older than max_age (both with
 * leeway), nonce equal to the one sent, sub non-empty. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OIDC_TOKEN_MAX (16 * 1024)
#define OIDC_TEXT_MAX 512

struct oidc_expect {
        const char *issuer;
        const char *client_id;
        const char *nonce;
        const uint8_t *hs_key;   /* the client secret for HS256; NULL/0: HS256 refused */
        size_t hs_keylen;
        const char *org_claim;   /* the claim that names the provider organization; NULL: none */
        uint64_t now_s, leeway_s, max_age_s;
};

struct oidc_identity {
        char issuer[OIDC_TEXT_MAX];
        char subject[OIDC_TEXT_MAX];
        char email[256];          /* "" when the token has none */
        bool email_verified;
        char given_name[128], family_name[128];
        char org_id[OIDC_TEXT_MAX];   /* the org claim's value, "" when absent */
};

/* Verifies token against jwks ({"keys": [...]}, may be NULL for HS256 only)
 * and x. 0 with *ret filled; -ENOKEY when the RS256 key named by the token
 * is not in jwks (fetch it afresh, then try once more); -EPERM a wrong
 * signature or algorithm, or a claim that does not match; -EKEYEXPIRED
 * expired; -EINVAL malformed. why (may be NULL) gets a short reason that
 * never quotes the token. */
int oidc_id_token_verify(const char *token, const json_t *jwks, const struct oidc_expect *x,
                         struct oidc_identity *ret, char *why, size_t whylen);

/* n random bytes as base64url (out holds 4 * ceil(n / 3) + 1). 0 or -EIO. */
int oidc_random_text(size_t n, char *out);
/* The S256 challenge of a verifier: base64url(SHA-256(verifier)). */
#define OIDC_CHALLENGE_LEN 43
void oidc_pkce_challenge(const char *verifier, char out[OIDC_CHALLENGE_LEN + 1]);
