/* The /mcp group: its auth hook (the runtime and bridge APIs' rule, plus
 * the Origin check the MCP transport requires) and an envelope that
 * answers the HTTP layer's own errors as JSON-RPC errors, which MCP
 * clients show as such. */
#include <stdlib.h>
#include <strings.h>

#include "api/app.h"
#include "api/common/auth.h"
#include "api/common/group.h"
#include "api/common/host_check.h"
#include "api/mcp/internal.h"
#include "api/mcp/mcp_http.h"
#include "base/util.h"

void mcp_http_error(struct http_response *res, int status, int code, const char *message)
{
        json_t *body = mcp_error_response(NULL, code, message);
        http_json(res, status, body);
}

/* DNS rebinding and cross-site pages: a browser sends Origin on every
 * POST. A page served from anywhere else must not drive the tools: keyless,
 * only loopback origins pass (as only loopback Hosts do); with a key, a
 * loopback origin or the daemon's own (same Host). No Origin: not a
 * browser, nothing to check. */
static bool origin_ok(struct http_request *req, bool keyless)
{
        const char *origin = http_header(req, "Origin");
        if (!origin)
                return true;
        const char *authority = api_origin_authority(origin);
        if (!authority)
                return false;
        if (api_host_is_loopback_literal(authority))
                return true;
        const char *host = http_header(req, "Host");
        return !keyless && host && strcasecmp(authority, host) == 0;
}

static bool mcp_auth(void *cls, struct http_request *req, struct http_response *res)
{
        const struct app *app = cls;
        const char *key = app->cfg->api_key;
        if (!origin_ok(req, !key[0])) {
                mcp_http_error(res, 403, MCP_HTTP_BAD_REQUEST, "Origin not allowed");
                return false;
        }
        if (!key[0]) {
                if (api_host_is_loopback_literal(http_header(req, "Host")))
                        return true;
                mcp_http_error(res, 403, MCP_HTTP_BAD_REQUEST,
                               "Host not allowed: without an API key only Host 127.0.0.1, localhost or [::1] is served");
                return false;
        }
        const char *token = api_bearer_token(http_header(req, "Authorization"));
        if (token && api_key_equal(token, key))
                return true;
        mcp_http_error(res, 401, MCP_HTTP_BAD_REQUEST, "Unauthorized: send Authorization: Bearer <the API key>");
        http_response_header(res, "WWW-Authenticate", "Bearer realm=\"sandboxd\"");
        return false;
}

static void mcp_envelope(void *cls, struct http_response *res, int status, const char *message)
{
        (void)cls;
        mcp_http_error(res, status, MCP_HTTP_BAD_REQUEST, message);
}

int api_mcp_register(struct http_server *srv, struct app *app)
{
        static const struct http_group_ops ops = { .auth = mcp_auth, .envelope = mcp_envelope };
        static const api_route_table tables[] = { mcp_post_routes };
        struct api_mcp *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        mcp_table_init(&m->table, app->cfg->mcp_max_sessions, app->cfg->mcp_session_idle_s * 1000);
        app->mcp = m;
        return api_group_register(srv, "/mcp", &ops, app, tables, ARRAY_SIZE(tables));
}

void api_mcp_free(struct app *app)
{
        if (!app->mcp)
                return;
        mcp_table_done(&app->mcp->table);
        free(app->mcp);
        app->mcp = NULL;
}
