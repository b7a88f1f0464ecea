/* api/controller/sso_provider.c: which provider URLs the daemon may call
 * (https anywhere; plain http only to a loopback host). */
#include "api/controller/sso.h"
#include "tap.h"

TEST(sso_url_allowed_https_and_loopback_http)
{
        ASSERT_TRUE(sso_url_allowed("https://idp.example/.well-known/openid-configuration"));
        ASSERT_TRUE(sso_url_allowed("http://127.0.0.1:8080/token"));
        ASSERT_TRUE(sso_url_allowed("http://127.3.4.5/x"));
        ASSERT_TRUE(sso_url_allowed("http://localhost:9/jwks"));
        ASSERT_TRUE(sso_url_allowed("http://[::1]:8080/x"));
        ASSERT_TRUE(sso_url_allowed("http://[::1]"));
        ASSERT_FALSE(sso_url_allowed("https://"));
        ASSERT_FALSE(sso_url_allowed("http://idp.example/token"));
        ASSERT_FALSE(sso_url_allowed("http://127.0.0.1.evil.example/x"));
        ASSERT_FALSE(sso_url_allowed("http://127.0.0.1@evil.example/x"));
        ASSERT_FALSE(sso_url_allowed("http://evil.example#@127.0.0.1/"));
        ASSERT_FALSE(sso_url_allowed("http://10.0.0.1/x"));
        ASSERT_FALSE(sso_url_allowed("http://[::2]/x"));
        ASSERT_FALSE(sso_url_allowed("http:///x"));
        ASSERT_FALSE(sso_url_allowed("file:///etc/passwd"));
        ASSERT_FALSE(sso_url_allowed("gopher://127.0.0.1/"));
        ASSERT_FALSE(sso_url_allowed(""));
}
