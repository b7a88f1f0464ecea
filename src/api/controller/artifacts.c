/* Artifacts (issue 15; see artifacts.h and docs/controller-api.md
 * "Artifacts"): POST /sandbox/:id/artifacts/upload {path, name?,
 * content_type?, ttl_seconds?, metadata?} keeps a file of the sandbox's
 * workspace as an artifact; GET /artifacts (paginated; ?sandbox_id=,
 * ?prefix=), GET /artifacts/:id, GET (or HEAD) /artifacts/:id/download
 * (the bytes; ETag = the SHA-256; one Range; If-None-Match), DELETE /artifacts/:id, and POST
 * /artifacts/:id/download-to-sandbox {sandbox_id, path} writes it into a
 * sandbox of the same org through the confined file ops. Everything is
 * scoped by the caller's org: another org's artifact is a 404. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/controller/artifacts.h"
#include "tenant/events.h"
#include "base/util.h"
#include "sandbox/files.h"
#include "sandbox/sandbox.h"

#define NAME_MAX_BYTES 1024
#define METADATA_MAX_BYTES (16 * 1024)
#define CONTENT_TYPE_MAX 128
_Static_assert(CONTENT_TYPE_MAX <= sizeof(((struct http_response *)0)->content_type),
               "a content type must fit the reply's Content-Type");

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void art_lock(void)
{
        pthread_mutex_lock(&lock);
}

void art_unlock(void)
{
        pthread_mutex_unlock(&lock);
}

static bool expired(const struct artifact_row *row, uint64_t now)
{
        return row->expires_at && row->expires_at <= now;
}

/* ---- sweeping ---- */

static void sweep_one(const struct artifact_row *row, void *userdata)
{
        struct app *app = userdata;
        art_lock();
        struct artifact_row cur;
        /* Re-read under the lock: a completed upload or a renewed row is
         * not swept from a stale list. */
        bool found = store_artifact_get(app->store, row->org_id, row->id, &cur) == 0;
        bool gone = found && expired(&cur, wall_ms()) && store_artifact_delete(app->store, row->org_id, row->id) == 0;
        art_unlock();
        /* The row is gone, so nobody reaches the bytes any more: removing
         * them (slow on a bucket) needs no lock. */
        if (gone) {
                art_blob_remove(app, row->org_id, row->id);
                art_parts_remove(app, row->org_id, row->id);
        }
        if (found)
                artifact_row_done(&cur);
}

void art_sweep(struct app *app, bool force)
{
        static uint64_t last;
        uint64_t now = wall_ms();
        art_lock();
        bool due = force || now >= last + 1000;
        if (due)
                last = now;
        art_unlock();
        if (due)
                (void)store_artifact_each_expired(app->store, now, sweep_one, app);
}

/* ---- rows ---- */

int art_get(struct app *app, const char *org, const char *id, const char *state, struct artifact_row *ret,
            struct err *err)
{
        int r = store_artifact_get(app->store, org, id, ret);
        if (r == 0 && ((state && strcmp(ret->state, state) != 0) || expired(ret, wall_ms()))) {
                artifact_row_done(ret);
                r = -ENOENT;
        }
        if (r == -ENOENT || r == -EINVAL || r == -ENAMETOOLONG)
                return err_set(err, ERR_NOT_FOUND, ENOENT, state && strcmp(state, ART_STATE_UPLOADING) == 0
                                                                   ? "Upload not found"
                                                                   : "Artifact not found");
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot read the artifact") : 0;
}

int art_quota_check(struct app *app, const char *org, uint64_t len, uint64_t max, struct err *err)
{
        if (len > max)
                return err_set(err, ERR_TOO_LARGE, EFBIG, "The artifact exceeds %" PRIu64 " bytes", max);
        uint64_t used = 0, quota = app->cfg->ctl_artifact_org_quota_bytes;
        int r = store_artifact_bytes(app->store, org, &used);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot read the artifact quota");
        if (used + len > quota)
                return err_set(err, ERR_QUOTA, EDQUOT,
                               "The organization's artifacts would exceed their quota of %" PRIu64 " bytes (%" PRIu64
                               " used)",
                               quota, used);
        return 0;
}

/* ---- request options ---- */

static bool text_ok(const char *s, size_t max)
{
        size_t n = strlen(s);
        if (!n || n >= max)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

/* type/subtype and parameters in printable ASCII: it goes out as a header
 * (the HTTP layer's Content-Type holds 127 bytes). */
static bool content_type_ok(const char *s)
{
        if (!text_ok(s, CONTENT_TYPE_MAX) || !strchr(s, '/') || s[0] == '/')
                return false;
        for (const char *p = s; *p; p++)
                if ((unsigned char)*p > 0x7e)
                        return false;
        return true;
}

static bool parse_ttl(struct app *app, json_t *body, struct artifact_row *row, struct http_response *res)
{
        json_t *t = json_object_get(body, "ttl_seconds");
        uint64_t max = app->cfg->ctl_artifact_max_ttl_s;
        row->ttl_s = 0;
        if (!t || json_is_null(t))
                return true;
        if (!json_is_integer(t) || json_integer_value(t) < 1 || json_integer_value(t) > (json_int_t)(UINT32_MAX)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "ttl_seconds must be a positive integer");
                return false;
        }
        if (max && (uint64_t)json_integer_value(t) > max) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "ttl_seconds may be at most %" PRIu64, max);
                return false;
        }
        row->ttl_s = (uint64_t)json_integer_value(t);
        return true;
}

static bool parse_metadata(json_t *body, struct artifact_row *row, struct http_response *res)
{
        json_t *m = json_object_get(body, "metadata");
        if (m && !json_is_null(m) && !json_is_object(m)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "metadata must be an object");
                return false;
        }
        row->metadata = m && json_is_object(m) ? json_dumps(m, JSON_COMPACT) : strdup("{}");
        if (row->metadata && strlen(row->metadata) > METADATA_MAX_BYTES) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "metadata may hold at most %d bytes of JSON",
                           METADATA_MAX_BYTES);
                return false;
        }
        if (!row->metadata)
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
        return row->metadata != NULL;
}

bool art_parse_options(struct app *app, json_t *body, const char *default_name, struct artifact_row *row,
                       struct http_response *res)
{
        const char *name, *type;
        if (!ctl_opt_string(body, "name", &name, res) || !ctl_opt_string(body, "content_type", &type, res))
                return false;
        name = name ? name : default_name;
        if (!name || !text_ok(name, NAME_MAX_BYTES)) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "name must be 1 to %d bytes without control characters",
                           NAME_MAX_BYTES - 1);
                return false;
        }
        if (type && !content_type_ok(type)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "content_type must be a MIME type such as text/plain (127 bytes at most)");
                return false;
        }
        snprintf(row->name, sizeof(row->name), "%s", name);
        snprintf(row->content_type, sizeof(row->content_type), "%s", type ? type : files_mime_type(name, true));
        return parse_ttl(app, body, row, res) && parse_metadata(body, row, res);
}

/* ---- views ---- */

static void put_time(json_t *j, const char *name, uint64_t ms)
{
        char at[32];
        iso8601_ms(ms, at);
        json_object_set_new(j, name, ms ? json_string(at) : json_null());
}

static json_t *opt_string(const char *s)
{
        return s[0] ? json_string(s) : json_null();
}

json_t *art_view(const struct artifact_row *row)
{
        json_t *meta = json_loads(row->metadata ? row->metadata : "{}", 0, NULL);
        char url[256];
        snprintf(url, sizeof(url), CTL_PREFIX "/artifacts/%s/download", row->id);
        json_t *j = json_pack("{s:s, s:s, s:o, s:o, s:s, s:I, s:s, s:s, s:s, s:o, s:s}", "id", row->id, "name",
                              row->name, "path", opt_string(row->path), "sandbox_id", opt_string(row->sandbox_id),
                              "content_type", row->content_type, "size", (json_int_t)row->size, "checksum",
                              row->checksum, "checksum_algorithm", "sha256", "etag", row->checksum, "metadata",
                              meta ? meta : json_object(), "download_url", url);
        put_time(j, "created_at", row->created_at);
        put_time(j, "expires_at", row->expires_at);
        return j;
}

void art_uploaded_event(struct app *app, const struct artifact_row *row)
{
        (void)events_emit(app->events, row->org_id, "artifact.uploaded", row->sandbox_id[0] ? row->sandbox_id : NULL,
                          json_pack("{s:o}", "artifact", art_view(row)), NULL);
}

static void fail(struct http_response *res, struct err *err)
{
        ctl_error_done(res, err, ERR_OK, 0, NULL);
}

/* ---- POST /sandbox/:id/artifacts/upload ---- */

/* The file at path of the caller's sandbox, opened for reading. */
static int open_source(struct app *app, const char *org, const char *sid, const char *path, int *ret_fd,
                       uint64_t *ret_size, struct err *err)
{
        struct sbx_workspace ws;
        int r = sbx_workspace_acquire_org(app->sandboxes, org, sid, &ws, err);
        if (r < 0)
                return r;
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        r = files_open_read(&root, path, ret_fd, ret_size, err);
        sbx_workspace_release(app->sandboxes, &ws);
        return r;
}

/* Reserves row->size against the quota (a "writing" row), writes the bytes
 * from fd, then makes the row ready. */
static int keep_from_fd(struct app *app, struct artifact_row *row, int fd, struct err *err)
{
        uint64_t now = wall_ms(), ttl = row->ttl_s;
        snprintf(row->state, sizeof(row->state), ART_STATE_WRITING);
        row->created_at = now;
        row->expires_at = now + app->cfg->ctl_artifact_upload_ttl_s * 1000;
        art_lock();
        int r = art_quota_check(app, row->org_id, row->size, app->cfg->ctl_artifact_max_bytes, err);
        if (r == 0 && (r = store_artifact_put(app->store, row)) < 0)
                err_set(err, ERR_INTERNAL, -r, "Cannot store the artifact");
        art_unlock();
        if (r < 0)
                return r;
        r = art_blob_write_fd(app, row->org_id, row->id, fd, row->size, row->checksum, err);
        snprintf(row->state, sizeof(row->state), ART_STATE_READY);
        row->expires_at = ttl ? now + ttl * 1000 : 0;
        art_lock();
        if (r == 0 && (r = store_artifact_put(app->store, row)) < 0)
                err_set(err, ERR_INTERNAL, -r, "Cannot store the artifact");
        if (r < 0)
                (void)store_artifact_delete(app->store, row->org_id, row->id);
        art_unlock();
        if (r < 0)
                art_blob_remove(app, row->org_id, row->id);
        return r;
}

static void h_upload(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id, *path;
        _cleanup_json_ json_t *b = NULL;
        char norm[PATH_MAX];
        struct artifact_row row = { 0 };
        struct err err = {};
        _cleanup_close_ int fd = -1;
        art_sweep(app, false);
        if (!ctl_body_object(req, res, &b) || !ctl_opt_string(b, "path", &path, res) ||
            !ctl_user_path(path, res, norm) || !art_parse_options(app, b, strrchr(norm, '/') + 1, &row, res))
                goto out;
        snprintf(row.org_id, sizeof(row.org_id), "%s", org);
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", req->captures[0]);
        snprintf(row.path, sizeof(row.path), "%s", norm);
        if (open_source(app, org, req->captures[0], norm, &fd, &row.size, &err) < 0 ||
            (tenant_id_new("art", row.id) < 0 && err_set(&err, ERR_INTERNAL, EIO, "Cannot make an id")) ||
            keep_from_fd(app, &row, fd, &err) < 0) {
                fail(res, &err);
                goto out;
        }
        art_uploaded_event(app, &row);
        http_json(res, 201, art_view(&row));
out:
        artifact_row_done(&row);
}

/* ---- GET /artifacts ---- */

static void on_row(const struct artifact_row *row, void *userdata)
{
        json_array_append_new(userdata, art_view(row));
}

static int list_fill(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                     struct err *err)
{
        const char *sid = http_query(req, "sandbox_id"), *prefix = http_query(req, "prefix");
        if (!prefix)
                prefix = http_query(req, "name_prefix");
        struct artifact_filter f = { .org_id = ctl_caller(req)->who.org_id, .state = ART_STATE_READY,
                                     .sandbox_id = sid ? sid : "", .name_prefix = prefix ? prefix : "",
                                     .now = wall_ms() };
        int r = store_artifact_each(((struct app *)req->app)->store, &f, p->limit, p->offset, on_row, data,
                                    ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot list artifacts") : 0;
}

static void h_list(struct http_request *req, struct http_response *res)
{
        art_sweep(req->app, false);
        ctl_page_reply(req, res, list_fill);
}

/* ---- GET /artifacts/:id ---- */

/* The caller's ready artifact :id, or false with the 404 in res. */
static bool own_artifact(struct http_request *req, struct http_response *res, struct artifact_row *row)
{
        struct err err = {};
        art_sweep(req->app, false);
        if (art_get(req->app, ctl_caller(req)->who.org_id, req->captures[0], ART_STATE_READY, row, &err) == 0)
                return true;
        fail(res, &err);
        return false;
}

static void h_get(struct http_request *req, struct http_response *res)
{
        struct artifact_row row;
        if (!own_artifact(req, res, &row))
                return;
        http_json(res, 200, art_view(&row));
        artifact_row_done(&row);
}

/* ---- GET /artifacts/:id/download ---- */

/* One "bytes=a-b", "bytes=a-" or "bytes=-n" range of size bytes: 1 and
 * [*off, *off + *len) when satisfiable, 0 when unsatisfiable, -1 when the
 * header is not one such range (then it is ignored, as RFC 9110 allows). */
static int parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
        unsigned long long a = 0, b = 0;
        int n = 0;
        if (strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
                return -1;
        h += 6;
        if (h[0] == '-') {
                if (sscanf(h + 1, "%llu%n", &b, &n) != 1 || h[1 + n] || !b)
                        return b || h[1 + n] ? -1 : 0;
                *len = b < size ? b : size;
                *off = size - *len;
                return size ? 1 : 0;
        }
        if (sscanf(h, "%llu-%n", &a, &n) != 1)
                return -1;
        if (h[n] && (sscanf(h + n, "%llu", &b) != 1 || b < a))
                return -1;
        if (a >= size)
                return 0;
        uint64_t last = h[n] && b < size ? b : size - 1;
        *off = a;
        *len = last - a + 1;
        return 1;
}

/* Whether an If-None-Match list names this checksum's ETag (or is "*"). */
static bool etag_listed(const char *h, const char *checksum)
{
        if (!h)
                return false;
        if (strcmp(h, "*") == 0)
                return true;
        char quoted[sizeof(((struct artifact_row *)0)->checksum) + 2];
        snprintf(quoted, sizeof(quoted), "\"%s\"", checksum);
        for (const char *p = strstr(h, quoted); p; p = strstr(p + 1, quoted))
                if ((p == h || strchr(" ,/", p[-1])) && strchr(" ,", p[strlen(quoted)]))
                        return true;
        return false;
}

static void download_headers(struct http_response *res, const struct artifact_row *row)
{
        char etag[sizeof(row->checksum) + 2], disp[NAME_MAX_BYTES + 64];
        snprintf(etag, sizeof(etag), "\"%s\"", row->checksum);
        const char *base = strrchr(row->name, '/') ? strrchr(row->name, '/') + 1 : row->name;
        /* Only a plain name is quoted into the header; anything else is
         * left to the client (it has the name in GET /artifacts/:id). */
        bool plain = base[0] && strspn(base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+ ") ==
                                          strlen(base);
        snprintf(disp, sizeof(disp), plain ? "attachment; filename=\"%s\"" : "attachment", base);
        (void)http_response_header(res, "ETag", etag);
        (void)http_response_header(res, "Accept-Ranges", "bytes");
        (void)http_response_header(res, "Content-Disposition", disp);
        (void)http_response_header(res, "X-Checksum-Sha256", row->checksum);
}

static void h_download(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct artifact_row row;
        if (!own_artifact(req, res, &row))
                return;
        int fd;
        uint64_t size, off = 0, len = 0;
        int r = art_blob_open(app, row.org_id, row.id, &fd, &size);
        if (r < 0) {
                ctl_error(res, r == -ENOENT ? 404 : 500, r == -ENOENT ? "NOT_FOUND" : "INTERNAL_ERROR",
                          r == -ENOENT ? "Artifact not found" : "Cannot read the artifact");
                artifact_row_done(&row);
                return;
        }
        const char *range = http_header(req, "Range");
        int rr = range ? parse_range(range, size, &off, &len) : -1;
        if (etag_listed(http_header(req, "If-None-Match"), row.checksum)) {
                /* The client has these bytes already. */
                close(fd);
                (void)http_bytes(res, 304, NULL, "", 0);
        } else if (rr == 0) {
                close(fd);
                char cr[64];
                snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
                ctl_error(res, 416, "RANGE_NOT_SATISFIABLE", "The range is outside the artifact");
                (void)http_response_header(res, "Content-Range", cr);
        } else if (rr == 1) {
                char cr[96];
                snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1, size);
                http_file_range(res, 206, row.content_type, fd, off, len);
                (void)http_response_header(res, "Content-Range", cr);
        } else {
                http_file(res, 200, row.content_type, fd, size);
        }
        download_headers(res, &row);
        artifact_row_done(&row);
}

/* ---- DELETE /artifacts/:id ---- */

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct artifact_row row;
        if (!own_artifact(req, res, &row))
                return;
        art_lock();
        int r = store_artifact_delete(app->store, row.org_id, row.id);
        art_unlock();
        if (r == 0)
                art_blob_remove(app, row.org_id, row.id);
        if (r < 0)
                ctl_error(res, r == -ENOENT ? 404 : 500, r == -ENOENT ? "NOT_FOUND" : "INTERNAL_ERROR",
                          r == -ENOENT ? "Artifact not found" : "Cannot delete the artifact");
        else
                http_json(res, 200, json_pack("{s:s, s:b}", "id", row.id, "deleted", 1));
        artifact_row_done(&row);
}

/* ---- POST /artifacts/:id/download-to-sandbox ---- */

static int write_into(struct app *app, const struct artifact_row *row, const char *sid, const char *path,
                      struct err *err)
{
        int fd;
        uint64_t size;
        int r = art_blob_open(app, row->org_id, row->id, &fd, &size);
        if (r < 0)
                return err_set(err, r == -ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL, -r, "Cannot read the artifact");
        struct sbx_workspace ws;
        r = sbx_workspace_acquire_org(app->sandboxes, row->org_id, sid, &ws, err);
        if (r == 0) {
                struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
                r = files_put_fd(&root, path, fd, size, FILES_RECURSIVE, err);
                sbx_workspace_release(app->sandboxes, &ws);
        }
        close(fd);
        return r;
}

static void h_to_sandbox(struct http_request *req, struct http_response *res)
{
        _cleanup_json_ json_t *b = NULL;
        const char *sid = NULL, *path = NULL;
        char norm[PATH_MAX];
        struct artifact_row row;
        struct err err = {};
        if (!ctl_body_object(req, res, &b) || !ctl_opt_string(b, "sandbox_id", &sid, res) ||
            !ctl_opt_string(b, "path", &path, res))
                return;
        if (!sid || !sid[0]) {
                ctl_error(res, 400, "VALIDATION_ERROR", "sandbox_id is required");
                return;
        }
        if (!own_artifact(req, res, &row))
                return;
        if (!path) {
                /* Default: the artifact's name (its last segment) in /workspace. */
                const char *base = strrchr(row.name, '/') ? strrchr(row.name, '/') + 1 : row.name;
                path = base;
        }
        /* The sandbox's owner writes into its workspace (with the blob from
         * its own artifacts root: shared when that is a bucket). */
        if (ctl_user_path(path, res, norm) && !ctl_cluster_forward(req, res, sid)) {
                if (write_into(req->app, &row, sid, norm, &err) < 0)
                        fail(res, &err);
                else
                        http_json(res, 200, json_pack("{s:s, s:s, s:s, s:I, s:s}", "artifact_id", row.id, "sandbox_id",
                                                      sid, "path", norm, "size", (json_int_t)row.size, "checksum",
                                                      row.checksum));
        }
        artifact_row_done(&row);
}

CTL_IDEMPOTENT(h_upload_idem, h_upload)
CTL_IDEMPOTENT(h_to_sandbox_idem, h_to_sandbox)

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/sandbox/:id/artifacts/upload", h_upload_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/artifacts", h_list, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/artifacts/:id", h_get, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/artifacts/:id/download", h_download, ROUTE_BLOCKING, 0 },
        /* The headers only (size, type, ETag): libmicrohttpd sends no body for HEAD. */
        { "HEAD", CTL_PREFIX "/artifacts/:id/download", h_download, ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/artifacts/:id", h_delete, ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/artifacts/:id/download-to-sandbox", h_to_sandbox_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
};

const struct route *ctl_artifact_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
