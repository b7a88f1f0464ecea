/* POST /v1/sandbox, DELETE /v1/sandbox/:id, GET /v1/sandbox/:id/running.
 * A bridge sandbox is the one sandbox model: owned by the default org,
 * visible to the runtime API under the same id. */
#include <sys/random.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

int bridge_id_new(char out[27])
{
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
        unsigned char b[16];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        /* 128 bits, 5 at a time, most significant first (RFC 4648 order). */
        unsigned acc = 0, bits = 0;
        size_t n = 0;
        for (size_t i = 0; i < sizeof(b); i++) {
                acc = (acc << 8) | b[i];
                bits += 8;
                while (bits >= 5) {
                        out[n++] = alphabet[(acc >> (bits - 5)) & 31];
                        bits -= 5;
                }
        }
        out[n++] = alphabet[(acc << (5 - bits)) & 31];
        out[n] = '\0';
        return 0;
}

bool bridge_sandbox_ready(struct http_request *req, struct http_response *res, const char *id)
{
        const struct app *app = req->app;
        const struct sbx_create_options opts = {
                .workspace_bytes = app->cfg->bridge_workspace_bytes,
                .workspace_inodes = app->cfg->bridge_workspace_inodes,
                .file_bytes = app->cfg->bridge_file_bytes,
        };
        struct err err = { 0 };
        if (sbx_create(app->sandboxes, id, &opts, NULL, &err) == 0)
                return true;
        bridge_error_from(res, &err, "pool_error");
        err_done(&err);
        return false;
}

/* A warm sandbox when the pool has one (its first command then costs what
 * any later one does); else a new id, provisioned on first use. */
static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = { 0 };
        char id[STORE_ID_MAX];
        int r = sbx_pool_take(app->sandboxes, id, &err);
        if (r == 0) {
                http_json(res, 200, json_pack("{s:s}", "id", id));
                return;
        }
        if (r != -ENOENT) {
                bridge_error_from(res, &err, "pool_error");
                err_done(&err);
                return;
        }
        if (bridge_id_new(id) < 0) {
                bridge_error(res, 502, "pool_error", "Cannot make a sandbox id");
                return;
        }
        if (bridge_sandbox_ready(req, res, id))
                http_json(res, 200, json_pack("{s:s}", "id", id));
}

static void h_destroy(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = { 0 };
        if (sbx_destroy(app->sandboxes, req->captures[0], &err) < 0) {
                bridge_error_from(res, &err, "pool_error");
                err_done(&err);
                return;
        }
        http_bytes(res, 204, NULL, "", 0);
}

/* The anchor runs `true` in the container: running means the sandbox can
 * be served (it is provisioned on first use, as every route does). */
static void h_running(struct http_request *req, struct http_response *res)
{
        struct http_response scratch = { 0 };
        bool ok = bridge_sandbox_ready(req, &scratch, req->captures[0]);
        json_decref(scratch.json);
        http_json(res, 200, json_pack("{s:b}", "running", ok));
}

const struct route *bridge_sandbox_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox", h_create, ROUTE_BLOCKING, 0 },
                { "DELETE", "/v1/sandbox/:id", h_destroy, ROUTE_BLOCKING, 0 },
                { "GET", "/v1/sandbox/:id/running", h_running, ROUTE_BLOCKING, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
