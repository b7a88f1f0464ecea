/* The playground's static files. web/dist holds three files (esbuild
 * bundles every module and stylesheet into app.js and app.css), listed
 * below; the Makefile's EMBEDDED list must name the same ones. */
#include "api/web/web.h"

#include <stdio.h>
#include <string.h>

#include "api/common/embed.h"
#include "base/util.h"

EMBED(web_index_html, "web/dist/index.html");
EMBED(web_app_js, "web/dist/app.js");
EMBED(web_app_css, "web/dist/app.css");

struct asset {
        const char *path;
        const char *type;
        const char *data;
        const uint64_t *len;
        char etag[24];              /* "\"<16 hex>\"", set at registration */
};

static struct asset assets[] = {
        { "/index.html", "text/html; charset=utf-8", web_index_html, &web_index_html_len, "" },
        { "/app.js", "text/javascript; charset=utf-8", web_app_js, &web_app_js_len, "" },
        { "/app.css", "text/css; charset=utf-8", web_app_css, &web_app_css_len, "" },
};

/* Everything the page loads is its own: scripts and styles from this
 * origin (CodeMirror and xterm.js add <style> elements and style
 * attributes, hence 'unsafe-inline' for styles only), fetch and the PTY
 * WebSocket to this origin, result images as data: URLs, HTML results in
 * srcdoc iframes (sandbox="": no script, an opaque origin). */
static const char page_csp[] =
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'";

/* FNV-1a: the ETag only has to change when the bytes do. */
static void etag_of(struct asset *a)
{
        uint64_t h = 14695981039346656037ull;
        for (uint64_t i = 0; i < *a->len; i++)
                h = (h ^ (unsigned char)a->data[i]) * 1099511628211ull;
        snprintf(a->etag, sizeof(a->etag), "\"%016llx\"", (unsigned long long)h);
}

static const struct asset *asset_for(const char *path)
{
        if (strcmp(path, "/") == 0)
                path = "/index.html";
        for (size_t i = 0; i < ARRAY_SIZE(assets); i++)
                if (strcmp(assets[i].path, path) == 0)
                        return &assets[i];
        return NULL;
}

/* If-None-Match: "*" or a list holding our tag (W/ prefixes allowed). */
static bool not_modified(struct http_request *req, const struct asset *a)
{
        const char *inm = http_header(req, "If-None-Match");
        return inm && (strcmp(inm, "*") == 0 || strstr(inm, a->etag));
}

static int add_headers(struct http_response *res, const struct asset *a)
{
        if (http_response_header(res, "ETag", a->etag) < 0 ||
            http_response_header(res, "Cache-Control", "no-cache") < 0 ||
            http_response_header(res, "X-Content-Type-Options", "nosniff") < 0 ||
            http_response_header(res, "Referrer-Policy", "no-referrer") < 0 ||
            http_response_header(res, "Content-Security-Policy", page_csp) < 0)
                return -ENOMEM;
        return 0;
}

/* GET and HEAD alike: libmicrohttpd sends no body for HEAD. */
static void h_asset(struct http_request *req, struct http_response *res)
{
        const struct asset *a = asset_for(req->path);
        if (!a) { /* only the paths of the table below reach here */
                http_bytes(res, 404, "text/plain; charset=utf-8", "Not found\n", 10);
                return;
        }
        bool same = not_modified(req, a);
        int r = http_bytes(res, same ? 304 : 200, a->type, a->data, same ? 0 : (size_t)*a->len);
        if (r >= 0)
                r = add_headers(res, a);
        if (r < 0)
                http_bytes(res, 500, "text/plain; charset=utf-8", "Out of memory\n", 14);
}

/* 405 (POST /, …): plain text, the page's paths carry no API envelope. */
static void web_envelope(void *cls, struct http_response *res, int status, const char *message)
{
        (void)cls;
        char text[256];
        int n = snprintf(text, sizeof(text), "%s\n", message);
        http_bytes(res, status, "text/plain; charset=utf-8", text,
                   n < 0 ? 0 : (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1);
}

#define ASSET_ROUTES(path) \
        { "GET", path, h_asset, ROUTE_PUBLIC, 0 }, { "HEAD", path, h_asset, ROUTE_PUBLIC, 0 }

int api_web_register(struct http_server *srv, struct app *app)
{
        static const struct route routes[] = {
                ASSET_ROUTES("/"),
                ASSET_ROUTES("/index.html"),
                ASSET_ROUTES("/app.js"),
                ASSET_ROUTES("/app.css"),
        };
        static const struct http_group_ops ops = { .envelope = web_envelope };
        (void)app;
        for (size_t i = 0; i < ARRAY_SIZE(assets); i++)
                etag_of(&assets[i]);
        /* A prefix no other path shares ("" would make it a second default
         * group, which the router never picks): unknown paths stay with the
         * facade whose prefix they carry, or the runtime API. */
        struct http_group *g = http_server_group(srv, "/index.html", &ops, NULL);
        if (!g || http_group_routes(g, routes, ARRAY_SIZE(routes)) < 0)
                return -ENOMEM;
        return 0;
}
