/* The org's side of the GitHub integration (seed 003 "GitHub
 * Integrations"): GET /github/installations, POST
 * /github/installations/:id/connect, DELETE /github/installations/:id,
 * GET/PUT /github/settings, GET /github/events, GET /github/health; and
 * the route of the public webhook receiver (github_webhook.c).
 *
 * Installations arrive by webhook and wait, pending, until an org connects
 * one. Every org sees the pending ones, with the account they were
 * installed on and nothing else (no repositories): the GitHub App's setup
 * redirect hands the installer its id, and the org connects it right
 * after. Once linked, an installation is its org's alone: any other org
 * gets 404 on it (connect, delete), as on an id that does not exist. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "api/controller/github.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/util.h"

#define GH_WEBHOOK_MAX_BODY (8u << 20)   /* GitHub caps deliveries at 25 MB; PR payloads are far smaller */
#define GH_HEALTH_WINDOW_DEFAULT 24
#define GH_HEALTH_WINDOW_MAX 168

/* ---- settings ---------------------------------------------------------- */

static const struct {
        const char *name;
        size_t offset;
        bool dflt;
} settings_fields[] = {
        { "auto_create_sandbox_on_pr", offsetof(struct gh_settings, auto_create_sandbox_on_pr), false },
        { "auto_pr_comment_on_sandbox", offsetof(struct gh_settings, auto_pr_comment_on_sandbox), true },
        { "auto_stop_sandbox_on_pr_close", offsetof(struct gh_settings, auto_stop_sandbox_on_pr_close), true },
};

static bool *settings_field(struct gh_settings *s, size_t i)
{
        return (bool *)((char *)s + settings_fields[i].offset);
}

int gh_settings_load(struct app *app, const char *org_id, struct gh_settings *ret, uint64_t *ret_updated_at)
{
        _cleanup_free_ char *text = NULL;
        uint64_t at = 0;
        int r = store_gh_settings_get(app->store, org_id, &text, &at);
        if (r < 0 && r != -ENOENT)
                return r;
        _cleanup_json_ json_t *j = text ? json_loads(text, 0, NULL) : NULL;
        for (size_t i = 0; i < ARRAY_SIZE(settings_fields); i++) {
                json_t *v = json_object_get(j, settings_fields[i].name);
                *settings_field(ret, i) = json_is_boolean(v) ? json_is_true(v) : settings_fields[i].dflt;
        }
        *ret_updated_at = at;
        return 0;
}

static json_t *settings_json(struct gh_settings *s)
{
        json_t *j = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(settings_fields); i++)
                json_object_set_new(j, settings_fields[i].name, json_boolean(*settings_field(s, i)));
        return j;
}

static void settings_reply(struct http_request *req, struct http_response *res, int status)
{
        struct gh_settings s;
        uint64_t at;
        if (gh_settings_load(req->app, ctl_caller(req)->who.org_id, &s, &at) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot read the GitHub settings");
                return;
        }
        json_t *j = settings_json(&s);
        ctl_put_time(j, "updated_at", at);
        http_json(res, status, j);
}

static void h_settings_get(struct http_request *req, struct http_response *res)
{
        settings_reply(req, res, 200);
}

/* A partial update: the members given (each a known setting, a boolean)
 * over the stored ones. */
static void h_settings_put(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id;
        _cleanup_json_ json_t *b = NULL;
        if (!ctl_body_object(req, res, &b))
                return;
        if (!json_object_size(b)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "Give at least one setting");
                return;
        }
        struct gh_settings s;
        uint64_t at;
        if (gh_settings_load(app, org, &s, &at) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot read the GitHub settings");
                return;
        }
        const char *k;
        json_t *v;
        json_object_foreach(b, k, v)
        {
                size_t i = 0;
                while (i < ARRAY_SIZE(settings_fields) && strcmp(settings_fields[i].name, k) != 0)
                        i++;
                if (i == ARRAY_SIZE(settings_fields)) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "Unknown setting: %.64s", k);
                        return;
                }
                if (!json_is_boolean(v)) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be a boolean", k);
                        return;
                }
                *settings_field(&s, i) = json_is_true(v);
        }
        _cleanup_json_ json_t *j = settings_json(&s);
        _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);
        if (!text || store_gh_settings_put(app->store, org, text, wall_ms()) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot store the GitHub settings");
                return;
        }
        settings_reply(req, res, 200);
}

/* ---- installations ------------------------------------------------------ */

static json_t *install_json(const struct gh_install_row *row)
{
        bool pending = !row->org_id[0];
        json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "id", row->id, "account_login", row->account_login,
                              "account_type", row->account_type, "state", pending ? "pending" : "linked");
        ctl_put_time(j, "created_at", row->created_at);
        if (pending)
                return j;
        json_t *repos = json_loads(row->repos_json, 0, NULL);
        json_object_set_new(j, "status", json_string(row->status));
        json_object_set_new(j, "repositories", json_is_array(repos) ? repos : json_array());
        if (!json_is_array(repos))
                json_decref(repos);
        json_object_set_new(j, "org_id", json_string(row->org_id));
        ctl_put_time(j, "connected_at", row->connected_at);
        ctl_put_time(j, "updated_at", row->updated_at);
        return j;
}

static void on_install(const struct gh_install_row *row, void *userdata)
{
        json_array_append_new(userdata, install_json(row));
}

static int fill_installs(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                         struct err *err)
{
        struct app *app = req->app;
        _cleanup_json_ json_t *all = json_array();
        int r = store_gh_install_each(app->store, ctl_caller(req)->who.org_id, true, on_install, all);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot list GitHub installations");
        *ret_total = json_array_size(all);
        for (uint64_t i = p->offset; i < *ret_total && i - p->offset < p->limit; i++)
                json_array_append(data, json_array_get(all, i));
        return 0;
}

static void h_installs(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, fill_installs);
}

/* GitHub's installation ids are positive integers: anything else is no
 * installation (404, never a 400 that would tell ids apart). */
static bool install_id_ok(const char *id)
{
        size_t n = strlen(id);
        return n >= 1 && n <= 20 && strspn(id, "0123456789") == n && id[0] != '0';
}

static void not_found(struct http_response *res)
{
        ctl_error(res, 404, "NOT_FOUND", "GitHub installation not found");
}

static void h_connect(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id, *id = req->captures[0];
        int r = install_id_ok(id) ? store_gh_install_link(app->store, id, "", org, wall_ms()) : -ENOENT;
        if (r < 0 && r != -ENOENT) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot connect the installation");
                return;
        }
        /* -ENOENT: not pending. Connecting what the org holds already
         * answers as the first time; anything else is nobody's business. */
        _cleanup_(gh_install_row_done) struct gh_install_row row = {};
        if (store_gh_install_get(app->store, id, &row) < 0 || strcmp(row.org_id, org) != 0) {
                not_found(res);
                return;
        }
        http_json(res, 200, install_json(&row));
}

CTL_IDEMPOTENT(h_connect_idem, h_connect)

static void h_disconnect(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *id = req->captures[0];
        int r = install_id_ok(id) ? store_gh_install_link(app->store, id, ctl_caller(req)->who.org_id, "", wall_ms())
                                  : -ENOENT;
        if (r == -ENOENT)
                not_found(res);
        else if (r < 0)
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot disconnect the installation");
        else
                http_json(res, 200, json_pack("{s:s, s:s}", "id", id, "state", "disconnected"));
}

/* ---- events and health -------------------------------------------------- */

/* A stored text as JSON: cut messages may end inside a UTF-8 sequence,
 * which is dropped rather than losing the whole event. */
static json_t *str_or_null(const char *s)
{
        return s[0] ? json_stringn(s, utf8_complete_len(s, strlen(s))) ?: json_string("") : json_null();
}

static json_t *event_json(const struct gh_event_row *e)
{
        json_t *j = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "id", e->id, "event", e->event,
                              "status", e->status, "action", str_or_null(e->action), "delivery_id",
                              str_or_null(e->delivery_id), "installation_id", str_or_null(e->installation_id),
                              "repository", str_or_null(e->repo), "error", str_or_null(e->error), "detail",
                              str_or_null(e->detail));
        json_object_set_new(j, "pull_request_number",
                            e->pr_number ? json_integer((json_int_t)e->pr_number) : json_null());
        json_object_set_new(j, "sandbox_id", str_or_null(e->sandbox_id));
        ctl_put_time(j, "received_at", e->received_at);
        return j;
}

static void on_event(const struct gh_event_row *row, void *userdata)
{
        json_array_append_new(userdata, event_json(row));
}

static int fill_events(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                       struct err *err)
{
        struct app *app = req->app;
        int r = store_gh_event_each(app->store, ctl_caller(req)->who.org_id, p->limit, p->offset, on_event, data,
                                    ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot list GitHub events") : 0;
}

static void h_events(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, fill_events);
}

static void count_install(const struct gh_install_row *row, void *userdata)
{
        uint64_t *n = userdata;
        n[0]++;
        n[1] += !strcmp(row->status, "active");
}

/* ?window_hours: absent → 24, else an integer 1…168. */
static bool parse_window(struct http_request *req, struct http_response *res, uint64_t *ret)
{
        const char *v = http_query(req, "window_hours");
        *ret = GH_HEALTH_WINDOW_DEFAULT;
        if (!v)
                return true;
        size_t n = strlen(v);
        if (n >= 1 && n <= 3 && strspn(v, "0123456789") == n) {
                *ret = strtoull(v, NULL, 10);
                if (*ret >= 1 && *ret <= GH_HEALTH_WINDOW_MAX)
                        return true;
        }
        ctl_errorf(res, 400, "VALIDATION_ERROR", "window_hours must be an integer from 1 to %d", GH_HEALTH_WINDOW_MAX);
        return false;
}

/* not_configured (no webhook secret), not_connected (no installation),
 * unhealthy (only failures in the window), degraded (some), healthy. */
static const char *health_status(const struct app *app, uint64_t installs, const struct gh_event_stats *st)
{
        if (!app->cfg->ctl_github_webhook_secret[0])
                return "not_configured";
        if (!installs)
                return "not_connected";
        if (st->failure)
                return st->success ? "degraded" : "unhealthy";
        return "healthy";
}

static void h_health(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id;
        uint64_t hours, installs[2] = { 0, 0 };
        struct gh_event_stats st;
        if (!parse_window(req, res, &hours))
                return;
        uint64_t now = wall_ms(), since = now > hours * 3600000 ? now - hours * 3600000 : 0;
        if (store_gh_install_each(app->store, org, false, count_install, installs) < 0 ||
            store_gh_event_stats(app->store, org, since, &st) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot read the GitHub integration's state");
                return;
        }
        json_t *j = json_pack("{s:s, s:I, s:b, s:b, s:{s:I, s:I}, s:{s:I, s:I, s:I}}", "status",
                              health_status(app, installs[0], &st), "window_hours", (json_int_t)hours,
                              "webhook_configured", app->cfg->ctl_github_webhook_secret[0] != '\0', "app_configured",
                              gh_app_configured(app), "installations", "total", (json_int_t)installs[0], "active",
                              (json_int_t)installs[1], "webhooks", "success", (json_int_t)st.success, "failure",
                              (json_int_t)st.failure, "total", (json_int_t)(st.success + st.failure));
        json_object_set_new(j, "latest_event", st.has_latest ? event_json(&st.latest) : json_null());
        json_object_set_new(j, "latest_failure", st.has_failure ? event_json(&st.latest_failure) : json_null());
        http_json(res, 200, j);
}

static size_t webhook_cap(const void *app)
{
        (void)app;
        return GH_WEBHOOK_MAX_BODY;
}

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/github/webhook", gh_webhook, ROUTE_PUBLIC | ROUTE_BLOCKING, webhook_cap },
        { "GET", CTL_PREFIX "/github/installations", h_installs, ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/github/installations/:id/connect", h_connect_idem, ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/github/installations/:id", h_disconnect, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/github/settings", h_settings_get, ROUTE_BLOCKING, 0 },
        { "PUT", CTL_PREFIX "/github/settings", h_settings_put, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/github/events", h_events, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/github/health", h_health, ROUTE_BLOCKING, 0 },
};

const struct route *ctl_github_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
