/* The controller's auth hook: who calls, from an Authorization header
 *   ApiKey sk_…            an org's API key (+ optional X-Org-Id)
 *   Bearer <jwt>           a login session
 *   Bearer sk_…            an API key too (clients pick the scheme by
 *                          whether the token has a '.'; accept both)
 * or, with no Authorization header, the stateset_session cookie (and on
 * GET /events/stream only, ?token= or ?apiKey=&orgId= first); a cookie
 * only authorises a write (anything but GET/HEAD/OPTIONS) along with an
 * X-CSRF-Token header equal to the session's CSRF token, because a browser
 * attaches the cookie to requests other sites make. A header is never sent
 * by a browser on its own, so header-authenticated calls need no token.
 *
 * X-Org-Id names the org the client believes the credential is for; when
 * given it must be that org, else 401 (a credential that does not open the
 * org asked for is a failed authentication, and answering 401 rather than
 * 404 tells nothing about the other org). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/app.h"
#include "api/common/cluster_route.h"
#include "api/controller/controller.h"
#include "tenant/jwt.h"

const struct ctl_caller *ctl_caller(const struct http_request *req)
{
        return req->auth;
}

bool ctl_require_session(struct http_request *req, struct http_response *res)
{
        const struct ctl_caller *c = ctl_caller(req);
        if (c && c->via != CTL_VIA_API_KEY)
                return true;
        ctl_error(res, 401, "AUTH_REQUIRED", "A session (cookie or Bearer token) is required");
        return false;
}

static bool safe_method(const char *m)
{
        return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0;
}

/* "<scheme> <token>" with the scheme in any case (RFC 9110 §11.1). */
static const char *scheme_token(const char *authz, const char *scheme)
{
        size_t n = strlen(scheme);
        if (strncasecmp(authz, scheme, n) != 0 || authz[n] != ' ')
                return NULL;
        authz += n;
        while (*authz == ' ')
                authz++;
        return authz;
}

/* A bearer token: a session JWT when it has a '.', else an API key. */
static int from_token(struct tenant *t, const char *tok, struct ctl_caller *c)
{
        if (!strchr(tok, '.')) {
                c->via = CTL_VIA_API_KEY;
                return tenant_key_authenticate(t, tok, &c->who);
        }
        c->via = CTL_VIA_BEARER;
        return tenant_session_authenticate(t, tok, &c->who);
}

/* 0, or the failure as the tenant layer gave it. */
static int from_header(struct tenant *t, const char *authz, struct ctl_caller *c)
{
        const char *tok = scheme_token(authz, "ApiKey");
        if (tok) {
                c->via = CTL_VIA_API_KEY;
                return tenant_key_authenticate(t, tok, &c->who);
        }
        tok = scheme_token(authz, "Bearer");
        return tok ? from_token(t, tok, c) : -EPERM;
}

/* GET /events/stream only: a browser's EventSource cannot send headers,
 * so the seed lets the credential ride in the query (?token=, or
 * ?apiKey=&orgId=). Nowhere else: a URL ends up in logs and histories.
 * -ENOENT when the query has none. */
static int from_query(struct tenant *t, struct http_request *req, struct ctl_caller *c)
{
        if (!req->route || strcmp(req->route, CTL_EVENTS_STREAM) != 0)
                return -ENOENT;
        const char *tok = http_query(req, "token"), *key = http_query(req, "apiKey");
        if (tok)
                return from_token(t, tok, c);
        if (!key)
                return -ENOENT;
        const char *org = http_query(req, "orgId");
        c->via = CTL_VIA_API_KEY;
        int r = org ? tenant_key_authenticate(t, key, &c->who) : -EPERM;
        /* The org named must be the key's, as X-Org-Id below. */
        return r == 0 && strcmp(org, c->who.org_id) != 0 ? -EPERM : r;
}

/* The session cookie; -ENOENT when there is none. */
static int from_cookie(struct tenant *t, struct http_request *req, struct ctl_caller *c)
{
        char token[JWT_MAX_LEN + 1];
        int r = ctl_cookie_get(http_header(req, "Cookie"), CTL_SESSION_COOKIE, token, sizeof(token));
        if (r == -ENOENT)
                return r;
        c->via = CTL_VIA_COOKIE;
        return r == 0 ? tenant_session_authenticate(t, token, &c->who) : -EINVAL;
}

static bool refuse(struct http_response *res, int r)
{
        if (r == -EKEYEXPIRED)
                ctl_error(res, 401, "SESSION_EXPIRED", "Session expired; log in again");
        else if (r == -EPERM || r == -EINVAL)
                ctl_error(res, 401, "INVALID_CREDENTIALS", "Invalid or revoked credentials");
        else
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot check credentials");
        return false;
}

/* A request another node forwarded: the caller it vouched for (a key's or
 * a session's), never a cookie (the sender checked CSRF already). 0 or
 * -EPERM for a signature that is wrong, stale or from no node of ours. */
static int from_cluster(struct app *app, struct http_request *req, struct ctl_caller *c)
{
        if (!api_cluster_identity(app, req, &c->who) || !c->who.org_id[0])
                return -EPERM;
        c->via = c->who.key_id[0] ? CTL_VIA_API_KEY : CTL_VIA_BEARER;
        return 0;
}

bool ctl_auth_hook(void *cls, struct http_request *req, struct http_response *res)
{
        struct app *app = cls;
        struct ctl_caller c = {};
        const char *authz = http_header(req, "Authorization");
        int r;
        if (api_cluster_signed(req))
                r = from_cluster(app, req, &c);
        else if (authz)
                r = from_header(app->tenant, authz, &c);
        else if ((r = from_query(app->tenant, req, &c)) == -ENOENT)
                r = from_cookie(app->tenant, req, &c);
        if (r == -ENOENT) {
                ctl_error(res, 401, "AUTH_REQUIRED", "Authentication required");
                return false;
        }
        if (r < 0)
                return refuse(res, r);
        const char *org = http_header(req, "X-Org-Id");
        if (org && strcmp(org, c.who.org_id) != 0) {
                ctl_error(res, 401, "INVALID_CREDENTIALS", "X-Org-Id is not the credential's organization");
                return false;
        }
        if (c.via == CTL_VIA_COOKIE && !safe_method(req->method) &&
            !tenant_csrf_ok(app->tenant, c.who.session_id, http_header(req, "X-CSRF-Token"))) {
                ctl_error(res, 403, "CSRF_TOKEN_INVALID",
                          "X-CSRF-Token is missing or wrong (take it from a GET's x-csrf-token header)");
                return false;
        }
        struct ctl_caller *box = malloc(sizeof(*box));
        if (!box) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
                return false;
        }
        *box = c;
        req->auth = box;
        req->auth_free = free;
        return true;
}
