/* GET and PUT /v1/sandbox/:id/file/<path>: raw bytes in and out of the
 * sandbox's /workspace, on the files API's confined operations
 * (sandbox/files.h: openat2 beneath the workspace root, no symlink ever
 * followed, the guest's file system identity, the workspace's limits).
 *
 * The part after /file/ gets a leading "/" and is resolved as the anchor's
 * resolveWorkspacePath does (relative → /workspace/<p>; empty and "."
 * segments dropped; ".." pops), so the URL path must begin with
 * "workspace/". The HTTP layer hands the path over percent-decoded:
 * %2e%2e is "..", %2F is "/", and they are resolved like the literal
 * forms, before anything touches the disk. */
#include <limits.h>
#include <string.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

/* Files are not per-session (every session shares the one /workspace): a
 * valid Session-Id is only accepted. */
static bool session_ok(struct http_request *req, struct http_response *res)
{
        const char *sid;
        return bridge_session_header(req, res, &sid);
}

/* The resolved path ("/workspace/…") of the request into out, or false
 * with res filled: empty 400, escaping 403, not UTF-8 or too long 400. */
static bool file_path(struct http_request *req, struct http_response *res, char out[PATH_MAX])
{
        const char *rest = req->captures[1] ? req->captures[1] : "";
        if (!rest[0]) {
                bridge_error(res, 400, "invalid_request", "file path must not be empty");
                return false;
        }
        char abs[PATH_MAX + 1];
        if (strlen(rest) >= PATH_MAX) {
                bridge_error(res, 400, "invalid_request", "file path is too long");
                return false;
        }
        abs[0] = '/';
        memcpy(abs + 1, rest, strlen(rest) + 1);
        int r = files_normalize(abs, out, PATH_MAX);
        if (r == -EACCES)
                bridge_error(res, 403, "invalid_request", "path must resolve to a location within /workspace");
        else if (r == -ENAMETOOLONG)
                bridge_error(res, 400, "invalid_request", "file path is too long");
        else if (r < 0)
                bridge_error(res, 400, "invalid_request", "file path is not valid UTF-8");
        return r == 0;
}

int bridge_on_workspace(struct http_request *req, struct http_response *res, bridge_ws_fn fn, void *ud,
                        const char *upstream_code)
{
        struct app *app = req->app;
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                return -EIO;
        struct sbx_workspace ws;
        struct err err = { 0 };
        int r = sbx_workspace_acquire(app->sandboxes, req->captures[0], &ws, &err);
        if (r == 0) {
                struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
                r = fn(&root, req, res, ud, &err);
                sbx_workspace_release(app->sandboxes, &ws);
        }
        if (r < 0)
                bridge_error_from(res, &err, upstream_code);
        err_done(&err);
        return r;
}

size_t bridge_body_cap(const void *app)
{
        (void)app;
        return BRIDGE_BODY_MAX;
}

/* The size is known and a missing file is a 404 before any header goes
 * out; the bytes then go from the fd (no copy in memory). */
static int get_op(const struct files_root *root, struct http_request *req, struct http_response *res, void *path,
                  struct err *err)
{
        (void)req;
        int fd;
        uint64_t size;
        int r = files_open_read(root, path, &fd, &size, err);
        if (r == 0)
                http_file(res, 200, "application/octet-stream", fd, size);
        return r;
}

/* Any Content-Type; missing parents are made; the file is replaced
 * atomically (temp file + rename) as the sandbox user. */
static int put_op(const struct files_root *root, struct http_request *req, struct http_response *res, void *path,
                  struct err *err)
{
        int r = files_put(root, path, req->body, req->body_len, FILES_RECURSIVE, err);
        if (r == 0)
                http_json(res, 200, json_pack("{s:b}", "ok", 1));
        return r;
}

static void with_path(struct http_request *req, struct http_response *res, bridge_ws_fn op, const char *upstream_code)
{
        char path[PATH_MAX];
        if (session_ok(req, res) && file_path(req, res, path))
                bridge_on_workspace(req, res, op, path, upstream_code);
}

static void h_get(struct http_request *req, struct http_response *res)
{
        with_path(req, res, get_op, "exec_transport_error");
}

static void h_put(struct http_request *req, struct http_response *res)
{
        with_path(req, res, put_op, "workspace_archive_write_error");
}

const struct route *bridge_file_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "GET", "/v1/sandbox/:id/file/*", h_get, ROUTE_BLOCKING, 0 },
                { "PUT", "/v1/sandbox/:id/file/*", h_put, ROUTE_BLOCKING, bridge_body_cap },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
