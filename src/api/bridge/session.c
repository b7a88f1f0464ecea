/* POST /v1/sandbox/:id/session {id?, cwd?, env?} and DELETE
 * /v1/sandbox/:id/session/:sid: the bridge's shell sessions (the domain:
 * sandbox/session.c; commands in them: /exec with Session-Id). As the
 * anchor: a body that is not JSON counts as {}, the default id is
 * session-<epoch ms>, an existing id or an unknown one is 502 session_error. */
#include <stdio.h>
#include <string.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/time.h"
#include "sandbox/sandbox.h"

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                return;
        json_error_t jerr;
        json_t *root = req->body_len ? json_loadb(req->body, req->body_len, 0, &jerr) : NULL;
        json_t *id = json_object_get(root, "id"), *cwd = json_object_get(root, "cwd"), *env = json_object_get(root, "env");
        char sid[SBX_SESSION_ID_MAX + 1];
        if (json_is_string(id))
                snprintf(sid, sizeof(sid), "%s", json_string_value(id));
        else
                snprintf(sid, sizeof(sid), "session-%llu", (unsigned long long)wall_ms());
        struct err err = { 0 };
        if (json_is_string(id) && (json_string_length(id) != strlen(sid) || !bridge_session_id_valid(sid))) {
                bridge_error(res, 400, "invalid_request", "Invalid session ID format");
        } else if (sbx_session_create(app->sandboxes, req->captures[0], sid,
                                      json_is_string(cwd) ? json_string_value(cwd) : NULL,
                                      json_is_object(env) ? env : NULL, &err) < 0) {
                bridge_error_from(res, &err, "session_error");
        } else {
                http_json(res, 200, json_pack("{s:s}", "id", sid));
        }
        err_done(&err);
        json_decref(root);
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *sid = req->captures[1];
        struct err err = { 0 };
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                return;
        if (!bridge_session_id_valid(sid)) {
                bridge_error(res, 400, "invalid_request", "Invalid session ID format");
        } else if (sbx_session_delete(app->sandboxes, req->captures[0], sid, &err) < 0) {
                /* The anchor reports an unknown session as its upstream's failure. */
                if (err.reason == ERR_NOT_FOUND)
                        bridge_error(res, 502, "session_error", err.msg);
                else
                        bridge_error_from(res, &err, "session_error");
        } else {
                char ts[32];
                iso8601_ms(wall_ms(), ts);
                http_json(res, 200, json_pack("{s:b, s:s, s:s}", "success", 1, "sessionId", sid, "timestamp", ts));
        }
        err_done(&err);
}

const struct route *bridge_session_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox/:id/session", h_create, ROUTE_BLOCKING, 0 },
                { "DELETE", "/v1/sandbox/:id/session/:sid", h_delete, ROUTE_BLOCKING, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
