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

struct persist_job {
        struct excludes ex;
        int fd;
};

/* Every failure of the archive itself is the anchor's read error (502). */
static int persist_op(const struct files_root *root, struct http_request *req, struct http_response *res,
                      void *ud, struct err *err)
{
        (void)req;
        struct persist_job *job = ud;
        struct stat st;
        int r = files_persist(root, job->ex.v, job->ex.n, job->fd, err);
        if (r == 0 && fstat(job->fd, &st) < 0)
                r = err_set(err, ERR_FILESYSTEM, errno, "Cannot size the archive: %s", strerror(errno));
        if (r < 0) {
                err->reason = ERR_FILESYSTEM;
                return r;
        }
        http_file(res, 200, "application/x-tar", TAKE_FD(job->fd), (uint64_t)st.st_size);
        return 0;
}

static void h_persist(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct persist_job job = { .fd = -1 };
        if (parse_excludes(req, res, &job.ex)) {
                job.fd = temp_file(app->cfg->data_dir);
                if (job.fd < 0)
                        bridge_errorf(res, 502, "workspace_archive_read_error", "Cannot make a temporary file: %s",
                                      strerror(-job.fd));
                else
                        bridge_on_workspace(req, res, persist_op, &job, "workspace_archive_read_error");
        }
        if (job.fd >= 0)
                close(job.fd);
        free(job.ex.buf);
}

/* The anchor's "raw tar ≤ 32 MiB" (bridge_body_cap): above it the HTTP
 * layer answers 413 payload_too_large before reading the body. The anchor
 * says 400 after buffering it; 413 is what the status means, and what PUT
 * /file says. */
static int hydrate_op(const struct files_root *root, struct http_request *req, struct http_response *res,
                      void *ud, struct err *err)
{
        (void)ud;
        int r = files_hydrate(root, req->body, req->body_len, err);
        if (r == 0)
                http_json(res, 200, json_pack("{s:b}", "ok", 1));
        return r;
}

static void h_hydrate(struct http_request *req, struct http_response *res)
{
        if (req->body_len == 0)
                bridge_error(res, 400, "invalid_request", "Empty tar payload");
        else
                bridge_on_workspace(req, res, hydrate_op, NULL, "workspace_archive_write_error");
}

const struct route *bridge_archive_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox/:id/persist", h_persist, ROUTE_BLOCKING, 0 },
                { "POST", "/v1/sandbox/:id/hydrate", h_hydrate, ROUTE_BLOCKING, bridge_body_cap },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
