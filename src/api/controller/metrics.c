/* GET /api/v1/metrics: Prometheus text exposition format 0.0.4 (seed 003,
 * "Internal auth in production (X-Internal-Token or Authorization:
 * Bearer)"). The token is controller.internal_token (env
 * INTERNAL_API_TOKEN); with none configured only loopback clients may
 * scrape. Counters come from base/metrics.c; gauges are read from their
 * owners here, at scrape time. */
#include <openssl/crypto.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/metrics.h"
#include "base/util.h"

#define METRICS_MAX_BYTES (1024 * 1024)

/* Equal length and bytes, in time that depends on the length only. */
static bool token_equal(const char *given, const char *want)
{
        size_t n = strlen(want);
        return given && strlen(given) == n && CRYPTO_memcmp(given, want, n) == 0;
}

bool ctl_internal_allowed(struct http_request *req)
{
        struct app *app = req->app;
        const char *want = app->cfg->ctl_internal_token;
        if (!want[0]) {
                char addr[64];
                http_client_addr(req, addr, sizeof(addr));
                return addr[0] && http_host_is_loopback(addr);
        }
        const char *auth = http_header(req, "Authorization");
        if (token_equal(http_header(req, "X-Internal-Token"), want))
                return true;
        return auth && strncasecmp(auth, "Bearer ", 7) == 0 && token_equal(auth + 7, want);
}

static int render_gauges(struct app *app, struct buf *out)
{
        uint64_t sandboxes = 0;
        struct engine_pool_stats pools[ENGINE_MAX_RUNTIMES];
        size_t n = engine_pool_stats(app->engine, pools, ARRAY_SIZE(pools));
        (void)store_sandbox_count(app->store, &sandboxes);
        int r = buf_printf(out,
                           "# HELP sandboxd_sandboxes Sandboxes in the store (every API, every org).\n"
                           "# TYPE sandboxd_sandboxes gauge\nsandboxd_sandboxes %llu\n"
                           "# HELP sandboxd_contexts_live Live code-context interpreters.\n"
                           "# TYPE sandboxd_contexts_live gauge\nsandboxd_contexts_live %zu\n"
                           "# HELP sandboxd_pool_members Warm pool members ready, by language.\n"
                           "# TYPE sandboxd_pool_members gauge\n",
                           (unsigned long long)sandboxes, sbx_resident_count(app->sandboxes));
        for (size_t i = 0; i < n && r >= 0; i++)
                r = buf_printf(out, "sandboxd_pool_members{language=\"%s\"} %llu\n", pools[i].lang,
                               (unsigned long long)pools[i].ready);
        return r;
}

static void h_metrics(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        if (!ctl_internal_allowed(req)) {
                ctl_error(res, 401, "AUTH_REQUIRED", "An internal token is required");
                return;
        }
        struct buf out;
        buf_init(&out, METRICS_MAX_BYTES);
        if (metrics_render(&out) < 0 || render_gauges(app, &out) < 0)
                ctl_error(res, 500, "INTERNAL_ERROR", "Metrics too large");
        else
                http_bytes(res, 200, "text/plain; version=0.0.4; charset=utf-8", out.data, out.len);
        buf_free(&out);
}

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/metrics", h_metrics, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
};

const struct route *ctl_metrics_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
