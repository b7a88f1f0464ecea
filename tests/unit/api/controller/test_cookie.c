/* api/controller/cookie.c: reading one cookie out of a Cookie header. */
#include <errno.h>
#include <string.h>

#include "api/controller/controller.h"
#include "tap.h"

static const char *get(const char *header, const char *name, int *ret)
{
        static char out[64];
        out[0] = '\0';
        *ret = ctl_cookie_get(header, name, out, sizeof(out));
        return out;
}

TEST(cookie_finds_the_named_pair)
{
        int r;
        ASSERT_STREQ(get("s=1", "s", &r), "1");
        ASSERT_EQ(r, 0);
        ASSERT_STREQ(get("a=1; s=2; b=3", "s", &r), "2");
        ASSERT_STREQ(get("a=1;s=2", "s", &r), "2");
        ASSERT_STREQ(get("  s = 2 ;", "s", &r), "2");
        ASSERT_STREQ(get("s=\"quoted\"", "s", &r), "quoted");
        ASSERT_STREQ(get("s=first; s=second", "s", &r), "first");
        ASSERT_STREQ(get("s=", "s", &r), "");
        ASSERT_EQ(r, 0);
        ASSERT_STREQ(get("s=a=b", "s", &r), "a=b");
        ASSERT_EQ(r, 0);
}

TEST(cookie_names_match_exactly)
{
        int r;
        get("xs=1; sx=2; S=3", "s", &r);
        ASSERT_EQ(r, -ENOENT);
        get("", "s", &r);
        ASSERT_EQ(r, -ENOENT);
        get(NULL, "s", &r);
        ASSERT_EQ(r, -ENOENT);
        get("s", "s", &r);
        ASSERT_EQ(r, -ENOENT);
        get(";;;", "s", &r);
        ASSERT_EQ(r, -ENOENT);
        get("s=1", "", &r);
        ASSERT_EQ(r, -ENOENT);
}

TEST(cookie_refuses_bad_values)
{
        int r;
        get("s=a b", "s", &r);
        ASSERT_EQ(r, -EINVAL);
        get("s=a\\b", "s", &r);
        ASSERT_EQ(r, -EINVAL);
        get("s=\"a", "s", &r);
        ASSERT_EQ(r, -EINVAL);
        get("s=a,b", "s", &r);
        ASSERT_EQ(r, -EINVAL);
        get("s=\x01", "s", &r);
        ASSERT_EQ(r, -EINVAL);
        char big[200];
        memset(big, 'x', sizeof(big));
        memcpy(big, "s=", 2);
        big[199] = '\0';
        get(big, "s", &r);
        ASSERT_EQ(r, -ENOBUFS);
}
