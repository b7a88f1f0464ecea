/* tenant/webhooks.c: the signature (a fixed vector: what a receiver
 * computes), the URL rules against server-side request forgery (literal
 * addresses only, so no DNS is needed), and the sealed signing secret
 * (opens for its own row only). */
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "tap.h"
#include "tenant/webhooks.h"

TEST(signature_is_hmac_sha256_of_t_dot_body)
{
        char sig[WEBHOOK_SIGNATURE_MAX];
        const char *body = "{\"a\":1}";
        ASSERT_OK(webhook_sign("whsec_test", 1700000000, body, strlen(body), sig));
        /* python3: hmac.new(b"whsec_test", b'1700000000.{"a":1}', hashlib.sha256).hexdigest() */
        ASSERT_STREQ(sig, "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789");
}

static int check(const char *url, bool allow_private)
{
        struct err e = {};
        int r = webhook_url_check(url, allow_private, &e);
        err_done(&e);
        return r;
}

TEST(internal_addresses_are_refused)
{
        static const char *const refused[] = {
                "http://127.0.0.1/h",        "http://127.9.9.9:8080/h",     "http://10.0.0.1/h",
                "http://172.16.5.4/h",       "http://172.31.255.255/h",     "http://192.168.0.1/h",
                "http://169.254.169.254/x",  "http://100.64.0.1/h",         "http://0.0.0.0/h",
                "http://224.0.0.1/h",        "http://255.255.255.255/h",    "http://[::1]/h",
                "http://[fe80::1]/h",        "http://[fc00::1]/h",          "http://[::ffff:10.0.0.1]/h",
                "http://[::]/h",             "https://198.18.0.1/h",
        };
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
                if (check(refused[i], false) != -EACCES)
                        TAP_FAIL("%s was not refused", refused[i]);
                ASSERT_OK(check(refused[i], true));
        }
        static const char *const allowed[] = { "http://8.8.8.8/h", "https://172.32.0.1:8443/h",
                                               "http://[2001:4860::8888]/h", "https://1.1.1.1/h" };
        for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
                if (check(allowed[i], false) != 0)
                        TAP_FAIL("%s was refused", allowed[i]);
}

TEST(only_http_urls_with_a_host)
{
        static const char *const bad[] = { "ftp://8.8.8.8/x", "file:///etc/passwd", "8.8.8.8", "http://",
                                           "http://u:p@8.8.8.8/", "gopher://8.8.8.8/" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (check(bad[i], true) != -EINVAL)
                        TAP_FAIL("%s was accepted", bad[i]);
        char *longer = malloc(WEBHOOK_URL_MAX + 32);
        ASSERT_NOT_NULL(longer);
        memset(longer, 'a', WEBHOOK_URL_MAX + 31);
        memcpy(longer, "http://8.8.8.8/", 15);
        longer[WEBHOOK_URL_MAX + 31] = '\0';
        ASSERT_ERR(check(longer, true), EINVAL);
        free(longer);
}
