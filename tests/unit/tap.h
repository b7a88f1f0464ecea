/* A tiny TAP unit-test harness (libuv/crun style): TEST(name) registers a
 * test; the runner forks each test with a timeout, prints TAP and a final
 * "N passed, N failed, N skipped" line. Exit 77 from a test means skip. */
#pragma once

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*tap_fn)(void);
void tap_register(const char *name, tap_fn fn);

#define TEST(name)                                                           \
        static void test_##name(void);                                       \
        __attribute__((constructor)) static void register_##name(void)       \
        {                                                                    \
                tap_register(#name, test_##name);                            \
        }                                                                    \
        static void test_##name(void)

#define TAP_FAIL(...)                                                        \
        do {                                                                 \
                fprintf(stderr, "# %s:%d: ", __FILE__, __LINE__);            \
                fprintf(stderr, __VA_ARGS__);                                \
                fprintf(stderr, "\n");                                       \
                exit(1);                                                     \
        } while (0)

#define ASSERT_TRUE(x)                                                       \
        do {                                                                 \
                if (!(x))                                                    \
                        TAP_FAIL("assertion failed: %s", #x);                \
        } while (0)
#define ASSERT_EQ(a, b)                                                      \
        do {                                                                 \
                long long _a = (long long)(a), _b = (long long)(b);          \
                if (_a != _b)                                                \
                        TAP_FAIL("%s == %s: %lld != %lld", #a, #b, _a, _b);  \
        } while (0)
#define ASSERT_OK(x) ASSERT_EQ((x) < 0 ? (x) : 0, 0)
#define ASSERT_STREQ(a, b)                                                   \
        do {                                                                 \
                const char *_a = (a), *_b = (b);                             \
                if (!_a || !_b || strcmp(_a, _b) != 0)                       \
                        TAP_FAIL("%s == %s: '%s' != '%s'", #a, #b,           \
                                 _a ? _a : "(null)", _b ? _b : "(null)");    \
        } while (0)
#define SKIP(why)                                                            \
        do {                                                                 \
                fprintf(stderr, "# skip: %s\n", why);                        \
                exit(77);                                                    \
        } while (0)
