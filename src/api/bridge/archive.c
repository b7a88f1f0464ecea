/* POST /v1/sandbox/:id/persist (a tar of /workspace) and POST …/hydrate
 * (a tar, or tar.gz, merged into /workspace), on sandbox/archive.h. Both
 * are sessionless and always act on the whole /workspace. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/util.h"
#include "sandbox/archive.h"
#include "sandbox/sandbox.h"

/* The anchor's "raw tar ≤ 32 MiB"; above it the HTTP layer answers 413
 * payload_too_large before reading the body (the anchor says 400 after
 * buffering it: 413 is what the status means, and what PUT /file says). */
#define HYDRATE_MAX (32 * MiB)
#define EXCLUDES_MAX 256

struct excludes {
        char *buf;                   /* the query value, cut in place */
        const char *v[EXCLUDES_MAX];
        size_t n;
};

/* ?excludes=a,b: split on commas, empty items dropped, an item with ".."
 * refused, leading "./" and trailing "/" stripped. */
static bool parse_excludes(struct http_request *req, struct http_response *res, struct excludes *ex)
{
        const char *q = http_query(req, "excludes");
        if (!q)
                return true;
        if (!(ex->buf = strdup(q))) {
                bridge_error(res, 500, "workspace_archive_read_error", "Out of memory");
                return false;
        }
        char *save = NULL;
        for (char *item = strtok_r(ex->buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                if (strstr(item, "..")) {
                        bridge_errorf(res, 400, "invalid_request", "Invalid exclude path: %s", item);
                        return false;
                }
                while (item[0] == '.' && item[1] == '/')
                        item += 2;
                for (size_t n = strlen(item); n > 0 && item[n - 1] == '/'; n--)
                        item[n - 1] = '\0';
                if (!item[0])
                        continue;
                if (ex->n == EXCLUDES_MAX) {
                        bridge_errorf(res, 400, "invalid_request", "At most %d excludes", EXCLUDES_MAX);
                        return false;
                }
                ex->v[ex->n++] = item;
        }
        return true;
}

/* An unnamed file in the data directory: the archive can be as large as
 * the workspace, so it is not kept in memory, and the sandbox is not held
 * (locked) while a slow client downloads it. */
static int temp_file(const char *dir)
{
        int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
                return fd >= 0 ? fd : -errno;
        char path[4200];
        snprintf(path, sizeof(path), "%s/.persist-XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        unlink(path);
        return fd;
}

static void h_persist(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct excludes ex = { 0 };
        if (!parse_excludes(req, res, &ex) || !bridge_sandbox_ready(req, res, req->captures[0])) {
                free(ex.buf);
                return;
        }
        _cleanup_close_ int fd = temp_file(app->cfg->data_dir);
        if (fd < 0) {
                free(ex.buf);
                bridge_errorf(res, 502, "workspace_archive_read_error", "Cannot make a temporary file: %s",
                              strerror(-fd));
                return;
        }
        struct sbx_workspace ws;
        struct err err = { 0 };
        int r = sbx_workspace_acquire(app->sandboxes, req->captures[0], &ws, &err);
        if (r < 0) {
                bridge_error_from(res, &err, "workspace_archive_read_error");
        } else {
                struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
                r = files_persist(&root, ex.v, ex.n, fd, &err);
                sbx_workspace_release(app->sandboxes, &ws);
                if (r < 0)
                        bridge_error(res, 502, "workspace_archive_read_error", err.msg);
        }
        struct stat st;
        if (r == 0 && fstat(fd, &st) < 0) {
                r = -errno;
                bridge_errorf(res, 502, "workspace_archive_read_error", "Cannot size the archive: %s", strerror(errno));
        }
        if (r == 0)
                http_file(res, 200, "application/x-tar", TAKE_FD(fd), (uint64_t)st.st_size);
        err_done(&err);
        free(ex.buf);
}

static void h_hydrate(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        if (req->body_len == 0) {
                bridge_error(res, 400, "invalid_request", "Empty tar payload");
                return;
        }
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                return;
        struct sbx_workspace ws;
        struct err err = { 0 };
        int r = sbx_workspace_acquire(app->sandboxes, req->captures[0], &ws, &err);
        if (r == 0) {
                struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
                r = files_hydrate(&root, req->body, req->body_len, &err);
                sbx_workspace_release(app->sandboxes, &ws);
        }
        if (r < 0)
                bridge_error_from(res, &err, "workspace_archive_write_error");
        else
                http_json(res, 200, json_pack("{s:b}", "ok", 1));
        err_done(&err);
}

static size_t hydrate_cap(const void *app)
{
        (void)app;
        return HYDRATE_MAX;
}

const struct route *bridge_archive_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox/:id/persist", h_persist, ROUTE_BLOCKING, 0 },
                { "POST", "/v1/sandbox/:id/hydrate", h_hydrate, ROUTE_BLOCKING, hydrate_cap },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
