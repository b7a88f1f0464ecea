/* Unit tests for base64 (src/base/b64.c): atob()-compatible decoding (the
 * WHATWG forgiving-base64 rules) and padded encoding. */
#include <errno.h>

#include "base/b64.h"
#include "base/util.h"
#include "tap.h"

static void decodes_to(const char *in, const char *want, size_t want_len)
{
        unsigned char *out = NULL;
        size_t len = 99;
        int r = b64_decode(in, strlen(in), &out, &len);
        if (r != 0)
                TAP_FAIL("b64_decode('%s') = %d", in, r);
        ASSERT_EQ(len, want_len);
        ASSERT_TRUE(memcmp(out, want, want_len) == 0);
        ASSERT_EQ(out[len], 0);
        free(out);
}

TEST(b64_decode_forgiving)
{
        decodes_to("", "", 0);
        decodes_to("YQ", "a", 1);
        decodes_to("YQ==", "a", 1);
        decodes_to("YWI", "ab", 2);
        decodes_to("YWI=", "ab", 2);
        decodes_to("YWJj", "abc", 3);
        decodes_to(" Y W\nJ j\t\r\f", "abc", 3);
        decodes_to("AP8A", "\x00\xff\x00", 3);
        decodes_to("+/+/", "\xfb\xff\xbf", 3);
}

TEST(b64_decode_rejects)
{
        static const char *bad[] = { "Y", "!!!!", "YQ=a", "YQ===", "a===", "YQ==YQ==", "YW-_", "=", "YWJjZ",
                                     "YQ=", "Y\vQ" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                unsigned char *out = NULL;
                size_t len = 0;
                int r = b64_decode(bad[i], strlen(bad[i]), &out, &len);
                if (r != -EINVAL)
                        TAP_FAIL("b64_decode('%s') = %d, want -EINVAL", bad[i], r);
                ASSERT_TRUE(out == NULL);
        }
}

TEST(b64_encode_roundtrip)
{
        unsigned char all[256];
        for (int i = 0; i < 256; i++)
                all[i] = (unsigned char)i;
        for (size_t n = 0; n <= sizeof(all); n++) {
                char *enc = b64_encode(all, n);
                ASSERT_TRUE(enc != NULL);
                ASSERT_EQ(strlen(enc), (n + 2) / 3 * 4);
                unsigned char *dec = NULL;
                size_t len = 0;
                ASSERT_OK(b64_decode(enc, strlen(enc), &dec, &len));
                ASSERT_EQ(len, n);
                ASSERT_TRUE(memcmp(dec, all, n) == 0);
                free(dec);
                free(enc);
        }
        char *enc = b64_encode((const unsigned char *)"ab", 2);
        ASSERT_STREQ(enc, "YWI=");
        free(enc);
}
