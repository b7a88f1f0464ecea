/* tenant/password.c and ratelimit.c: Argon2id hashing, password rules,
 * the failed-login windows. */
#include <string.h>

#include "tap.h"
#include "tenant/internal.h"

TEST(password_hash_and_verify)
{
        char a[256], b[256];
        ASSERT_OK(password_hash("correct horse 1", a, sizeof(a)));
        ASSERT_OK(password_hash("correct horse 1", b, sizeof(b)));
        /* Argon2id with the documented parameters, salted: two hashes differ. */
        ASSERT_EQ(strncmp(a, "$argon2id$v=19$m=19456,t=2,p=1$", 31), 0);
        ASSERT_TRUE(strcmp(a, b) != 0);
        ASSERT_TRUE(password_verify(a, "correct horse 1"));
        ASSERT_TRUE(password_verify(b, "correct horse 1"));
        ASSERT_FALSE(password_verify(a, "correct horse 2"));
        ASSERT_FALSE(password_verify(a, ""));
        ASSERT_FALSE(password_verify("$argon2id$garbage", "correct horse 1"));
        ASSERT_FALSE(password_verify("", "x"));
        ASSERT_ERR(password_hash("x", a, 20), ENOBUFS);
}

TEST(password_rules)
{
        struct err e = {};
        ASSERT_OK(tenant_password_check("abcdefghijk1", &e));
        ASSERT_OK(tenant_password_check("SecurePassword123!", &e));
        ASSERT_OK(tenant_password_check("ünïcödé-pässwörd-9", &e));
        const char *bad[] = { NULL, "", "abcdefghij1", "abcdefghijkl", "123456789012", "!!!!!!!!!!!!1" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ASSERT_ERR(tenant_password_check(bad[i], &e), EINVAL);
                ASSERT_EQ(e.reason, ERR_INVALID);
                err_done(&e);
        }
        char longpw[300];
        memset(longpw, 'a', sizeof(longpw));
        longpw[0] = '1';
        longpw[257] = '\0';
        ASSERT_ERR(tenant_password_check(longpw, &e), EINVAL);
        longpw[256] = '\0';
        ASSERT_OK(tenant_password_check(longpw, &e));
}

TEST(limiter_windows)
{
        struct login_limiter *l = limiter_new();
        ASSERT_NOT_NULL(l);
        ASSERT_U64_EQ(limiter_blocked(l, "a", 3, 10000, 1000), 0);
        limiter_fail(l, "a", 10000, 1000);
        limiter_fail(l, "a", 10000, 2000);
        ASSERT_U64_EQ(limiter_blocked(l, "a", 3, 10000, 2000), 0);
        limiter_fail(l, "a", 10000, 3000);
        /* Blocked until the window that began at 1000 ends (11000). */
        ASSERT_U64_EQ(limiter_blocked(l, "a", 3, 10000, 3000), 8);
        ASSERT_U64_EQ(limiter_blocked(l, "a", 3, 10000, 10999), 1);
        ASSERT_U64_EQ(limiter_blocked(l, "a", 3, 10000, 11000), 0);
        ASSERT_U64_EQ(limiter_blocked(l, "b", 3, 10000, 3000), 0);
        /* A failure after the window starts a new one. */
        limiter_fail(l, "a", 10000, 11000);
        ASSERT_U64_EQ(limiter_blocked(l, "a", 1, 10000, 11000), 10);
        limiter_reset(l, "a");
        ASSERT_U64_EQ(limiter_blocked(l, "a", 1, 10000, 11000), 0);
        /* Many names: bounded table, the oldest window is reused. */
        char name[32];
        for (int i = 0; i < 10000; i++) {
                snprintf(name, sizeof(name), "n%d", i);
                limiter_fail(l, name, 10000, 20000 + (uint64_t)i);
        }
        ASSERT_U64_EQ(limiter_blocked(l, "n9999", 1, 10000, 30000), 10);
        limiter_free(l);
        limiter_free(NULL);
}
