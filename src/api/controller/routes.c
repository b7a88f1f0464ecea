/* The controller facade's route group: /api/v1 with its auth hook, the
 * {"error": {code, message}} envelope, and the headers every reply of the
 * group carries (X-Request-Id; on a safe request authenticated by the
 * session cookie, the CSRF token as x-csrf-token and __stateset_csrf).
 * Also the cheap health routes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api/app.h"
#include "api/common/cluster_route.h"
#include "api/common/group.h"
#include "api/controller/controller.h"
#include "cluster/cluster.h"
#include "base/util.h"

/* A client's id is echoed when it is a plain token (at most 128 of
 * [A-Za-z0-9._:-]): anything else could smuggle text into logs and
 * headers, and is replaced by a fresh "req_<32 hex>". */
static bool request_id_ok(const char *id)
{
        size_t n = id ? strlen(id) : 0;
        return n >= 1 && n <= 128 &&
               strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == n;
}

static void request_id(struct http_request *req, char out[STORE_ID_MAX])
{
        const char *given = http_header(req, "X-Request-Id");
        if (request_id_ok(given)) {
                snprintf(out, STORE_ID_MAX, "%s", given);
                return;
        }
        if (tenant_id_new("req", out) < 0)
                snprintf(out, STORE_ID_MAX, "req_%llu", (unsigned long long)req->id);
}

static void ctl_finish(void *cls, struct http_request *req, struct http_response *res)
{
        struct app *app = cls;
        char id[STORE_ID_MAX];
        request_id(req, id);
        (void)http_response_header(res, "X-Request-Id", id);
        /* A relayed reply: the node that served it keeps the audit row. */
        if (!res->relayed)
                ctl_audit_record(app, req, res, id);
        const struct ctl_caller *c = ctl_caller(req);
        bool safe = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0 ||
                    strcmp(req->method, "OPTIONS") == 0;
        if (!c || c->via != CTL_VIA_COOKIE || !safe || !c->who.session_id[0])
                return;
        char csrf[TENANT_CSRF_LEN + 1];
        tenant_csrf_token(app->tenant, c->who.session_id, csrf);
        uint64_t now = wall_ms(), left = c->who.expires_at > now ? (c->who.expires_at - now) / 1000 : 0;
        (void)http_response_header(res, "x-csrf-token", csrf);
        (void)ctl_set_csrf_cookie(res, app, csrf, left ? left : 1);
}

static void h_health(struct http_request *req, struct http_response *res)
{
        (void)req;
        http_json(res, 200, json_pack("{s:s}", "status", "ok"));
}

/* 503 while draining (the daemon answers nothing before it is ready). */
static void h_ready(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        if (http_server_draining(app->srv)) {
                ctl_error(res, 503, "SERVICE_UNAVAILABLE", "Server is shutting down");
                res->retry_after = 1;
                return;
        }
        http_json(res, 200, json_pack("{s:s}", "status", "ready"));
}

/* A node's state as seen from here: its own word ("up", "down") while its
 * heartbeat is fresh, else "dead". */
static const char *node_state(const struct cluster_node_info *n)
{
        return n->live || strcmp(n->row.state, "down") == 0 ? n->row.state : "dead";
}

static json_t *node_view(const struct cluster_node_info *n)
{
        const struct node_row *r = &n->row;
        return json_pack("{s:s, s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I}}", "id", r->id, "url",
                         r->url, "state", node_state(n), "live", n->live, "self", n->self, "epoch",
                         (json_int_t)r->epoch, "started_at", (json_int_t)r->started_at, "heartbeat_age_ms",
                         (json_int_t)n->age_ms, "load", "cpu_millis", (json_int_t)r->cpu_millis, "mem_bytes",
                         (json_int_t)r->mem_bytes, "contexts", (json_int_t)r->contexts, "sandboxes",
                         (json_int_t)r->sandboxes);
}

/* Cluster mode's part of /health/detailed: this node, every node as the
 * last heartbeat read them, and the sandboxes re-homed here. */
static json_t *cluster_view(struct cluster *c)
{
        struct cluster_node_info *v = NULL;
        size_t n = 0;
        json_t *nodes = json_array();

        if (cluster_nodes(c, &v, &n) == 0)
                for (size_t i = 0; i < n; i++)
                        json_array_append_new(nodes, node_view(&v[i]));
        free(v);
        return json_pack("{s:s, s:I, s:o, s:I}", "node_id", cluster_node_id(c), "epoch",
                         (json_int_t)cluster_epoch(c), "nodes", nodes, "rehomes", (json_int_t)cluster_rehomes(c));
}

static void h_health_detailed(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        char msg[128];
        int ok = store_integrity_check(app->store, msg, sizeof(msg)) == 0;
        uint64_t sandboxes = 0;
        (void)store_sandbox_count(app->store, &sandboxes);
        json_t *body = json_pack("{s:s, s:I, s:{s:s, s:s}, s:{s:I}, s:I, s:b}", "status", ok ? "ok" : "degraded",
                                 "uptime_ms", (json_int_t)(wall_ms() - app->started_ms), "store", "backend",
                                 store_backend_name(app->store), "status", ok ? "ok" : msg, "sandboxes", "count",
                                 (json_int_t)sandboxes, "busy_executions", (json_int_t)http_server_busy(app->srv),
                                 "draining", http_server_draining(app->srv));
        if (body && app->cluster)
                json_object_set_new(body, "cluster", cluster_view(app->cluster));
        http_json(res, ok ? 200 : 503, body);
}

static const struct route health_routes[] = {
        { "GET", CTL_PREFIX "/health", h_health, ROUTE_PUBLIC, 0 },
        { "GET", CTL_PREFIX "/ready", h_ready, ROUTE_PUBLIC, 0 },
        { "GET", CTL_PREFIX "/health/detailed", h_health_detailed, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
};

const struct route *ctl_health_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(health_routes);
        return health_routes;
}

/* Cluster mode: a sandbox another node owns is served there (as the
 * caller the auth hook found); a create goes where placement says. */
static const char *const cluster_families[] = { CTL_PREFIX "/sandbox/:id", NULL };
/* create-from-template is a create like any other; a checkpoint's clone
 * is not (it goes where the checkpoint is: checkpoints.c). */
static const char *const cluster_creates[] = { CTL_PREFIX "/sandbox/create", CTL_PREFIX "/sandbox/create-from-template",
                                               NULL };
static const struct api_cluster_facade cluster_facade = { "controller", cluster_families, cluster_creates,
                                                          ctl_envelope };

static bool ctl_intercept(void *cls, struct http_request *req, struct http_response *res)
{
        const struct ctl_caller *c = ctl_caller(req);
        return api_cluster_intercept(&cluster_facade, cls, req, res, c ? &c->who : NULL);
}

bool ctl_cluster_forward(struct http_request *req, struct http_response *res, const char *sandbox_id)
{
        const struct ctl_caller *c = ctl_caller(req);
        return api_cluster_forward_as(&cluster_facade, NULL, req, res, sandbox_id, false, c ? &c->who : NULL);
}

int api_controller_register(struct http_server *srv, struct app *app)
{
        static const struct http_group_ops ops = {
                .auth = ctl_auth_hook,
                .envelope = ctl_envelope,
                .finish = ctl_finish,
                .intercept = ctl_intercept,
        };
        static const api_route_table tables[] = {
                ctl_health_routes,
                ctl_identity_routes,
                ctl_key_routes,
                ctl_sandbox_routes,
                ctl_execute_routes,
                ctl_file_routes,
                ctl_repl_routes,
                ctl_secret_routes,
                ctl_metrics_routes,
                ctl_openapi_routes,
                ctl_queue_routes,
                ctl_template_routes,
                ctl_checkpoint_routes,
                ctl_event_routes,
                ctl_audit_routes,
                /* before ctl_artifact_routes: /artifacts/uploads is not an :id */
                ctl_artifact_upload_routes,
                ctl_artifact_routes,
                ctl_snapshot_routes,
                ctl_github_routes,
                ctl_egress_routes,
                ctl_sso_routes,
                ctl_webhook_routes,
        };
        /* REPL_ENABLED=false, GITHUB_INTEGRATION_ENABLED=false,
         * EGRESS_POLICIES_ENABLED=false: those routes are not registered
         * (the seed's optional features), so they answer 404 as any
         * unknown path. */
        api_route_table on[ARRAY_SIZE(tables)];
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(tables); i++)
                if ((tables[i] != ctl_repl_routes || app->cfg->ctl_repl_enabled) &&
                    (tables[i] != ctl_github_routes || app->cfg->ctl_github_enabled) &&
                    (tables[i] != ctl_egress_routes || app->cfg->ctl_egress_enabled))
                        on[n++] = tables[i];
        int r = ctl_queue_start(app);
        if (r == 0 && (r = ctl_artifacts_start(app)) < 0)
                ctl_queue_stop(app);
        if (r == 0 && (r = ctl_egress_start(app)) < 0) {
                ctl_artifacts_stop(app);
                ctl_queue_stop(app);
        }
        if (r == 0 && (r = ctl_webhooks_start(app)) < 0) {
                ctl_egress_stop();
                ctl_artifacts_stop(app);
                ctl_queue_stop(app);
        }
        if (r < 0)
                return r;
        return api_group_register(srv, CTL_PREFIX, &ops, app, on, n);
}
