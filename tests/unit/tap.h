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
#define ASSERT_FALSE(x) ASSERT_TRUE(!(x))

/* Typed comparisons: each operand is evaluated exactly once, and a failure
 * prints both expressions and both values. */
#define TAP_CMP_(type, fmt, a, op, b)                                        \
        do {                                                                 \
                type _tap_a = (type)(a);                                     \
                type _tap_b = (type)(b);                                     \
                if (!(_tap_a op _tap_b))                                     \
                        TAP_FAIL("%s %s %s: " fmt " vs " fmt, #a, #op, #b,   \
                                 _tap_a, _tap_b);                            \
        } while (0)
#define ASSERT_EQ(a, b) TAP_CMP_(long long, "%lld", a, ==, b)
#define ASSERT_NE(a, b) TAP_CMP_(long long, "%lld", a, !=, b)
#define ASSERT_LT(a, b) TAP_CMP_(long long, "%lld", a, <, b)
#define ASSERT_LE(a, b) TAP_CMP_(long long, "%lld", a, <=, b)
#define ASSERT_GT(a, b) TAP_CMP_(long long, "%lld", a, >, b)
#define ASSERT_GE(a, b) TAP_CMP_(long long, "%lld", a, >=, b)
/* Unsigned 64-bit values (sizes, limits, UINT64_MAX). */
#define ASSERT_U64_EQ(a, b) TAP_CMP_(unsigned long long, "%llu", a, ==, b)
#define ASSERT_U64_LE(a, b) TAP_CMP_(unsigned long long, "%llu", a, <=, b)
#define ASSERT_PTR_EQ(a, b) TAP_CMP_(const void *, "%p", a, ==, b)
#define ASSERT_NULL(p) ASSERT_PTR_EQ(p, NULL)
#define ASSERT_NOT_NULL(p)                                                   \
        do {                                                                 \
                if ((p) == NULL)                                             \
                        TAP_FAIL("%s is NULL", #p);                          \
        } while (0)

/* x returns 0 (or any value >= 0) or -errno: evaluated once, and a failure
 * names the errno. */
#define ASSERT_OK(x)                                                         \
        do {                                                                 \
                long long _tap_r = (long long)(x);                           \
                if (_tap_r < 0)                                              \
                        TAP_FAIL("%s failed: %lld (%s)", #x, _tap_r,         \
                                 strerror((int)-_tap_r));                    \
        } while (0)
/* x (0 or -errno style) fails with exactly -err. */
#define ASSERT_ERR(x, err)                                                   \
        do {                                                                 \
                long long _tap_r = (long long)(x), _tap_e = -(long long)(err); \
                if (_tap_r != _tap_e)                                        \
                        TAP_FAIL("%s: %lld (%s), expected %lld (%s)", #x,    \
                                 _tap_r, _tap_r < 0 ? strerror((int)-_tap_r) : "no error", \
                                 _tap_e, strerror((int)-_tap_e));            \
        } while (0)
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
