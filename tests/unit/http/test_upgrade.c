/* Raw upgrades over real TCP: the handler's headers go out with the 101,
 * bytes the client sent with the request head reach run(), the socket
 * then carries any bytes both ways (an echo here), ops->free runs once, the
 * slot is given back, and a server stop ends an upgrade that is still open
 * (run sees EOF). */
#include <stdlib.h>

#include "base/log.h"
#include "httpc.h"

static struct {
        int freed, ran, run_done;
        size_t extra_len;
} g;

/* Echoes until EOF; the first bytes echoed are those sent with the head. */
static void echo_run(int fd, const void *extra, size_t extra_len, void *ctx)
{
        (void)ctx;
        __atomic_store_n(&g.extra_len, extra_len, __ATOMIC_RELEASE);
        __atomic_store_n(&g.ran, 1, __ATOMIC_RELEASE);
        echo_until_eof(fd, extra, extra_len);
        __atomic_store_n(&g.run_done, 1, __ATOMIC_RELEASE);
}

static void echo_free(void *ctx)
{
        (void)ctx;
        __atomic_add_fetch(&g.freed, 1, __ATOMIC_RELEASE);
}

static const struct http_upgrade_ops echo_ops = { echo_run, echo_free };

static void h_raw(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_upgrade_raw(res, &echo_ops, NULL));
        ASSERT_OK(http_response_header(res, "Upgrade", "echo/1"));
        ASSERT_OK(http_response_header(res, "X-Echo", "yes"));
}

static const struct route routes[] = {
        { "GET", "/raw", h_raw, ROUTE_BLOCKING, NULL },
};

static struct http_server *start(unsigned max_streams)
{
        log_set_level(LOG_WARN);
        struct http_options opt = test_options();
        opt.max_streams = max_streams;
        struct http_server *s;
        ASSERT_OK(http_server_new(&opt, NULL, &s));
        ASSERT_OK(http_group_routes(http_server_group(s, NULL, NULL, NULL), routes, ARRAY_SIZE(routes)));
        ASSERT_OK(http_server_start(s));
        return s;
}

static int raw_connect(unsigned port, const char *early)
{
        int fd = tcp_connect(port);
        send_fmt(fd, "GET /raw HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: echo/1\r\n\r\n%s",
                 early);
        struct resp r;
        memset(&r, 0, sizeof(r));
        read_head(fd, &r);
        ASSERT_EQ(r.status, 101);
        char v[64];
        ASSERT_STREQ(resp_header(&r, "Upgrade", v, sizeof(v)), "echo/1");
        ASSERT_STREQ(resp_header(&r, "X-Echo", v, sizeof(v)), "yes");
        ASSERT_TRUE(resp_header(&r, "Connection", v, sizeof(v)) && strcasestr(v, "upgrade"));
        return fd;
}

static void expect_read(int fd, const char *want)
{
        size_t n = strlen(want), got = 0;
        char b[256];
        while (got < n) {
                ssize_t k = read(fd, b + got, n - got);
                if (k <= 0)
                        TAP_FAIL("connection ended after %zu of %zu bytes", got, n);
                got += (size_t)k;
        }
        ASSERT_TRUE(memcmp(b, want, n) == 0);
}

TEST(raw_upgrade_echoes_bytes_both_ways)
{
        memset(&g, 0, sizeof(g));
        struct http_server *s = start(8);
        int fd = raw_connect(http_server_port(s), "");
        send_str(fd, "hello\x01\x02");
        expect_read(fd, "hello\x01\x02");
        ASSERT_EQ(http_server_streams(s), 1);
        shutdown(fd, SHUT_WR); /* run sees EOF and returns */
        ASSERT_TRUE(wait_flag(&g.freed, 2000));
        close(fd);
        ASSERT_EQ(__atomic_load_n(&g.freed, __ATOMIC_ACQUIRE), 1);
        ASSERT_EQ(http_server_streams(s), 0);
        http_server_stop(s);
}

TEST(raw_upgrade_gets_bytes_sent_with_the_head)
{
        memset(&g, 0, sizeof(g));
        struct http_server *s = start(8);
        /* MHD may or may not have read them with the head: either way
         * they must come back first. */
        int fd = raw_connect(http_server_port(s), "early");
        expect_read(fd, "early");
        close(fd);
        ASSERT_TRUE(wait_flag(&g.freed, 2000));
        http_server_stop(s);
}

TEST(raw_upgrade_beyond_max_streams_is_503)
{
        memset(&g, 0, sizeof(g));
        struct http_server *s = start(1);
        int fd = raw_connect(http_server_port(s), "");
        ASSERT_TRUE(wait_flag(&g.ran, 2000));
        struct resp r;
        request(http_server_port(s), "GET", "/raw", "Connection: Upgrade\r\nUpgrade: echo/1\r\n", &r);
        ASSERT_EQ(r.status, 503);
        resp_free(&r);
        close(fd);
        ASSERT_TRUE(wait_flag(&g.freed, 2000));
        http_server_stop(s);
}

TEST(server_stop_ends_an_open_raw_upgrade)
{
        memset(&g, 0, sizeof(g));
        struct http_server *s = start(8);
        int fd = raw_connect(http_server_port(s), "");
        ASSERT_TRUE(wait_flag(&g.ran, 2000));
        http_server_stop(s); /* returns only once run has returned */
        ASSERT_EQ(__atomic_load_n(&g.run_done, __ATOMIC_ACQUIRE), 1);
        ASSERT_EQ(__atomic_load_n(&g.freed, __ATOMIC_ACQUIRE), 1);
        close(fd);
}
