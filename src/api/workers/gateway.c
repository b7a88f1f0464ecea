/* The gateway facade (seed 000 "Gateway paths" + the Sandbox wire protocol):
 * /languages/:language/sandboxes/:id[/execute|/contexts[/:cid]|/env|/files].
 * The binding is forced from the path (PYTHON, JAVASCRIPT, …); the same id
 * reached through two languages is one sandbox. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "api/workers/envelope.h"
#include "api/workers/errors.h"
#include "api/workers/files.h"
#include "api/workers/result_json.h"
#include "api/workers/routes.h"
#include "api/workers/views.h"
#include "api/app.h"
#include "api/common/exec_metrics.h"
#include "api/workers/validate.h"
#include "sandbox/sandbox.h"
#include "runtimes/runtime.h"

struct gw {
        struct app *app;
        const struct runtime *rt;
        char binding[32];
        const char *id;
};

/* Resolves :language and :id shared by every gateway route. */
static bool gw_begin(struct http_request *req, struct http_response *res, struct gw *g)
{
        g->app = req->app;
        g->rt = runtime_resolve(req->captures[0], NULL);
        g->id = req->captures[1];
        /* Sandboxes hold kernels (contexts); a process runtime has none. */
        if (!g->rt || g->rt->kind != RUNTIME_KERNEL) {
                workers_errorf(res, 400, "VALIDATION_FAILED", "Unsupported language: %s", req->captures[0]);
                return false;
        }
        /* This API's ids are at most 63 characters (seed 000); the domain
         * takes the bridge's longer ones too. */
        if (strlen(g->id) > 63) {
                workers_errorf(res, 400, "VALIDATION_FAILED", "Invalid sandbox id: %s", g->id);
                return false;
        }
        size_t i = 0;
        for (; g->rt->id[i] && i + 1 < sizeof(g->binding); i++)
                g->binding[i] = (char)toupper((unsigned char)g->rt->id[i]);
        g->binding[i] = '\0';
        return true;
}

/* gw_begin plus the JSON object body; NULL (res filled) on failure. */
static json_t *gw_begin_json(struct http_request *req, struct http_response *res, struct gw *g)
{
        return gw_begin(req, res, g) ? validate_json_object(req, res) : NULL;
}

/* Answers {success: true}, or the domain error r < 0 left in err. */
static void answer_success(struct http_response *res, int r, struct err *err)
{
        if (r < 0)
                workers_error_from(res, err);
        else
                http_json(res, 200, json_pack("{s:b}", "success", 1));
        err_done(err);
}

static void h_info(struct http_request *req, struct http_response *res)
{
        struct gw g;
        struct err err = { 0 };
        struct sbx_info info;
        if (!gw_begin(req, res, &g))
                return;
        if (sbx_info(g.app->sandboxes, g.id, &info, &err) < 0) {
                workers_error_from(res, &err);
        } else {
                http_json(res, 200, workers_sandbox_info_json(&info));
                sbx_info_done(&info);
        }
        err_done(&err);
}

static void h_destroy(struct http_request *req, struct http_response *res)
{
        struct gw g;
        struct err err = { 0 };
        if (gw_begin(req, res, &g))
                answer_success(res, sbx_destroy(g.app->sandboxes, g.id, &err), &err);
}

/* Runs a validated execute request and answers its ExecutionResult. */
/* With "display": true (a sandboxd extension; python), what the kernel
 * showed: display = the figures, data = the last expression's MIME bundle
 * (docs/kernel-protocol.md "Display"). */
static void add_display(json_t *body, const struct sbx_exec_result *r)
{
        json_t *display = json_object_get(r->outcome.response, "display");
        json_t *data = json_object_get(r->outcome.response, "data");
        json_object_set_new(body, "display", json_is_array(display) ? json_incref(display) : json_array());
        json_object_set_new(body, "data", json_is_object(data) ? json_incref(data) : json_null());
}

static void gw_execute(struct gw *g, const char *code, const char *context_id, json_t *env, bool display,
                       struct http_response *res)
{
        struct err err = { 0 };
        struct sbx_exec_result r;
        uint64_t start = now_ns();
        const struct sbx_cell cell = { .context_id = context_id, .code = code, .display = display };
        int rc = sbx_execute_cell(g->app->sandboxes, g->id, g->rt, g->binding, &cell, env, &r, &err);
        /* A missing sandbox or context is the caller's mistake, not a run. */
        if (rc == 0 || err.reason == ERR_UNAVAILABLE || err.reason == ERR_INTERNAL)
                api_count_execution(METRICS_API_GATEWAY, rc < 0 ? NULL : &r.outcome, start);
        if (rc < 0) {
                workers_error_from(res, &err);
                err_done(&err);
                return;
        }
        json_t *body = exec_result_json(r.rt, code, &r.outcome, &r.limits);
        if (body) {
                workers_add_context_block(body, &r);
                if (display)
                        add_display(body, &r);
                http_json(res, 200, body);
        } else {
                workers_error(res, 500, "INTERNAL_ERROR", "Cannot encode the result", NULL);
        }
        sbx_exec_result_done(&r);
}

static void h_execute(struct http_request *req, struct http_response *res)
{
        struct gw g;
        json_t *root = gw_begin_json(req, res, &g);
        if (!root)
                return;
        json_t *code = json_object_get(root, "code");
        json_t *cid = json_object_get(root, "contextId");
        json_t *display = json_object_get(root, "display");
        json_t *env = NULL;
        if (json_object_get(root, "input")) {
                workers_error(res, 400, "VALIDATION_FAILED", "input is no longer supported; pass data with envVars", NULL);
        } else if (json_object_get(root, "cwd")) {
                workers_error(res, 400, "VALIDATION_FAILED", "cwd is a context property; pass it to createCodeContext",
                           NULL);
        } else if (!json_is_string(code) || !code_non_empty(json_string_value(code))) {
                workers_error(res, 400, "VALIDATION_FAILED", "Non-empty code is required", NULL);
        } else if (json_string_length(code) > g.app->cfg->code_bytes) {
                workers_errorf(res, 413, "VALIDATION_FAILED", "Code exceeds %llu KiB",
                            (unsigned long long)(g.app->cfg->code_bytes / 1024));
        } else if (cid && !json_is_null(cid) && !json_is_string(cid)) {
                workers_error(res, 400, "VALIDATION_FAILED", "contextId must be a string", NULL);
        } else if (display && !json_is_boolean(display)) {
                workers_error(res, 400, "VALIDATION_FAILED", "display must be a boolean", NULL);
        } else if ((env = validate_env(json_object_get(root, "envVars"), ENV_REJECT_BAD_KEYS, true, res))) {
                gw_execute(&g, json_string_value(code), json_is_string(cid) ? json_string_value(cid) : NULL, env,
                           json_is_true(display), res);
        }
        json_decref(env);
        json_decref(root);
}

static void h_context_create(struct http_request *req, struct http_response *res)
{
        struct gw g;
        json_t *root = gw_begin_json(req, res, &g);
        if (!root)
                return;
        json_t *cwd = json_object_get(root, "cwd");
        json_t *env = NULL;
        if (cwd && !json_is_null(cwd) && !json_is_string(cwd)) {
                workers_error(res, 400, "VALIDATION_FAILED", "cwd must be a string", NULL);
        } else if ((env = validate_env(json_object_get(root, "envVars"), ENV_REJECT_BAD_KEYS, false, res))) {
                struct err err = { 0 };
                struct sbx_context_info info;
                if (sbx_context_create(g.app->sandboxes, g.id, g.rt, g.binding, json_string_value(cwd), env, &info,
                                       &err) < 0)
                        workers_error_from(res, &err);
                else
                        http_json(res, 201, workers_context_brief_json(&info));
                err_done(&err);
        }
        json_decref(env);
        json_decref(root);
}

static void h_context_list(struct http_request *req, struct http_response *res)
{
        struct gw g;
        struct err err = { 0 };
        struct sbx_context_info *list = NULL;
        size_t n = 0;
        if (!gw_begin(req, res, &g))
                return;
        if (sbx_context_list(g.app->sandboxes, g.id, &list, &n, &err) < 0) {
                workers_error_from(res, &err);
        } else {
                json_t *arr = json_array();
                for (size_t i = 0; arr && i < n; i++)
                        json_array_append_new(arr, workers_context_brief_json(&list[i]));
                http_json(res, 200, json_pack("{s:o}", "contexts", arr));
        }
        free(list);
        err_done(&err);
}

static void h_context_delete(struct http_request *req, struct http_response *res)
{
        struct gw g;
        struct err err = { 0 };
        if (gw_begin(req, res, &g))
                answer_success(res, sbx_context_delete(g.app->sandboxes, g.id, req->captures[2], &err), &err);
}

static void h_env(struct http_request *req, struct http_response *res)
{
        struct gw g;
        json_t *root = gw_begin_json(req, res, &g);
        if (!root)
                return;
        json_t *vars = json_object_get(root, "envVars");
        json_t *env = NULL;
        if (!json_is_object(vars)) {
                workers_error(res, 400, "VALIDATION_FAILED", "envVars must be an object", NULL);
        } else if ((env = validate_env(vars, ENV_REJECT_BAD_KEYS, true, res))) {
                struct err err = { 0 };
                answer_success(res, sbx_set_env(g.app->sandboxes, g.id, env, &err), &err);
        }
        json_decref(env);
        json_decref(root);
}

static void h_files(struct http_request *req, struct http_response *res)
{
        struct gw g;
        json_t *root = gw_begin_json(req, res, &g);
        if (!root)
                return;
        workers_files(g.app->sandboxes, g.id, root, res);
        json_decref(root);
}

/* Unknown sub-paths answer 404, known ones with the wrong method 405. */
static void h_other(struct http_request *req, struct http_response *res)
{
        static const struct {
                const char *sub, *allow;
        } known[] = { { "execute", "POST" }, { "contexts", "GET, POST" }, { "env", "POST" }, { "files", "POST" } };
        struct gw g;
        if (!gw_begin(req, res, &g))
                return;
        const char *sub = req->captures[2];
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
                if (strcmp(sub, known[i].sub) == 0) {
                        workers_errorf(res, 405, "VALIDATION_FAILED", "Method %s not allowed", req->method);
                        snprintf(res->allow, sizeof(res->allow), "%s", known[i].allow);
                        return;
                }
        if (strncmp(sub, "contexts/", 9) == 0 && !strchr(sub + 9, '/')) {
                workers_errorf(res, 405, "VALIDATION_FAILED", "Method %s not allowed", req->method);
                snprintf(res->allow, sizeof(res->allow), "DELETE");
                return;
        }
        workers_error(res, 404, "VALIDATION_FAILED", "Not found", NULL);
}

#define SBX "/languages/:lang/sandboxes/:id"
#define GW (ROUTE_BLOCKING)

/* GET /sandboxes (a sandboxd extension for the playground, the CLI and the
 * MCP server): the sandboxes this API serves, by creation, each with its
 * contexts: {sandboxes: [{id, createdAt, lastUsed, expiresAt, envVars,
 * contexts: [...]}], total, limit, offset}. ?limit 1-1000 (100), ?offset. */
struct listing {
        struct app *app;
        json_t *items;
};

static void list_one(const struct sbx_info *info, void *userdata)
{
        struct listing *l = userdata;
        struct sbx_info copy = *info;
        struct sbx_context_info *ctx = NULL;
        struct err err = { 0 };
        /* The stored view has no contexts; a vanished sandbox lists none. */
        if (sbx_context_list_org(l->app->sandboxes, SBX_DEFAULT_ORG, info->id, &ctx, &copy.ncontexts, &err) < 0)
                copy.ncontexts = 0;
        copy.contexts = ctx;
        json_array_append_new(l->items, workers_sandbox_info_json(&copy));
        free(ctx);
        err_done(&err);
}

static bool query_u64(struct http_request *req, const char *name, uint64_t def, uint64_t max, uint64_t *ret)
{
        const char *v = http_query(req, name);
        char *end;
        if (!v) {
                *ret = def;
                return true;
        }
        unsigned long long n = strtoull(v, &end, 10);
        if (!*v || *end || n > max || v[0] == '-')
                return false;
        *ret = n;
        return true;
}

static void h_list(struct http_request *req, struct http_response *res)
{
        struct listing l = { .app = req->app, .items = json_array() };
        uint64_t limit, offset, total = 0;
        struct err err = { 0 };
        if (!query_u64(req, "limit", 100, 1000, &limit) || limit == 0 || !query_u64(req, "offset", 0, UINT32_MAX, &offset)) {
                json_decref(l.items);
                workers_error(res, 400, "VALIDATION_FAILED", "limit must be 1-1000 and offset a whole number", NULL);
                return;
        }
        if (sbx_list_org(l.app->sandboxes, SBX_DEFAULT_ORG, limit, offset, list_one, &l, &total, &err) < 0) {
                json_decref(l.items);
                workers_error_from(res, &err);
        } else {
                http_json(res, 200, json_pack("{s:o, s:I, s:I, s:I}", "sandboxes", l.items, "total", (json_int_t)total,
                                              "limit", (json_int_t)limit, "offset", (json_int_t)offset));
        }
        err_done(&err);
}

static const struct route routes[] = {
        { "GET", "/sandboxes", h_list, 0, 0 },
        { "GET", SBX, h_info, GW, 0 },
        { "DELETE", SBX, h_destroy, GW, 0 },
        { "POST", SBX "/execute", h_execute, GW, 0 },
        { "POST", SBX "/contexts", h_context_create, GW, 0 },
        { "GET", SBX "/contexts", h_context_list, GW, 0 },
        { "DELETE", SBX "/contexts/:cid", h_context_delete, GW, 0 },
        { "POST", SBX "/env", h_env, GW, 0 },
        { "POST", SBX "/files", h_files, GW, workers_files_body_cap },
        { "GET", SBX "/*", h_other, 0, 0 },
        { "POST", SBX "/*", h_other, 0, 0 },
        { "DELETE", SBX "/*", h_other, 0, 0 },
};

const struct route *api_gateway_routes(size_t *ret_n)
{
        *ret_n = sizeof(routes) / sizeof(routes[0]);
        return routes;
}
