/* Checkpoints (seed 003 "Optional Features": /sandbox/:id/checkpoints,
 * /checkpoints; issue 15 item 4) on sandbox/checkpoint.h:
 *
 *   POST   /sandbox/:id/checkpoints   {name, description?, include_paths?,
 *          exclude_paths?, include_env?, include_contexts?} → 201 view
 *   GET    /sandbox/:id/checkpoints   the sandbox's, paginated, newest first
 *   GET    /checkpoints               the org's (?sandbox_id=), paginated
 *   GET    /checkpoints/:id           view
 *   DELETE /checkpoints/:id           {id, deleted: true}
 *   POST   /checkpoints/:id/restore   {sandbox_id?, restore_env?} in place
 *   POST   /checkpoints/:id/clone     POST /sandbox/create's options → 201
 *   GET    /checkpoints/:id/compare/:other   added / removed / modified
 *
 * Paths are relative to /workspace ("/workspace/" and "./" prefixes are
 * dropped); include_contexts keeps the code contexts (REPL sessions) as
 * their cell journals, replayed on their next cell after a restore. Quotas: controller.checkpoints_max and
 * controller.checkpoint_bytes per org → 413 CHECKPOINT_QUOTA_EXCEEDED. */
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/checkpoint.h"

#define CKPT_PATTERNS_MAX 64
#define CKPT_PATTERN_BYTES 1024
#define CKPT_NAME_BYTES 256
#define CKPT_DESCRIPTION_BYTES 4096

static void put_time(json_t *j, const char *name, uint64_t ms)
{
        char at[32];
        iso8601_ms(ms, at);
        json_object_set_new(j, name, json_string(at));
}

static json_t *checkpoint_json(const struct checkpoint_row *row)
{
        _cleanup_json_ json_t *meta = json_loads(row->meta_json, 0, NULL);
        json_t *inc = json_object_get(meta, "include_paths"), *exc = json_object_get(meta, "exclude_paths");
        json_t *ctxs = json_object_get(meta, "contexts");
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:O, s:O, s:b, s:b, s:I}", "id", row->id,
                              "sandbox_id", row->sandbox_id, "org_id", row->org_id, "name", row->name, "description",
                              row->description, "size_bytes", (json_int_t)row->size_bytes, "file_count",
                              (json_int_t)row->file_count, "checksum", row->checksum, "include_paths",
                              inc ? inc : json_array(), "exclude_paths", exc ? exc : json_array(), "include_env",
                              json_object_get(meta, "env") != NULL, "include_contexts", ctxs != NULL, "contexts",
                              json_integer_value(ctxs));
        put_time(j, "created_at", row->created_at);
        return j;
}

static void fail(struct http_response *res, struct err *err)
{
        ctl_error_done(res, err, ERR_TOO_LARGE, 413, "CHECKPOINT_QUOTA_EXCEEDED");
}

/* ---- create ---- */

/* A pattern relative to /workspace; NULL when it is not one. */
static const char *pattern_rel(const char *p)
{
        if (!strncmp(p, "/workspace/", 11))
                p += 11;
        while (p[0] == '.' && p[1] == '/')
                p += 2;
        while (p[0] == '/')
                p++;
        size_t n = strlen(p);
        if (!n || n > CKPT_PATTERN_BYTES || !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") ||
            (n >= 3 && !strcmp(p + n - 3, "/..")))
                return NULL;
        return p;
}

/* A member of b that is an array of patterns into v (borrowed from b). */
static bool parse_patterns(json_t *b, const char *name, const char **v, size_t *ret_n, struct http_response *res)
{
        json_t *a = json_object_get(b, name), *x;
        size_t i;
        *ret_n = 0;
        if (!a || json_is_null(a))
                return true;
        if (!json_is_array(a) || json_array_size(a) > CKPT_PATTERNS_MAX) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be an array of at most %d paths", name,
                           CKPT_PATTERNS_MAX);
                return false;
        }
        json_array_foreach(a, i, x)
        {
                const char *s = json_is_string(x) && strlen(json_string_value(x)) == json_string_length(x)
                                        ? pattern_rel(json_string_value(x))
                                        : NULL;
                if (!s) {
                        ctl_errorf(res, 400, "VALIDATION_ERROR", "%s[%zu] must be a path or pattern within /workspace",
                                   name, i);
                        return false;
                }
                v[(*ret_n)++] = s;
        }
        return true;
}

static bool opt_bool(json_t *b, const char *name, bool *ret, struct http_response *res)
{
        json_t *v = json_object_get(b, name);
        if (v && !json_is_null(v) && !json_is_boolean(v)) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be a boolean", name);
                return false;
        }
        *ret = json_is_true(v);
        return true;
}

static bool parse_spec(json_t *b, struct sbx_checkpoint_spec *spec, const char **inc, const char **exc,
                       struct http_response *res)
{
        if (!ctl_opt_string(b, "name", &spec->name, res) || !ctl_opt_string(b, "description", &spec->description, res))
                return false;
        if (!spec->name || !spec->name[0] || strlen(spec->name) > CKPT_NAME_BYTES ||
            (spec->description && strlen(spec->description) > CKPT_DESCRIPTION_BYTES)) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "name (1 to %d bytes) is required; description at most %d",
                           CKPT_NAME_BYTES, CKPT_DESCRIPTION_BYTES);
                return false;
        }
        if (!parse_patterns(b, "include_paths", inc, &spec->filter.ninclude, res) ||
            !parse_patterns(b, "exclude_paths", exc, &spec->filter.nexclude, res) ||
            !opt_bool(b, "include_env", &spec->include_env, res) ||
            !opt_bool(b, "include_contexts", &spec->include_contexts, res))
                return false;
        spec->filter.include = inc;
        spec->filter.exclude = exc;
        return true;
}

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *inc[CKPT_PATTERNS_MAX], *exc[CKPT_PATTERNS_MAX];
        struct sbx_checkpoint_spec spec = { .org_id = ctl_caller(req)->who.org_id, .sandbox_id = req->captures[0],
                                            .max_count = app->cfg->ctl_checkpoints_max,
                                            .max_bytes = app->cfg->ctl_checkpoint_bytes };
        _cleanup_json_ json_t *b = NULL;
        struct sbx_info info;
        struct err err = {};
        /* An unknown sandbox is a 404 before any complaint about the body. */
        if (sbx_find(app->sandboxes, spec.org_id, spec.sandbox_id, &info, &err) < 0) {
                fail(res, &err);
                return;
        }
        sbx_info_done(&info);
        if (!ctl_body_object(req, res, &b) || !parse_spec(b, &spec, inc, exc, res))
                return;
        struct checkpoint_row row;
        if (sbx_checkpoint_create(app->sandboxes, &spec, &row, &err) < 0) {
                fail(res, &err);
                return;
        }
        http_json(res, 201, checkpoint_json(&row));
        checkpoint_row_done(&row);
}

CTL_IDEMPOTENT(h_create_idem, h_create)

/* ---- lists ---- */

static void on_row(const struct checkpoint_row *row, void *userdata)
{
        json_array_append_new(userdata, checkpoint_json(row));
}

static int fill_sandbox(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                        struct err *err)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id;
        struct sbx_info info;
        int r = sbx_find(app->sandboxes, org, req->captures[0], &info, err);
        if (r < 0)
                return r;
        sbx_info_done(&info);
        return sbx_checkpoint_list(app->sandboxes, org, req->captures[0], p->limit, p->offset, on_row, data,
                                   ret_total, err);
}

static int fill_org(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                    struct err *err)
{
        struct app *app = req->app;
        const char *sid = http_query(req, "sandbox_id");
        return sbx_checkpoint_list(app->sandboxes, ctl_caller(req)->who.org_id, sid && *sid ? sid : NULL, p->limit,
                                   p->offset, on_row, data, ret_total, err);
}

static void h_list_sandbox(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, fill_sandbox);
}

static void h_list_org(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, fill_org);
}

/* ---- one checkpoint ---- */

static void h_get(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct checkpoint_row row;
        struct err err = {};
        if (sbx_checkpoint_get(app->sandboxes, ctl_caller(req)->who.org_id, req->captures[0], &row, &err) < 0) {
                fail(res, &err);
                return;
        }
        http_json(res, 200, checkpoint_json(&row));
        checkpoint_row_done(&row);
}

/* Cluster mode: a checkpoint's tar is in the data dir of the node that
 * took it, the owner of its sandbox: that node serves what reads or
 * removes the tar. true = res holds that node's answer. An unknown id is
 * the handler's to report. */
static bool at_its_node(struct http_request *req, struct http_response *res, const char *id)
{
        struct app *app = req->app;
        struct checkpoint_row row;
        struct err err = {};
        if (!app->cluster || sbx_checkpoint_get(app->sandboxes, ctl_caller(req)->who.org_id, id, &row, &err) < 0) {
                err_done(&err);
                return false;
        }
        bool forwarded = ctl_cluster_forward(req, res, row.sandbox_id);
        checkpoint_row_done(&row);
        return forwarded;
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct err err = {};
        if (at_its_node(req, res, req->captures[0]))
                return;
        if (sbx_checkpoint_delete(app->sandboxes, ctl_caller(req)->who.org_id, req->captures[0], &err) < 0)
                fail(res, &err);
        else
                http_json(res, 200, json_pack("{s:s, s:b}", "id", req->captures[0], "deleted", 1));
}

/* restore and clone take an optional body: none is {}. */
static bool body_or_empty(struct http_request *req, struct http_response *res, json_t **ret)
{
        if (req->body_len)
                return ctl_body_object(req, res, ret);
        *ret = json_object();
        return true;
}

static void h_restore(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id, *target = NULL;
        _cleanup_json_ json_t *b = NULL;
        struct checkpoint_row row;
        struct err err = {};
        json_t *re;
        if (sbx_checkpoint_get(app->sandboxes, org, req->captures[0], &row, &err) < 0) {
                fail(res, &err);
                return;
        }
        if (!body_or_empty(req, res, &b) || !ctl_opt_string(b, "sandbox_id", &target, res)) {
                checkpoint_row_done(&row);
                return;
        }
        re = json_object_get(b, "restore_env");
        if (re && !json_is_null(re) && !json_is_boolean(re)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "restore_env must be a boolean");
        } else if (ctl_cluster_forward(req, res, target ? target : row.sandbox_id)) {
                /* the target's owner answered (it restores into its own copy) */
        } else if (sbx_checkpoint_restore(app->sandboxes, org, row.id, target ? target : row.sandbox_id,
                                          !json_is_false(re), &err) < 0) {
                fail(res, &err);
        } else {
                json_t *j = json_pack("{s:s, s:s, s:b, s:I, s:I}", "checkpoint_id", row.id, "sandbox_id",
                                      target ? target : row.sandbox_id, "restored", 1, "file_count",
                                      (json_int_t)row.file_count, "size_bytes", (json_int_t)row.size_bytes);
                put_time(j, "restored_at", wall_ms());
                http_json(res, 200, j);
        }
        checkpoint_row_done(&row);
}

CTL_IDEMPOTENT(h_restore_idem, h_restore)

static void h_clone(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id;
        _cleanup_json_ json_t *b = NULL, *meta = NULL;
        struct checkpoint_row row;
        struct err err = {};
        json_t *view;
        if (sbx_checkpoint_get(app->sandboxes, org, req->captures[0], &row, &err) < 0) {
                fail(res, &err);
                return;
        }
        meta = json_loads(row.meta_json, 0, NULL);
        /* The clone is made where the checkpoint's tar is. */
        if (ctl_cluster_forward(req, res, row.sandbox_id)) {
                /* that node answered */
        } else if (body_or_empty(req, res, &b) && ctl_sandbox_create(req, res, b, json_object_get(meta, "env"), &view)) {
                const char *id = json_string_value(json_object_get(view, "sandbox_id"));
                if (sbx_checkpoint_restore(app->sandboxes, org, row.id, id, false, &err) < 0) {
                        struct err gone = {};
                        (void)sbx_destroy_org(app->sandboxes, org, id, &gone);
                        err_done(&gone);
                        json_decref(view);
                        fail(res, &err);
                } else {
                        json_object_set_new(view, "checkpoint_id", json_string(row.id));
                        json_object_set_new(view, "source_sandbox_id", json_string(row.sandbox_id));
                        http_json(res, 201, view);
                }
        }
        checkpoint_row_done(&row);
}

CTL_BUDGETED(h_clone_budgeted, CTL_SLOT_SANDBOX, CTL_PREFIX "/checkpoints/:id/clone", h_clone)
CTL_IDEMPOTENT(h_clone_idem, h_clone_budgeted)

/* ---- compare ---- */

static int collect_entry(void *userdata, const struct files_tar_entry *e)
{
        json_t *j = json_pack("{s:I, s:s%}", "size", (json_int_t)e->size, "type", &e->type, (size_t)1);
        if (e->type == 'f')
                json_object_set_new(j, "sha256", json_string(e->sha256));
        return json_object_set_new(userdata, e->rel, j);
}

static bool manifest(struct http_request *req, struct http_response *res, const char *id, json_t **ret)
{
        struct app *app = req->app;
        struct err err = {};
        json_t *m = json_object();
        if (sbx_checkpoint_entries(app->sandboxes, ctl_caller(req)->who.org_id, id, collect_entry, m, &err) < 0) {
                json_decref(m);
                fail(res, &err);
                return false;
        }
        *ret = m;
        return true;
}

static json_t *sized(const char *path, json_t *e)
{
        return json_pack("{s:s, s:O, s:O}", "path", path, "size", json_object_get(e, "size"), "type",
                         json_object_get(e, "type"));
}

static void h_compare(struct http_request *req, struct http_response *res)
{
        _cleanup_json_ json_t *from = NULL, *to = NULL;
        if (at_its_node(req, res, req->captures[0]) || !manifest(req, res, req->captures[0], &from) || !manifest(req, res, req->captures[1], &to))
                return;
        json_t *added = json_array(), *removed = json_array(), *modified = json_array();
        uint64_t same = 0;
        const char *k;
        json_t *a, *b;
        json_object_foreach(from, k, a)
        {
                b = json_object_get(to, k);
                if (!b)
                        json_array_append_new(removed, sized(k, a));
                else if (!json_equal(a, b))
                        json_array_append_new(modified, json_pack("{s:s, s:O, s:O, s:O, s:O}", "path", k, "old_size",
                                                                  json_object_get(a, "size"), "new_size",
                                                                  json_object_get(b, "size"), "old_type",
                                                                  json_object_get(a, "type"), "new_type",
                                                                  json_object_get(b, "type")));
                else
                        same++;
        }
        json_object_foreach(to, k, b) if (!json_object_get(from, k)) json_array_append_new(added, sized(k, b));
        http_json(res, 200,
                  json_pack("{s:s, s:s, s:o, s:o, s:o, s:I, s:{s:I, s:I, s:I}}", "from", req->captures[0], "to",
                            req->captures[1], "added", added, "removed", removed, "modified", modified, "unchanged",
                            (json_int_t)same, "summary", "added", (json_int_t)json_array_size(added), "removed",
                            (json_int_t)json_array_size(removed), "modified", (json_int_t)json_array_size(modified)));
}

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/sandbox/:id/checkpoints", h_create_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/sandbox/:id/checkpoints", h_list_sandbox, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/checkpoints", h_list_org, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/checkpoints/:id", h_get, ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/checkpoints/:id", h_delete, ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/checkpoints/:id/restore", h_restore_idem, ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/checkpoints/:id/clone", h_clone_idem, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/checkpoints/:id/compare/:other", h_compare, ROUTE_BLOCKING, 0 },
};

const struct route *ctl_checkpoint_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
