/* GET /openapi.json (the OpenAPI 3.1 document of the runtime and gateway
 * routes and sandboxd's extensions, beside this file, assembled into the
 * binary) and /openapi.html (the shared viewer). Public: the document holds
 * no secret, and the playground links it before any key is entered. */
#include "api/common/embed.h"
#include "api/common/openapi.h"
#include "api/workers/envelope.h"
#include "api/workers/routes.h"
#include "base/util.h"

EMBED(workers_openapi_json, "src/api/workers/openapi.json");

static void h_json(struct http_request *req, struct http_response *res)
{
        (void)req;
        http_bytes(res, 200, "application/json", workers_openapi_json, workers_openapi_json_len);
}

static void h_html(struct http_request *req, struct http_response *res)
{
        (void)req;
        if (!api_openapi_viewer(res))
                workers_error(res, 500, "INTERNAL_ERROR", "Out of memory", NULL);
}

const struct route *api_workers_openapi_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "GET", "/openapi.json", h_json, ROUTE_PUBLIC, 0 },
                { "GET", "/openapi.html", h_html, ROUTE_PUBLIC, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
