/* The signed identity between cluster nodes (api/common/cluster_sign.c):
 * a signature verifies under the same secret, for the same request and
 * identity, within ±60 s; any tampered piece, another secret, a stale or
 * future time, or a malformed signature is refused; the identity round-
 * trips and a malformed one is refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/common/cluster_route.h"
#include "tap.h"

#define NOW 1700000000000ULL
#define T "1700000000000"

static void sign(const char *secret, const char *time, const char *method, const char *target, const char *id,
                 char sig[API_CLUSTER_SIG_HEX + 1])
{
        ASSERT_OK(api_cluster_sign(secret, time, method, target, id, sig));
        ASSERT_EQ(strlen(sig), API_CLUSTER_SIG_HEX);
}

TEST(a_signature_verifies_for_the_same_request)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("s3cret", T, "POST", "/v1/sandbox/abc/exec?x=1", "eyJ9", sig);
        ASSERT_OK(api_cluster_verify("s3cret", NOW, T, "POST", "/v1/sandbox/abc/exec?x=1", "eyJ9", sig));
        /* Known answer (openssl dgst -sha256 -hmac s3cret) over
         * "time\nmethod\ntarget\nidentity": what another implementation
         * of a node must compute. */
        ASSERT_STREQ(sig, "163f0b969940283ea53f0acd15fab0068253971e00f9ae60a1226e2fcfb00fb5");
}

TEST(tampering_any_piece_is_refused)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("s3cret", T, "POST", "/v1/sandbox/abc/exec", "id", sig);
        ASSERT_ERR(api_cluster_verify("s3cret", NOW, T, "GET", "/v1/sandbox/abc/exec", "id", sig), EPERM);
        ASSERT_ERR(api_cluster_verify("s3cret", NOW, T, "POST", "/v1/sandbox/abd/exec", "id", sig), EPERM);
        ASSERT_ERR(api_cluster_verify("s3cret", NOW, T, "POST", "/v1/sandbox/abc/exec", "iD", sig), EPERM);
        ASSERT_ERR(api_cluster_verify("s3cret", NOW, "1700000000001", "POST", "/v1/sandbox/abc/exec", "id", sig),
                   EPERM);
        char bad[API_CLUSTER_SIG_HEX + 1];
        memcpy(bad, sig, sizeof(bad));
        bad[10] = bad[10] == '0' ? '1' : '0';
        ASSERT_ERR(api_cluster_verify("s3cret", NOW, T, "POST", "/v1/sandbox/abc/exec", "id", bad), EPERM);
}

TEST(another_secret_is_refused)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("secret-a", T, "GET", "/x", "id", sig);
        ASSERT_ERR(api_cluster_verify("secret-b", NOW, T, "GET", "/x", "id", sig), EPERM);
        ASSERT_ERR(api_cluster_sign("", T, "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(api_cluster_verify("", NOW, T, "GET", "/x", "id", sig), EINVAL);
}

TEST(only_within_sixty_seconds)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("k", T, "GET", "/x", "id", sig);
        ASSERT_OK(api_cluster_verify("k", NOW + 60000, T, "GET", "/x", "id", sig));
        ASSERT_OK(api_cluster_verify("k", NOW - 60000, T, "GET", "/x", "id", sig));
        ASSERT_ERR(api_cluster_verify("k", NOW + 60001, T, "GET", "/x", "id", sig), EKEYEXPIRED);
        ASSERT_ERR(api_cluster_verify("k", NOW - 60001, T, "GET", "/x", "id", sig), EKEYEXPIRED);
}

TEST(malformed_signatures_and_times_are_refused)
{
        char sig[API_CLUSTER_SIG_HEX + 1];
        sign("k", T, "GET", "/x", "id", sig);
        ASSERT_ERR(api_cluster_verify("k", NOW, T, "GET", "/x", "id", NULL), EINVAL);
        ASSERT_ERR(api_cluster_verify("k", NOW, T, "GET", "/x", "id", "abc"), EINVAL);
        ASSERT_ERR(api_cluster_verify("k", NOW, NULL, "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(api_cluster_verify("k", NOW, "-5", "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(api_cluster_verify("k", NOW, "17e11", "GET", "/x", "id", sig), EINVAL);
        ASSERT_ERR(api_cluster_verify("k", NOW, T, "GET", "/x", NULL, sig), EINVAL);
}

TEST(identity_round_trips)
{
        struct tenant_principal p = { .expires_at = 123 };
        strcpy(p.org_id, "org_1");
        strcpy(p.user_id, "usr_2");
        strcpy(p.session_id, "ses_3");
        char *v = api_cluster_identity_encode(&p, "controller");
        ASSERT_NOT_NULL(v);
        ASSERT_EQ(strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), strlen(v));
        struct tenant_principal q;
        char facade[16];
        ASSERT_OK(api_cluster_identity_decode(v, &q, facade, sizeof(facade)));
        ASSERT_STREQ(facade, "controller");
        ASSERT_STREQ(q.org_id, "org_1");
        ASSERT_STREQ(q.user_id, "usr_2");
        ASSERT_STREQ(q.key_id, "");
        ASSERT_STREQ(q.session_id, "ses_3");
        ASSERT_U64_EQ(q.expires_at, 123);
        free(v);
        v = api_cluster_identity_encode(NULL, "bridge");
        ASSERT_OK(api_cluster_identity_decode(v, &q, facade, sizeof(facade)));
        ASSERT_STREQ(facade, "bridge");
        ASSERT_STREQ(q.org_id, "");
        free(v);
}

TEST(malformed_identities_are_refused)
{
        struct tenant_principal q;
        char facade[16];
        ASSERT_ERR(api_cluster_identity_decode("not base64!", &q, facade, sizeof(facade)), EINVAL);
        ASSERT_ERR(api_cluster_identity_decode("e30", &q, facade, sizeof(facade)), EINVAL); /* {} */
        ASSERT_ERR(api_cluster_identity_decode(NULL, &q, facade, sizeof(facade)), EINVAL);
        /* A facade longer than the room for it. */
        char *v = api_cluster_identity_encode(NULL, "a-very-long-facade-name");
        ASSERT_ERR(api_cluster_identity_decode(v, &q, facade, sizeof(facade)), EINVAL);
        free(v);
}

TEST(facade_of_paths)
{
        ASSERT_STREQ(api_cluster_facade_of("/api/v1/sandbox/x"), "controller");
        ASSERT_STREQ(api_cluster_facade_of("/v1/sandbox/x/exec"), "bridge");
        ASSERT_STREQ(api_cluster_facade_of("/languages/python/sandboxes/x"), "runtime");
}
