/* The sandbox-workers facade's route group: the runtime and gateway route
 * tables, its API-key check and the ErrorResponse envelope for the errors
 * the HTTP layer answers itself (404, 405, 401, 413, 415, 503, 500). */
#include "api/workers/routes.h"

#include <string.h>
#include <strings.h>

#include "api/app.h"
#include "api/common/auth.h"
#include "api/common/cluster_route.h"
#include "api/common/host_check.h"
#include "api/workers/envelope.h"

/* Authorization: Bearer <key> (scheme case-insensitive) or X-API-Key.
 * Without a key only loopback Host names are served: a browser page that
 * rebinds its own name to 127.0.0.1 still sends that name as Host
 * (docs/security.md, "Tenant isolation: hygiene"). With a key, the key
 * protects and any Host is fine (a reverse proxy may set its own). */
static bool workers_auth(void *cls, struct http_request *req, struct http_response *res)
{
        struct app *app = cls;
        const char *key = app->cfg->api_key;
        struct tenant_principal who;
        /* A request another node forwarded: its signature vouches instead
         * of the key (which never crosses nodes); a bad one is refused. */
        if (api_cluster_signed(req)) {
                if (api_cluster_identity(app, req, &who))
                        return true;
                workers_error(res, 401, "UNAUTHORIZED", "Invalid cluster signature", NULL);
                return false;
        }
        if (!key[0]) {
                if (api_host_is_loopback_literal(http_header(req, "Host")))
                        return true;
                workers_error(res, 403, "FORBIDDEN",
                              "Host not allowed: without an API key only Host 127.0.0.1, localhost or [::1] "
                              "(with an optional port) is served",
                              NULL);
                return false;
        }
        const char *token = api_bearer_token(http_header(req, "Authorization"));
        if (token && api_key_equal(token, key))
                return true;
        const char *xkey = http_header(req, "X-API-Key");
        if (xkey && api_key_equal(xkey, key))
                return true;
        workers_error(res, 401, "UNAUTHORIZED", "Missing or invalid API key", NULL);
        return false;
}

static const char *code_for(int status)
{
        switch (status) {
        case 401: return "UNAUTHORIZED";
        case 403: return "FORBIDDEN";
        case 503: return "OVERLOADED";
        case 500:
        case 502: return "INTERNAL_ERROR"; /* 502: a cluster node that owns the sandbox is unreachable */
        default: return "VALIDATION_FAILED"; /* 400, 404, 405, 413, 415 */
        }
}

static void workers_envelope(void *cls, struct http_response *res, int status, const char *message)
{
        (void)cls;
        workers_error(res, status, code_for(status), message, NULL);
}

size_t workers_files_body_cap(const void *app)
{
        return ((const struct app *)app)->cfg->files_request_bytes;
}

/* Cluster mode: a sandbox another node owns is served there. */
static bool workers_intercept(void *cls, struct http_request *req, struct http_response *res)
{
        static const char *const families[] = { "/languages/:lang/sandboxes/:id", NULL };
        static const struct api_cluster_facade f = { "runtime", families, NULL, workers_envelope };
        return api_cluster_intercept(&f, cls, req, res, NULL);
}

int api_workers_register(struct http_server *srv, struct app *app)
{
        static const struct http_group_ops ops = {
                .auth = workers_auth,
                .envelope = workers_envelope,
                .intercept = workers_intercept,
        };
        const struct route *(*const tables[])(size_t *) = { api_runtime_routes, api_gateway_routes,
                                                             api_workers_openapi_routes };
        /* The default group: every path no other facade claims. */
        struct http_group *g = http_server_group(srv, NULL, &ops, app);
        if (!g)
                return -ENOMEM;
        for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
                size_t n;
                const struct route *r = tables[i](&n);
                if (http_group_routes(g, r, n) < 0)
                        return -ENOMEM;
        }
        return 0;
}
