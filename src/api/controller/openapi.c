/* GET /api/v1/openapi.json (the OpenAPI 3.1 document of the controller's
 * routes, beside this file, assembled into the binary) and
 * /api/v1/openapi.html (the shared viewer). Public: the document holds no
 * secret. */
#include "api/common/embed.h"
#include "api/common/openapi.h"
#include "api/controller/controller.h"
#include "base/util.h"

EMBED(controller_openapi_json, "src/api/controller/openapi.json");

static void h_json(struct http_request *req, struct http_response *res)
{
        (void)req;
        http_bytes(res, 200, "application/json", controller_openapi_json, controller_openapi_json_len);
}

static void h_html(struct http_request *req, struct http_response *res)
{
        (void)req;
        if (!api_openapi_viewer(res))
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
}

const struct route *ctl_openapi_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "GET", CTL_PREFIX "/openapi.json", h_json, ROUTE_PUBLIC, 0 },
                { "GET", CTL_PREFIX "/openapi.html", h_html, ROUTE_PUBLIC, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
