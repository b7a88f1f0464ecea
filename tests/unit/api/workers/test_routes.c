/* The workers facade's route group on the real HTTP server over TCP: its
 * auth hook (API key, Bearer scheme case-insensitive, X-API-Key, public
 * routes) and its ErrorResponse envelope for the HTTP layer's own errors. */
#include "api/app.h"
#include "api/workers/routes.h"
#include "base/log.h"
#include "http/httpc.h"

static struct config cfg;
static struct app app = { .cfg = &cfg };

static struct http_server *start(const char *key)
{
        log_set_level(LOG_WARN);
        config_defaults(&cfg);
        snprintf(cfg.api_key, sizeof(cfg.api_key), "%s", key);
        struct http_options opt = test_options();
        ASSERT_OK(http_server_new(&opt, &app, &app.srv));
        ASSERT_OK(api_workers_register(app.srv, &app));
        ASSERT_OK(http_server_start(app.srv));
        return app.srv;
}

/* An ErrorResponse with this status and code, or a 200. */
static void expect(const char *method, const char *path, const char *hdrs, int status, const char *code)
{
        struct resp r;
        request(http_server_port(app.srv), method, path, hdrs, &r);
        if (r.status != status)
                TAP_FAIL("%s %s [%s]: %d, want %d: %s", method, path, hdrs ? hdrs : "", r.status, status,
                         r.body.data);
        json_t *j = resp_json(&r);
        if (code) {
                ASSERT_STREQ(jstr(j, "code"), code);
                ASSERT_EQ(json_integer_value(json_object_get(j, "httpStatus")), status);
                ASSERT_TRUE(jstr(j, "timestamp") && jstr(j, "message"));
                ASSERT_TRUE(json_is_object(json_object_get(j, "context")));
        }
        json_decref(j);
        resp_free(&r);
}

TEST(api_key_checked_by_the_workers_hook)
{
        struct http_server *s = start("s3cret-key");
        expect("GET", "/health", NULL, 200, NULL); /* public */
        expect("GET", "/languages", NULL, 401, "UNAUTHORIZED");
        expect("GET", "/languages", "Authorization: Bearer s3cret-kez\r\n", 401, "UNAUTHORIZED");
        expect("GET", "/languages", "Authorization: Bearer s3cret-ke\r\n", 401, "UNAUTHORIZED");
        expect("GET", "/languages", "Authorization: Bearer s3cret-key2\r\n", 401, "UNAUTHORIZED");
        expect("GET", "/languages", "Authorization: Basic s3cret-key\r\n", 401, "UNAUTHORIZED");
        expect("GET", "/languages", "Authorization: Bearer s3cret-key\r\n", 200, NULL);
        expect("GET", "/languages", "Authorization: bEARER s3cret-key\r\n", 200, NULL);
        expect("GET", "/languages", "X-API-Key: s3cret-key\r\n", 200, NULL);
        expect("GET", "/languages", "X-API-Key: S3CRET-KEY\r\n", 401, "UNAUTHORIZED");
        http_server_stop(s);
}

TEST(no_key_means_open)
{
        struct http_server *s = start("");
        expect("GET", "/languages", NULL, 200, NULL);
        http_server_stop(s);
}

TEST(http_layer_errors_are_error_responses)
{
        struct http_server *s = start("k");
        expect("GET", "/nowhere", NULL, 404, "VALIDATION_FAILED"); /* 404 before auth */
        expect("PUT", "/languages", NULL, 405, "VALIDATION_FAILED");
        expect("POST", "/execute/python", "Authorization: Bearer k\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n",
               415, "VALIDATION_FAILED");
        expect("POST", "/execute/python",
               "Authorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n", 413,
               "VALIDATION_FAILED");
        http_server_stop(s);
}

/* The status of the first answer to a head with Expect: 100-continue: 100
 * when the HTTP layer lets the body come (route, auth, type, cap passed),
 * its error otherwise. No body is sent, so no handler runs. */
static int head_status(const char *path, size_t content_length)
{
        int fd = tcp_connect(http_server_port(app.srv));
        send_fmt(fd,
                 "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Expect: 100-continue\r\n\r\n",
                 path, content_length);
        struct resp r = { 0 };
        read_head(fd, &r);
        close(fd);
        return r.status;
}

TEST(files_route_takes_its_cap_from_configuration)
{
        struct http_server *s = start("");
        cfg.request_bytes = 1000;
        cfg.files_request_bytes = 5000;
        const char *files = "/languages/python/sandboxes/x/files", *exec = "/languages/python/sandboxes/x/execute";
        ASSERT_EQ(head_status(exec, 900), 100);
        ASSERT_EQ(head_status(exec, 3000), 413);
        ASSERT_EQ(head_status(files, 3000), 100);
        ASSERT_EQ(head_status(files, 6000), 413);
        cfg.files_request_bytes = 2000; /* read per request */
        ASSERT_EQ(head_status(files, 3000), 413);
        http_server_stop(s);
}
