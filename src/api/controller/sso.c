/* Single sign-on routes (seed 003 "WorkOS"; issue 15 item 9) over a generic
 * OpenID Connect provider: the authorization code flow with PKCE (S256).
 *
 *   GET /auth/workos/authorize  302 to the provider, a short-lived cookie
 *                               holding state, nonce and the PKCE verifier
 *   GET /auth/workos/callback   state checked, code exchanged, ID token
 *                               verified (tenant/oidc.h), user found or
 *                               made (tenant.h's rule), session cookie,
 *                               302 to return_to
 *   GET/POST/DELETE /auth/workos/link   an org's provider organization id
 *                               and email domain (owner; GET admin too)
 *
 * Failures of the flow answer in the controller's error shape (a 4xx JSON
 * body), never a redirect: the browser shows what went wrong, and no
 * error text is ever put into a URL. */
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "api/controller/sso.h"
#include "base/log.h"
#include "base/util.h"
#include "tenant/jwt.h"
#include "tenant/oidc.h"

#define SSO_COOKIE "stateset_sso"
#define SSO_COOKIE_PATH CTL_PREFIX "/auth/workos"
#define SSO_COOKIE_AGE_S 600
#define RETURN_TO_MAX 512
#define HINT_MAX 256
#define RANDOM_BYTES 32                       /* state, nonce, verifier: 256 bits each */
#define RANDOM_LEN 43                         /* their base64url length */
#define ID_TOKEN_LEEWAY_S 60
#define ID_TOKEN_MAX_AGE_S 600

json_t *ctl_sso_providers(const struct app *app)
{
        const struct config *cfg = app->cfg;
        if (!sso_enabled(cfg))
                return json_pack("{s:{s:b, s:n}}", "workos", "enabled", 0, "redirect_uri");
        return json_pack("{s:{s:b, s:s}, s:{s:b, s:s}}", "workos", "enabled", 1, "redirect_uri",
                         cfg->ctl_oidc_redirect_uri, "oidc", "enabled", 1, "issuer", cfg->ctl_oidc_issuer);
}

static bool require_enabled(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        if (sso_enabled(app->cfg))
                return true;
        ctl_error(res, 404, "SSO_NOT_CONFIGURED", "Single sign-on is not configured on this server");
        return false;
}

/* A same-origin path: "/" then no second '/' or '\' right after it, no
 * backslash, no control character ("//evil.com" and "/\evil.com" are
 * other hosts to a browser). */
static bool return_to_ok(const char *v)
{
        size_t n = strlen(v);
        if (n == 0 || n > RETURN_TO_MAX || v[0] != '/' || v[1] == '/' || v[1] == '\\')
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f || v[i] == '\\')
                        return false;
        return true;
}

static bool hint_ok(const char *v)
{
        size_t n = strlen(v);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
                        return false;
        return n <= HINT_MAX;
}

/* "&name=<escaped value>" appended to out. */
static int query_add(char *out, size_t cap, const char *name, const char *value)
{
        char *esc = curl_easy_escape(NULL, value, 0);
        if (!esc)
                return -ENOMEM;
        size_t len = strlen(out);
        int n = snprintf(out + len, cap - len, "&%s=%s", name, esc);
        curl_free(esc);
        return n < 0 || (size_t)n >= cap - len ? -E2BIG : 0;
}

/* The seed's hints, passed on as OIDC parameters where OIDC has one
 * (login_hint; domain_hint also as Google's "hd"; screen_hint=sign-up as
 * prompt=create) and as themselves otherwise (a provider ignores
 * parameters it does not know: RFC 6749 §3.1). */
static int add_hints(struct http_request *req, struct http_response *res, char *url, size_t cap)
{
        static const struct {
                const char *query, *param;
        } hints[] = {
                { "login_hint", "login_hint" },           { "domain_hint", "domain_hint" },
                { "domain_hint", "hd" },                  { "organization_id", "organization_id" },
                { "connection_id", "connection_id" },     { "screen_hint", "screen_hint" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(hints); i++) {
                const char *v = http_query(req, hints[i].query);
                if (!v || !v[0])
                        continue;
                if (!hint_ok(v)) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be at most %d printable characters",
                                   hints[i].query, HINT_MAX);
                        return -EINVAL;
                }
                if (query_add(url, cap, hints[i].param, v) < 0)
                        return -E2BIG;
        }
        const char *screen = http_query(req, "screen_hint");
        if (screen && strcmp(screen, "sign-up") == 0 && query_add(url, cap, "prompt", "create") < 0)
                return -E2BIG;
        return 0;
}

/* The provider's authorization URL for this login. */
static int authorize_url(struct http_request *req, struct http_response *res, const struct sso_provider *p,
                         const char *state, const char *nonce, const char *verifier, char *url, size_t cap)
{
        const struct config *cfg = ((struct app *)req->app)->cfg;
        char challenge[OIDC_CHALLENGE_LEN + 1];
        oidc_pkce_challenge(verifier, challenge);
        int n = snprintf(url, cap, "%s%sresponse_type=code", p->authorization_endpoint,
                         strchr(p->authorization_endpoint, '?') ? "&" : "?");
        const char *params[][2] = {
                { "client_id", cfg->ctl_oidc_client_id }, { "redirect_uri", cfg->ctl_oidc_redirect_uri },
                { "scope", "openid email profile" },      { "state", state },
                { "nonce", nonce },                       { "code_challenge", challenge },
                { "code_challenge_method", "S256" },
        };
        int r = n < 0 || (size_t)n >= cap ? -E2BIG : 0;
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(params); i++)
                r = query_add(url, cap, params[i][0], params[i][1]);
        if (r == 0)
                r = add_hints(req, res, url, cap);
        if (r == -E2BIG)
                ctl_error(res, 400, "VALIDATION_ERROR", "The authorization request is too long");
        else if (r < 0 && r != -EINVAL)   /* -EINVAL: add_hints answered */
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
        return r;
}

static void redirect(struct http_response *res, const char *location)
{
        (void)http_bytes(res, 302, "text/plain", "", 0);
        (void)http_response_header(res, "Location", location);
        (void)http_response_header(res, "Cache-Control", "no-store");
}

static void h_authorize(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *return_to = http_query(req, "return_to");
        char state[RANDOM_LEN + 1], nonce[RANDOM_LEN + 1], verifier[RANDOM_LEN + 1], url[8192];
        char rt[RETURN_TO_MAX / 3 * 4 + 8], cookie[1024];
        struct sso_provider p;
        struct err err = {};
        if (!require_enabled(req, res))
                return;
        if (!return_to || !return_to[0])
                return_to = "/";
        if (!return_to_ok(return_to)) {
                ctl_error(res, 400, "VALIDATION_ERROR",
                          "return_to must be a path on this site (starting with a single '/')");
                return;
        }
        if (oidc_random_text(RANDOM_BYTES, state) < 0 || oidc_random_text(RANDOM_BYTES, nonce) < 0 ||
            oidc_random_text(RANDOM_BYTES, verifier) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "No randomness");
                return;
        }
        if (sso_discover(app->cfg, &p, &err) < 0) {
                ctl_error_done(res, &err, ERR_UNAVAILABLE, 502, "SSO_PROVIDER_UNAVAILABLE");
                return;
        }
        if (authorize_url(req, res, &p, state, nonce, verifier, url, sizeof(url)) < 0)
                return;
        b64url_encode((const uint8_t *)return_to, strlen(return_to), rt);
        snprintf(cookie, sizeof(cookie), "%s.%s.%s.%s", state, nonce, verifier, rt);
        redirect(res, url);
        (void)ctl_set_cookie(res, app, SSO_COOKIE, cookie, SSO_COOKIE_PATH, SSO_COOKIE_AGE_S, true);
}

/* What the authorize step left in the browser. */
struct pending {
        char state[RANDOM_LEN + 1], nonce[RANDOM_LEN + 1], verifier[RANDOM_LEN + 1];
        char return_to[RETURN_TO_MAX + 1];
};

static bool take_part(const char **p, char *out, size_t cap)
{
        size_t n = strcspn(*p, ".");
        if (n == 0 || n >= cap)
                return false;
        memcpy(out, *p, n);
        out[n] = '\0';
        *p += (*p)[n] == '.' ? n + 1 : n;
        return true;
}

static bool pending_read(struct http_request *req, struct pending *ret)
{
        char cookie[1024], rt[RETURN_TO_MAX / 3 * 4 + 8];
        size_t n;
        const char *p = cookie;
        if (ctl_cookie_get(http_header(req, "Cookie"), SSO_COOKIE, cookie, sizeof(cookie)) < 0)
                return false;
        if (!take_part(&p, ret->state, sizeof(ret->state)) || !take_part(&p, ret->nonce, sizeof(ret->nonce)) ||
            !take_part(&p, ret->verifier, sizeof(ret->verifier)) || !take_part(&p, rt, sizeof(rt)) || *p)
                return false;
        if (b64url_decode(rt, strlen(rt), (uint8_t *)ret->return_to, RETURN_TO_MAX, &n) < 0)
                return false;
        ret->return_to[n] = '\0';
        return strlen(ret->return_to) == n && return_to_ok(ret->return_to);
}

static bool state_matches(const char *given, const char *want)
{
        return given && strlen(given) == strlen(want) && CRYPTO_memcmp(given, want, strlen(want)) == 0;
}

/* The ID token verified against the provider's keys (fetched afresh once
 * when it names a key we do not have: the provider rotated). */
static int verify_id_token(const struct config *cfg, const struct sso_provider *p, const char *token,
                           const char *nonce, struct oidc_identity *ret, char *why, size_t whylen, struct err *err)
{
        struct oidc_expect x = {
                .issuer = cfg->ctl_oidc_issuer, .client_id = cfg->ctl_oidc_client_id, .nonce = nonce,
                .hs_key = (const uint8_t *)cfg->ctl_oidc_client_secret, .hs_keylen = strlen(cfg->ctl_oidc_client_secret),
                .org_claim = cfg->ctl_oidc_org_claim, .now_s = wall_ms() / 1000, .leeway_s = ID_TOKEN_LEEWAY_S,
                .max_age_s = ID_TOKEN_MAX_AGE_S,
        };
        int r = -ENOKEY;
        for (int attempt = 0; attempt < 2 && r == -ENOKEY; attempt++) {
                json_t *jwks = NULL;
                if ((r = sso_jwks(cfg, p, attempt > 0, &jwks, err)) < 0)
                        return r;
                r = oidc_id_token_verify(token, jwks, &x, ret, why, whylen);
                json_decref(jwks);
        }
        return r < 0 ? err_set(err, ERR_PERMISSION, -r, "The ID token was refused: %s", why) : 0;
}

/* The provider's answer turned into a verified identity; false with the
 * error in res. */
static bool callback_identity(struct http_request *req, struct http_response *res, const struct pending *pd,
                              struct oidc_identity *id)
{
        const struct config *cfg = ((struct app *)req->app)->cfg;
        struct sso_provider p;
        struct err err = {};
        _cleanup_free_ char *token = NULL;
        char why[160] = "";
        if (sso_discover(cfg, &p, &err) < 0) {
                ctl_error_done(res, &err, ERR_UNAVAILABLE, 502, "SSO_PROVIDER_UNAVAILABLE");
                return false;
        }
        if (sso_token(cfg, &p, http_query(req, "code"), pd->verifier, &token, &err) < 0) {
                if (err.reason == ERR_PERMISSION)
                        ctl_error_done(res, &err, ERR_PERMISSION, 401, "SSO_EXCHANGE_FAILED");
                else
                        ctl_error_done(res, &err, ERR_UNAVAILABLE, 502, "SSO_PROVIDER_UNAVAILABLE");
                return false;
        }
        if (verify_id_token(cfg, &p, token, pd->nonce, id, why, sizeof(why), &err) < 0) {
                ctl_error_done(res, &err, ERR_PERMISSION, 401, "SSO_TOKEN_INVALID");
                return false;
        }
        return true;
}

static void h_callback(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *code = http_query(req, "code"), *state = http_query(req, "state");
        const char *provider_error = http_query(req, "error");
        struct pending pd = {};
        struct oidc_identity id;
        struct tenant_account a;
        _cleanup_(tenant_session_done) struct tenant_session s = {};
        struct err err = {};
        if (!require_enabled(req, res))
                return;
        /* One use: whatever happens next, the pending login is over. */
        bool have = pending_read(req, &pd);
        (void)ctl_set_cookie(res, app, SSO_COOKIE, "", SSO_COOKIE_PATH, 0, true);
        if (provider_error) {
                ctl_errorf(res, 400, "SSO_PROVIDER_ERROR", "The identity provider answered: %.64s", provider_error);
                return;
        }
        if (!code || !code[0] || !state || !state[0]) {
                ctl_error(res, 400, "VALIDATION_ERROR", "code and state are required");
                return;
        }
        if (!have || !state_matches(state, pd.state)) {
                ctl_error(res, 400, "SSO_STATE_INVALID",
                          "This sign-in was not started here, or took longer than 10 minutes; start again");
                return;
        }
        if (!callback_identity(req, res, &pd, &id))
                return;
        if (tenant_sso_login(app->tenant, &id, &a, &s, &err) < 0) {
                ctl_error_done(res, &err, ERR_EXISTS, 409, "EMAIL_ALREADY_EXISTS");
                return;
        }
        log_info("sso: %s signed in to %s (issuer %s)", a.user.id, a.org.id, id.issuer);
        redirect(res, pd.return_to);
        ctl_start_cookie_session(res, app, &s);
}

/* ---- links ---- */

/* Audit hook: auth.sso.link / auth.sso.unlink. The audit log (issue 15
 * item 5) is not in this tree yet; when it is, record the action here
 * (who: the caller's user and org; what: the link's values). */
/* The audit log's row comes from the controller's finish hook (actions
 * auth.sso.link / auth.sso.unlink, audit.c); the daemon's log gets the
 * link itself, which the row does not carry. */
static void sso_audit(const struct ctl_caller *c, const char *action, const struct sso_link_row *link)
{
        log_info("audit %s: org %s user %s provider_org %s domain %s", action, c->who.org_id, c->who.user_id,
                 link && link->provider_org_id[0] ? link->provider_org_id : "-",
                 link && link->domain[0] ? link->domain : "-");
}

/* The caller's session and role: owner, or admin too when admin_ok. */
static bool require_role(struct http_request *req, struct http_response *res, bool admin_ok)
{
        struct app *app = req->app;
        struct tenant_account a;
        struct err err = {};
        if (!ctl_require_session(req, res))
                return false;
        if (tenant_account_get(app->tenant, &ctl_caller(req)->who, &a, &err) < 0) {
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return false;
        }
        if (strcmp(a.user.role, "owner") == 0 || (admin_ok && strcmp(a.user.role, "admin") == 0))
                return true;
        ctl_error(res, 403, "FORBIDDEN", admin_ok ? "Only an owner or an admin may read the single sign-on link"
                                                 : "Only the organization's owner may change single sign-on");
        return false;
}

static json_t *nullable(const char *v)
{
        return v && v[0] ? json_string(v) : json_null();
}

static json_t *link_json(const char *org_id, const struct sso_link_row *l)
{
        char at[32] = "";
        if (l)
                iso8601_ms(l->updated_at, at);
        return json_pack("{s:s, s:b, s:o, s:o, s:o}", "organization_id", org_id, "linked", l != NULL,
                         "workos_organization_id", nullable(l ? l->provider_org_id : NULL), "domain",
                         nullable(l ? l->domain : NULL), "linked_at", nullable(at));
}

static void h_link_get(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct sso_link_row l;
        struct err err = {};
        if (!require_role(req, res, true))
                return;
        const char *org = ctl_caller(req)->who.org_id;
        int r = tenant_sso_link_get(app->tenant, org, &l, &err);
        if (r < 0 && err.reason != ERR_NOT_FOUND) {
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return;
        }
        err_done(&err);
        http_json(res, 200, link_json(org, r == 0 ? &l : NULL));
}

static void h_link_post(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *provider_org = NULL, *domain = NULL;
        _cleanup_json_ json_t *b = NULL;
        struct sso_link_row l;
        struct err err = {};
        const struct ctl_string_field fields[] = { { "workos_organization_id", &provider_org }, { "domain", &domain } };
        if (!require_role(req, res, false) || !ctl_body_strings(req, res, &b, fields, ARRAY_SIZE(fields)))
                return;
        const struct ctl_caller *c = ctl_caller(req);
        if (tenant_sso_link_set(app->tenant, c->who.org_id, provider_org, domain, &l, &err) < 0) {
                ctl_error_done(res, &err, ERR_EXISTS, 409, "CONFLICT");
                return;
        }
        sso_audit(c, "auth.sso.link", &l);
        http_json(res, 200, link_json(c->who.org_id, &l));
}

CTL_IDEMPOTENT(h_link_post_idem, h_link_post)

static void h_link_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = {};
        if (!require_role(req, res, false))
                return;
        const struct ctl_caller *c = ctl_caller(req);
        if (tenant_sso_unlink(app->tenant, c->who.org_id, &err) < 0) {
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return;
        }
        sso_audit(c, "auth.sso.unlink", NULL);
        http_json(res, 200, json_pack("{s:b}", "success", 1));
}

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/auth/workos/authorize", h_authorize, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/auth/workos/callback", h_callback, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/auth/workos/link", h_link_get, 0, 0 },
        { "POST", CTL_PREFIX "/auth/workos/link", h_link_post_idem, ROUTE_JSON, 0 },
        { "DELETE", CTL_PREFIX "/auth/workos/link", h_link_delete, 0, 0 },
};

const struct route *ctl_sso_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
