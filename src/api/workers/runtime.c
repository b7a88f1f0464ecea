/* The runtime facade (seed 000): stateless POST /execute[/<language>],
 * GET /languages, the per-runtime routes under /runtimes/<language>/, and
 * /health and /ready. */
#include <string.h>

#include "api/workers/envelope.h"
#include "api/app.h"
#include "api/common/exec_metrics.h"
#include "api/workers/result_json.h"
#include "api/workers/validate.h"
#include "base/log.h"
#include "runtimes/runtime.h"

#define KERNEL_PROTOCOL 1

static struct app *app_of(struct http_request *req)
{
        return req->app;
}

static void run_stateless(struct http_request *req, struct http_response *res, const char *lang)
{
        struct app *app = app_of(req);
        bool typescript = false;
        const struct runtime *rt = runtime_resolve(lang, &typescript);
        if (!rt) {
                workers_errorf(res, 400, "VALIDATION_FAILED", "Unsupported language: %s", lang);
                return;
        }
        struct exec_body body;
        if (!validate_exec_body(req, typescript ? "typescript" : rt->id, app->cfg->code_bytes, &body, res))
                return;
        /* As the reference: JavaScript that does not parse is retried as
         * TypeScript (types stripped), so every JS route accepts TS. */
        typescript = strcmp(rt->id, "javascript") == 0;
        struct err err = { 0 };
        struct exec_outcome o;
        json_t *result = NULL;
        uint64_t start = now_ns();
        if (exec_stateless(app->engine, rt, body.code, body.env, typescript, &o, &err) == 0) {
                api_count_execution(METRICS_API_RUNTIME, &o, start);
                result = exec_result_json(rt, body.code, &o, engine_limits(app->engine));
                exec_outcome_done(&o);
        } else {
                api_count_execution(METRICS_API_RUNTIME, NULL, start);
        }
        exec_body_done(&body);
        if (!result) {
                /* Every engine failure is the gateway's upstream failure here,
                 * whatever its reason (as the reference's dead Worker). */
                workers_errorf(res, 502, "INTERNAL_ERROR", "Engine execution failed (%s)",
                               err.msg[0] ? err.msg : "unknown");
                err_done(&err);
                return;
        }
        http_json(res, 200, result);
}

static void h_execute_lang(struct http_request *req, struct http_response *res)
{
        run_stateless(req, res, req->captures[0]);
}

static void h_execute_default(struct http_request *req, struct http_response *res)
{
        run_stateless(req, res, "javascript");
}

static json_t *string_array(const char *const *items, size_t max)
{
        json_t *arr = json_array();
        for (size_t i = 0; i < max && items[i]; i++)
                json_array_append_new(arr, json_string(items[i]));
        return arr;
}

static json_t *language_json(const struct app *app, const struct runtime *rt)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:b, s:o, s:{s:I, s:I, s:I, s:I, s:I}}", "id", rt->id,
                         "name", rt->name, "package", rt->package, "version", rt->version, "engine", rt->engine,
                         "enabled", rt->version[0] != '\0', "mode", "script", "contexts", rt->contexts,
                         "capabilities", string_array(rt->capabilities, 8), "limits", "codeBytes",
                         (json_int_t)app->cfg->code_bytes, "requestBytes", (json_int_t)app->cfg->request_bytes,
                         "fuel", (json_int_t)(app->cfg->cpu_ms * 1000), "memoryBytes",
                         (json_int_t)app->cfg->memory_bytes, "wallMs", (json_int_t)app->cfg->wall_ms);
}

static void h_languages(struct http_request *req, struct http_response *res)
{
        json_t *arr = json_array();
        for (size_t i = 0; i < runtime_count(); i++)
                json_array_append_new(arr, language_json(app_of(req), runtime_at(i)));
        http_json(res, 200, json_pack("{s:o}", "languages", arr));
}

static const struct runtime *runtime_from_path(struct http_request *req, struct http_response *res)
{
        const struct runtime *rt = runtime_find(req->captures[0]);
        if (!rt)
                workers_errorf(res, 404, "VALIDATION_FAILED", "Unknown runtime: %s", req->captures[0]);
        return rt;
}

static void h_runtime_interpreter(struct http_request *req, struct http_response *res)
{
        const struct runtime *rt = runtime_from_path(req, res);
        if (rt)
                http_json(res, 200, json_pack("{s:s, s:s, s:b, s:i}", "language", rt->id, "engine", rt->engine,
                                              "contexts", rt->contexts, "protocol", KERNEL_PROTOCOL));
}

static void h_runtime_execute(struct http_request *req, struct http_response *res)
{
        if (runtime_from_path(req, res))
                run_stateless(req, res, req->captures[0]);
}

static void h_health(struct http_request *req, struct http_response *res)
{
        (void)req;
        /* One /health for every facade: the runtime API reads status, the
         * bridge's clients ok. */
        http_json(res, 200, json_pack("{s:s, s:b}", "status", "ok", "ok", 1));
}

/* {lang: {ready, target, grown, hits, misses, memberBytes[, template: {alive, forks, failures}]}} */
static json_t *pool_stats_json(struct engine *e)
{
        struct engine_pool_stats st[ENGINE_MAX_RUNTIMES];
        size_t n = engine_pool_stats(e, st, ARRAY_SIZE(st));
        json_t *o = json_object();
        for (size_t i = 0; i < n; i++) {
                json_t *entry = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "ready", (json_int_t)st[i].ready,
                                          "target", (json_int_t)st[i].target, "grown", (json_int_t)st[i].grown,
                                          "hits", (json_int_t)st[i].hits, "misses", (json_int_t)st[i].misses,
                                          "memberBytes", (json_int_t)st[i].member_bytes);
                if (st[i].has_template)
                        json_object_set_new(entry, "template",
                                            json_pack("{s:b, s:I, s:I}", "alive", st[i].template_alive, "forks",
                                                      (json_int_t)st[i].template_forks, "failures",
                                                      (json_int_t)st[i].template_failures));
                json_object_set_new(o, st[i].lang, entry);
        }
        return o;
}

static void h_ready(struct http_request *req, struct http_response *res)
{
        struct app *app = app_of(req);
        if (http_server_draining(app->srv)) {
                workers_error(res, 503, "NOT_READY", "Server is shutting down", NULL);
                res->retry_after = 1;
                return;
        }
        struct sbx_warm_runtime_stats w;
        sbx_warm_runtime_stats(app->sandboxes, &w);
        struct sbx_spare_stats sp;
        sbx_spare_stats(app->sandboxes, &sp);
        http_json(res, 200,
                  json_pack("{s:s, s:s, s:I, s:o, s:I, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I}}", "status", "ready",
                            "cgroup", cgroup_backend_name(engine_cgroup_backend(app->engine)), "uptimeMs",
                            (json_int_t)(wall_ms() - app->started_ms), "pools", pool_stats_json(app->engine),
                            "residentContexts", (json_int_t)sbx_resident_count(app->sandboxes), "warmSandboxes",
                            "ready", (json_int_t)w.ready, "taken", (json_int_t)w.taken, "adopted",
                            (json_int_t)w.adopted, "spareJails", "held", (json_int_t)sp.held, "hits",
                            (json_int_t)sp.hits, "misses", (json_int_t)sp.misses));
}

static const struct route routes[] = {
        { "GET", "/health", h_health, ROUTE_PUBLIC, 0 },
        { "GET", "/ready", h_ready, ROUTE_PUBLIC, 0 },
        { "GET", "/languages", h_languages, 0, 0 },
        { "POST", "/execute", h_execute_default, ROUTE_BLOCKING | ROUTE_JSON, 0 },
        { "POST", "/execute/:lang", h_execute_lang, ROUTE_BLOCKING | ROUTE_JSON, 0 },
        { "GET", "/runtimes/:lang/interpreter", h_runtime_interpreter, 0, 0 },
        { "POST", "/runtimes/:lang/execute", h_runtime_execute, ROUTE_BLOCKING | ROUTE_JSON, 0 },
};

const struct route *api_runtime_routes(size_t *ret_n)
{
        *ret_n = sizeof(routes) / sizeof(routes[0]);
        return routes;
}
