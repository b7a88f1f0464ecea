/* The signed identity between cluster nodes (api/common/cluster_sign.c):
 * a signature verifies under the same secret, for the same request,
 * identity and body, within ±60 s; any tampered piece (the body too),
 * another secret, a stale or future time, or a malformed signature is
 * refused; the identity (with the client's address) round-trips and a
 * malformed one is refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/common/cluster_route.h"
#include "tap.h"

#define NOW 1700000000000ULL
#define T "1700000000000"

/* The request with body (NULL: none). */
static int sign_body(const char *secret, const char *time, const char *method, const char *target, const char *id,
                     const char *body, char sig[API_CLUSTER_SIG_HEX + 1])
{
        char digest[API_CLUSTER_SIG_HEX + 1];
        api_cluster_body_digest(body, body ? strlen(body) : 0, digest);
        const struct api_cluster_msg m = { time, method, target, id, digest };
        return api_cluster_sign(secret, &m, sig);
}

static int verify_body(const char *secret, uint64_t now, const char *time, const char *method, const char *target,
                       const char *id, const char *body, const char *sig)
{
        char digest[API_CLUSTER_SIG_HEX + 1];
        api_cluster_body_digest(body, body ? strlen(body) : 0, digest);
        const struct api_cluster_msg m = { time, method, target, id, digest };
        return api_cluster_verify(secret, now, &m, sig);
}

static int sign_req(const char *secret, const char *time, const char *method, const char *target, const char *id,
                    char sig[API_CLUSTER_SIG_HEX + 1])
{
        return sign_body(secret, time, method, target, id, NULL, sig);
}

static int verify_req(const char *secret, uint64_t now, const char *time, const char *method, const char *target,
                      const char *id, const char *sig)
{
        return verify_body(secret, now, time, method, target, id, NULL, sig);
}

static void sign(const char *secret, const char *time, const char *method, const char *target, const char *id,
                 char sig[API_CLUSTER_SIG_HEX + 1])
{
        ASSERT_OK(sign_req(secret, time, method, target, id, sig));
        ASSERT_EQ(strlen(sig), API_CLUSTER_SIG_HEX);
}

TEST(a_signature_verifies_for_the_same_request)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("s3cret", T, "POST", "/v1/sandbox/abc/exec?x=1", "eyJ9", sig);
        ASSERT_OK(verify_req("s3cret", NOW, T, "POST", "/v1/sandbox/abc/exec?x=1", "eyJ9", sig));
        /* Known answer (openssl dgst -sha256 -hmac s3cret) over
         * "time\nmethod\ntarget\nidentity\n" + hex SHA-256 of the empty
         * body: what another implementation of a node must compute. */
        ASSERT_STREQ(sig, "5d5a327021060211e4387b2a765a585d5a746d9266b6e1a86d07258d74e9b48d");
        ASSERT_OK(sign_body("s3cret", T, "POST", "/v1/sandbox/abc/exec?x=1", "eyJ9", "{\"cmd\":\"ls\"}", sig));
        ASSERT_STREQ(sig, "ce32438a80caf713b33f118ff26527f70daaf77315dafc98451c180f91f7972d");
}

TEST(the_body_is_bound_into_the_signature)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        ASSERT_OK(sign_body("k", T, "POST", "/x", "id", "{\"a\":1}", sig));
        ASSERT_OK(verify_body("k", NOW, T, "POST", "/x", "id", "{\"a\":1}", sig));
        ASSERT_ERR(verify_body("k", NOW, T, "POST", "/x", "id", "{\"a\":2}", sig), EPERM);
        ASSERT_ERR(verify_body("k", NOW, T, "POST", "/x", "id", "{\"a\":1} ", sig), EPERM);
        ASSERT_ERR(verify_body("k", NOW, T, "POST", "/x", "id", NULL, sig), EPERM);
        /* No body and an empty one are the same request; so is no digest. */
        ASSERT_OK(sign_body("k", T, "DELETE", "/x", "id", NULL, sig));
        ASSERT_OK(verify_body("k", NOW, T, "DELETE", "/x", "id", "", sig));
        const struct api_cluster_msg none = { T, "DELETE", "/x", "id", NULL };
        ASSERT_OK(api_cluster_verify("k", NOW, &none, sig));
        char d[API_CLUSTER_SIG_HEX + 1];
        api_cluster_body_digest("abc", 3, d);
        ASSERT_STREQ(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(tampering_any_piece_is_refused)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("s3cret", T, "POST", "/v1/sandbox/abc/exec", "id", sig);
        ASSERT_ERR(verify_req("s3cret", NOW, T, "GET", "/v1/sandbox/abc/exec", "id", sig), EPERM);
        ASSERT_ERR(verify_req("s3cret", NOW, T, "POST", "/v1/sandbox/abd/exec", "id", sig), EPERM);
        ASSERT_ERR(verify_req("s3cret", NOW, T, "POST", "/v1/sandbox/abc/exec", "iD", sig), EPERM);
        ASSERT_ERR(verify_req("s3cret", NOW, "1700000000001", "POST", "/v1/sandbox/abc/exec", "id", sig),
                   EPERM);
        char bad[API_CLUSTER_SIG_HEX + 1];
        memcpy(bad, sig, sizeof(bad));
        bad[10] = bad[10] == '0' ? '1' : '0';
        ASSERT_ERR(verify_req("s3cret", NOW, T, "POST", "/v1/sandbox/abc/exec", "id", bad), EPERM);
}

TEST(another_secret_is_refused)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("secret-a", T, "GET", "/x", "id", sig);
        ASSERT_ERR(verify_req("secret-b", NOW, T, "GET", "/x", "id", sig), EPERM);
        ASSERT_ERR(sign_req("", T, "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(verify_req("", NOW, T, "GET", "/x", "id", sig), EINVAL);
}

TEST(only_within_sixty_seconds)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("k", T, "GET", "/x", "id", sig);
        ASSERT_OK(verify_req("k", NOW + 60000, T, "GET", "/x", "id", sig));
        ASSERT_OK(verify_req("k", NOW - 60000, T, "GET", "/x", "id", sig));
        ASSERT_ERR(verify_req("k", NOW + 60001, T, "GET", "/x", "id", sig), EKEYEXPIRED);
        ASSERT_ERR(verify_req("k", NOW - 60001, T, "GET", "/x", "id", sig), EKEYEXPIRED);
}

TEST(malformed_signatures_and_times_are_refused)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("k", T, "GET", "/x", "id", sig);
        ASSERT_ERR(verify_req("k", NOW, T, "GET", "/x", "id", NULL), EINVAL);
        ASSERT_ERR(verify_req("k", NOW, T, "GET", "/x", "id", "abc"), EINVAL);
        ASSERT_ERR(verify_req("k", NOW, NULL, "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(verify_req("k", NOW, "-5", "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(verify_req("k", NOW, "17e11", "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(verify_req("k", NOW, T, "GET", "/x", NULL, sig), EINVAL);
}

TEST(identity_round_trips)
{
        struct tenant_principal p = { .expires_at = 123 };
        strcpy(p.org_id, "org_1");
        strcpy(p.user_id, "usr_2");
        strcpy(p.session_id, "ses_3");
        char *v = api_cluster_identity_encode(&p, "controller", "203.0.113.7");
        ASSERT_NOT_NULL(v);
        ASSERT_EQ(strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), strlen(v));
        struct tenant_principal q;
        char facade[16];
        char addr[64];
        ASSERT_OK(api_cluster_identity_decode(v, &q, facade, sizeof(facade), addr, sizeof(addr)));
        ASSERT_STREQ(facade, "controller");
        ASSERT_STREQ(addr, "203.0.113.7");
        ASSERT_STREQ(q.org_id, "org_1");
        ASSERT_STREQ(q.user_id, "usr_2");
        ASSERT_STREQ(q.key_id, "");
        ASSERT_STREQ(q.session_id, "ses_3");
        ASSERT_U64_EQ(q.expires_at, 123);
        free(v);
        v = api_cluster_identity_encode(NULL, "bridge", NULL);
        ASSERT_OK(api_cluster_identity_decode(v, &q, facade, sizeof(facade), addr, sizeof(addr)));
        ASSERT_STREQ(facade, "bridge");
        ASSERT_STREQ(addr, "");
        ASSERT_STREQ(q.org_id, "");
        free(v);
}

TEST(malformed_identities_are_refused)
{
        struct tenant_principal q;
        char facade[16];
        char addr[16];
        ASSERT_ERR(api_cluster_identity_decode("not base64!", &q, facade, sizeof(facade), addr, sizeof(addr)), EINVAL);
        ASSERT_ERR(api_cluster_identity_decode("e30", &q, facade, sizeof(facade), addr, sizeof(addr)), EINVAL); /* {} */
        ASSERT_ERR(api_cluster_identity_decode(NULL, &q, facade, sizeof(facade), addr, sizeof(addr)), EINVAL);
        /* A facade, an address longer than the room for it. */
        char *v = api_cluster_identity_encode(NULL, "a-very-long-facade-name", NULL);
        ASSERT_ERR(api_cluster_identity_decode(v, &q, facade, sizeof(facade), addr, sizeof(addr)), EINVAL);
        free(v);
        v = api_cluster_identity_encode(NULL, "bridge", "2001:db8:1:2:3:4:5:6");
        ASSERT_ERR(api_cluster_identity_decode(v, &q, facade, sizeof(facade), addr, sizeof(addr)), EINVAL);
        free(v);
}

TEST(facade_of_paths)
{
        ASSERT_STREQ(api_cluster_facade_of("/api/v1/sandbox/x"), "controller");
        ASSERT_STREQ(api_cluster_facade_of("/v1/sandbox/x/exec"), "bridge");
        ASSERT_STREQ(api_cluster_facade_of("/languages/python/sandboxes/x"), "runtime");
}
