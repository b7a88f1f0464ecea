/* http_forward over real TCP: a "front" server forwards everything to an
 * "upstream" one. What crosses (method, path, query, body, headers) minus
 * the caller's credentials and hop-by-hop fields; the reply relayed as it
 * comes: status and headers, a body, an SSE stream whose first event
 * reaches the client before the upstream sends the second, a big chunked
 * body, a raw upgrade's bytes both ways; an unreachable node is an error
 * the caller answers. And the pure pieces: query filter, path encoding,
 * URL parsing, header predicates. */
#include <stdlib.h>

#include "base/log.h"
#include "httpc.h"

static struct {
        char up_url[64];
        int client_got_one;         /* the test read the first SSE event */
        int two_after_one;          /* upstream sent event two only after that */
        int raw_freed;
} g;

/* ---- upstream ---- */

static bool collect(void *cls, const char *name, const char *value)
{
        json_object_set_new(cls, name, json_string(value));
        return true;
}

static void up_echo(struct http_request *req, struct http_response *res)
{
        json_t *h = json_object();
        http_headers_each(req, collect, h);
        char *q = http_query_string(req);
        http_json(res, 201, json_pack("{s:s, s:s, s:s, s:s%, s:o}", "method", req->method, "path", req->path,
                                      "query", q ? q : "", "body", req->body, req->body_len, "headers", h));
        free(q);
        http_response_header(res, "X-Up", "1");
        http_response_header(res, "X-Request-Id", "up");
}

static void sse_run(struct http_stream *s, void *ctx)
{
        (void)ctx;
        ASSERT_OK(http_sse_event(s, "one", NULL, "first"));
        bool got = wait_flag(&g.client_got_one, 5000);
        __atomic_store_n(&g.two_after_one, got, __ATOMIC_RELEASE);
        http_sse_event(s, "two", NULL, "second");
}

static const struct http_stream_ops sse_ops = { sse_run, NULL, NULL };

static void up_sse(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_stream(res, 200, NULL, &sse_ops, NULL));
        http_response_header(res, "X-Stream", "yes");
}

#define BIG (300 * 1000)

static void big_run(struct http_stream *s, void *ctx)
{
        (void)ctx;
        char b[1000];
        for (size_t i = 0; i < BIG; i += sizeof(b)) {
                for (size_t k = 0; k < sizeof(b); k++)
                        b[k] = (char)('a' + (i + k) % 26);
                if (http_stream_write(s, b, sizeof(b)) < 0)
                        return;
        }
}

static const struct http_stream_ops big_ops = { big_run, NULL, NULL };

static void up_big(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_stream(res, 200, "application/octet-stream", &big_ops, NULL));
}

static void up_nothing(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_bytes(res, 204, "text/plain", "", 0));
}

static void echo_run(int fd, const void *extra, size_t extra_len, void *ctx)
{
        (void)ctx;
        echo_until_eof(fd, extra, extra_len);
}

static void echo_free(void *ctx)
{
        (void)ctx;
        __atomic_add_fetch(&g.raw_freed, 1, __ATOMIC_RELEASE);
}

static const struct http_upgrade_ops echo_ops = { echo_run, echo_free };

static void up_raw(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_upgrade_raw(res, &echo_ops, NULL));
        ASSERT_OK(http_response_header(res, "Upgrade", "echo/1"));
}

static const struct route up_routes[] = {
        { "GET", "/echo/*", up_echo, 0, NULL },
        { "POST", "/echo/*", up_echo, 0, NULL },
        { "GET", "/sse", up_sse, 0, NULL },
        { "GET", "/big", up_big, 0, NULL },
        { "GET", "/nothing", up_nothing, 0, NULL },
        { "GET", "/raw", up_raw, ROUTE_BLOCKING, NULL },
};

/* ---- front ---- */

/* Sends raw on a new connection to port and reads the reply's head, which
 * must have status; the connection, left open for the body. */
static int open_expect(unsigned port, const char *raw, int status, struct resp *r)
{
        int fd = tcp_connect(port);
        send_str(fd, raw);
        memset(r, 0, sizeof(*r));
        read_head(fd, r);
        ASSERT_EQ(r->status, status);
        return fd;
}

static void h_forward(struct http_request *req, struct http_response *res)
{
        static const struct http_forward_header xh[] = { { "X-Sandboxd-Node", "front" } };
        static const char *const drop[] = { "X-Request-Id", NULL };
        const struct http_forward_headers extra = { xh, ARRAY_SIZE(xh), drop };
        int r = http_forward(req, res, g.up_url, &extra);
        if (r < 0)
                http_json(res, 502, json_pack("{s:i}", "errno", -r));
}

static const struct route front_routes[] = {
        { "GET", "/*", h_forward, ROUTE_BLOCKING, NULL },
        { "POST", "/*", h_forward, ROUTE_BLOCKING, NULL },
};

static struct http_server *start(const struct route *routes, size_t n)
{
        struct http_options opt = test_options();
        opt.workers = 4;
        opt.default_max_body = 1 << 20;
        struct http_server *s;
        ASSERT_OK(http_server_new(&opt, NULL, &s));
        ASSERT_OK(http_group_routes(http_server_group(s, NULL, NULL, NULL), routes, n));
        ASSERT_OK(http_server_start(s));
        return s;
}

static struct http_server *up, *front;

static void start_both(void)
{
        log_set_level(LOG_ERROR);
        memset(&g, 0, sizeof(g));
        up = start(up_routes, ARRAY_SIZE(up_routes));
        front = start(front_routes, ARRAY_SIZE(front_routes));
        snprintf(g.up_url, sizeof(g.up_url), "http://127.0.0.1:%u", http_server_port(up));
}

static void stop_both(void)
{
        http_server_stop(front);
        http_server_stop(up);
}

TEST(request_crosses_without_credentials_or_hop_by_hop_headers)
{
        start_both();
        struct resp r;
        request(http_server_port(front), "GET", "/echo/a%20b?x=1&token=secret&apiKey=k2&y=%C3%A9",
                "Authorization: Bearer sk_secret\r\nX-API-Key: k3\r\nCookie: s=1\r\n"
                "X-Sandboxd-Node: evil\r\nX-Sandboxd-Cluster-Sig: forged\r\nX-Custom: kept\r\n"
                "Keep-Alive: 5\r\n",
                &r);
        ASSERT_EQ(r.status, 201);
        json_t *j = resp_json(&r);
        ASSERT_STREQ(jstr(j, "method"), "GET");
        ASSERT_STREQ(jstr(j, "path"), "/echo/a b");
        ASSERT_STREQ(jstr(j, "query"), "x=1&y=%C3%A9");
        json_t *h = json_object_get(j, "headers");
        const char *k;
        json_t *v;
        json_object_foreach(h, k, v) {
                ASSERT_TRUE(strcasecmp(k, "Authorization") != 0);
                ASSERT_TRUE(strcasecmp(k, "X-API-Key") != 0);
                ASSERT_TRUE(strcasecmp(k, "Cookie") != 0);
                ASSERT_TRUE(strcasecmp(k, "Keep-Alive") != 0);
                ASSERT_TRUE(strcasecmp(k, "X-Sandboxd-Cluster-Sig") != 0);
                if (strcasecmp(k, "X-Sandboxd-Node") == 0)
                        ASSERT_STREQ(json_string_value(v), "front");
        }
        const char *custom = NULL;
        json_object_foreach(h, k, v) if (strcasecmp(k, "X-Custom") == 0) custom = json_string_value(v);
        ASSERT_STREQ(custom, "kept");
        /* The reply's own headers come back; the dropped one does not. */
        char val[64];
        ASSERT_STREQ(resp_header(&r, "X-Up", val, sizeof(val)), "1");
        ASSERT_NULL(resp_header(&r, "X-Request-Id", val, sizeof(val)));
        ASSERT_STREQ(resp_header(&r, "Content-Type", val, sizeof(val)), "application/json; charset=utf-8");
        json_decref(j);
        resp_free(&r);
        stop_both();
}

TEST(post_body_crosses)
{
        start_both();
        struct resp r;
        request_raw(http_server_port(front),
                    "POST /echo/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                    "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello world!!",
                    &r);
        ASSERT_EQ(r.status, 201);
        json_t *j = resp_json(&r);
        ASSERT_STREQ(jstr(j, "method"), "POST");
        ASSERT_STREQ(jstr(j, "body"), "hello world!!");
        json_decref(j);
        resp_free(&r);
        stop_both();
}

TEST(bodiless_reply_is_relayed)
{
        start_both();
        struct resp r;
        request(http_server_port(front), "GET", "/nothing", NULL, &r);
        ASSERT_EQ(r.status, 204);
        ASSERT_EQ(r.body.len, 0);
        resp_free(&r);
        stop_both();
}

TEST(sse_events_arrive_as_they_are_sent)
{
        start_both();
        struct resp r;
        int fd = open_expect(http_server_port(front), "GET /sse HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                             200, &r);
        char v[64];
        ASSERT_STREQ(resp_header(&r, "Content-Type", v, sizeof(v)), "text/event-stream");
        ASSERT_STREQ(resp_header(&r, "X-Stream", v, sizeof(v)), "yes");
        /* The first event arrives while the upstream still waits for us. */
        struct buf b;
        buf_init(&b, SIZE_MAX);
        char tmp[4096];
        while (!memmem(b.data ? b.data : "", b.len, "data: first", 11)) {
                ssize_t k = read(fd, tmp, sizeof(tmp));
                ASSERT_TRUE(k > 0);
                ASSERT_OK(buf_append(&b, tmp, (size_t)k));
        }
        ASSERT_FALSE(__atomic_load_n(&g.two_after_one, __ATOMIC_ACQUIRE));
        __atomic_store_n(&g.client_got_one, 1, __ATOMIC_RELEASE);
        read_until_eof(fd, &b);
        close(fd);
        ASSERT_OK(buf_append(&b, "", 0));
        ASSERT_NOT_NULL(strstr(b.data, "data: second"));
        ASSERT_TRUE(__atomic_load_n(&g.two_after_one, __ATOMIC_ACQUIRE));
        buf_free(&b);
        stop_both();
}

TEST(big_chunked_body_is_relayed_whole)
{
        start_both();
        struct resp r;
        request(http_server_port(front), "GET", "/big", NULL, &r);
        ASSERT_EQ(r.status, 200);
        ASSERT_EQ(r.body.len, BIG);
        for (size_t i = 0; i < BIG; i++)
                if (r.body.data[i] != (char)('a' + i % 26))
                        TAP_FAIL("byte %zu differs", i);
        resp_free(&r);
        stop_both();
}

TEST(upgrade_is_spliced_both_ways)
{
        start_both();
        struct resp r;
        int fd = open_expect(http_server_port(front),
                             "GET /raw HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: echo/1\r\n\r\n",
                             101, &r);
        char v[64];
        ASSERT_STREQ(resp_header(&r, "Upgrade", v, sizeof(v)), "echo/1");
        for (int i = 0; i < 3; i++) {
                send_str(fd, "ping\x01");
                char b[5];
                size_t got = 0;
                while (got < sizeof(b)) {
                        ssize_t k = read(fd, b + got, sizeof(b) - got);
                        ASSERT_TRUE(k > 0);
                        got += (size_t)k;
                }
                ASSERT_TRUE(memcmp(b, "ping\x01", 5) == 0);
        }
        close(fd); /* the front closes the upstream side too */
        ASSERT_TRUE(wait_flag(&g.raw_freed, 3000));
        stop_both();
}

TEST(unreachable_node_is_an_error_for_the_caller)
{
        start_both();
        snprintf(g.up_url, sizeof(g.up_url), "http://127.0.0.1:1");
        struct resp r;
        request(http_server_port(front), "GET", "/echo/x", NULL, &r);
        ASSERT_EQ(r.status, 502);
        json_t *j = resp_json(&r);
        ASSERT_EQ(json_integer_value(json_object_get(j, "errno")), ECONNREFUSED);
        json_decref(j);
        resp_free(&r);
        stop_both();
}

TEST(query_filter_drops_only_credentials)
{
        const char *cases[][2] = {
                { "", "" },
                { "token=a", "" },
                { "a=1&token=x&b=2", "a=1&b=2" },
                { "apiKey=k&orgId=o", "orgId=o" },
                { "tokens=1&token", "tokens=1" },
                { "x=token%3D1&apiKeys=2", "x=token%3D1&apiKeys=2" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *q = http_forward_query(cases[i][0]);
                ASSERT_STREQ(q, cases[i][1]);
                free(q);
        }
}

TEST(path_encoding_keeps_slashes_and_unreserved)
{
        char *p = http_forward_path("/v1/sandbox/ab/file/dir name/é?#%+");
        ASSERT_STREQ(p, "/v1/sandbox/ab/file/dir%20name/%C3%A9%3F%23%25%2B");
        free(p);
}

TEST(url_parsing)
{
        char host[64], prefix[64];
        unsigned port;
        ASSERT_OK(http_forward_parse_url("http://10.0.0.2:8080", host, sizeof(host), &port, prefix, sizeof(prefix)));
        ASSERT_STREQ(host, "10.0.0.2");
        ASSERT_EQ(port, 8080);
        ASSERT_STREQ(prefix, "");
        ASSERT_OK(http_forward_parse_url("http://node-b/base/", host, sizeof(host), &port, prefix, sizeof(prefix)));
        ASSERT_STREQ(host, "node-b");
        ASSERT_EQ(port, 80);
        ASSERT_STREQ(prefix, "/base");
        ASSERT_OK(http_forward_parse_url("http://[::1]:9", host, sizeof(host), &port, prefix, sizeof(prefix)));
        ASSERT_STREQ(host, "::1");
        ASSERT_EQ(port, 9);
        ASSERT_ERR(http_forward_parse_url("https://a:1", host, sizeof(host), &port, prefix, sizeof(prefix)), EINVAL);
        ASSERT_ERR(http_forward_parse_url("http://", host, sizeof(host), &port, prefix, sizeof(prefix)), EINVAL);
}

TEST(header_predicates)
{
        ASSERT_FALSE(http_forward_request_header("authorization"));
        ASSERT_FALSE(http_forward_request_header("X-Api-Key"));
        ASSERT_FALSE(http_forward_request_header("Cookie"));
        ASSERT_FALSE(http_forward_request_header("Connection"));
        ASSERT_FALSE(http_forward_request_header("Host"));
        ASSERT_FALSE(http_forward_request_header("x-sandboxd-identity"));
        ASSERT_TRUE(http_forward_request_header("Content-Type"));
        ASSERT_TRUE(http_forward_request_header("Sec-WebSocket-Key"));
        ASSERT_TRUE(http_forward_request_header("X-Org-Id"));
        ASSERT_FALSE(http_forward_reply_header("Transfer-Encoding"));
        ASSERT_FALSE(http_forward_reply_header("Content-Length"));
        ASSERT_TRUE(http_forward_reply_header("Set-Cookie"));
        ASSERT_TRUE(http_forward_reply_header("Retry-After"));
}
