/* Controller REPL sessions (seed 003, "REPL Sessions"; issue 12 item 6):
 * a session is a code context of the caller's sandbox (sandbox/context.c:
 * a live interpreter whose cells are journaled, rebuilt from the journal
 * after an eviction, a crash or a daemon restart), created with the
 * binding "repl". Its id is "repl_" + the context id; its kernelId names
 * the context's interpreter.
 *
 * POST   /sandbox/:id/repl/sessions {language?}           → 201 {session}
 * GET    /sandbox/:id/repl/sessions                        → {sessions}
 * POST   /sandbox/:id/repl/sessions/:sid/execute {code}    → {executionCount, outputs, status, durationMs}
 * POST   /sandbox/:id/repl/sessions/:sid/stream {code}     → SSE output… then done
 * POST   /sandbox/:id/repl/sessions/:sid/interrupt         → {status: "interrupted", action}
 * DELETE /sandbox/:id/repl/sessions/:sid                   → {status: "destroyed"}
 *
 * Cells run with the kernel's display on: results are MIME bundles
 * (text/plain, application/json, text/html, image/png). Another org's
 * sandbox or session, by id guessing too, is a 404. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/common/exec_metrics.h"
#include "api/controller/controller.h"
#include "api/workers/result_json.h"
#include "base/buf.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

#define REPL_BINDING "repl"
#define REPL_ID_PREFIX "repl_"
#define REPL_DEFAULT_LANGUAGE "python"
/* How long a cell may ignore SIGINT before its kernel is killed. */
#define REPL_INTERRUPT_GRACE_MS 2000
/* Stdout and stderr kept for a non-streaming answer, each run of them. */
#define REPL_OUTPUT_MAX (16u << 20)

static const char *org_of(struct http_request *req)
{
        return ctl_caller(req)->who.org_id;
}

static void fail(struct http_response *res, struct err *err)
{
        ctl_error_done(res, err, ERR_OK, 0, NULL);
}

/* The context id behind a session id, or NULL (not one of ours: 404). */
static const char *context_of(const char *sid)
{
        size_t n = strlen(REPL_ID_PREFIX);
        return strncmp(sid, REPL_ID_PREFIX, n) == 0 && sid[n] ? sid + n : NULL;
}

static void session_not_found(struct http_response *res, const char *sid)
{
        ctl_errorf(res, 404, "NOT_FOUND", "REPL session not found: %s", sid);
}

/* A context error about the session answers as the session's 404. */
static void fail_session(struct http_response *res, struct err *err, const char *sid)
{
        if (err->reason == ERR_NOT_FOUND && err->op && strncmp(err->op, "context.", 8) == 0) {
                err_done(err);
                session_not_found(res, sid);
                return;
        }
        fail(res, err);
}

static const char *session_status(const struct sbx_context_info *ci)
{
        if (!ci->available)
                return "dead";
        if (ci->busy)
                return ci->resident ? "busy" : "starting";
        return "idle";
}

static json_t *session_json(const char *sandbox_id, const struct sbx_context_info *ci)
{
        char id[STORE_ID_MAX + 8], kernel[24];
        snprintf(id, sizeof(id), REPL_ID_PREFIX "%s", ci->id);
        /* The context id's hex digits: stable across restores, as the
         * session's variables are. */
        size_t k = (size_t)snprintf(kernel, sizeof(kernel), "k_");
        for (const char *p = ci->id; *p && k < 14; p++)
                if (*p != '-')
                        kernel[k++] = *p;
        kernel[k] = '\0';
        return json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", id, "sandboxId", sandbox_id, "language", ci->language,
                         "kernelId", kernel, "status", session_status(ci));
}

/* The session sid of the caller's sandbox id, in *ret; false with the
 * 404 (or another failure) in res. */
static bool find_session(struct http_request *req, struct http_response *res, const char *id, const char *sid,
                         struct sbx_context_info *ret)
{
        const char *cid = context_of(sid);
        struct sbx_context_info *list = NULL;
        size_t n = 0;
        struct err err = {};
        if (sbx_context_list_org(((struct app *)req->app)->sandboxes, org_of(req), id, &list, &n, &err) < 0) {
                fail(res, &err);
                return false;
        }
        bool found = false;
        for (size_t i = 0; cid && i < n && !found; i++)
                if (strcmp(list[i].id, cid) == 0 && strcmp(list[i].binding, REPL_BINDING) == 0) {
                        *ret = list[i];
                        found = true;
                }
        free(list);
        if (!found)
                session_not_found(res, sid);
        return found;
}

/* ---- create, list, delete ---- */

static const struct runtime *repl_runtime(const char *language)
{
        const char *name = runtime_normalize(language ? language : REPL_DEFAULT_LANGUAGE);
        const struct runtime *rt = name ? runtime_find(name) : NULL;
        return rt && rt->contexts && rt->kind == RUNTIME_KERNEL ? rt : NULL;
}

static void h_create(struct http_request *req, struct http_response *res)
{
        _cleanup_json_ json_t *b = NULL;
        const char *language = NULL;
        if (req->body_len && (!ctl_body_object(req, res, &b) || !ctl_opt_string(b, "language", &language, res)))
                return;
        const struct runtime *rt = repl_runtime(language);
        if (!rt) {
                ctl_errorf(res, 400, "VALIDATION_ERROR",
                           "language '%s' has no REPL here (python, javascript, perl, ruby)", language);
                return;
        }
        const char *id = req->captures[0];
        struct sbx_context_info ci;
        struct err err = {};
        if (sbx_context_create_org(((struct app *)req->app)->sandboxes, org_of(req), id, rt, REPL_BINDING, NULL, NULL,
                                   &ci, &err) < 0) {
                fail(res, &err);
                return;
        }
        http_json(res, 201, json_pack("{s:o}", "session", session_json(id, &ci)));
}
CTL_IDEMPOTENT(h_create_idem, h_create)

static void h_list(struct http_request *req, struct http_response *res)
{
        const char *id = req->captures[0];
        struct sbx_context_info *list = NULL;
        size_t n = 0;
        struct err err = {};
        if (sbx_context_list_org(((struct app *)req->app)->sandboxes, org_of(req), id, &list, &n, &err) < 0) {
                fail(res, &err);
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
                if (strcmp(list[i].binding, REPL_BINDING) == 0)
                        json_array_append_new(arr, session_json(id, &list[i]));
        free(list);
        http_json(res, 200, json_pack("{s:o}", "sessions", arr));
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        const char *id = req->captures[0], *sid = req->captures[1];
        struct sbx_context_info ci;
        if (!find_session(req, res, id, sid, &ci))
                return;
        struct err err = {};
        if (sbx_context_delete_org(((struct app *)req->app)->sandboxes, org_of(req), id, ci.id, &err) < 0) {
                fail_session(res, &err, sid);
                return;
        }
        http_json(res, 200, json_pack("{s:s}", "status", "destroyed"));
}

static void h_interrupt(struct http_request *req, struct http_response *res)
{
        static const char *const actions[] = {
                [SBX_INTERRUPT_NONE] = "none",     [SBX_INTERRUPT_SIGNALED] = "signal",
                [SBX_INTERRUPT_SKIPPED] = "skip",  [SBX_INTERRUPT_KILLED] = "restart",
        };
        const char *id = req->captures[0], *sid = req->captures[1];
        struct sbx_context_info ci;
        if (!find_session(req, res, id, sid, &ci))
                return;
        enum sbx_interrupt what;
        struct err err = {};
        if (sbx_context_interrupt(((struct app *)req->app)->sandboxes, org_of(req), id, ci.id,
                                  REPL_INTERRUPT_GRACE_MS, &what, &err) < 0) {
                fail_session(res, &err, sid);
                return;
        }
        http_json(res, 200, json_pack("{s:s, s:s}", "status", "interrupted", "action", actions[what]));
}

/* ---- one cell ---- */

/* A cell's request and its outputs as they come. */
struct cell_job {
        struct app *app;
        char org[STORE_ID_MAX];
        char id[STORE_ID_MAX];
        char cid[STORE_ID_MAX];
        char *code;
        struct http_stream *s;       /* streaming: the client; else NULL */
        json_t *outputs;             /* not streaming: the outputs so far */
        struct buf run;              /* not streaming: bytes of the current stdout/stderr run */
        struct buf tail[2];          /* streaming: an incomplete UTF-8 character of each stream */
        int run_which;               /* 1 stdout, 2 stderr, 0: no run */
};

static json_t *text_output(int which, const char *data, size_t len)
{
        char *clean = malloc(3 * len + 1);
        size_t n = clean ? utf8_sanitize(data, len, clean) : 0;
        json_t *j = json_pack("{s:s, s:s%}", "type", which == 2 ? "stderr" : "stdout", "text", clean ? clean : "", n);
        free(clean);
        return j;
}

static void end_run(struct cell_job *job)
{
        if (job->run_which && job->run.len)
                json_array_append_new(job->outputs, text_output(job->run_which, job->run.data, job->run.len));
        job->run.len = 0;
        job->run_which = 0;
}

static int emit(struct cell_job *job, json_t *output)
{
        if (!job->s) {
                end_run(job);
                return json_array_append_new(job->outputs, output);
        }
        _cleanup_free_ char *text = output ? json_dumps(output, JSON_COMPACT) : NULL;
        json_decref(output);
        return text ? http_sse_event(job->s, "output", NULL, text) : -ENOMEM;
}

/* The sink: one run per stream switch (order kept), or one event per
 * chunk that ends on a whole character. */
static void on_output(void *userdata, int which, const char *data, size_t len)
{
        struct cell_job *job = userdata;
        if (!job->s) {
                if (job->run_which != which)
                        end_run(job);
                job->run_which = which;
                (void)buf_append(&job->run, data, len);
                return;
        }
        struct buf *t = &job->tail[which == 2];
        if (buf_append(t, data, len) < 0)
                return;
        size_t n = utf8_complete_len(t->data, t->len);
        if (n)
                (void)emit(job, text_output(which, t->data, n));
        memmove(t->data, t->data + n, t->len - n);
        t->len -= n;
}

static json_t *result_data(json_t *response)
{
        json_t *data = json_object_get(response, "data");
        if (json_is_object(data))
                return json_incref(data);
        json_t *first = json_array_get(json_object_get(response, "results"), 0), *v;
        if ((v = json_object_get(first, "text")))
                return json_pack("{s:O}", "text/plain", v);
        if (!(v = json_object_get(first, "json")))
                return NULL;
        _cleanup_free_ char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        return json_pack("{s:s, s:O}", "text/plain", text ? text : "", "application/json", v);
}

/* The error output of a cell, or NULL: the runtime API's judgement of the
 * outcome (limits, a dead interpreter, the guest's exception). */
static json_t *error_output(const struct sbx_exec_result *r)
{
        if (r->interrupted == SBX_INTERRUPT_KILLED)
                return json_pack("{s:s, s:s, s:s, s:[]}", "type", "error", "name", "KeyboardInterrupt", "value",
                                 "Interrupted: the kernel was restarted; the session's state comes back from its "
                                 "journal",
                                 "traceback");
        _cleanup_json_ json_t *view = exec_result_json(r->rt, "", &r->outcome, &r->limits);
        json_t *e = json_object_get(view, "error");
        if (!e)
                return NULL;
        json_t *tb = json_object_get(e, "traceback");
        return json_pack("{s:s, s:O, s:O, s:O}", "type", "error", "name", json_object_get(e, "name"), "value",
                         json_object_get(e, "message"), "traceback", json_is_array(tb) ? tb : json_array());
}

/* Everything after the output: what the cell displayed, its result or its
 * error. 0, or -EPIPE once a streaming client is gone. */
static int emit_outcome(struct cell_job *job, const struct sbx_exec_result *r, bool *ret_error)
{
        json_t *response = r->outcome.response, *d;
        json_t *err = error_output(r);
        size_t i;
        int rc = 0;
        json_array_foreach(json_object_get(response, "display"), i, d)
                rc = rc ? rc : emit(job, json_pack("{s:s, s:O}", "type", "result", "data", d));
        json_t *data = err ? NULL : result_data(response);
        if (data)
                rc = rc ? rc : emit(job, json_pack("{s:s, s:o}", "type", "result", "data", data));
        *ret_error = err != NULL;
        if (err)
                rc = rc ? rc : emit(job, err);
        return rc;
}

static json_t *done_json(const struct sbx_exec_result *r, bool error)
{
        return json_pack("{s:I, s:s, s:I}", "executionCount", (json_int_t)r->executions, "status",
                         error ? "error" : "ok", "durationMs", (json_int_t)(r->outcome.duration_ns / 1000000));
}

static int run_cell(struct cell_job *job, struct sbx_exec_result *r, struct err *err)
{
        const struct exec_sink sink = { on_output, job };
        const struct sbx_cell cell = { .org_id = job->org, .context_id = job->cid, .code = job->code,
                                       .display = true, .sink = &sink };
        uint64_t start = now_ns();
        int rc = sbx_context_run(job->app->sandboxes, job->id, &cell, r, err);
        api_count_execution(METRICS_API_CONTROLLER, rc < 0 ? NULL : &r->outcome, start);
        return rc;
}

static void job_free(struct cell_job *job)
{
        if (!job)
                return;
        json_decref(job->outputs);
        buf_free(&job->run);
        buf_free(&job->tail[0]);
        buf_free(&job->tail[1]);
        free(job->code);
        free(job);
}

static void stream_run(struct http_stream *s, void *ctx)
{
        struct cell_job *job = ctx;
        job->s = s;
        struct sbx_exec_result r;
        struct err err = {};
        bool error = true;
        if (run_cell(job, &r, &err) < 0) {
                (void)emit(job, json_pack("{s:s, s:s, s:s, s:[]}", "type", "error", "name", "EngineError", "value",
                                          err.msg, "traceback"));
                err_done(&err);
        } else if (emit_outcome(job, &r, &error) < 0) {
                sbx_exec_result_done(&r);
                return;
        }
        json_t *done = done_json(&r, error);
        _cleanup_free_ char *text = done ? json_dumps(done, JSON_COMPACT) : NULL;
        json_decref(done);
        if (text)
                (void)http_sse_event(s, "done", NULL, text);
        sbx_exec_result_done(&r);
}

static void stream_free(void *ctx)
{
        job_free(ctx);
}

/* A client that leaves does not stop its cell (as a notebook's kernel
 * goes on without its browser): POST …/interrupt does. */
static const struct http_stream_ops cell_stream_ops = { stream_run, NULL, stream_free };

static void reply_collected(struct http_response *res, struct cell_job *job, const char *sid)
{
        struct sbx_exec_result r;
        struct err err = {};
        bool error;
        if (run_cell(job, &r, &err) < 0) {
                fail_session(res, &err, sid);
                return;
        }
        end_run(job);
        emit_outcome(job, &r, &error);
        json_t *body = done_json(&r, error);
        json_object_set(body, "outputs", job->outputs);
        http_json(res, 200, body);
        sbx_exec_result_done(&r);
}

static struct cell_job *job_new(struct http_request *req, const char *id, const char *cid, const char *code)
{
        struct cell_job *job = calloc(1, sizeof(*job));
        if (!job || !(job->code = strdup(code)) || !(job->outputs = json_array())) {
                job_free(job);
                return NULL;
        }
        job->app = req->app;
        snprintf(job->org, sizeof(job->org), "%s", org_of(req));
        snprintf(job->id, sizeof(job->id), "%s", id);
        snprintf(job->cid, sizeof(job->cid), "%s", cid);
        buf_init(&job->run, REPL_OUTPUT_MAX);
        buf_init(&job->tail[0], 64 << 10);
        buf_init(&job->tail[1], 64 << 10);
        return job;
}

static void cell(struct http_request *req, struct http_response *res, bool stream)
{
        const char *id = req->captures[0], *sid = req->captures[1];
        struct sbx_context_info ci;
        _cleanup_json_ json_t *b = NULL;
        const char *code = NULL;
        /* An unknown session is a 404 before any complaint about the body. */
        if (!find_session(req, res, id, sid, &ci) || !ctl_body_object(req, res, &b) ||
            !ctl_opt_string(b, "code", &code, res))
                return;
        if (!code) {
                ctl_error(res, 400, "VALIDATION_ERROR", "code is required");
                return;
        }
        struct cell_job *job = job_new(req, id, ci.id, code);
        if (!job) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
                return;
        }
        if (!stream) {
                reply_collected(res, job, sid);
                job_free(job);
        } else if (http_stream(res, 200, "text/event-stream", &cell_stream_ops, job) == 0) {
                http_response_header(res, "Cache-Control", "no-cache");
        }
}

static void h_execute(struct http_request *req, struct http_response *res)
{
        cell(req, res, false);
}

static void h_stream(struct http_request *req, struct http_response *res)
{
        cell(req, res, true);
}

#define SESSIONS CTL_PREFIX "/sandbox/:id/repl/sessions"
CTL_IDEMPOTENT(h_execute_idem, h_execute)
CTL_IDEMPOTENT(h_stream_idem, h_stream)
CTL_IDEMPOTENT(h_interrupt_idem, h_interrupt)

static const struct route routes[] = {
        { "POST", SESSIONS, h_create_idem, ROUTE_BLOCKING, 0 },
        { "GET", SESSIONS, h_list, ROUTE_BLOCKING, 0 },
        { "POST", SESSIONS "/:sid/execute", h_execute_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "POST", SESSIONS "/:sid/stream", h_stream_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "POST", SESSIONS "/:sid/interrupt", h_interrupt_idem, ROUTE_BLOCKING, 0 },
        { "DELETE", SESSIONS "/:sid", h_delete, ROUTE_BLOCKING, 0 },
};

const struct route *ctl_repl_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
