/* GET /v1/openapi.json (the OpenAPI 3.1 document of every bridge route) and
 * /v1/openapi.html = /v1/openapi (a self-contained viewer of it). Both files
 * live beside this one and are assembled into the binary (.incbin), so the
 * daemon never reads them at run time; the Makefile makes this object depend
 * on them. Auth (Bearer, or ?token= for these paths) is the group's hook. */
#include "api/bridge/bridge.h"
#include "api/common/embed.h"
#include "base/util.h"

EMBED(bridge_openapi_json, "src/api/bridge/openapi.json");
EMBED(bridge_openapi_html, "src/api/bridge/openapi.html");

/* The viewer is inline script and style only; it fetches the document from
 * its own origin and nothing else may load (no CDN, no fonts, no frames). */
static const char viewer_csp[] =
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'";

static void h_json(struct http_request *req, struct http_response *res)
{
        (void)req;
        http_bytes(res, 200, "application/json", bridge_openapi_json, bridge_openapi_json_len);
}

static void h_html(struct http_request *req, struct http_response *res)
{
        (void)req;
        /* The page's URL may carry ?token=: no Referer may take it along. */
        if (http_response_header(res, "Content-Security-Policy", viewer_csp) < 0 ||
            http_response_header(res, "X-Content-Type-Options", "nosniff") < 0 ||
            http_response_header(res, "Referrer-Policy", "no-referrer") < 0) {
                bridge_error(res, 500, "internal_error", "Out of memory");
                return;
        }
        http_bytes(res, 200, "text/html; charset=utf-8", bridge_openapi_html, bridge_openapi_html_len);
}

const struct route *bridge_openapi_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "GET", "/v1/openapi.json", h_json, 0, 0 },
                { "GET", "/v1/openapi.html", h_html, 0, 0 },
                /* The anchor serves the same viewer at both paths. */
                { "GET", "/v1/openapi", h_html, 0, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
