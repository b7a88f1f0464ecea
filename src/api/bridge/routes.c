/* The bridge facade's route group: /v1 (plus the shared GET /health),
 * its auth hook and the {"error","code"} envelope of the errors the HTTP
 * layer answers itself. */
#include <string.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "api/common/auth.h"
#include "api/common/cluster_route.h"
#include "api/common/group.h"
#include "api/common/host_check.h"
#include "base/util.h"

bool bridge_id_valid(const char *id)
{
        size_t n = strlen(id);
        return n >= 1 && n <= 128 && strspn(id, "abcdefghijklmnopqrstuvwxyz234567") == n;
}

/* The sandbox segment of /v1/sandbox/<seg>[/…] must be a valid id; this
 * is answered before auth (as the anchor does), so a client learns about
 * a malformed id even with a wrong key. */
static bool id_segment_ok(const char *path)
{
        static const char prefix[] = "/v1/sandbox/";
        if (strncmp(path, prefix, sizeof(prefix) - 1) != 0)
                return true;
        const char *seg = path + sizeof(prefix) - 1;
        size_t n = strcspn(seg, "/");
        char id[130];
        if (n >= sizeof(id))
                return false;
        memcpy(id, seg, n);
        id[n] = '\0';
        return bridge_id_valid(id);
}

/* Browsers cannot set headers on a WebSocket or a plain link: the OpenAPI
 * pages and the terminal also take the key as ?token=. */
static bool token_query_allowed(const char *path)
{
        size_t n = strlen(path);
        return strncmp(path, "/v1/openapi", 11) == 0 || (n >= 4 && strcmp(path + n - 4, "/pty") == 0);
}

static bool bridge_auth(void *cls, struct http_request *req, struct http_response *res)
{
        struct app *app = cls;
        if (!id_segment_ok(req->path)) {
                bridge_error(res, 400, "invalid_request", "Invalid sandbox ID format");
                return false;
        }
        struct tenant_principal who;
        /* Forwarded by another node: its signature stands for the key. */
        if (api_cluster_signed(req)) {
                if (api_cluster_identity(app, req, &who))
                        return true;
                bridge_error(res, 401, "unauthorized", "Invalid cluster signature");
                return false;
        }
        const char *key = app->cfg->api_key;
        if (!key[0]) {
                /* No key: loopback only (the Host check keeps DNS rebinding
                 * pages out, as for the runtime API). */
                if (api_host_is_loopback_literal(http_header(req, "Host")))
                        return true;
                bridge_error(res, 403, "unauthorized",
                             "Host not allowed: without an API key only Host 127.0.0.1, localhost or [::1] is served");
                return false;
        }
        const char *token = api_bearer_token(http_header(req, "Authorization"));
        if (token && api_key_equal(token, key))
                return true;
        const char *q = token_query_allowed(req->path) ? http_query(req, "token") : NULL;
        if (q && api_key_equal(q, key))
                return true;
        bridge_error(res, 401, "unauthorized", "Unauthorized");
        return false;
}

static const char *code_for(int status)
{
        switch (status) {
        case 401: return "unauthorized";
        case 413: return "payload_too_large";
        case 503: return "capacity_exceeded";
        case 500:
        case 502: return "internal_error"; /* 502: a cluster node that owns the sandbox is unreachable */
        default: return "invalid_request"; /* 400, 404, 405, 415 */
        }
}

static void bridge_envelope(void *cls, struct http_response *res, int status, const char *message)
{
        (void)cls;
        bridge_error(res, status, code_for(status), message);
}

/* Cluster mode: a sandbox another node owns is served there; a create
 * goes where placement says. */
static bool bridge_intercept(void *cls, struct http_request *req, struct http_response *res)
{
        static const char *const families[] = { "/v1/sandbox/:id", NULL };
        static const char *const creates[] = { "/v1/sandbox", NULL };
        static const struct api_cluster_facade f = { "bridge", families, creates, bridge_envelope };
        return api_cluster_intercept(&f, cls, req, res, NULL);
}

int api_bridge_register(struct http_server *srv, struct app *app)
{
        static const struct http_group_ops ops = {
                .auth = bridge_auth,
                .envelope = bridge_envelope,
                .intercept = bridge_intercept,
        };
        static const api_route_table tables[] = {
                bridge_sandbox_routes,
                bridge_exec_routes,
                bridge_file_routes,
                bridge_archive_routes,
                bridge_mount_routes,
                bridge_openapi_routes,
                bridge_tunnel_routes,
                bridge_session_routes,
                bridge_pty_routes,
                bridge_pool_routes,
        };
        return api_group_register(srv, "/v1", &ops, app, tables, ARRAY_SIZE(tables));
}
