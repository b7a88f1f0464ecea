/* Controller files (seed 003, "File Operations"): POST /sandbox/:id/files
 * {files: [{path, content (base64)}]}, GET /sandbox/:id/files?path= (JSON
 * {path, content, size, encoding: "base64"}) and GET
 * /sandbox/:id/files/download?path= (the bytes, application/octet-stream).
 * On the confined typed ops of sandbox/files.h, in the caller's own
 * sandbox's /workspace (another org's: 404), as the guest's identity.
 *
 * Paths are absolute under /workspace or relative to it; one that leaves
 * /workspace by its text ("..", /etc) is a 400 VALIDATION_ERROR before
 * anything is touched; a symlink on the way (planted by guest code) is a
 * 403 FORBIDDEN from the ops. Missing parents of a written file are made;
 * each file is replaced atomically; files are written in order and the
 * first failure stops the call (the ones before it stay written). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/b64.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

/* base64 of the largest upload: 48 MiB of files in one call. */
#define FILES_BODY_MAX (64u << 20)

bool ctl_user_path(const char *path, struct http_response *res, char *out)
{
        if (!path || !path[0]) {
                ctl_error(res, 400, "VALIDATION_ERROR", "path is required");
                return false;
        }
        int r = files_normalize(path, out, PATH_MAX);
        if (r == -EACCES)
                ctl_error(res, 400, "VALIDATION_ERROR", "path must be within /workspace");
        else if (r < 0)
                ctl_error(res, 400, "VALIDATION_ERROR", "path is too long or not valid UTF-8");
        return r == 0;
}

typedef int (*ws_op)(const struct files_root *root, struct http_request *req, struct http_response *res, void *ud,
                     struct err *err);

/* Runs op on the caller's sandbox's workspace; a domain failure is
 * answered as its error. */
static void on_workspace(struct http_request *req, struct http_response *res, ws_op op, void *ud)
{
        struct app *app = req->app;
        struct sbx_workspace ws;
        struct err err = {};
        int r = sbx_workspace_acquire_org(app->sandboxes, ctl_caller(req)->who.org_id, req->captures[0], &ws, &err);
        if (r == 0) {
                struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
                r = op(&root, req, res, ud, &err);
                sbx_workspace_release(app->sandboxes, &ws);
        }
        if (r < 0)
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
        else
                err_done(&err);
}

/* ---- write ---- */

struct upload {
        char (*paths)[PATH_MAX];
        json_t *files;
};

static int put_op(const struct files_root *root, struct http_request *req, struct http_response *res, void *ud,
                  struct err *err)
{
        (void)req;
        struct upload *u = ud;
        json_t *done = json_array();
        size_t i;
        json_t *f;
        json_array_foreach(u->files, i, f)
        {
                const char *c = json_string_value(json_object_get(f, "content"));
                unsigned char *data = NULL;
                size_t len = 0;
                if (b64_decode(c, strlen(c), &data, &len) < 0) {
                        json_decref(done);
                        return err_set(err, ERR_INVALID, EINVAL, "content of %s is not base64", u->paths[i]);
                }
                int r = files_put(root, u->paths[i], data, len, FILES_RECURSIVE, err);
                free(data);
                if (r < 0) {
                        json_decref(done);
                        return r;
                }
                json_array_append_new(done, json_pack("{s:s, s:I}", "path", u->paths[i], "size", (json_int_t)len));
        }
        http_json(res, 200, json_pack("{s:o, s:I}", "files", done, "written", (json_int_t)json_array_size(done)));
        return 0;
}

static bool check_files(json_t *files, struct upload *u, struct http_response *res)
{
        size_t n = json_is_array(files) ? json_array_size(files) : 0;
        if (!n || n > 1000) {
                ctl_error(res, 400, "VALIDATION_ERROR", "files must be an array of 1 to 1000 {path, content}");
                return false;
        }
        u->paths = calloc(n, sizeof(*u->paths));
        if (!u->paths) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
                return false;
        }
        u->files = files;
        for (size_t i = 0; i < n; i++) {
                json_t *f = json_array_get(files, i);
                json_t *p = json_object_get(f, "path"), *c = json_object_get(f, "content");
                if (!json_is_string(p) || !json_is_string(c)) {
                        ctl_error(res, 400, "VALIDATION_ERROR", "each file needs a string path and base64 content");
                        return false;
                }
                if (!ctl_user_path(json_string_value(p), res, u->paths[i]))
                        return false;
        }
        return true;
}

static void h_put(struct http_request *req, struct http_response *res)
{
        _cleanup_json_ json_t *b = NULL;
        struct upload u = { 0 };
        if (ctl_body_object(req, res, &b) && check_files(json_object_get(b, "files"), &u, res))
                on_workspace(req, res, put_op, &u);
        free(u.paths);
}

/* ---- read ---- */

static int read_op(const struct files_root *root, struct http_request *req, struct http_response *res, void *ud,
                   struct err *err)
{
        (void)req;
        struct files_blob blob = { 0 };
        int r = files_read(root, ud, &blob, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *b64 = b64_encode(blob.data, blob.len);
        size_t len = blob.len;
        files_blob_done(&blob);
        if (!b64)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        http_json(res, 200, json_pack("{s:s, s:s, s:I, s:s}", "path", (const char *)ud, "content", b64, "size",
                                      (json_int_t)len, "encoding", "base64"));
        return 0;
}

/* The size is known and a missing file is a 404 before any header goes
 * out; the bytes then go from the fd. */
static int download_op(const struct files_root *root, struct http_request *req, struct http_response *res,
                       void *ud, struct err *err)
{
        (void)req;
        int fd;
        uint64_t size;
        int r = files_open_read(root, ud, &fd, &size, err);
        if (r == 0)
                http_file(res, 200, "application/octet-stream", fd, size);
        return r;
}

static void with_query_path(struct http_request *req, struct http_response *res, ws_op op)
{
        char path[PATH_MAX];
        if (ctl_user_path(http_query(req, "path"), res, path))
                on_workspace(req, res, op, path);
}

static void h_read(struct http_request *req, struct http_response *res)
{
        with_query_path(req, res, read_op);
}

static void h_download(struct http_request *req, struct http_response *res)
{
        with_query_path(req, res, download_op);
}

static size_t files_body_cap(const void *app)
{
        (void)app;
        return FILES_BODY_MAX;
}

CTL_IDEMPOTENT(h_put_idem, h_put)

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/sandbox/:id/files", h_put_idem, ROUTE_JSON | ROUTE_BLOCKING, files_body_cap },
        { "GET", CTL_PREFIX "/sandbox/:id/files", h_read, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/sandbox/:id/files/download", h_download, ROUTE_BLOCKING, 0 },
};

const struct route *ctl_file_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
