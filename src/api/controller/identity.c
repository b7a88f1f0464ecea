/* Identity routes (seed 003, "Authentication Endpoints"): POST /register,
 * POST /auth/login, POST /auth/logout, GET /auth/session, GET
 * /auth/providers. Registration and login hash passwords (Argon2id, tens
 * of ms): they run on the worker pool. */
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/util.h"

static json_t *org_json(const struct org_row *o)
{
        return json_pack("{s:s, s:s, s:s, s:s}", "id", o->id, "name", o->name, "slug", o->slug, "plan",
                         o->plan[0] ? o->plan : "hobby");
}

static json_t *user_json(const struct user_row *u)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "id", u->id, "email", u->email, "firstName",
                         u->first_name, "lastName", u->last_name, "role", u->role, "emailVerified", 0);
}

/* The session payload of /auth/login and /auth/session. */
static json_t *session_json(const struct tenant_account *a, const char *token, uint64_t expires_at)
{
        char exp[32];
        iso8601_ms(expires_at, exp);
        return json_pack("{s:s, s:s, s:o, s:o}", "token", token, "expiresAt", exp, "user", user_json(&a->user),
                         "organization", org_json(&a->org));
}

/* The CSRF token comes right away so a browser can write without a GET
 * first. */
void ctl_start_cookie_session(struct http_response *res, struct app *app, const struct tenant_session *s)
{
        char csrf[TENANT_CSRF_LEN + 1];
        uint64_t now = wall_ms(), age = s->expires_at > now ? (s->expires_at - now) / 1000 : 1;
        tenant_csrf_token(app->tenant, s->id, csrf);
        (void)ctl_set_session_cookie(res, app, s->token, age);
        (void)ctl_set_csrf_cookie(res, app, csrf, age);
        (void)http_response_header(res, "x-csrf-token", csrf);
}

static void h_register(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct tenant_registration in = {};
        struct tenant_account a;
        struct tenant_new_key k;
        _cleanup_(tenant_session_done) struct tenant_session s = {};
        _cleanup_json_ json_t *b = NULL;
        struct err err = {};
        const struct ctl_string_field fields[] = {
                { "first_name", &in.first_name }, { "last_name", &in.last_name },
                { "organization_name", &in.organization_name }, { "email", &in.email },
                { "password", &in.password },
        };
        if (!ctl_body_strings(req, res, &b, fields, ARRAY_SIZE(fields)))
                return;
        if (tenant_register(app->tenant, &in, &a, &k, &s, &err) < 0) {
                ctl_error_done(res, &err, ERR_EXISTS, 409, "EMAIL_ALREADY_EXISTS");
                return;
        }
        http_json(res, 201,
                  json_pack("{s:o, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s, s:s}, s:s}", "organization", org_json(&a.org),
                            "user", "id", a.user.id, "email", a.user.email, "role", a.user.role, "api_key", "id",
                            k.row.id, "key", k.key, "key_prefix", k.row.prefix, "name", k.row.name, "token", s.token));
        explicit_bzero(k.key, sizeof(k.key));
        ctl_start_cookie_session(res, app, &s);
}

static void h_login(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *email, *password;
        struct tenant_account a;
        _cleanup_(tenant_session_done) struct tenant_session s = {};
        _cleanup_json_ json_t *b = NULL;
        struct err err = {};
        char addr[64];
        const struct ctl_string_field fields[] = { { "email", &email }, { "password", &password } };
        if (!ctl_body_strings(req, res, &b, fields, ARRAY_SIZE(fields)))
                return;
        http_client_addr(req, addr, sizeof(addr));
        if (tenant_login(app->tenant, email, password, addr, &a, &s, &err) < 0) {
                ctl_error_done(res, &err, ERR_PERMISSION, 401, "INVALID_CREDENTIALS");
                return;
        }
        http_json(res, 200, session_json(&a, s.token, s.expires_at));
        ctl_start_cookie_session(res, app, &s);
}

static void h_logout(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const struct ctl_caller *c = ctl_caller(req);
        if (c->who.session_id[0] && tenant_logout(app->tenant, c->who.session_id) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot end the session");
                return;
        }
        http_json(res, 200, json_pack("{s:b}", "success", 1));
        (void)ctl_set_session_cookie(res, app, NULL, 0);
        (void)ctl_set_csrf_cookie(res, app, NULL, 0);
}

/* No secret in its reply: safe to store under an Idempotency-Key. */
CTL_IDEMPOTENT(h_logout_idem, h_logout)

/* The token the caller presented (Bearer, else the cookie). */
static bool presented_token(struct http_request *req, char *out, size_t cap)
{
        const char *authz = http_header(req, "Authorization");
        const char *sp = authz ? strchr(authz, ' ') : NULL;
        if (sp) {
                while (*sp == ' ')
                        sp++;
                return snprintf(out, cap, "%s", sp) < (int)cap;
        }
        return ctl_cookie_get(http_header(req, "Cookie"), CTL_SESSION_COOKIE, out, cap) == 0;
}

static void h_session(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct tenant_account a;
        struct err err = {};
        char token[4200];
        if (!ctl_require_session(req, res))
                return;
        const struct ctl_caller *c = ctl_caller(req);
        if (!presented_token(req, token, sizeof(token)) || tenant_account_get(app->tenant, &c->who, &a, &err) < 0) {
                ctl_error_from(res, &err);
                err_done(&err);
                return;
        }
        http_json(res, 200, session_json(&a, token, c->who.expires_at));
}

static void h_providers(struct http_request *req, struct http_response *res)
{
        http_json(res, 200, ctl_sso_providers(req->app));
}

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/register", h_register, ROUTE_PUBLIC | ROUTE_BLOCKING | ROUTE_JSON, 0 },
        { "POST", CTL_PREFIX "/auth/login", h_login, ROUTE_PUBLIC | ROUTE_BLOCKING | ROUTE_JSON, 0 },
        { "POST", CTL_PREFIX "/auth/logout", h_logout_idem, 0, 0 },
        { "GET", CTL_PREFIX "/auth/session", h_session, 0, 0 },
        { "GET", CTL_PREFIX "/auth/providers", h_providers, ROUTE_PUBLIC, 0 },
};

const struct route *ctl_identity_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
