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

struct miss {
        const char *header, *name;
        int want;
};

/* Each case fails with exactly its errno. */
static void check_misses(const struct miss *cases, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                int r;
                get(cases[i].header, cases[i].name, &r);
                if (r != cases[i].want)
                        TAP_FAIL("case %zu ('%s'): %d, expected %d", i, cases[i].header ? cases[i].header : "(null)",
                                 r, cases[i].want);
        }
}

TEST(cookie_names_match_exactly)
{
        static const struct miss cases[] = {
                { "xs=1; sx=2; S=3", "s", -ENOENT }, { "", "s", -ENOENT }, { NULL, "s", -ENOENT },
                { "s", "s", -ENOENT },               { ";;;", "s", -ENOENT }, { "s=1", "", -ENOENT },
        };
        check_misses(cases, sizeof(cases) / sizeof(cases[0]));
}

TEST(cookie_refuses_bad_values)
{
        static const struct miss cases[] = {
                { "s=a b", "s", -EINVAL }, { "s=a\\b", "s", -EINVAL }, { "s=\"a", "s", -EINVAL },
                { "s=a,b", "s", -EINVAL }, { "s=\x01", "s", -EINVAL },
        };
        check_misses(cases, sizeof(cases) / sizeof(cases[0]));
        char big[200];
        int r;
        memset(big, 'x', sizeof(big));
        memcpy(big, "s=", 2);
        big[199] = '\0';
        get(big, "s", &r);
        ASSERT_EQ(r, -ENOBUFS);
}
