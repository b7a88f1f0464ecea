/* Shortest round-trip doubles in the server's JSON (src/http/json.c). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
        expect_real(20.0, "20.0");
        expect_real(1e6, "1000000.0");
        expect_real(1e15, "1e15");
        expect_real(4.9406564584124654e-320, "4.9407e-320"); /* subnormal: fewer digits */
}

/* The fewest digits that read back, by brute force. */
static void brute_shortest(double v, char *out, size_t len)
{
        for (int p = 1; p <= 17; p++) {
                snprintf(out, len, "%.*g", p, v);
                double r = strtod(out, NULL);
                if (memcmp(&r, &v, sizeof(v)) == 0)
                        return;
        }
}

/* A number's significant digits, without leading or trailing zeros. */
static void significant_digits(const char *s, char *out, size_t len)
{
        size_t n = 0;
        for (; *s && *s != 'e' && *s != 'E' && n + 1 < len; s++)
                if (*s >= '0' && *s <= '9' && (n || *s != '0'))
                        out[n++] = *s;
        while (n && out[n - 1] == '0')
                n--;
        out[n] = '\0';
}

/* The dump reads back as v with the brute force's digits, unless the
 * shortest text would be longer than jansson's own (a 16-digit integer's
 * exponent form): then jansson's text stays. */
static void expect_fewest_digits(double v)
{
        json_t *j = json_real(v);
        char *jansson = json_dumps(j, JSON_ENCODE_ANY);
        char *got = http_json_dump(j);
        char want[64], got_digits[64], want_digits[64];
        brute_shortest(v, want, sizeof(want));
        significant_digits(got, got_digits, sizeof(got_digits));
        significant_digits(want, want_digits, sizeof(want_digits));
        double r = strtod(got, NULL);
        ASSERT_TRUE(memcmp(&r, &v, sizeof(v)) == 0);
        if (strcmp(got, jansson) == 0 && strcmp(got_digits, want_digits) != 0)
                ASSERT_TRUE(strlen(want_digits) >= 16);
        else
                ASSERT_STREQ(got_digits, want_digits);
        json_decref(j);
        free(jansson);
        free(got);
}

/* Tried from 15 digits up (json.c): the same text as trying from 1 up, for
 * arbitrary bit patterns and for the durations the daemon reports. */
TEST(shortest_doubles_match_the_brute_force)
{
        srand(7);
        for (int i = 0; i < 20000; i++) {
                uint64_t bits = ((uint64_t)rand() << 42) ^ ((uint64_t)rand() << 21) ^ (uint64_t)rand();
                double v;
                memcpy(&v, &bits, sizeof(v));
                if (isfinite(v))
                        expect_fewest_digits(v);
                expect_fewest_digits((double)(rand() % 1000000000) / 1e6);
                expect_fewest_digits((double)(rand() % 100000) / 1000.0);
        }
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
