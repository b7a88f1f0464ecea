/* Unit tests for the pure helpers of src/http/ (router.c, server.c): route pattern
 * matching, listen-address parsing and the loopback check. */
#include <errno.h>

#include "base/util.h"
#include "http/server.h"
#include "tap.h"

/* Matches with a fresh capture array; captures beyond the filled ones stay
 * NULL so tests can count them. */
struct m {
        bool ok;
        const char *cap[HTTP_MAX_CAPTURES];
        char buf[256];
};

/* Fills *r in place: the captures point into r->buf. */
static bool match(struct m *r, const char *pattern, const char *path, size_t buflen)
{
        memset(r, 0, sizeof(*r));
        ASSERT_TRUE(buflen <= sizeof(r->buf));
        r->ok = http_match(pattern, path, r->cap, r->buf, buflen);
        return r->ok;
}

static size_t ncaps(const struct m *r)
{
        size_t n = 0;
        while (n < HTTP_MAX_CAPTURES && r->cap[n])
                n++;
        return n;
}

TEST(match_literal)
{
        struct m r;
        match(&r, "/health", "/health", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_EQ(ncaps(&r), 0);
        ASSERT_TRUE(match(&r, "/", "/", 64));
        ASSERT_TRUE(!match(&r, "/health", "/health/", 64));
        ASSERT_TRUE(!match(&r, "/health", "/healthz", 64));
        ASSERT_TRUE(!match(&r, "/health", "/heal", 64));
        ASSERT_TRUE(!match(&r, "/health", "/Health", 64));
        ASSERT_TRUE(!match(&r, "/health", "", 64));
        ASSERT_TRUE(!match(&r, "/health", "health", 64));
        ASSERT_TRUE(!match(&r, "/", "/x", 64));
}

TEST(match_params)
{
        struct m r;
        match(&r, "/execute/:lang", "/execute/python", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_EQ(ncaps(&r), 1);
        ASSERT_STREQ(r.cap[0], "python");

        match(&r, "/sandboxes/:id/contexts/:ctx", "/sandboxes/sb_123/contexts/c-9", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_EQ(ncaps(&r), 2);
        ASSERT_STREQ(r.cap[0], "sb_123");
        ASSERT_STREQ(r.cap[1], "c-9");

        match(&r, "/a/:x/b/:y", "/a/1/b/2", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_STREQ(r.cap[0], "1");
        ASSERT_STREQ(r.cap[1], "2");

        /* a param takes one whole segment, never an empty one */
        ASSERT_TRUE(!match(&r, "/execute/:lang", "/execute/", 64));
        ASSERT_TRUE(!match(&r, "/execute/:lang", "/execute", 64));
        ASSERT_TRUE(!match(&r, "/execute/:lang", "/execute/python/extra", 64));
        ASSERT_TRUE(!match(&r, "/execute/:lang", "/execute/python/", 64));
        ASSERT_TRUE(!match(&r, "/a/:x/b/:y", "/a/1/c/2", 64));
        ASSERT_TRUE(!match(&r, "/a/:x/b/:y", "/a//b/2", 64));
        ASSERT_TRUE(!match(&r, "/a/:x/b", "/a/1/b/extra", 64));
        /* odd but legal characters stay in the capture verbatim */
        match(&r, "/f/:name", "/f/a.b%20c:d", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_STREQ(r.cap[0], "a.b%20c:d");
}

TEST(match_trailing_star)
{
        struct m r;
        match(&r, "/sandboxes/:id/files/*", "/sandboxes/abc/files/dir/sub/f.txt", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_EQ(ncaps(&r), 2);
        ASSERT_STREQ(r.cap[0], "abc");
        ASSERT_STREQ(r.cap[1], "dir/sub/f.txt");

        match(&r, "/sandboxes/:id/files/*", "/sandboxes/abc/files/", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_EQ(ncaps(&r), 2);
        ASSERT_STREQ(r.cap[1], ""); /* the rest may be empty */

        /* without the slash before the star the plain matcher says no (the
         * server's pattern_matches() adds that case) */
        ASSERT_TRUE(!match(&r, "/sandboxes/:id/files/*", "/sandboxes/abc/files", 64));
        ASSERT_TRUE(!match(&r, "/sandboxes/:id/files/*", "/sandboxes/abc/filez/x", 64));
        ASSERT_TRUE(!match(&r, "/sandboxes/:id/files/*", "/sandboxes//files/x", 64));

        match(&r, "/static/*", "/static/a//b/../c", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_STREQ(r.cap[0], "a//b/../c");
}

TEST(match_capture_buffer_overflow)
{
        /* "python" + NUL needs 7 bytes */
        struct m r;
        match(&r, "/execute/:lang", "/execute/python", 7);
        ASSERT_TRUE(r.ok);
        ASSERT_STREQ(r.cap[0], "python");
        ASSERT_TRUE(!match(&r, "/execute/:lang", "/execute/python", 6));
        ASSERT_TRUE(!match(&r, "/execute/:lang", "/execute/python", 1));
        ASSERT_TRUE(!match(&r, "/execute/:lang", "/execute/python", 0));

        /* two captures share the buffer: "ab\0" + "cd\0" = 6 */
        match(&r, "/:x/:y", "/ab/cd", 6);
        ASSERT_TRUE(r.ok);
        ASSERT_STREQ(r.cap[0], "ab");
        ASSERT_STREQ(r.cap[1], "cd");
        ASSERT_TRUE(!match(&r, "/:x/:y", "/ab/cd", 5));

        /* the star capture too: "id\0" + "xyz\0" = 7 */
        match(&r, "/:a/*", "/id/xyz", 7);
        ASSERT_TRUE(r.ok);
        ASSERT_STREQ(r.cap[1], "xyz");
        ASSERT_TRUE(!match(&r, "/:a/*", "/id/xyz", 6));

        /* nothing is written past buflen */
        struct m g;
        memset(&g, 0, sizeof(g));
        memset(g.buf, '#', sizeof(g.buf));
        ASSERT_TRUE(!http_match("/:x/:y", "/aaaa/bbbbbbbbbb", g.cap, g.buf, 8));
        for (size_t i = 8; i < sizeof(g.buf); i++)
                if (g.buf[i] != '#')
                        TAP_FAIL("byte %zu past buflen written", i);
}

TEST(match_too_many_captures)
{
        struct m r;
        match(&r, "/:a/:b/:c/:d", "/1/2/3/4", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_EQ(ncaps(&r), HTTP_MAX_CAPTURES);
        ASSERT_STREQ(r.cap[3], "4");
        ASSERT_TRUE(!match(&r, "/:a/:b/:c/:d/:e", "/1/2/3/4/5", 64));
        ASSERT_TRUE(!match(&r, "/:a/:b/:c/:d/*", "/1/2/3/4/5", 64));
        match(&r, "/:a/:b/:c/*", "/1/2/3/4/5", 64);
        ASSERT_TRUE(r.ok);
        ASSERT_STREQ(r.cap[3], "4/5");
}

/* ---- listen addresses ---- */

TEST(parse_listen_ok)
{
        char host[64];
        unsigned port = 1;

        ASSERT_OK(http_parse_listen("127.0.0.1:8787", host, sizeof(host), &port));
        ASSERT_STREQ(host, "127.0.0.1");
        ASSERT_EQ(port, 8787);

        ASSERT_OK(http_parse_listen("[::1]:80", host, sizeof(host), &port));
        ASSERT_STREQ(host, "::1");
        ASSERT_EQ(port, 80);

        ASSERT_OK(http_parse_listen("localhost:0", host, sizeof(host), &port));
        ASSERT_STREQ(host, "localhost");
        ASSERT_EQ(port, 0);

        ASSERT_OK(http_parse_listen("0.0.0.0:65535", host, sizeof(host), &port));
        ASSERT_STREQ(host, "0.0.0.0");
        ASSERT_EQ(port, 65535);

        ASSERT_OK(http_parse_listen("[fe80::1%eth0]:443", host, sizeof(host), &port));
        ASSERT_STREQ(host, "fe80::1%eth0");
        ASSERT_EQ(port, 443);

        /* host exactly fills the buffer (9 chars + NUL) */
        ASSERT_OK(http_parse_listen("127.0.0.1:1", host, 10, &port));
        ASSERT_STREQ(host, "127.0.0.1");
        ASSERT_OK(http_parse_listen("[::1]:2", host, 4, &port));
        ASSERT_STREQ(host, "::1");
}

TEST(parse_listen_bad)
{
        static const char *const bad[] = {
                "",              "127.0.0.1",     "127.0.0.1:",    ":",
                "host:65536",    "host:99999999999999999999",     "host:abc",
                "host:80x",      "host:8 0",      "[::1]80",       "[::1",
                "[::1]:",        "[::1]",         "[]x:80",        "host:-1",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char host[64] = "untouched";
                unsigned port = 4242;
                int r = http_parse_listen(bad[i], host, sizeof(host), &port);
                if (r != -EINVAL)
                        TAP_FAIL("'%s': r=%d host='%s' port=%u", bad[i], r, host, port);
                ASSERT_EQ(port, 4242);
        }
        /* host does not fit */
        char small[9];
        unsigned port = 4242;
        ASSERT_EQ(http_parse_listen("127.0.0.1:80", small, sizeof(small), &port), -EINVAL);
        ASSERT_EQ(http_parse_listen("[::ffff:1.2.3.4]:80", small, sizeof(small), &port), -EINVAL);
        ASSERT_EQ(port, 4242);
}

TEST(host_is_loopback)
{
        static const char *const yes[] = { "127.0.0.1", "127.0.0.2", "127.1.2.3", "127.255.255.255",
                                           "::1", "0:0:0:0:0:0:0:1", "localhost" };
        static const char *const no[] = { "0.0.0.0",  "10.0.0.1",   "192.168.1.1", "128.0.0.1",
                                          "126.255.255.255", "::",  "::2",         "fe80::1",
                                          "example.com", "",        "localhost.",  "localhost.example.com",
                                          "127.0.0.1.nip.io", "1.127.0.0" };
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
                if (!http_host_is_loopback(yes[i]))
                        TAP_FAIL("'%s' should be loopback", yes[i]);
        for (size_t i = 0; i < ARRAY_SIZE(no); i++)
                if (http_host_is_loopback(no[i]))
                        TAP_FAIL("'%s' should not be loopback", no[i]);
}

/* A request's capture buffer holds its path's length plus a NUL per capture
 * (server.c conn_state_new): captures are pieces of the path, so every
 * match a large buffer finds fits in that room too. */
TEST(captures_fit_in_the_path_length)
{
        static const char *const patterns[] = { "/v1/sandbox/:id/file/*", "/:a/:b/:c/*", "/x/:id", "/*",
                                                "/sandboxes/:id/files/*", "/:a/:b/:c/:d" };
        static const char alphabet[] = "ab/x";
        char path[64], big[8192], small[64 + HTTP_MAX_CAPTURES + 1];
        srand(11);
        for (int i = 0; i < 200000; i++) {
                size_t n = 1 + (size_t)rand() % 40;
                path[0] = '/';
                for (size_t k = 1; k < n; k++)
                        path[k] = alphabet[rand() % 4];
                path[n] = '\0';
                const char *pattern = patterns[(size_t)rand() % ARRAY_SIZE(patterns)];
                const char *cap_big[HTTP_MAX_CAPTURES] = { 0 }, *cap_small[HTTP_MAX_CAPTURES] = { 0 };
                bool in_big = http_match(pattern, path, cap_big, big, sizeof(big));
                bool in_small = http_match(pattern, path, cap_small, small, n + HTTP_MAX_CAPTURES + 1);
                if (in_big != in_small)
                        TAP_FAIL("'%s' on '%s': %d with 8 KiB, %d with the path's length", pattern, path, in_big,
                                 in_small);
                for (size_t c = 0; in_big && in_small && c < HTTP_MAX_CAPTURES && cap_big[c]; c++)
                        ASSERT_STREQ(cap_big[c], cap_small[c]);
        }
}
