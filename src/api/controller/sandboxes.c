/* Controller sandboxes (seed 003, "Sandboxes"): POST /sandbox/create
 * (Idempotency-Key aware), GET /sandboxes (the caller's org, paginated),
 * GET /sandbox/:id, GET /sandbox/:id/status, POST /sandbox/:id/stop and its
 * alias DELETE /sandbox/:id. A sandbox belongs to the caller's org: any
 * other org (the single-key APIs' "default" included) gets a 404.
 *
 * Decisions (docs/controller-api.md): cpus and memory become the CPU quota
 * and memory limit of the sandbox's parent cgroup; timeout_seconds is an
 * absolute lifetime (activity does not renew it); only the "container"
 * isolation exists here; stop destroys the sandbox (status "stopped" in its
 * answer, then 404), so a listed sandbox is always "running". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "api/controller/sandbox_limits.h"
#include "api/workers/validate.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

int ctl_sandbox_id_new(char out[37])
{
        unsigned char b[16];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        size_t n = 0;
        for (size_t i = 0; i < sizeof(b); i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        out[n++] = '-';
                n += (size_t)snprintf(out + n, 3, "%02x", b[i]);
        }
        out[n] = '\0';
        return 0;
}

void ctl_put_time(json_t *j, const char *name, uint64_t ms)
{
        char at[32];
        if (!ms) {
                json_object_set_new(j, name, json_null());
                return;
        }
        iso8601_ms(ms, at);
        json_object_set_new(j, name, json_string(at));
}

static json_t *sandbox_json(const struct sbx_info *info, const char *status)
{
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "sandbox_id", info->id, "org_id", info->org_id,
                              "session_id", info->id, "status", status, "isolation", "container");
        ctl_put_time(j, "created_at", info->created_at);
        ctl_put_time(j, "expires_at", info->expires_at);
        json_object_set_new(j, "cpus", info->cpu_millis ? json_real((double)info->cpu_millis / 1000) : json_null());
        json_object_set_new(j, "memory_bytes",
                            info->memory_bytes ? json_integer((json_int_t)info->memory_bytes) : json_null());
        return j;
}

static void fail(struct http_response *res, struct err *err)
{
        ctl_error_done(res, err, ERR_OK, 0, NULL);
}

/* The body's env: {name: string}, names as shell variables. */
static bool parse_env(json_t *v, struct http_response *res)
{
        if (!v || json_is_null(v))
                return true;
        if (!json_is_object(v)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "env must be an object of strings");
                return false;
        }
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val)
        {
                if (!env_key_valid(k) || strlen(k) > 256) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "Invalid env name: %.64s", k);
                        return false;
                }
                if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val)) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "env %s must be a string without NUL bytes", k);
                        return false;
                }
        }
        return true;
}

/* isolation: only what this host does; never a silent downgrade. */
static bool parse_isolation(json_t *b, struct http_response *res)
{
        json_t *iso = json_object_get(b, "isolation");
        const char *s = json_is_string(iso) ? json_string_value(iso) : NULL;
        if (iso && !json_is_null(iso) && !s) {
                ctl_error(res, 400, "VALIDATION_ERROR", "isolation must be a string");
                return false;
        }
        if (s && strcmp(s, "container") != 0) {
                bool known = !strcmp(s, "gvisor") || !strcmp(s, "microvm") || !strcmp(s, "wasm");
                ctl_errorf(res, 400, "VALIDATION_ERROR",
                           "isolation '%.32s' is %s; supported: container (namespaces, seccomp, Landlock, cgroups)",
                           s, known ? "not available on this host" : "unknown");
                return false;
        }
        json_t *wn = json_object_get(b, "wasm_network");
        if (wn && !json_is_null(wn)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "wasm_network is valid only with isolation wasm");
                return false;
        }
        return true;
}

static bool parse_create(json_t *b, struct sbx_create_options *o, struct http_response *res)
{
        const char *bad = NULL;
        json_t *t = json_object_get(b, "timeout_seconds");
        if (!parse_isolation(b, res))
                return false;
        if (ctl_parse_cpus(json_object_get(b, "cpus"), &o->cpu_millis, &bad) < 0 ||
            ctl_parse_memory(json_object_get(b, "memory"), &o->memory_bytes, &bad) < 0) {
                ctl_error(res, 400, "VALIDATION_ERROR", bad);
                return false;
        }
        o->lifetime_ms = CTL_SANDBOX_TIMEOUT_DEFAULT_S * 1000;
        if (t && !json_is_null(t)) {
                double v = json_is_number(t) ? json_number_value(t) : -1;
                if (v < 1 || v > CTL_SANDBOX_TIMEOUT_MAX_S || v != (double)(uint64_t)v) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "timeout_seconds must be an integer from 1 to %d",
                                   CTL_SANDBOX_TIMEOUT_MAX_S);
                        return false;
                }
                o->lifetime_ms = (uint64_t)v * 1000;
        }
        o->env = json_object_get(b, "env");
        return parse_env(o->env, res);
}

/* b's env over env_base into a new object (NULL: no env at all). */
static json_t *merged_env(json_t *env_base, json_t *env)
{
        if (!env_base || !json_object_size(env_base))
                return json_incref(env);
        json_t *m = json_deep_copy(env_base);
        if (m && env)
                json_object_update(m, env);
        return m;
}

bool ctl_sandbox_create(struct http_request *req, struct http_response *res, json_t *b, json_t *env_base,
                        json_t **ret_view)
{
        struct app *app = req->app;
        uint64_t t0 = now_ms();
        struct sbx_create_options o = { .org_id = ctl_caller(req)->who.org_id };
        if (!parse_create(b, &o, res))
                return false;
        if (json_is_null(o.env))
                o.env = NULL;
        _cleanup_json_ json_t *env = o.env = merged_env(env_base, o.env);
        char id[37];
        struct err err = {};
        if (ctl_sandbox_id_new(id) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot make a sandbox id");
                return false;
        }
        struct sbx_info info;
        if (sbx_create(app->sandboxes, id, &o, NULL, &err) < 0 || sbx_find(app->sandboxes, o.org_id, id, &info, &err) < 0) {
                fail(res, &err);
                return false;
        }
        json_t *j = sandbox_json(&info, "running");
        json_object_set_new(j, "startup_metrics", json_pack("{s:I}", "total_ms", (json_int_t)(now_ms() - t0)));
        sbx_info_done(&info);
        *ret_view = j;
        return true;
}

static void h_create(struct http_request *req, struct http_response *res)
{
        _cleanup_json_ json_t *b = NULL;
        json_t *view;
        if (ctl_body_object(req, res, &b) && ctl_sandbox_create(req, res, b, NULL, &view))
                http_json(res, 201, view);
}

CTL_BUDGETED(h_create_budgeted, CTL_SLOT_SANDBOX, CTL_PREFIX "/sandbox/create", h_create)
CTL_IDEMPOTENT(h_create_idem, h_create_budgeted)

static void on_sandbox(const struct sbx_info *info, void *userdata)
{
        json_array_append_new(userdata, sandbox_json(info, "running"));
}

static int fill_sandboxes(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                          struct err *err)
{
        struct app *app = req->app;
        return sbx_list_org(app->sandboxes, ctl_caller(req)->who.org_id, p->limit, p->offset, on_sandbox, data,
                            ret_total, err);
}

static void h_list(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, fill_sandboxes);
}

/* The caller's sandbox :id into info, or false with a 404 in res. */
static bool find(struct http_request *req, struct http_response *res, struct sbx_info *info)
{
        struct app *app = req->app;
        struct err err = {};
        if (sbx_find(app->sandboxes, ctl_caller(req)->who.org_id, req->captures[0], info, &err) == 0)
                return true;
        fail(res, &err);
        return false;
}

static void h_get(struct http_request *req, struct http_response *res)
{
        struct sbx_info info;
        if (!find(req, res, &info))
                return;
        http_json(res, 200, sandbox_json(&info, "running"));
        sbx_info_done(&info);
}

static void h_status(struct http_request *req, struct http_response *res)
{
        struct sbx_info info;
        if (!find(req, res, &info))
                return;
        json_t *j = json_pack("{s:s, s:s}", "sandbox_id", info.id, "status", "running");
        ctl_put_time(j, "expires_at", info.expires_at);
        sbx_info_done(&info);
        http_json(res, 200, j);
}

static void h_stop(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = {};
        if (sbx_destroy_org(app->sandboxes, ctl_caller(req)->who.org_id, req->captures[0], &err) < 0)
                fail(res, &err);
        else
                http_json(res, 200, json_pack("{s:s, s:s}", "sandbox_id", req->captures[0], "status", "stopped"));
}

CTL_IDEMPOTENT(h_stop_idem, h_stop)

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/sandbox/create", h_create_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/sandboxes", h_list, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/sandbox/:id", h_get, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/sandbox/:id/status", h_status, ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/sandbox/:id/stop", h_stop_idem, ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/sandbox/:id", h_stop, ROUTE_BLOCKING, 0 },
};

const struct route *ctl_sandbox_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
