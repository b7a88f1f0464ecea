/* The real HTTP server on 127.0.0.1:0 with test route groups, over real
 * TCP: reply kinds (JSON, bytes, file), query arguments, several response
 * headers, two groups with their own envelope and auth hook, the errors the
 * HTTP layer answers itself, and route body caps read from the app. */
#include <fcntl.h>
#include <stdlib.h>

#include "base/log.h"
#include "httpc.h"

/* ---- handlers ---- */

static void h_json(struct http_request *req, struct http_response *res)
{
        (void)req;
        http_json(res, 200, json_pack("{s:f, s:f, s:i}", "ms", 3.5223279999999999, "third", 1.0 / 3, "n", 7));
}

static void h_bytes(struct http_request *req, struct http_response *res)
{
        (void)req;
        static const char data[] = { 'a', '\0', 'b', '\n', (char)0xff };
        ASSERT_OK(http_bytes(res, 201, "application/x-test", data, sizeof(data)));
}

static void h_file(struct http_request *req, struct http_response *res)
{
        (void)req;
        char path[] = "/tmp/http-test-XXXXXX";
        int fd = mkstemp(path);
        ASSERT_TRUE(fd >= 0);
        unlink(path);
        struct buf b;
        buf_init(&b, SIZE_MAX);
        for (int i = 0; i < 20000; i++)
                ASSERT_OK(buf_printf(&b, "line %d\n", i));
        ASSERT_OK(write_all(fd, b.data, b.len));
        http_file(res, 200, "text/plain; charset=utf-8", fd, b.len);
        buf_free(&b);
}

static void h_query(struct http_request *req, struct http_response *res)
{
        const char *name = http_query(req, "name"), *missing = http_query(req, "missing");
        http_json(res, 200, json_pack("{s:s?, s:s?, s:b}", "name", name, "n", http_query(req, "n"), "missing",
                                      missing != NULL));
}

static void h_headers(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_response_header(res, "X-One", "1"));
        ASSERT_OK(http_response_header(res, "Set-Cookie", "a=1"));
        ASSERT_OK(http_response_header(res, "Set-Cookie", "b=2"));
        /* A value that would break the header line is refused. */
        ASSERT_EQ(http_response_header(res, "X-Evil", "x\r\nInjected: 1"), -EINVAL);
        ASSERT_EQ(http_response_header(res, "Bad Name", "x"), -EINVAL);
        http_json(res, 200, json_object());
}

static void h_ok(struct http_request *req, struct http_response *res)
{
        http_json(res, 200, json_pack("{s:s, s:s%}", "path", req->path, "body", req->body, req->body_len));
}

static void h_nothing(struct http_request *req, struct http_response *res)
{
        (void)req;
        (void)res;
}

/* ---- two facades: A (auth by header, envelope {"a": ...}) and B ---- */

static int auth_freed;   /* auth slots freed (atomically: polling threads) */

static void auth_free(void *p)
{
        free(p);
        __atomic_add_fetch(&auth_freed, 1, __ATOMIC_SEQ_CST);
}

/* The hook leaves who it found in the request's auth slot. */
static bool a_auth(void *cls, struct http_request *req, struct http_response *res)
{
        const char *v = http_header(req, "X-A-Key");
        if (v && strcmp(v, cls) == 0) {
                req->auth = strdup("caller-a");
                req->auth_free = auth_free;
                return true;
        }
        http_json(res, 401, json_pack("{s:s, s:i}", "a_denied", "no key", "status", 401));
        return false;
}

/* Every reply of group A, whoever answered it, gets X-Finished. */
static void a_finish(void *cls, struct http_request *req, struct http_response *res)
{
        (void)cls;
        ASSERT_OK(http_response_header(res, "X-Finished", req->auth ? (const char *)req->auth : "anonymous"));
}

static void a_envelope(void *cls, struct http_response *res, int status, const char *message)
{
        (void)cls;
        http_json(res, status, json_pack("{s:s, s:i}", "a_error", message, "status", status));
}

static void b_envelope(void *cls, struct http_response *res, int status, const char *message)
{
        http_json(res, status, json_pack("{s:s, s:s, s:i}", "b_error", message, "facade", (const char *)cls,
                                         "status", status));
}

struct test_app {
        size_t big_cap;
};

static size_t big_cap(const void *app)
{
        return ((const struct test_app *)app)->big_cap;
}

static const struct route a_routes[] = {
        { "GET", "/a/json", h_json, 0, NULL },
        { "GET", "/a/bytes", h_bytes, 0, NULL },
        { "GET", "/a/file", h_file, 0, NULL },
        { "GET", "/a/query", h_query, 0, NULL },
        { "GET", "/a/headers", h_headers, 0, NULL },
        { "GET", "/a/open", h_ok, ROUTE_PUBLIC, NULL },
        { "POST", "/a/echo", h_ok, ROUTE_PUBLIC | ROUTE_JSON, NULL },
        { "POST", "/a/big", h_ok, ROUTE_PUBLIC, big_cap },
        { "DELETE", "/a/echo", h_ok, ROUTE_PUBLIC, NULL },
        { "GET", "/a/nothing", h_nothing, ROUTE_PUBLIC, NULL },
};
static const struct route b_routes[] = {
        { "GET", "/b/ok", h_ok, 0, NULL },
};
static const struct route d_routes[] = {
        { "GET", "/", h_ok, 0, NULL },
};

static struct test_app app = { .big_cap = 4096 };

static struct http_server *start(void)
{
        static const struct http_group_ops a_ops = { .auth = a_auth, .envelope = a_envelope, .finish = a_finish };
        static const struct http_group_ops b_ops = { .envelope = b_envelope };
        log_set_level(LOG_WARN);
        struct http_options opt = test_options();
        struct http_server *s;
        ASSERT_OK(http_server_new(&opt, &app, &s));
        /* The default group has no hooks: the server's plain {"error"}. */
        struct http_group *d = http_server_group(s, NULL, NULL, NULL);
        struct http_group *a = http_server_group(s, "/a", &a_ops, (void *)"sesame");
        struct http_group *b = http_server_group(s, "/b/", &b_ops, (void *)"B");
        ASSERT_TRUE(a && b && d);
        ASSERT_OK(http_group_routes(a, a_routes, ARRAY_SIZE(a_routes)));
        ASSERT_OK(http_group_routes(b, b_routes, ARRAY_SIZE(b_routes)));
        ASSERT_OK(http_group_routes(d, d_routes, ARRAY_SIZE(d_routes)));
        ASSERT_OK(http_server_start(s));
        ASSERT_TRUE(http_server_port(s) > 0);
        return s;
}

#define KEY "X-A-Key: sesame\r\n"

/* One GET with the key: status, type, length and every byte of the body. */
static void expect_reply(const char *path, int status, const char *ctype, const void *body, size_t len)
{
        struct http_server *s = start();
        struct resp r;
        get_expect(http_server_port(s), path, KEY, status, ctype, &r);
        char v[128], cl[32];
        snprintf(cl, sizeof(cl), "%zu", len);
        ASSERT_STREQ(resp_header(&r, "Content-Length", v, sizeof(v)), cl);
        ASSERT_EQ(r.body.len, len);
        ASSERT_TRUE(memcmp(r.body.data, body, len) == 0);
        resp_free(&r);
        http_server_stop(s);
}

TEST(json_reply_has_shortest_doubles)
{
        const char *want = "{\"ms\":3.522328,\"third\":0.3333333333333333,\"n\":7}";
        expect_reply("/a/json", 200, "application/json; charset=utf-8", want, strlen(want));
}

TEST(bytes_reply_keeps_every_byte_and_type)
{
        expect_reply("/a/bytes", 201, "application/x-test", "a\0b\n\xff", 5);
}

TEST(file_reply_sends_the_file)
{
        struct buf want;
        buf_init(&want, SIZE_MAX);
        for (int i = 0; i < 20000; i++)
                ASSERT_OK(buf_printf(&want, "line %d\n", i));
        expect_reply("/a/file", 200, "text/plain; charset=utf-8", want.data, want.len);
        buf_free(&want);
}

TEST(query_arguments_are_decoded)
{
        struct http_server *s = start();
        struct resp r;
        get_expect(http_server_port(s), "/a/query?name=a%20b%26c&n=1", KEY, 200, NULL, &r);
        json_t *j = resp_json(&r);
        ASSERT_STREQ(jstr(j, "name"), "a b&c");
        ASSERT_STREQ(jstr(j, "n"), "1");
        ASSERT_TRUE(json_is_false(json_object_get(j, "missing")));
        json_decref(j);
        resp_free(&r);
        http_server_stop(s);
}

TEST(several_response_headers)
{
        struct http_server *s = start();
        struct resp r;
        get_expect(http_server_port(s), "/a/headers", KEY, 200, NULL, &r);
        char v[128];
        ASSERT_STREQ(resp_header(&r, "X-One", v, sizeof(v)), "1");
        const char *from = NULL;
        ASSERT_STREQ(resp_header_from(&r, "Set-Cookie", &from, v, sizeof(v)), "a=1");
        ASSERT_STREQ(resp_header_from(&r, "Set-Cookie", &from, v, sizeof(v)), "b=2");
        ASSERT_TRUE(!resp_header(&r, "X-Evil", v, sizeof(v)) && !resp_header(&r, "Injected", v, sizeof(v)));
        resp_free(&r);
        http_server_stop(s);
}

/* Status, then the envelope key that tells which group answered. */
static void expect(unsigned port, const char *method, const char *path, const char *hdrs, int status,
                   const char *key, const char *message)
{
        struct resp r;
        request(port, method, path, hdrs, &r);
        if (r.status != status)
                TAP_FAIL("%s %s: status %d, want %d (%s)", method, path, r.status, status, r.body.data);
        json_t *j = resp_json(&r);
        if (!jstr(j, key) || (message && strcmp(jstr(j, key), message) != 0))
                TAP_FAIL("%s %s: body %s lacks %s=%s", method, path, r.body.data, key, message ? message : "*");
        json_decref(j);
        resp_free(&r);
}

TEST(groups_answer_unmatched_paths_in_their_envelope)
{
        struct http_server *s = start();
        unsigned p = http_server_port(s);
        expect(p, "GET", "/a/nope", NULL, 404, "a_error", "Not found");
        expect(p, "GET", "/b/nope", NULL, 404, "b_error", "Not found");
        expect(p, "GET", "/bzz", NULL, 404, "error", "Not found"); /* "/b/" is not a prefix of /bzz */
        expect(p, "GET", "/elsewhere", NULL, 404, "error", "Not found");
        expect(p, "GET", "/b/ok", NULL, 200, "path", "/b/ok"); /* B has no auth hook */
        http_server_stop(s);
}

TEST(auth_hook_decides_per_group)
{
        struct http_server *s = start();
        unsigned p = http_server_port(s);
        expect(p, "GET", "/a/query", NULL, 401, "a_denied", "no key");
        expect(p, "GET", "/a/query", "X-A-Key: sesamE\r\n", 401, "a_denied", "no key");
        expect(p, "GET", "/a/query?name=x", KEY, 200, "name", "x");
        expect(p, "GET", "/a/open", NULL, 200, "path", "/a/open"); /* ROUTE_PUBLIC skips the hook */
        /* 404 comes before auth: an unknown path says so without a key. */
        expect(p, "GET", "/a/unknown", NULL, 404, "a_error", NULL);
        http_server_stop(s);
}

TEST(method_not_allowed_lists_allow_in_the_group_envelope)
{
        struct http_server *s = start();
        struct resp r;
        request(http_server_port(s), "PUT", "/a/echo", NULL, &r);
        ASSERT_EQ(r.status, 405);
        char v[128];
        ASSERT_STREQ(resp_header(&r, "Allow", v, sizeof(v)), "POST, DELETE");
        json_t *j = resp_json(&r);
        ASSERT_STREQ(jstr(j, "a_error"), "Method PUT not allowed");
        json_decref(j);
        resp_free(&r);
        http_server_stop(s);
}

TEST(content_type_body_caps_and_no_response)
{
        struct http_server *s = start();
        unsigned p = http_server_port(s);
        struct resp r;
        request_raw(p,
                    "POST /a/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                    "Content-Length: 2\r\n\r\n{}",
                    &r);
        ASSERT_EQ(r.status, 415);
        resp_free(&r);
        request_raw(p,
                    "POST /a/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                    "Content-Length: 2\r\n\r\n{}",
                    &r);
        ASSERT_EQ(r.status, 200);
        json_t *j = resp_json(&r);
        ASSERT_STREQ(jstr(j, "body"), "{}");
        json_decref(j);
        resp_free(&r);

        /* The default cap (1024) on /a/echo, the route's own (4096, read
         * from the app) on /a/big. */
        char raw[8192], body[3001];
        memset(body, 'x', 3000);
        body[3000] = '\0';
        snprintf(raw, sizeof(raw),
                 "POST /a/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                 "Content-Length: 3000\r\n\r\n%s", body);
        request_raw(p, raw, &r);
        ASSERT_EQ(r.status, 413);
        j = resp_json(&r);
        ASSERT_STREQ(jstr(j, "a_error"), "Request too large");
        json_decref(j);
        resp_free(&r);
        snprintf(raw, sizeof(raw), "POST /a/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 3000\r\n\r\n%s",
                 body);
        request_raw(p, raw, &r);
        ASSERT_EQ(r.status, 200);
        resp_free(&r);
        app.big_cap = 2000; /* the cap is read per request */
        request_raw(p, raw, &r);
        ASSERT_EQ(r.status, 413);
        resp_free(&r);
        expect(p, "GET", "/a/nothing", NULL, 500, "a_error", "Handler produced no response");
        http_server_stop(s);
}

static void expect_finished(unsigned port, const char *path, const char *hdrs, int status, const char *want)
{
        struct resp r;
        char v[64];
        get_expect(port, path, hdrs, status, NULL, &r);
        const char *got = resp_header(&r, "X-Finished", v, sizeof(v));
        if (want)
                ASSERT_STREQ(got, want);
        else
                ASSERT_TRUE(got == NULL);
        resp_free(&r);
}

TEST(finish_hook_runs_on_every_reply_of_its_group_and_auth_slots_are_freed)
{
        struct http_server *s = start();
        unsigned p = http_server_port(s);
        int before = __atomic_load_n(&auth_freed, __ATOMIC_SEQ_CST);
        expect_finished(p, "/a/query", KEY, 200, "caller-a");       /* a handler's reply */
        expect_finished(p, "/a/query", NULL, 401, "anonymous");     /* the auth hook's */
        expect_finished(p, "/a/nope", NULL, 404, "anonymous");      /* the router's */
        expect_finished(p, "/a/open", NULL, 200, "anonymous");      /* a public route */
        expect_finished(p, "/b/ok", NULL, 200, NULL);               /* another group: not */
        http_server_stop(s);
        /* One slot was filled (the authorised request), and freed once. */
        ASSERT_EQ(__atomic_load_n(&auth_freed, __ATOMIC_SEQ_CST) - before, 1);
}
