/* API keys (seed 003, "API Keys"): GET /api-keys (paginated; never the key
 * or its hash), POST /api-keys {name} (the key shown once), DELETE
 * /api-keys/:id (dead at once), POST /api-keys/:id/regenerate (a new
 * secret for the same id; the old one dead at once). Scoped by the
 * caller's org: another org's id is a 404 like a missing one. */
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/util.h"

static json_t *key_json(const struct apikey_row *k)
{
        char at[32];
        iso8601_ms(k->created_at, at);
        return json_pack("{s:s, s:s, s:s, s:s}", "id", k->id, "name", k->name, "key_prefix", k->prefix,
                         "created_at", at);
}

/* The listing view plus the plaintext key, once. */
static void reply_new_key(struct http_response *res, int status, struct tenant_new_key *k)
{
        json_t *j = key_json(&k->row);
        json_object_set_new(j, "key", json_string(k->key));
        explicit_bzero(k->key, sizeof(k->key));
        http_json(res, status, j);
}

static void fail(struct http_response *res, struct err *err)
{
        ctl_error_done(res, err, ERR_OK, 0, NULL);
}

static void on_key(const struct apikey_row *row, void *userdata)
{
        json_array_append_new(userdata, key_json(row));
}

static int fill_keys(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                     struct err *err)
{
        struct app *app = req->app;
        return tenant_key_each(app->tenant, ctl_caller(req)->who.org_id, p->limit, p->offset, on_key, data, ret_total,
                               err);
}

static void h_list(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, fill_keys);
}

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const struct ctl_caller *c = ctl_caller(req);
        struct tenant_new_key k;
        struct err err = {};
        const char *name;
        _cleanup_json_ json_t *b = NULL;
        const struct ctl_string_field fields[] = { { "name", &name } };
        if (!ctl_body_strings(req, res, &b, fields, ARRAY_SIZE(fields)))
                return;
        if (tenant_key_create(app->tenant, c->who.org_id, c->who.user_id, name ? name : "API Key", &k, &err) < 0)
                fail(res, &err);
        else
                reply_new_key(res, 201, &k);
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = {};
        if (tenant_key_revoke(app->tenant, ctl_caller(req)->who.org_id, req->captures[0], &err) < 0)
                fail(res, &err);
        else
                http_json(res, 200, json_pack("{s:s, s:b}", "id", req->captures[0], "revoked", 1));
}

static void h_regenerate(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct tenant_new_key k;
        struct err err = {};
        if (tenant_key_regenerate(app->tenant, ctl_caller(req)->who.org_id, req->captures[0], &k, &err) < 0)
                fail(res, &err);
        else
                reply_new_key(res, 200, &k);
}

CTL_IDEMPOTENT(h_create_idem, h_create)
CTL_IDEMPOTENT(h_regenerate_idem, h_regenerate)

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/api-keys", h_list, 0, 0 },
        { "POST", CTL_PREFIX "/api-keys", h_create_idem, ROUTE_JSON, 0 },
        { "DELETE", CTL_PREFIX "/api-keys/:id", h_delete, 0, 0 },
        { "POST", CTL_PREFIX "/api-keys/:id/regenerate", h_regenerate_idem, 0, 0 },
};

const struct route *ctl_key_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
