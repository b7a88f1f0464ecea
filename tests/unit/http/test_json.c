/* Shortest round-trip doubles in the server's JSON (src/http/json.c). */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "http/server.h"
#include "tap.h"

static void expect_dump(json_t *j, const char *want)
{
        char *got = http_json_dump(j);
        json_decref(j);
        ASSERT_STREQ(got, want);
        free(got);
}

static void expect_real(double v, const char *want)
{
        expect_dump(json_real(v), want);
        /* And it reads back as the very same double. */
        json_t *back = json_loads(want, JSON_DECODE_ANY, NULL);
        ASSERT_TRUE(json_is_real(back));
        double r = json_real_value(back);
        ASSERT_TRUE(memcmp(&r, &v, sizeof(v)) == 0);
        json_decref(back);
}

TEST(shortest_doubles)
{
        expect_real(3.5223279999999999, "3.522328");
        expect_real(0.1, "0.1");
        expect_real(0.1 + 0.2, "0.30000000000000004");
        expect_real(1.0 / 3, "0.3333333333333333");
        expect_real(1e21, "1e21");
        expect_real(5e-324, "5e-324");
        expect_real(DBL_MAX, "1.7976931348623157e308");
        expect_real(-0.0, "-0.0");
        expect_real(3.0, "3.0"); /* stays a real, as jansson prints it */
        expect_real(-2.5e-7, "-2.5e-7");
        expect_real(123456789012.5, "123456789012.5");
}

TEST(integers_and_strings_untouched)
{
        expect_dump(json_integer(12345678901234567LL), "12345678901234567");
        expect_dump(json_integer(-7), "-7");
        expect_dump(json_pack("{s:s, s:[s, f, i]}", "s", "3.5223279999999999 \"x\\\" 0.10000000000000001",
                              "a", "-1e+021", 0.1, 10),
                    "{\"s\":\"3.5223279999999999 \\\"x\\\\\\\" 0.10000000000000001\",\"a\":[\"-1e+021\",0.1,10]}");
        expect_dump(json_pack("{s:f}", "k\"1.5000000000000001", 2.5),
                    "{\"k\\\"1.5000000000000001\":2.5}");
}

TEST(shorten_rewrites_only_reals_outside_strings)
{
        char *s = http_json_shorten("[0.10000000000000001,\"0.10000000000000001\",7,1.0e+21,true]");
        ASSERT_STREQ(s, "[0.1,\"0.10000000000000001\",7,1e21,true]");
        free(s);
}
