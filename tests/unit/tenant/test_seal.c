/* tenant/seal.c: AES-256-GCM round trips, fresh nonces, and every change
 * (key, aad, any byte) refused with -EBADMSG. */
#include <errno.h>
#include <string.h>

#include "tap.h"
#include "tenant/seal.h"

static const uint8_t KEY[SEAL_KEY_BYTES] = "0123456789abcdef0123456789abcdef";
static const char AAD[] = "org_a\0API_KEY";

TEST(seal_round_trip)
{
        const char *pt = "hunter2 and more";
        size_t len = strlen(pt), got = 0;
        uint8_t sealed[64], opened[64];
        ASSERT_OK(seal_encrypt(KEY, AAD, sizeof(AAD), pt, len, sealed));
        ASSERT_TRUE(memmem(sealed, len + SEAL_OVERHEAD, pt, len) == NULL);
        ASSERT_OK(seal_decrypt(KEY, AAD, sizeof(AAD), sealed, len + SEAL_OVERHEAD, opened, &got));
        ASSERT_U64_EQ(got, len);
        ASSERT_TRUE(memcmp(opened, pt, len) == 0);
}

TEST(seal_empty_value)
{
        uint8_t sealed[SEAL_OVERHEAD], opened[1];
        size_t got = 99;
        ASSERT_OK(seal_encrypt(KEY, AAD, sizeof(AAD), "", 0, sealed));
        ASSERT_OK(seal_decrypt(KEY, AAD, sizeof(AAD), sealed, sizeof(sealed), opened, &got));
        ASSERT_U64_EQ(got, 0);
}

TEST(seal_fresh_nonce_each_time)
{
        uint8_t a[40], b[40];
        ASSERT_OK(seal_encrypt(KEY, AAD, sizeof(AAD), "same value", 10, a));
        ASSERT_OK(seal_encrypt(KEY, AAD, sizeof(AAD), "same value", 10, b));
        ASSERT_TRUE(memcmp(a, b, SEAL_NONCE_BYTES) != 0);
        ASSERT_TRUE(memcmp(a + SEAL_NONCE_BYTES, b + SEAL_NONCE_BYTES, 10) != 0);
}

TEST(seal_every_flipped_byte_fails)
{
        uint8_t sealed[8 + SEAL_OVERHEAD], opened[8];
        size_t got;
        ASSERT_OK(seal_encrypt(KEY, AAD, sizeof(AAD), "abcdefgh", 8, sealed));
        for (size_t i = 0; i < sizeof(sealed); i++) {
                sealed[i] ^= 0x01;
                memset(opened, 'X', sizeof(opened));
                ASSERT_ERR(seal_decrypt(KEY, AAD, sizeof(AAD), sealed, sizeof(sealed), opened, &got), EBADMSG);
                /* nothing unauthenticated is left behind */
                ASSERT_TRUE(memcmp(opened, "abcdefgh", 8) != 0);
                sealed[i] ^= 0x01;
        }
        ASSERT_OK(seal_decrypt(KEY, AAD, sizeof(AAD), sealed, sizeof(sealed), opened, &got));
}

TEST(seal_other_key_or_aad_fails)
{
        uint8_t sealed[5 + SEAL_OVERHEAD], opened[5], other[SEAL_KEY_BYTES];
        size_t got;
        static const char OTHER_ROW[] = "org_b\0API_KEY";
        memcpy(other, KEY, sizeof(other));
        other[31] ^= 0x80;
        ASSERT_OK(seal_encrypt(KEY, AAD, sizeof(AAD), "value", 5, sealed));
        ASSERT_ERR(seal_decrypt(other, AAD, sizeof(AAD), sealed, sizeof(sealed), opened, &got), EBADMSG);
        ASSERT_ERR(seal_decrypt(KEY, OTHER_ROW, sizeof(OTHER_ROW), sealed, sizeof(sealed), opened, &got), EBADMSG);
        ASSERT_ERR(seal_decrypt(KEY, NULL, 0, sealed, sizeof(sealed), opened, &got), EBADMSG);
        /* truncated: shorter than nonce + tag is refused before OpenSSL */
        ASSERT_ERR(seal_decrypt(KEY, AAD, sizeof(AAD), sealed, SEAL_OVERHEAD - 1, opened, &got), EINVAL);
        /* truncated by one byte: the tag no longer matches */
        ASSERT_ERR(seal_decrypt(KEY, AAD, sizeof(AAD), sealed, sizeof(sealed) - 1, opened, &got), EBADMSG);
}

TEST(seal_key_parse_hex_and_base64)
{
        uint8_t k[SEAL_KEY_BYTES];
        ASSERT_OK(seal_key_parse("  3031323334353637383961626364656630313233343536373839616263646566\n", k));
        ASSERT_TRUE(memcmp(k, KEY, sizeof(k)) == 0);
        memset(k, 0, sizeof(k));
        ASSERT_OK(seal_key_parse("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", k));
        ASSERT_TRUE(memcmp(k, KEY, sizeof(k)) == 0);
        ASSERT_ERR(seal_key_parse("", k), EINVAL);
        ASSERT_ERR(seal_key_parse("30313233", k), EINVAL);                       /* 4 bytes */
        ASSERT_ERR(seal_key_parse("zz31323334353637383961626364656630313233343536373839616263646566", k), EINVAL);
        ASSERT_ERR(seal_key_parse("MDEyMzQ1Njc4OWFiY2RlZg==", k), EINVAL);       /* 16 bytes */
        ASSERT_ERR(seal_key_parse(NULL, k), EINVAL);
}

TEST(seal_key_id_is_stable_and_not_the_key)
{
        char a[SEAL_KEY_ID_LEN + 1], b[SEAL_KEY_ID_LEN + 1];
        uint8_t other[SEAL_KEY_BYTES];
        memcpy(other, KEY, sizeof(other));
        other[0] ^= 1;
        seal_key_id(KEY, a);
        ASSERT_U64_EQ(strlen(a), SEAL_KEY_ID_LEN);
        seal_key_id(KEY, b);
        ASSERT_STREQ(a, b);
        seal_key_id(other, b);
        ASSERT_TRUE(strcmp(a, b) != 0);
        ASSERT_TRUE(strstr(a, "3031") == NULL);
}
