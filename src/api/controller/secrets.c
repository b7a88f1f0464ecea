/* Secrets (seed 003, "Secrets (BYOK)"): POST /secrets {name, value} (201;
 * 409 on a taken name), GET /secrets (paginated: names and dates, never a
 * value), PUT /secrets/:name {value}, DELETE /secrets/:name. Scoped by the
 * caller's org (another org's name: 404). No reply, error message or log
 * line of this file ever holds a value: errors name the field, not what
 * was in it. Sealing and storage: tenant/secrets.c. */
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/util.h"

static json_t *secret_json(const struct tenant_secret *s)
{
        char created[32], updated[32];
        iso8601_ms(s->created_at, created);
        iso8601_ms(s->updated_at, updated);
        return json_pack("{s:s, s:s, s:s}", "name", s->name, "created_at", created, "updated_at", updated);
}

static void fail(struct http_response *res, struct err *err)
{
        ctl_error_done(res, err, ERR_OK, 0, NULL);
}

/* The body's "value" (a JSON string, which may hold \u0000: its length is
 * checked against strlen by the tenant layer), and "name" when wanted. */
static bool secret_body(struct http_request *req, struct http_response *res, json_t **ret_body, const char **ret_name,
                        const char **ret_value, size_t *ret_len)
{
        if (!ctl_body_object(req, res, ret_body))
                return false;
        json_t *v = json_object_get(*ret_body, "value");
        if (ret_name) {
                json_t *n = json_object_get(*ret_body, "name");
                if (!json_is_string(n)) {
                        ctl_error(res, 400, "VALIDATION_ERROR", "name is required (a string)");
                        return false;
                }
                *ret_name = json_string_value(n);
        }
        if (!json_is_string(v)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "value is required (a string)");
                return false;
        }
        *ret_value = json_string_value(v);
        *ret_len = json_string_length(v);
        return true;
}

static void on_secret(const struct tenant_secret *s, void *userdata)
{
        json_array_append_new(userdata, secret_json(s));
}

static int list_secrets(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                        struct err *err)
{
        struct app *app = req->app;
        return tenant_secret_each(app->tenant, ctl_caller(req)->who.org_id, p->limit, p->offset, on_secret, data,
                                  ret_total, err);
}

static void h_list(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, list_secrets);
}

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_json_ json_t *b = NULL;
        const char *name, *value;
        size_t len;
        struct tenant_secret s;
        struct err err = {};
        if (!secret_body(req, res, &b, &name, &value, &len))
                return;
        if (tenant_secret_create(app->tenant, ctl_caller(req)->who.org_id, name, value, len, &s, &err) < 0)
                fail(res, &err);
        else
                http_json(res, 201, secret_json(&s));
}
CTL_IDEMPOTENT(h_create_idem, h_create)

static void h_update(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_json_ json_t *b = NULL;
        const char *value;
        size_t len;
        struct tenant_secret s;
        struct err err = {};
        if (!secret_body(req, res, &b, NULL, &value, &len))
                return;
        if (tenant_secret_update(app->tenant, ctl_caller(req)->who.org_id, req->captures[0], value, len, &s, &err) < 0)
                fail(res, &err);
        else
                http_json(res, 200, secret_json(&s));
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = {};
        if (tenant_secret_delete(app->tenant, ctl_caller(req)->who.org_id, req->captures[0], &err) < 0)
                fail(res, &err);
        else
                http_json(res, 200, json_pack("{s:s, s:b}", "name", req->captures[0], "deleted", 1));
}

/* A 64 KiB value written as \uXXXX escapes takes six times that. */
static size_t secret_body_cap(const void *app)
{
        (void)app;
        return 7 * TENANT_SECRET_VALUE_MAX;
}

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/secrets", h_list, 0, 0 },
        { "POST", CTL_PREFIX "/secrets", h_create_idem, ROUTE_JSON | ROUTE_BLOCKING, secret_body_cap },
        { "PUT", CTL_PREFIX "/secrets/:name", h_update, ROUTE_JSON | ROUTE_BLOCKING, secret_body_cap },
        { "DELETE", CTL_PREFIX "/secrets/:name", h_delete, 0, 0 },
};

const struct route *ctl_secret_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
