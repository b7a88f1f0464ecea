/* GET /v1/openapi.json (the OpenAPI 3.1 document of every bridge route,
 * beside this file, assembled into the binary) and /v1/openapi.html =
 * /v1/openapi (the shared viewer, api/common/openapi.h). Auth (Bearer, or
 * ?token= for these paths) is the group's hook. */
#include <stdint.h>

#include "api/bridge/bridge.h"
#include "api/common/embed.h"
#include "api/common/openapi.h"
#include "base/util.h"

EMBED(bridge_openapi_json, "src/api/bridge/openapi.json");

static void h_json(struct http_request *req, struct http_response *res)
{
        (void)req;
        http_bytes(res, 200, "application/json", bridge_openapi_json, bridge_openapi_json_len);
}

static void h_html(struct http_request *req, struct http_response *res)
{
        (void)req;
        if (!api_openapi_viewer(res))
                bridge_error(res, 500, "internal_error", "Out of memory");
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
