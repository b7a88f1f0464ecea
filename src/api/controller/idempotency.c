/* Idempotency-Key on POSTs (seed 003, "Idempotency"), as a wrapper any
 * route of this facade can take (CTL_IDEMPOTENT in controller.h):
 *   - first request: the handler runs; a JSON reply below 500 is stored
 *     and sent with Idempotency-Status: stored;
 *   - the same (org, key, route) within 24 h with the same body: the stored
 *     reply, Idempotency-Status: replayed, the handler does not run;
 *   - with another body: 409 IDEMPOTENCY_KEY_REUSE_MISMATCH.
 * Every authenticated POST takes it; the stored reply is sealed by the
 * tenant layer (it may carry a new API key). Streams are not stored (a
 * retry runs again). Public routes (register, login) have no org to scope
 * by: the header is ignored there, as on other methods. Two concurrent first requests with
 * one key both run; the first stored reply is the one replayed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/util.h"

static bool replay(struct http_response *res, const struct tenant_idem *got)
{
        json_t *j = json_loads(got->response, 0, NULL);
        if (!j)
                return false;
        http_json(res, got->status, j);
        (void)http_response_header(res, "Idempotency-Status", "replayed");
        return true;
}

static void store_reply(struct app *app, struct http_request *req, struct http_response *res, const char *org,
                        const char *key, const char *route)
{
        if (res->kind != HTTP_REPLY_JSON || !res->json || res->status >= 500)
                return;
        _cleanup_free_ char *text = http_json_dump(res->json);
        if (text && tenant_idem_save(app->tenant, org, key, route, req->body, req->body_len, res->status, text) == 0)
                (void)http_response_header(res, "Idempotency-Status", "stored");
}

void ctl_idempotent(struct http_request *req, struct http_response *res, http_handler fn)
{
        struct app *app = req->app;
        const struct ctl_caller *c = ctl_caller(req);
        const char *key = http_header(req, "Idempotency-Key");
        char route[512];
        /* IDEMPOTENCY_ENABLED=false: the header is ignored, as by the seed. */
        if (!key || !c || strcmp(req->method, "POST") != 0 || !app->cfg->ctl_idempotency_enabled) {
                fn(req, res);
                return;
        }
        if (!tenant_idem_key_ok(key)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "Idempotency-Key must be 1 to 255 printable ASCII characters");
                return;
        }
        if (snprintf(route, sizeof(route), "%s %s", req->method, req->path) >= (int)sizeof(route)) {
                fn(req, res);
                return;
        }
        struct tenant_idem got = {};
        int r = tenant_idem_find(app->tenant, c->who.org_id, key, route, req->body, req->body_len, &got);
        if (r == -EEXIST) {
                ctl_error(res, 409, "IDEMPOTENCY_KEY_REUSE_MISMATCH",
                          "Idempotency-Key was already used with a different request body");
                return;
        }
        if (r == 0) {
                bool ok = replay(res, &got);
                free(got.response);
                if (ok)
                        return;
        }
        fn(req, res);
        store_reply(app, req, res, c->who.org_id, key, route);
}
