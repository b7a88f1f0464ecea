/* GET /v1/pool/stats, POST /v1/pool/shutdown-prewarmed, POST /v1/pool/prime:
 * the bridge's view of the sandbox layer's warm pool (src/sandbox/pool.c;
 * docs/bridge/pool.md). Behind the group's auth like every /v1 route (the
 * anchor insists on exactly "Bearer" here; ours takes any case). */
#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

/* The anchor's shape: {warm, assigned, total, config:{warmTarget,
 * refreshInterval, maxInstances, scaleBatchSize}, maxInstances}. The
 * top-level maxInstances is the limit in force (the anchor's learned one,
 * null until known): ours is always known. */
static void h_stats(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = { 0 };
        struct sbx_pool_stats st;
        if (sbx_pool_stats(app->sandboxes, &st, &err) < 0) {
                bridge_error_from(res, &err, "pool_error");
                err_done(&err);
                return;
        }
        http_json(res, 200,
                  json_pack("{s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I}, s:I}", "warm", (json_int_t)st.warm, "assigned",
                            (json_int_t)st.assigned, "total", (json_int_t)(st.warm + st.assigned), "config",
                            "warmTarget", (json_int_t)st.config.target, "refreshInterval",
                            (json_int_t)st.config.refresh_ms, "maxInstances", (json_int_t)st.config.max_instances,
                            "scaleBatchSize", (json_int_t)st.config.batch, "maxInstances", (json_int_t)st.limit));
}

/* Returns once the warm sandboxes are gone; the refill stays paused until
 * /v1/pool/prime. */
static void h_shutdown_prewarmed(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = { 0 };
        if (sbx_pool_shutdown_prewarmed(app->sandboxes, &err) < 0) {
                bridge_error_from(res, &err, "pool_error");
                err_done(&err);
                return;
        }
        http_json(res, 200, json_pack("{s:b}", "ok", 1));
}

static void h_prime(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        sbx_pool_prime(app->sandboxes);
        http_json(res, 200, json_pack("{s:b}", "ok", 1));
}

const struct route *bridge_pool_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "GET", "/v1/pool/stats", h_stats, ROUTE_BLOCKING, 0 },
                { "POST", "/v1/pool/shutdown-prewarmed", h_shutdown_prewarmed, ROUTE_BLOCKING, 0 },
                { "POST", "/v1/pool/prime", h_prime, 0, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
