/* Templates (seed 003, "Templates"): GET /templates (summaries; filters
 * ?category, ?language, ?tag, ?search), GET /templates/categories, GET
 * /templates/:id (with its files), and POST /sandbox/create-from-template
 * {template_id, run_setup?, + POST /sandbox/create's options}: a sandbox
 * made as POST /sandbox/create makes one (the template's env under the
 * body's), the template's files written into /workspace, then its setup
 * command run once (bash, in /workspace, CTL_TEMPLATE_SETUP_MS at most).
 * A setup that fails (non-zero exit, timeout) deletes the sandbox and is
 * a 422 TEMPLATE_SETUP_FAILED whose error carries the setup's output: a
 * half-prepared sandbox would hold a budget slot and mislead its caller.
 *
 * The catalog is data (templates/ of the repo, template_catalog.h). */
#include <string.h>
#include <strings.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "api/controller/template_catalog.h"
#include "base/b64.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/files.h"
#include "sandbox/sandbox.h"

#define CTL_TEMPLATE_SETUP_MS 120000

static json_t *summary_json(const struct ctl_template *t)
{
        json_t *j = json_object();
        static const char *const keys[] = { "id", "name", "description", "category", "language", "tags" };
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                json_object_set(j, keys[i], json_object_get(t->meta, keys[i]));
        json_object_set_new(j, "file_count", json_integer((json_int_t)t->nfiles));
        json_object_set_new(j, "size_bytes", json_integer((json_int_t)t->bytes));
        json_object_set_new(j, "has_setup", json_boolean(t->setup_command != NULL));
        return j;
}

static bool has_tag(const struct ctl_template *t, const char *tag)
{
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(t->meta, "tags"), i, v) if (!strcasecmp(json_string_value(v), tag)) return true;
        return false;
}

/* ?search: a case-insensitive substring of the name, description or a tag. */
static bool matches_search(const struct ctl_template *t, const char *q)
{
        if (strcasestr(json_string_value(json_object_get(t->meta, "name")), q) ||
            strcasestr(json_string_value(json_object_get(t->meta, "description")), q))
                return true;
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(t->meta, "tags"), i, v) if (strcasestr(json_string_value(v), q)) return true;
        return false;
}

static void h_list(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *cat = http_query(req, "category"), *lang = http_query(req, "language"),
                   *tag = http_query(req, "tag"), *q = http_query(req, "search");
        json_t *list = json_array();
        for (size_t i = 0; app->templates && i < app->templates->n; i++) {
                const struct ctl_template *t = &app->templates->v[i];
                if ((cat && *cat && strcasecmp(cat, t->category)) || (lang && *lang && strcasecmp(lang, t->language)) ||
                    (tag && *tag && !has_tag(t, tag)) || (q && *q && !matches_search(t, q)))
                        continue;
                json_array_append_new(list, summary_json(t));
        }
        http_json(res, 200, json_pack("{s:I, s:o}", "total", (json_int_t)json_array_size(list), "templates", list));
}

static void h_categories(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        json_t *counts = json_object();
        for (size_t i = 0; app->templates && i < app->templates->n; i++) {
                const char *c = app->templates->v[i].category;
                json_object_set_new(counts, c, json_integer(json_integer_value(json_object_get(counts, c)) + 1));
        }
        json_t *list = json_array();
        const char *k;
        json_t *v;
        json_object_foreach(counts, k, v) json_array_append_new(list, json_pack("{s:s, s:O}", "id", k, "count", v));
        json_decref(counts);
        http_json(res, 200, json_pack("{s:o}", "categories", list));
}

/* A file's content as text when it is UTF-8 without NUL, else base64. */
static json_t *file_json(const struct ctl_template_file *f)
{
        bool text = !files_is_binary(f->data, f->len);
        json_t *j = json_pack("{s:s, s:I, s:s}", "path", f->path, "size", (json_int_t)f->len, "encoding",
                              text ? "utf-8" : "base64");
        if (text) {
                json_object_set_new(j, "content", json_stringn((const char *)f->data, f->len));
                return j;
        }
        _cleanup_free_ char *b = b64_encode(f->data, f->len);
        json_object_set_new(j, "content", b ? json_string(b) : json_null());
        return j;
}

static const struct ctl_template *find(struct http_request *req, struct http_response *res, const char *id)
{
        struct app *app = req->app;
        const struct ctl_template *t = ctl_template_find(app->templates, id);
        if (!t)
                ctl_error(res, 404, "NOT_FOUND", "Template not found");
        return t;
}

static void h_get(struct http_request *req, struct http_response *res)
{
        const struct ctl_template *t = find(req, res, req->captures[0]);
        if (!t)
                return;
        json_t *j = summary_json(t), *files = json_array();
        json_object_set(j, "env", t->env);
        json_object_set_new(j, "setup_command", t->setup_command ? json_string(t->setup_command) : json_null());
        for (size_t i = 0; i < t->nfiles; i++)
                json_array_append_new(files, file_json(&t->files[i]));
        json_object_set_new(j, "files", files);
        http_json(res, 200, j);
}

/* ---- create-from-template ---- */

static int write_files(struct app *app, const char *org_id, const char *id, const struct ctl_template *t,
                       struct err *err)
{
        struct sbx_workspace ws;
        int r = sbx_workspace_acquire_org(app->sandboxes, org_id, id, &ws, err);
        if (r < 0)
                return r;
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        for (size_t i = 0; r == 0 && i < t->nfiles; i++)
                r = files_put(&root, t->files[i].path, t->files[i].data, t->files[i].len, FILES_RECURSIVE, err);
        sbx_workspace_release(app->sandboxes, &ws);
        return r;
}

/* Runs the setup command: 0 with *ret its output view (null when there
 * is none), -EIO when it failed (*ret set), or -errno with err filled. */
static int run_setup(struct app *app, const char *org_id, const char *id, const struct ctl_template *t, json_t **ret,
                     struct err *err)
{
        *ret = json_null();
        if (!t->setup_command)
                return 0;
        const char *argv[] = { "/bin/bash", "-c", t->setup_command, NULL };
        const struct sbx_command cmd = { .argv = argv, .org_id = org_id };
        uint64_t t0 = now_ms();
        json_t *out;
        int r = ctl_run_collected(app, id, &cmd, CTL_TEMPLATE_SETUP_MS, &out, err);
        if (r < 0)
                return r;
        json_object_set_new(out, "command", json_string(t->setup_command));
        json_object_set_new(out, "duration_ms", json_integer((json_int_t)(now_ms() - t0)));
        *ret = out;
        return json_integer_value(json_object_get(out, "exit_code")) == 0 ? 0 : -EIO;
}

static void setup_failed(struct http_response *res, json_t *setup)
{
        http_json(res, 422,
                  json_pack("{s:{s:s, s:s, s:o}}", "error", "code", "TEMPLATE_SETUP_FAILED", "message",
                            "The template's setup command failed; the sandbox was deleted", "details", setup));
}

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org_id = ctl_caller(req)->who.org_id, *tid = NULL;
        _cleanup_json_ json_t *b = NULL;
        json_t *view = NULL, *setup = NULL, *rs;
        if (!ctl_body_object(req, res, &b) || !ctl_opt_string(b, "template_id", &tid, res))
                return;
        rs = json_object_get(b, "run_setup");
        if (!tid || !*tid || (rs && !json_is_boolean(rs))) {
                ctl_error(res, 400, "VALIDATION_ERROR", "template_id (string) is required; run_setup is a boolean");
                return;
        }
        const struct ctl_template *t = find(req, res, tid);
        if (!t || !ctl_sandbox_create(req, res, b, t->env, &view))
                return;
        const char *id = json_string_value(json_object_get(view, "sandbox_id"));
        struct err err = {};
        int r = write_files(app, org_id, id, t, &err);
        if (r == 0 && !json_is_false(rs))
                r = run_setup(app, org_id, id, t, &setup, &err);
        if (r < 0) {
                struct err gone = {};
                (void)sbx_destroy_org(app->sandboxes, org_id, id, &gone);
                err_done(&gone);
                json_decref(view);
                if (r == -EIO && !err.reason)
                        setup_failed(res, setup);
                else
                        ctl_error_done(res, &err, ERR_OK, 0, NULL), json_decref(setup);
                return;
        }
        json_object_set_new(view, "template_id", json_string(t->id));
        json_object_set_new(view, "files_written", json_integer((json_int_t)t->nfiles));
        json_object_set_new(view, "setup", setup ? setup : json_null());
        http_json(res, 201, view);
}

CTL_BUDGETED(h_create_budgeted, CTL_SLOT_SANDBOX, CTL_PREFIX "/sandbox/create-from-template", h_create)
CTL_IDEMPOTENT(h_create_idem, h_create_budgeted)

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/templates", h_list, 0, 0 },
        { "GET", CTL_PREFIX "/templates/categories", h_categories, 0, 0 },
        { "GET", CTL_PREFIX "/templates/:id", h_get, 0, 0 },
        { "POST", CTL_PREFIX "/sandbox/create-from-template", h_create_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
};

const struct route *ctl_template_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
