/* Unit tests for the loopback Host check (src/api/common/host_check.c). */
#include "api/common/host_check.h"
#include "tap.h"

TEST(loopback_literals_with_optional_port)
{
        static const char *const ok[] = { "127.0.0.1", "127.0.0.1:8787", "localhost", "LocalHost:1",
                                          "[::1]", "[::1]:65535", "localhost:12345" };
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                ASSERT_TRUE(api_host_is_loopback_literal(ok[i]));
}

TEST(everything_else_is_refused)
{
        static const char *const bad[] = { NULL, "", "attacker.example", "attacker.example:8787",
                                           "localhost.attacker.example", "127.0.0.1.nip.io", "127.0.0.2",
                                           "127.0.0.1:", "127.0.0.1:123456", "127.0.0.1:80x",
                                           "localhost:80:80", "::1", "[::1", "[::2]:80", "x@localhost",
                                           "LOCALHOST ", "[::1]:-1", "0.0.0.0" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (api_host_is_loopback_literal(bad[i]))
                        TAP_FAIL("accepted '%s'", bad[i] ? bad[i] : "(null)");
}
