/* Webhooks (seed 003 "/webhooks"; issue 15): an org's HTTPS endpoints
 * that receive its events, signed with a per-webhook secret.
 *
 *   POST   /webhooks {url, events?, description?, active?}  201 + secret (once)
 *   GET    /webhooks                         paginated, never a secret
 *   GET    /webhooks/:id
 *   PATCH  /webhooks/:id (PUT too)           any of the create fields
 *   DELETE /webhooks/:id                     with its delivery log
 *   POST   /webhooks/:id/rotate-secret       200 + the new secret (once)
 *   POST   /webhooks/:id/test                202: a webhook.test delivery queued
 *   GET    /webhooks/:id/deliveries          paginated delivery log, newest first
 *   GET    /webhooks/:id/deliveries/:did     one delivery with its body
 *   POST   /webhooks/:id/deliveries/:did/redeliver   202: the same body again
 *
 * Scoped by the caller's org (another org's webhook or delivery: 404).
 * Sending, retries and the signature: tenant/webhook_dispatch.c. */
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/time.h"
#include "base/util.h"
#include "tenant/webhooks.h"

#define EVENTS_MAX 64
#define EVENT_NAME_MAX 63
#define DESCRIPTION_MAX 500

static json_t *webhook_json(const struct webhook_row *w)
{
        json_t *events = json_loads(w->events_json, 0, NULL);
        return json_pack("{s:s, s:s, s:o, s:s, s:b, s:o, s:o, s:o, s:o}", "id", w->id, "url", w->url, "events",
                         events ? events : json_array(), "description", w->description, "active", w->active,
                         "disabled_reason", w->disabled_reason[0] ? json_string(w->disabled_reason) : json_null(),
                         "failing_since", webhook_time_json(w->failing_since), "created_at", webhook_time_json(w->created_at),
                         "updated_at", webhook_time_json(w->updated_at));
}

static json_t *delivery_json(const struct webhook_delivery_row *d, bool with_payload)
{
        char event_id[32];
        snprintf(event_id, sizeof(event_id), "evt_%llu", (unsigned long long)d->event_id);
        json_t *log = json_loads(d->log_json, 0, NULL);
        json_t *j = json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:I, s:o, s:o, s:I, s:o, s:o, s:o, s:o}", "id", d->id,
                              "webhook_id", d->webhook_id, "event_id",
                              d->event_id ? json_string(event_id) : json_null(), "event", d->event, "origin",
                              d->origin, "status", d->status, "attempts", (json_int_t)d->attempts, "status_code",
                              d->last_status ? json_integer(d->last_status) : json_null(), "error",
                              d->last_error[0] ? json_string(d->last_error) : json_null(), "duration_ms",
                              (json_int_t)d->last_duration_ms, "next_retry_at", webhook_time_json(d->next_attempt_at),
                              "created_at", webhook_time_json(d->created_at), "delivered_at", webhook_time_json(d->delivered_at),
                              "attempt_log", log ? log : json_array());
        if (j && with_payload)
                json_object_set_new(j, "payload", json_loads(d->payload, 0, NULL));
        return j;
}

static void store_fail(struct http_response *res, int r, const char *what)
{
        if (r == -ENOENT)
                ctl_errorf(res, 404, "NOT_FOUND", "%s not found", what);
        else
                ctl_errorf(res, 500, "INTERNAL_ERROR", "cannot read or write the %s (errno %d)", what, -r);
}

/* The caller's webhook :id into *ret, or false with a 404/500 in res. */
static bool hook_find(struct http_request *req, struct http_response *res, struct webhook_row *ret)
{
        struct app *app = req->app;
        int r = store_webhook_get(app->store, ctl_caller(req)->who.org_id, req->captures[0], ret);
        if (r < 0)
                store_fail(res, r, "webhook");
        return r == 0;
}

/* "*", or dot-separated words of [a-z0-9_-], optionally ending in ".*". */
static bool event_name_ok(const char *s)
{
        size_t n = strlen(s);
        if (strcmp(s, "*") == 0)
                return true;
        if (n == 0 || n > EVENT_NAME_MAX || s[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
                if (c == '*' && !(i == n - 1 && i > 0 && s[i - 1] == '.'))
                        return false;
                if (!word && c != '.' && c != '*')
                        return false;
                if (c == '.' && (i == n - 1 || s[i + 1] == '.'))
                        return false;
        }
        return true;
}

/* The body's "events" as JSON text into *ret (malloc), or false + 400. */
static bool events_parse(json_t *v, struct http_response *res, char **ret)
{
        size_t i;
        json_t *e;
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > EVENTS_MAX) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "events must be a non-empty array of at most %d names",
                           EVENTS_MAX);
                return false;
        }
        json_array_foreach(v, i, e)
        {
                if (!json_is_string(e) || !event_name_ok(json_string_value(e))) {
                        ctl_error(res, 400, "VALIDATION_ERROR",
                                  "events must hold event names (\"sandbox.created\"), families (\"sandbox.*\") or "
                                  "\"*\"");
                        return false;
                }
        }
        *ret = json_dumps(v, JSON_COMPACT);
        return *ret != NULL;
}

/* Applies the body's fields to row (create: url required). */
static bool hook_apply(struct http_request *req, struct http_response *res, json_t *b, struct webhook_row *row,
                       bool create)
{
        struct app *app = req->app;
        json_t *url = json_object_get(b, "url"), *events = json_object_get(b, "events");
        json_t *desc = json_object_get(b, "description"), *active = json_object_get(b, "active");
        struct err err = {};
        if ((create || url) && (!json_is_string(url) || strlen(json_string_value(url)) != json_string_length(url))) {
                ctl_error(res, 400, "VALIDATION_ERROR", "url is required (a string)");
                return false;
        }
        if (url && webhook_url_check(json_string_value(url), app->cfg->ctl_webhooks_allow_private, &err) < 0) {
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return false;
        }
        if (desc && !json_is_null(desc) && (!json_is_string(desc) || json_string_length(desc) > DESCRIPTION_MAX)) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "description must be a string of at most %d bytes",
                           DESCRIPTION_MAX);
                return false;
        }
        if (active && !json_is_boolean(active)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "active must be a boolean");
                return false;
        }
        char *ev = NULL;
        if (events && !events_parse(events, res, &ev))
                return false;
        if (ev) {
                free(row->events_json);
                row->events_json = ev;
        }
        char *u = url ? strdup(json_string_value(url)) : NULL;
        if (u) {
                free(row->url);
                row->url = u;
        }
        char *d = desc ? strdup(json_is_string(desc) ? json_string_value(desc) : "") : NULL;
        if (d) {
                free(row->description);
                row->description = d;
        }
        if (active && json_is_true(active) && !row->active) {
                /* Switched on again: its failure streak starts afresh. */
                row->failing_since = 0;
                row->disabled_reason[0] = '\0';
        }
        if (active)
                row->active = json_is_true(active);
        row->updated_at = wall_ms();
        if (!row->url || !row->events_json || !row->description) {
                ctl_error(res, 500, "INTERNAL_ERROR", "out of memory");
                return false;
        }
        return true;
}

/* A fresh secret sealed into row, row saved, and the view with the
 * secret: the only replies that ever show it. */
static void save_with_secret(struct http_request *req, struct http_response *res, struct webhook_row *row,
                             int (*save)(struct store *s, const struct webhook_row *row), int status)
{
        struct app *app = req->app;
        char secret[WEBHOOK_SECRET_MAX];
        int r = webhook_secret_new(app->tenant, row, secret);
        if (r == 0)
                r = save(app->store, row);
        if (r < 0) {
                explicit_bzero(secret, sizeof(secret));
                return store_fail(res, r, "webhook");
        }
        json_t *j = webhook_json(row);
        json_object_set_new(j, "secret", json_string(secret));
        explicit_bzero(secret, sizeof(secret));
        http_json(res, status, j);
}

static bool under_org_cap(struct http_request *req, struct http_response *res);

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_json_ json_t *b = NULL;
        _cleanup_(webhook_row_done) struct webhook_row row = { .active = true };
        if (!ctl_body_object(req, res, &b) || !under_org_cap(req, res))
                return;
        row.events_json = strdup("[\"*\"]");
        row.description = strdup("");
        row.created_at = wall_ms();
        /* Only what happens from now on: a new webhook is not sent the past. */
        row.cursor = events_latest(app->events);
        snprintf(row.org_id, sizeof(row.org_id), "%s", ctl_caller(req)->who.org_id);
        if (!hook_apply(req, res, b, &row, true))
                return;
        int r = tenant_id_new("wh", row.id);
        if (r < 0)
                return store_fail(res, r, "webhook");
        save_with_secret(req, res, &row, store_webhook_create, 201);
}
CTL_IDEMPOTENT(h_create_idem, h_create)

static void on_count(const struct webhook_row *row, void *userdata)
{
        (void)row, (void)userdata;
}

static bool under_org_cap(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        uint64_t total = 0;
        int r = store_webhook_each(app->store, ctl_caller(req)->who.org_id, 0, 0, on_count, NULL, &total);
        if (r < 0)
                store_fail(res, r, "webhook");
        else if (total >= app->cfg->ctl_webhooks_max_per_org)
                ctl_errorf(res, 400, "VALIDATION_ERROR", "an org may have at most %llu webhooks",
                           (unsigned long long)app->cfg->ctl_webhooks_max_per_org);
        return r == 0 && total < app->cfg->ctl_webhooks_max_per_org;
}

static void on_hook(const struct webhook_row *row, void *userdata)
{
        json_array_append_new(userdata, webhook_json(row));
}

static int list_hooks(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                      struct err *err)
{
        struct app *app = req->app;
        int r = store_webhook_each(app->store, ctl_caller(req)->who.org_id, p->limit, p->offset, on_hook, data,
                                   ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "cannot list the webhooks") : 0;
}

static void h_list(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, list_hooks);
}

static void h_get(struct http_request *req, struct http_response *res)
{
        _cleanup_(webhook_row_done) struct webhook_row row = {};
        if (hook_find(req, res, &row))
                http_json(res, 200, webhook_json(&row));
}

static void h_update(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_json_ json_t *b = NULL;
        _cleanup_(webhook_row_done) struct webhook_row row = {};
        if (!ctl_body_object(req, res, &b) || !hook_find(req, res, &row) || !hook_apply(req, res, b, &row, false))
                return;
        int r = store_webhook_update(app->store, &row);
        if (r == 0 && json_object_get(b, "active"))
                r = store_webhook_set_active(app->store, row.org_id, row.id, row.active);
        if (r < 0)
                return store_fail(res, r, "webhook");
        webhooks_kick(app->webhooks);
        http_json(res, 200, webhook_json(&row));
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        int r = store_webhook_delete(app->store, ctl_caller(req)->who.org_id, req->captures[0]);
        if (r < 0)
                return store_fail(res, r, "webhook");
        http_json(res, 200, json_pack("{s:s, s:b}", "id", req->captures[0], "deleted", 1));
}

static void h_rotate(struct http_request *req, struct http_response *res)
{
        _cleanup_(webhook_row_done) struct webhook_row row = {};
        if (!hook_find(req, res, &row))
                return;
        row.updated_at = wall_ms();
        save_with_secret(req, res, &row, store_webhook_update, 200);
}
CTL_IDEMPOTENT(h_rotate_idem, h_rotate)

/* Queues d (taken) for hook and answers 202 with its view. */
static void enqueue_reply(struct http_request *req, struct http_response *res, const struct webhook_row *hook,
                          struct webhook_delivery_row *d, int r)
{
        struct app *app = req->app;
        if (!hook->active && r == 0) {
                ctl_error(res, 409, "CONFLICT", "the webhook is disabled: enable it (active: true) first");
                r = 1;
        }
        if (r == 0)
                r = store_webhook_enqueue(app->store, hook->id, 0, d, app->cfg->ctl_webhooks_keep_deliveries);
        if (r < 0)
                store_fail(res, r, "webhook");
        if (r == 0) {
                webhooks_kick(app->webhooks);
                http_json(res, 202, delivery_json(d, false));
        }
        webhook_delivery_row_done(d);
}

static char *test_body(const struct webhook_row *hook)
{
        char id[STORE_ID_MAX], at[32];
        if (tenant_id_new("evt_test", id) < 0)
                return NULL;
        iso8601_ms(wall_ms(), at);
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:n, s:{s:s, s:s}}", "id", id, "event", "webhook.test",
                              "created_at", at, "org_id", hook->org_id, "sandbox_id", "data", "webhook_id", hook->id,
                              "message", "a test delivery from sandboxd");
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return text;
}

static void h_test(struct http_request *req, struct http_response *res)
{
        _cleanup_(webhook_row_done) struct webhook_row hook = {};
        struct webhook_delivery_row d = {};
        if (!hook_find(req, res, &hook))
                return;
        int r = webhook_delivery_new(&hook, "test", 0, "webhook.test", test_body(&hook), &d);
        enqueue_reply(req, res, &hook, &d, r);
}
CTL_IDEMPOTENT(h_test_idem, h_test)

static void on_delivery(const struct webhook_delivery_row *row, void *userdata)
{
        json_array_append_new(userdata, delivery_json(row, false));
}

static int list_deliveries(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                           struct err *err)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id;
        struct webhook_row hook;
        int r = store_webhook_get(app->store, org, req->captures[0], &hook);
        if (r == -ENOENT)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "webhook not found");
        webhook_row_done(&hook);
        if (r == 0)
                r = store_webhook_delivery_each(app->store, org, req->captures[0], p->limit, p->offset, on_delivery,
                                                data, ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "cannot list the deliveries") : 0;
}

static void h_deliveries(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, list_deliveries);
}

static bool delivery_find(struct http_request *req, struct http_response *res, struct webhook_delivery_row *ret)
{
        struct app *app = req->app;
        int r = store_webhook_delivery_get(app->store, ctl_caller(req)->who.org_id, req->captures[0], req->captures[1],
                                           ret);
        if (r < 0)
                store_fail(res, r, "delivery");
        return r == 0;
}

static void h_delivery(struct http_request *req, struct http_response *res)
{
        struct webhook_delivery_row d = {};
        if (delivery_find(req, res, &d))
                http_json(res, 200, delivery_json(&d, true));
        webhook_delivery_row_done(&d);
}

static void h_redeliver(struct http_request *req, struct http_response *res)
{
        _cleanup_(webhook_row_done) struct webhook_row hook = {};
        struct webhook_delivery_row old = {}, d = {};
        if (!hook_find(req, res, &hook) || !delivery_find(req, res, &old))
                return;
        /* The same body, so the same event id: a receiver that saw it
         * already can tell. */
        int r = webhook_delivery_new(&hook, "redeliver", old.event_id, old.event, TAKE_PTR(old.payload), &d);
        webhook_delivery_row_done(&old);
        enqueue_reply(req, res, &hook, &d, r);
}
CTL_IDEMPOTENT(h_redeliver_idem, h_redeliver)

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/webhooks", h_list, 0, 0 },
        { "POST", CTL_PREFIX "/webhooks", h_create_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/webhooks/:id", h_get, 0, 0 },
        { "PATCH", CTL_PREFIX "/webhooks/:id", h_update, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "PUT", CTL_PREFIX "/webhooks/:id", h_update, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/webhooks/:id", h_delete, 0, 0 },
        { "POST", CTL_PREFIX "/webhooks/:id/rotate-secret", h_rotate_idem, 0, 0 },
        { "POST", CTL_PREFIX "/webhooks/:id/test", h_test_idem, 0, 0 },
        { "GET", CTL_PREFIX "/webhooks/:id/deliveries", h_deliveries, 0, 0 },
        { "GET", CTL_PREFIX "/webhooks/:id/deliveries/:delivery_id", h_delivery, 0, 0 },
        { "POST", CTL_PREFIX "/webhooks/:id/deliveries/:delivery_id/redeliver", h_redeliver_idem, 0, 0 },
};

const struct route *ctl_webhook_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}

/* After the controller's routes are in: the dispatcher follows the event
 * log from now on. */
int ctl_webhooks_start(struct app *app)
{
        const struct config *c = app->cfg;
        const struct webhook_options o = {
                .allow_private = c->ctl_webhooks_allow_private,
                .max_attempts = (uint32_t)c->ctl_webhooks_max_attempts,
                .base_delay_ms = c->ctl_webhooks_retry_base_ms,
                .max_delay_ms = c->ctl_webhooks_retry_max_ms,
                .connect_timeout_ms = c->ctl_webhooks_connect_timeout_ms,
                .timeout_ms = c->ctl_webhooks_timeout_ms,
                .disable_after_ms = c->ctl_webhooks_disable_after_s * 1000,
                .keep_deliveries = c->ctl_webhooks_keep_deliveries,
        };
        if (!app->events || !app->tenant)
                return 0;
        return webhooks_start(app->store, app->events, app->tenant, &o, &app->webhooks);
}

void ctl_webhooks_stop(struct app *app)
{
        webhooks_stop(app->webhooks);
        app->webhooks = NULL;
}
