/* POST and DELETE /v1/sandbox/:id/tunnel/:port, and the preview URLs they
 * hand out: /preview/<token>/<path> proxies HTTP and WebSocket to a server
 * listening on 127.0.0.1:<port> inside the sandbox (proxy.c). The token is
 * the capability (192 random bits; no API key is needed to use it, as for
 * the anchor's preview URLs), so a wrong one is a plain 404. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

/* An integer 1024–65535, and not 3000 (the anchor's container API). */
static bool port_parse(const char *s, unsigned *ret)
{
        if (!*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s))
                return false;
        unsigned long p = strtoul(s, NULL, 10);
        if (p < 1024 || p > 65535 || p == 3000)
                return false;
        *ret = (unsigned)p;
        return true;
}

/* One DNS label: ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$, at most 63 characters. */
static bool name_valid(const char *n)
{
        size_t len = strlen(n);
        return len >= 1 && len <= 63 && strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-") == len && n[0] != '-' &&
               n[len - 1] != '-';
}

/* The optional body {name?}: empty is {}. false with res filled when bad. */
static bool tunnel_name(struct http_request *req, struct http_response *res, char *name, size_t len)
{
        name[0] = '\0';
        size_t skip = strspn(req->body, " \t\r\n");
        if (skip == req->body_len)
                return true;
        json_error_t jerr;
        json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *n = json_object_get(root, "name");
        bool ok = json_is_object(root) && (!n || json_is_null(n) || json_is_string(n));
        if (!ok)
                bridge_error(res, 400, "invalid_request", root ? "name must be a string" : "Invalid JSON body");
        else if (json_is_string(n) && !name_valid(json_string_value(n))) {
                ok = false;
                bridge_error(res, 400, "invalid_request",
                             "Invalid name: one DNS label of at most 63 characters ([a-z0-9-], no leading or "
                             "trailing '-')");
        } else if (json_is_string(n))
                snprintf(name, len, "%s", json_string_value(n));
        json_decref(root);
        return ok;
}

/* The daemon as the client reached it (its Host header), else its listen
 * address with the bound port. */
static void public_host(struct http_request *req, char *out, size_t len)
{
        const struct app *app = req->app;
        const char *host = http_header(req, "Host");
        bool usable = host && *host && strlen(host) < 256 && host[strcspn(host, " \t/\\?#@")] == '\0';
        if (usable) {
                snprintf(out, len, "%s", host);
                return;
        }
        char h[256];
        unsigned port;
        if (http_parse_listen(app->cfg->listen, h, sizeof(h), &port) < 0)
                snprintf(h, sizeof(h), "127.0.0.1");
        snprintf(out, len, strchr(h, ':') ? "[%s]:%u" : "%s:%u", h, http_server_port(app->srv));
}

static void h_open(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        unsigned port;
        char name[64], host[300];
        if (!port_parse(req->captures[1], &port)) {
                bridge_error(res, 400, "invalid_request", "Invalid port");
                return;
        }
        if (!tunnel_name(req, res, name, sizeof(name)) || !bridge_sandbox_ready(req, res, req->captures[0]))
                return;
        struct sbx_tunnel t;
        struct err err = { 0 };
        if (sbx_tunnel_open(app->sandboxes, req->captures[0], port, name[0] ? name : NULL, &t, &err) < 0) {
                bridge_error_from(res, &err, "tunnel_error");
                err_done(&err);
                return;
        }
        public_host(req, host, sizeof(host));
        char url[512], created[32];
        snprintf(url, sizeof(url), "http://%s/preview/%s/", host, t.token);
        iso8601_ms(t.created_ms, created);
        json_t *body = json_pack("{s:s, s:i, s:s, s:s, s:s}", "id", t.id, "port", (json_int_t)t.port, "url", url,
                                 "hostname", host, "createdAt", created);
        if (body && t.name[0])
                json_object_set_new(body, "name", json_string(t.name));
        http_json(res, 200, body);
}

static void h_close(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        unsigned port;
        if (!port_parse(req->captures[1], &port)) {
                bridge_error(res, 400, "invalid_request", "Invalid port");
                return;
        }
        sbx_tunnel_close(app->sandboxes, req->captures[0], port);
        http_bytes(res, 204, NULL, "", 0);
}

/* Preview requests hold a blocking worker until the sandbox's server
 * starts answering, and their URL needs no key: at most half the workers
 * wait on guest servers at once, so a slow one cannot starve executions. */
static unsigned preview_waiting;

static bool preview_enter(const struct app *app)
{
        unsigned cap = app->cfg->exec_workers >= 2 ? (unsigned)(app->cfg->exec_workers / 2) : 1;
        if (__atomic_add_fetch(&preview_waiting, 1, __ATOMIC_ACQ_REL) <= cap)
                return true;
        __atomic_sub_fetch(&preview_waiting, 1, __ATOMIC_ACQ_REL);
        return false;
}

static void h_preview(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct sbx_tunnel t;
        struct err err = { 0 };
        int fd = -1;
        if (sbx_tunnel_connect(app->sandboxes, req->captures[0], &t, &fd, &err) < 0) {
                if (err.reason == ERR_NOT_FOUND)
                        bridge_error(res, 404, "tunnel_error", "No such tunnel");
                else
                        bridge_error(res, 502, "tunnel_error", err.msg);
                err_done(&err);
                return;
        }
        if (!preview_enter(app)) {
                close(fd);
                bridge_error(res, 503, "capacity_exceeded", "Too many preview requests waiting; retry later");
                res->retry_after = 1;
                return;
        }
        bridge_proxy(req, res, fd, t.port, req->captures[1]);
        __atomic_sub_fetch(&preview_waiting, 1, __ATOMIC_ACQ_REL);
}

static size_t preview_body_cap(const void *app)
{
        (void)app;
        return BRIDGE_PREVIEW_MAX_BODY;
}

#define PREVIEW(method)                                                                                   \
        { method, "/preview/:token/*", h_preview, ROUTE_BLOCKING | ROUTE_PUBLIC, preview_body_cap }

const struct route *bridge_tunnel_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox/:id/tunnel/:port", h_open, ROUTE_BLOCKING, 0 },
                { "DELETE", "/v1/sandbox/:id/tunnel/:port", h_close, ROUTE_BLOCKING, 0 },
                /* Not under /v1 and keyless: the token is the credential. */
                PREVIEW("GET"), PREVIEW("HEAD"), PREVIEW("POST"), PREVIEW("PUT"),
                PREVIEW("PATCH"), PREVIEW("DELETE"), PREVIEW("OPTIONS"),
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
