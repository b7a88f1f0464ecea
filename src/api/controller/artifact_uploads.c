/* Multipart uploads of artifacts (issue 15; S3's model): POST
 * /artifacts/uploads/initiate {name, content_type?, metadata?,
 * ttl_seconds?} → {upload_id, …}; PUT
 * /artifacts/uploads/:upload_id/parts/:part_number with the part's raw
 * bytes → {etag} (the part's SHA-256; uploading a number again replaces
 * it; parts may come in any order and at once); POST …/complete {parts:
 * [{part_number, etag}]} joins the listed parts in part-number order,
 * checking each etag, into a new artifact whose checksum is the SHA-256 of
 * the whole (parts not listed are dropped; an optional "checksum" of the
 * whole is checked); POST …/abort (or DELETE /artifacts/uploads/:upload_id)
 * drops the upload. GET /artifacts/uploads lists the org's open uploads,
 * GET /artifacts/uploads/:upload_id one with its parts (number, size,
 * etag). A part's PUT may carry X-Checksum-Sha256: a mismatch is a 400
 * CHECKSUM_MISMATCH and nothing is kept.
 * A part's body is held in memory by the HTTP layer while it arrives (it
 * buffers whole bodies up to a route's cap), so the cap is
 * controller.artifact_part_max_bytes; parts go to disk as they are
 * received and the join streams from disk to disk. An upload not
 * completed within controller.artifact_upload_ttl_s is swept. Another
 * org's upload id is a 404. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/controller/artifacts.h"
#include "base/util.h"

static void fail(struct http_response *res, struct err *err)
{
        ctl_error_done(res, err, ERR_OK, 0, NULL);
}

/* An open upload: its options, the bytes of its parts so far and the
 * limits its parts must keep. */
static json_t *upload_view(struct app *app, const struct artifact_row *row)
{
        char created[32], exp[32];
        iso8601_ms(row->created_at, created);
        iso8601_ms(row->expires_at, exp);
        json_t *meta = json_loads(row->metadata ? row->metadata : "{}", 0, NULL);
        return json_pack("{s:s, s:s, s:s, s:o, s:I, s:s, s:s, s:I, s:I, s:I, s:I}", "upload_id", row->id, "name",
                         row->name, "content_type", row->content_type, "metadata", meta ? meta : json_object(),
                         "size", (json_int_t)row->size, "created_at", created, "expires_at", exp, "part_size_min",
                         (json_int_t)app->cfg->ctl_artifact_part_min_bytes, "part_size_max",
                         (json_int_t)app->cfg->ctl_artifact_part_max_bytes, "max_parts",
                         (json_int_t)app->cfg->ctl_artifact_max_parts, "max_size",
                         (json_int_t)app->cfg->ctl_artifact_max_bytes);
}

/* ---- initiate ---- */

static void h_initiate(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_json_ json_t *b = NULL;
        struct artifact_row row = { 0 };
        art_sweep(app, false);
        if (!ctl_body_object(req, res, &b) || !art_parse_options(app, b, NULL, &row, res))
                goto out;
        uint64_t now = wall_ms();
        snprintf(row.org_id, sizeof(row.org_id), "%s", ctl_caller(req)->who.org_id);
        snprintf(row.state, sizeof(row.state), ART_STATE_UPLOADING);
        row.created_at = now;
        row.expires_at = now + app->cfg->ctl_artifact_upload_ttl_s * 1000;
        int r = tenant_id_new("upl", row.id);
        if (r == 0)
                r = store_artifact_put(app->store, &row);
        if (r < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot start the upload");
                goto out;
        }
        http_json(res, 201, upload_view(app, &row));
out:
        artifact_row_done(&row);
}

/* ---- parts ---- */

/* A part number: decimal digits, 1 … max_parts. */
static bool part_number(const char *s, uint64_t max, unsigned *ret)
{
        char *end;
        if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9)
                return false;
        unsigned long long v = strtoull(s, &end, 10);
        if (v < 1 || v > max)
                return false;
        *ret = (unsigned)v;
        return true;
}

/* An etag as a client echoes it: quoted or not, any case. */
static bool etag_parse(const char *s, char out[ART_SHA_HEX])
{
        size_t n = s ? strlen(s) : 0;
        if (n == 66 && s[0] == '"' && s[65] == '"') {
                s++;
                n = 64;
        }
        if (n != 64 || strspn(s, "0123456789abcdefABCDEF") < 64)
                return false;
        for (size_t i = 0; i < 64; i++)
                out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
        out[64] = '\0';
        return true;
}

/* A checksum the client sent (X-Checksum-Sha256, or complete's
 * "checksum": hex, quotes and case as for etags) against the one computed;
 * absent is fine. false with a 400 CHECKSUM_MISMATCH in res. */
static bool checksum_matches(const char *given, const char *sha, struct http_response *res)
{
        char want[ART_SHA_HEX];
        if (!given)
                return true;
        if (!etag_parse(given, want)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "A SHA-256 checksum is 64 hex digits");
                return false;
        }
        if (strcmp(want, sha) == 0)
                return true;
        ctl_errorf(res, 400, "CHECKSUM_MISMATCH", "The bytes' SHA-256 is %s, not %s", sha, want);
        return false;
}

/* After a part is written: the upload's row counts its parts' bytes
 * (unless it was completed or aborted meanwhile). */
static void count_parts(struct app *app, const char *org, const char *up, uint64_t total)
{
        struct artifact_row row;
        struct err err = {};
        art_lock();
        if (art_get(app, org, up, ART_STATE_UPLOADING, &row, &err) == 0) {
                row.size = total;
                (void)store_artifact_put(app->store, &row);
                artifact_row_done(&row);
        }
        art_unlock();
        err_done(&err);
}

static void h_part(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id, *up = req->captures[0];
        struct artifact_row row;
        struct err err = {};
        unsigned n;
        char sha[ART_SHA_HEX];
        uint64_t total;
        art_sweep(app, false);
        if (!part_number(req->captures[1], app->cfg->ctl_artifact_max_parts, &n)) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "part_number must be an integer from 1 to %" PRIu64,
                           app->cfg->ctl_artifact_max_parts);
                return;
        }
        art_sha256_hex(req->body, req->body_len, sha);
        if (!checksum_matches(http_header(req, "X-Checksum-Sha256"), sha, res))
                return;
        art_lock();
        int r = art_get(app, org, up, ART_STATE_UPLOADING, &row, &err);
        if (r == 0) {
                r = art_quota_check(app, org, req->body_len, app->cfg->ctl_artifact_part_max_bytes, &err);
                artifact_row_done(&row);
        }
        art_unlock();
        if (r == 0)
                r = art_part_write(app, org, up, n, req->body, req->body_len, sha, &total, &err);
        if (r < 0) {
                fail(res, &err);
                return;
        }
        count_parts(app, org, up, total);
        char etag[ART_SHA_HEX + 2];
        snprintf(etag, sizeof(etag), "\"%s\"", sha);
        http_json(res, 200, json_pack("{s:s, s:i, s:s, s:I}", "upload_id", up, "part_number", (int)n, "etag", sha,
                                      "size", (json_int_t)req->body_len));
        (void)http_response_header(res, "ETag", etag);
}

/* ---- complete ---- */

static int by_number(const void *a, const void *b)
{
        unsigned x = ((const struct art_part *)a)->number, y = ((const struct art_part *)b)->number;
        return x < y ? -1 : x > y;
}

/* body.parts into a sorted array (*ret, *ret_n), or false with a 400. */
static bool parse_parts(struct app *app, json_t *body, struct art_part **ret, size_t *ret_n,
                        struct http_response *res)
{
        json_t *parts = json_object_get(body, "parts"), *p;
        size_t n = json_is_array(parts) ? json_array_size(parts) : 0, i;
        if (!n || n > app->cfg->ctl_artifact_max_parts) {
                ctl_error(res, 400, "VALIDATION_ERROR", "parts must be a non-empty array of {part_number, etag}");
                return false;
        }
        struct art_part *v = calloc(n, sizeof(*v));
        if (!v) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
                return false;
        }
        json_array_foreach(parts, i, p)
        {
                json_t *num = json_object_get(p, "part_number");
                json_int_t k = json_is_integer(num) ? json_integer_value(num) : 0;
                if (k < 1 || (uint64_t)k > app->cfg->ctl_artifact_max_parts ||
                    !etag_parse(json_string_value(json_object_get(p, "etag")), v[i].etag)) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR",
                                   "parts[%zu] needs a part_number (1 to %" PRIu64 ") and the etag of that part", i,
                                   app->cfg->ctl_artifact_max_parts);
                        free(v);
                        return false;
                }
                v[i].number = (unsigned)k;
        }
        if (n > 0)
                qsort(v, n, sizeof(*v), by_number);
        for (i = 1; i < n; i++)
                if (v[i].number == v[i - 1].number) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "part %u is listed twice", v[i].number);
                        free(v);
                        return false;
                }
        *ret = v;
        *ret_n = n;
        return true;
}

/* Moves org's upload up from state `from` to `to`; the row into *ret when
 * given. Under the lock, so one complete (or abort) wins. */
static int upload_claim(struct app *app, const char *org, const char *up, const char *from, const char *to,
                        struct artifact_row *ret, struct err *err)
{
        struct artifact_row row;
        art_lock();
        int r = art_get(app, org, up, from, &row, err);
        if (r == 0) {
                snprintf(row.state, sizeof(row.state), "%s", to);
                r = store_artifact_put(app->store, &row);
                if (r < 0)
                        err_set(err, ERR_INTERNAL, -r, "Cannot update the upload");
        }
        art_unlock();
        if (r == 0 && ret)
                *ret = row;
        else if (r == 0)
                artifact_row_done(&row);
        return r;
}

/* The new artifact's row from the upload's, after the join. */
static int finish(struct app *app, const struct artifact_row *upload, struct artifact_row *art, struct err *err)
{
        uint64_t now = wall_ms();
        snprintf(art->org_id, sizeof(art->org_id), "%s", upload->org_id);
        snprintf(art->state, sizeof(art->state), ART_STATE_READY);
        snprintf(art->name, sizeof(art->name), "%s", upload->name);
        snprintf(art->content_type, sizeof(art->content_type), "%s", upload->content_type);
        art->metadata = strdup(upload->metadata ? upload->metadata : "{}");
        art->created_at = now;
        art->expires_at = upload->ttl_s ? now + upload->ttl_s * 1000 : 0;
        art->ttl_s = upload->ttl_s;
        art_lock();
        int r = art->metadata ? store_artifact_put(app->store, art) : -ENOMEM;
        if (r == 0)
                (void)store_artifact_delete(app->store, upload->org_id, upload->id);
        art_unlock();
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot store the artifact") : 0;
}

static void h_complete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id, *up = req->captures[0];
        _cleanup_json_ json_t *b = NULL;
        _cleanup_free_ struct art_part *parts = NULL;
        size_t n = 0;
        struct artifact_row upload = { 0 }, art = { 0 };
        struct err err = {};
        art_sweep(app, false);
        const char *want = NULL;
        char hex[ART_SHA_HEX];
        if (!ctl_body_object(req, res, &b) || !parse_parts(app, b, &parts, &n, res) ||
            !ctl_opt_string(b, "checksum", &want, res))
                return;
        if (want && !etag_parse(want, hex)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "checksum must be the SHA-256 of the whole, 64 hex digits");
                return;
        }
        int r = upload_claim(app, org, up, ART_STATE_UPLOADING, ART_STATE_WRITING, &upload, &err);
        if (r == 0 && (r = tenant_id_new("art", art.id)) < 0)
                err_set(&err, ERR_INTERNAL, -r, "Cannot make an id");
        if (r == 0)
                r = art_parts_join(app, org, up, parts, n, app->cfg->ctl_artifact_part_min_bytes,
                                   app->cfg->ctl_artifact_max_bytes, art.id, art.checksum, &art.size, &err);
        if (r == 0 && want && !checksum_matches(want, art.checksum, res)) {
                art_blob_remove(app, org, art.id);
                r = -EBADMSG;   /* answered */
        }
        if (r == 0 && (r = finish(app, &upload, &art, &err)) < 0)
                art_blob_remove(app, org, art.id);
        if (r == 0) {
                art_parts_remove(app, org, up);
                art_uploaded_event(app, &art);
                http_json(res, 201, art_view(&art));
        } else {
                /* A refused list (a wrong etag, a missing part) may be fixed
                 * and sent again: the upload stays open. */
                if (upload.id[0]) {
                        struct err ignored = {};
                        (void)upload_claim(app, org, up, ART_STATE_WRITING, ART_STATE_UPLOADING, NULL, &ignored);
                        err_done(&ignored);
                }
                if (r != -EBADMSG)
                        fail(res, &err);
        }
        artifact_row_done(&upload);
        artifact_row_done(&art);
}

/* ---- abort ---- */

static void h_abort(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id, *up = req->captures[0];
        struct artifact_row row;
        struct err err = {};
        art_lock();
        int r = art_get(app, org, up, ART_STATE_UPLOADING, &row, &err);
        if (r == 0) {
                (void)store_artifact_delete(app->store, org, up);
                artifact_row_done(&row);
        }
        art_unlock();
        if (r < 0) {
                fail(res, &err);
                return;
        }
        art_parts_remove(app, org, up);
        http_json(res, 200, json_pack("{s:s, s:s}", "upload_id", up, "status", "aborted"));
}

/* ---- GET /artifacts/uploads, GET /artifacts/uploads/:upload_id ---- */

struct list_ctx {
        struct app *app;
        json_t *data;
};

static void on_upload(const struct artifact_row *row, void *userdata)
{
        struct list_ctx *c = userdata;
        json_array_append_new(c->data, upload_view(c->app, row));
}

static int uploads_fill(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                        struct err *err)
{
        struct app *app = req->app;
        const char *prefix = http_query(req, "prefix");
        struct artifact_filter f = { .org_id = ctl_caller(req)->who.org_id, .state = ART_STATE_UPLOADING,
                                     .sandbox_id = "", .name_prefix = prefix ? prefix : "", .now = wall_ms() };
        struct list_ctx c = { app, data };
        int r = store_artifact_each(app->store, &f, p->limit, p->offset, on_upload, &c, ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot list uploads") : 0;
}

static void h_uploads(struct http_request *req, struct http_response *res)
{
        art_sweep(req->app, false);
        ctl_page_reply(req, res, uploads_fill);
}

static void h_upload_get(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id, *up = req->captures[0];
        struct artifact_row row;
        struct err err = {};
        struct art_part_info *parts = NULL;
        size_t n = 0;
        if (art_get(app, org, up, ART_STATE_UPLOADING, &row, &err) < 0) {
                fail(res, &err);
                return;
        }
        json_t *view = upload_view(app, &row), *list = json_array();
        artifact_row_done(&row);
        if (art_parts_list(app, org, up, &parts, &n) < 0) {
                json_decref(view);
                json_decref(list);
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot list the parts");
                return;
        }
        for (size_t i = 0; i < n; i++)
                json_array_append_new(list, json_pack("{s:i, s:I, s:s}", "part_number", (int)parts[i].number, "size",
                                                      (json_int_t)parts[i].size, "etag", parts[i].etag));
        free(parts);
        json_object_set_new(view, "parts", list);
        http_json(res, 200, view);
}

static size_t part_body_cap(const void *app)
{
        return ((const struct app *)app)->cfg->ctl_artifact_part_max_bytes;
}

CTL_IDEMPOTENT(h_initiate_idem, h_initiate)
CTL_IDEMPOTENT(h_complete_idem, h_complete)

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/artifacts/uploads/initiate", h_initiate_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "PUT", CTL_PREFIX "/artifacts/uploads/:upload_id/parts/:part_number", h_part, ROUTE_BLOCKING,
          part_body_cap },
        { "POST", CTL_PREFIX "/artifacts/uploads/:upload_id/complete", h_complete_idem, ROUTE_JSON | ROUTE_BLOCKING,
          0 },
        { "POST", CTL_PREFIX "/artifacts/uploads/:upload_id/abort", h_abort, ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/artifacts/uploads/:upload_id", h_abort, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/artifacts/uploads", h_uploads, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/artifacts/uploads/:upload_id", h_upload_get, ROUTE_BLOCKING, 0 },
};

const struct route *ctl_artifact_upload_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
