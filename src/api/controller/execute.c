/* POST /sandbox/:id/execute (seed 003, "Command Execution"): a command in
 * the caller's sandbox, in its jail (its /workspace, network namespace,
 * cgroup with the sandbox's cpus and memory), run by the command runner
 * the bridge's /exec uses (sandbox/runner.h: timeout = SIGTERM to the
 * process group, the bridge's exec grace, SIGKILL, exit 124).
 *
 * command: a string runs under `bash -c`; an array is exec'd directly (a
 * name without '/' is looked up in PATH by /usr/bin/env, no shell).
 * working_dir: under /workspace (else 400). timeout: ms, default 60 s, at
 * most an hour. stream false: {exit_code, stdout, stderr, timed_out,
 * stdout_truncated, stderr_truncated}, each output capped at 10 MiB.
 * stream true: SSE `data: {"type": ...}` events as output comes: stdout /
 * stderr {data}, then exit {exit_code, timed_out}, then done; a client
 * that leaves kills the command. Output is text: bytes that are not UTF-8
 * become U+FFFD (a character split between two stream chunks too).
 * Events (tenant/events.h): execution.started, execution.completed, and
 * resources.limit_warning for a timeout or a capped output. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/common/exec_metrics.h"
#include "api/controller/controller.h"
#include "api/workers/validate.h"
#include "base/buf.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/util.h"
#include "engine/proc.h"
#include "sandbox/runner.h"
#include "sandbox/sandbox.h"

#define EXEC_OUTPUT_MAX (10u << 20)
#define EXEC_TIMEOUT_DEFAULT_MS 60000
#define EXEC_TIMEOUT_MAX_MS 3600000
#define EXEC_ARGV_MAX 4096

/* ---- the request ---- */

struct exec_req {
        const char **argv;           /* owned array; strings borrowed from the body */
        json_t *env;                 /* borrowed, or NULL */
        char cwd[4096];
        uint64_t timeout_ms;
        bool stream;
};

static const char *parse_command(json_t *c, struct exec_req *x)
{
        size_t n = json_is_array(c) ? json_array_size(c) : 0;
        if (json_is_string(c)) {
                if (!json_string_length(c) || strlen(json_string_value(c)) != json_string_length(c))
                        return "command must be a non-empty string without NUL bytes";
                x->argv = calloc(4, sizeof(*x->argv));
                if (!x->argv)
                        return "out of memory";
                x->argv[0] = "/bin/bash";
                x->argv[1] = "-c";
                x->argv[2] = json_string_value(c);
                return NULL;
        }
        if (!n || n > EXEC_ARGV_MAX)
                return "command must be a string or a non-empty array of strings";
        x->argv = calloc(n + 3, sizeof(*x->argv));
        if (!x->argv)
                return "out of memory";
        size_t k = 0;
        const char *first = json_string_value(json_array_get(c, 0));
        if (first && !strchr(first, '/')) {
                x->argv[k++] = "/usr/bin/env"; /* a PATH lookup without a shell */
                x->argv[k++] = "--";
        }
        for (size_t i = 0; i < n; i++) {
                json_t *a = json_array_get(c, i);
                if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a) ||
                    (i == 0 && !json_string_length(a)))
                        return "command must be a string or a non-empty array of strings without NUL bytes";
                x->argv[k++] = json_string_value(a);
        }
        return NULL;
}

static const char *parse_env(json_t *v, struct exec_req *x)
{
        if (!v || json_is_null(v))
                return NULL;
        if (!json_is_object(v))
                return "env must be an object of strings";
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val)
        {
                if (!env_key_valid(k))
                        return "env has an invalid variable name";
                if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val))
                        return "env values must be strings without NUL bytes";
        }
        x->env = v;
        return NULL;
}

static const char *parse_rest(json_t *b, struct exec_req *x)
{
        json_t *wd = json_object_get(b, "working_dir"), *t = json_object_get(b, "timeout"),
               *st = json_object_get(b, "stream");
        x->cwd[0] = '\0';
        if (wd && !json_is_null(wd) &&
            (!json_is_string(wd) || strlen(json_string_value(wd)) != json_string_length(wd) ||
             sbx_workspace_path(json_string_value(wd), x->cwd, sizeof(x->cwd)) < 0))
                return "working_dir must be a path within /workspace";
        x->timeout_ms = EXEC_TIMEOUT_DEFAULT_MS;
        if (t && !json_is_null(t)) {
                double v = json_is_number(t) ? json_number_value(t) : 0;
                if (v < 1 || v > EXEC_TIMEOUT_MAX_MS)
                        return "timeout must be milliseconds from 1 to 3600000";
                x->timeout_ms = (uint64_t)v;
        }
        if (st && !json_is_null(st) && !json_is_boolean(st))
                return "stream must be a boolean";
        x->stream = json_is_true(st);
        return NULL;
}

/* ---- running it ---- */

struct exec_job {
        struct proc *proc;
        uint64_t timeout_ms, grace_ms;
        struct events *events;       /* the event log: execution.* and limit warnings */
        char org_id[STORE_ID_MAX], sandbox_id[STORE_ID_MAX];
        uint64_t started_ns;
        struct http_stream *s;       /* stream: the client */
        struct buf out[2];           /* no stream: stdout, stderr */
        bool truncated[2];
};

static int collect(void *ctx, int fd, const unsigned char *data, size_t len)
{
        struct exec_job *job = ctx;
        struct buf *b = &job->out[fd == 2];
        size_t room = EXEC_OUTPUT_MAX - b->len;
        if (len > room)
                job->truncated[fd == 2] = true;
        if (room)
                (void)buf_append(b, data, len < room ? len : room);
        return 0;
}

static json_t *text_json(const char *data, size_t len)
{
        char *clean = malloc(3 * len + 1);
        if (!clean)
                return json_string("");
        size_t n = utf8_sanitize(data ? data : "", len, clean);
        json_t *j = json_stringn(clean, n);
        free(clean);
        return j;
}

static int sse(struct http_stream *s, json_t *j)
{
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return text && http_sse_event(s, NULL, NULL, text) == 0 ? 0 : -EPIPE;
}

static int stream_output(void *ctx, int fd, const unsigned char *data, size_t len)
{
        struct exec_job *job = ctx;
        json_t *j = json_pack("{s:s, s:o}", "type", fd == 2 ? "stderr" : "stdout", "data",
                              text_json((const char *)data, len));
        return sse(job->s, j);
}

static int stream_heartbeat(void *ctx)
{
        struct exec_job *job = ctx;
        return http_sse_comment(job->s, "") < 0 ? -EPIPE : 0;
}

static const struct sbx_run_ops collect_ops = { collect, NULL, NULL };
static const struct sbx_run_ops stream_ops = { stream_output, stream_heartbeat, NULL };

static void job_free(struct exec_job *job)
{
        if (!job)
                return;
        proc_bury(job->proc); /* kills it if it still runs */
        buf_free(&job->out[0]);
        buf_free(&job->out[1]);
        free(job);
}

static void emit(struct exec_job *job, const char *name, json_t *data)
{
        (void)events_emit(job->events, job->org_id, name, job->sandbox_id, data, NULL);
}

/* execution.completed, and a limit warning for what this runner knows of
 * limits: its timeout and the output cap (the cgroup's verdicts are the
 * code contexts'; sandbox/lifecycle.c). */
static void emit_outcome(struct exec_job *job, const struct sbx_run_result *rr)
{
        emit(job, "execution.completed",
             json_pack("{s:i, s:b, s:I}", "exitCode", rr->exit_code, "timedOut", rr->timed_out, "durationMs",
                       (json_int_t)((now_ns() - job->started_ns) / 1000000)));
        if (rr->timed_out)
                emit(job, "resources.limit_warning",
                     json_pack("{s:s, s:I}", "limit", "timeout", "timeoutMs", (json_int_t)job->timeout_ms));
        if (job->truncated[0] || job->truncated[1])
                emit(job, "resources.limit_warning",
                     json_pack("{s:s, s:I}", "limit", "output", "maxBytes", (json_int_t)EXEC_OUTPUT_MAX));
}

/* sbx_run_wait, counted in /metrics as one controller execution, and
 * told to the event log. */
static int run_counted(struct exec_job *job, const struct sbx_run *run, struct sbx_run_result *rr)
{
        uint64_t start = now_ns();
        int r = sbx_run_wait(run, rr);
        api_count_run(METRICS_API_CONTROLLER, r < 0 ? NULL : rr, start);
        if (r == 0)
                emit_outcome(job, rr);
        return r;
}

static void stream_run(struct http_stream *s, void *ctx)
{
        struct exec_job *job = ctx;
        job->s = s;
        struct sbx_run run = { job->proc, job->timeout_ms, job->grace_ms, &stream_ops, job };
        struct sbx_run_result rr;
        if (run_counted(job, &run, &rr) < 0)
                return;
        char line[96];
        if (rr.timed_out) {
                size_t n = sbx_run_timeout_message(job->timeout_ms, line, sizeof(line));
                if (stream_output(job, 2, (const unsigned char *)line, n) < 0)
                        return;
        }
        if (sse(s, json_pack("{s:s, s:i, s:b}", "type", "exit", "exit_code", rr.exit_code, "timed_out",
                             rr.timed_out)) == 0)
                sse(s, json_pack("{s:s}", "type", "done"));
}

static void stream_disconnect(void *ctx)
{
        struct exec_job *job = ctx;
        proc_signal(job->proc, SIGKILL);
}

static void stream_free(void *ctx)
{
        job_free(ctx);
}

static const struct http_stream_ops exec_stream_ops = { stream_run, stream_disconnect, stream_free };

/* Runs job to its end with its output collected into *ret (the
 * non-streaming answer). */
static int collect_job(struct exec_job *job, json_t **ret, struct err *err)
{
        struct sbx_run run = { job->proc, job->timeout_ms, job->grace_ms, &collect_ops, job };
        struct sbx_run_result rr = { 0 };
        if (run_counted(job, &run, &rr) < 0)
                return err_set(err, ERR_INTERNAL, EIO, "The command could not be run");
        if (rr.timed_out) {
                char line[96];
                size_t n = sbx_run_timeout_message(job->timeout_ms, line, sizeof(line));
                (void)buf_append(&job->out[1], line, n);
        }
        *ret = json_pack("{s:i, s:o, s:o, s:b, s:b, s:b}", "exit_code", rr.exit_code, "stdout",
                         text_json(job->out[0].data, job->out[0].len), "stderr",
                         text_json(job->out[1].data, job->out[1].len), "timed_out", rr.timed_out,
                         "stdout_truncated", job->truncated[0], "stderr_truncated", job->truncated[1]);
        return *ret ? 0 : err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
}

static struct exec_job *job_new(struct app *app, uint64_t timeout_ms)
{
        struct exec_job *job = calloc(1, sizeof(*job));
        if (!job)
                return NULL;
        buf_init(&job->out[0], EXEC_OUTPUT_MAX + 128);
        buf_init(&job->out[1], EXEC_OUTPUT_MAX + 128);
        job->timeout_ms = timeout_ms;
        job->grace_ms = app->cfg->bridge_exec_grace_ms;
        job->events = app->events;
        return job;
}

/* sbx_spawn for job, and execution.started once it runs. */
static int job_spawn(struct app *app, struct exec_job *job, const char *id, const struct sbx_command *cmd, bool stream,
                     struct err *err)
{
        snprintf(job->org_id, sizeof(job->org_id), "%s", cmd->org_id ? cmd->org_id : "");
        snprintf(job->sandbox_id, sizeof(job->sandbox_id), "%s", id);
        int r = sbx_spawn(app->sandboxes, id, cmd, &job->proc, err);
        if (r < 0)
                return r;
        job->started_ns = now_ns();
        emit(job, "execution.started", json_pack("{s:b}", "stream", stream));
        return 0;
}

int ctl_run_collected(struct app *app, const char *id, const struct sbx_command *cmd, uint64_t timeout_ms,
                      json_t **ret, struct err *err)
{
        struct exec_job *job = job_new(app, timeout_ms);
        if (!job)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        int r = job_spawn(app, job, id, cmd, false, err);
        if (r == 0)
                r = collect_job(job, ret, err);
        job_free(job);
        return r;
}

static void run_request(struct http_request *req, struct http_response *res, struct exec_req *x)
{
        struct app *app = req->app;
        const struct sbx_command cmd = { .argv = x->argv, .env = x->env, .cwd = x->cwd[0] ? x->cwd : NULL,
                                         .org_id = ctl_caller(req)->who.org_id };
        struct err err = {};
        json_t *out;
        if (!x->stream) {
                if (ctl_run_collected(app, req->captures[0], &cmd, x->timeout_ms, &out, &err) < 0)
                        ctl_error_done(res, &err, ERR_OK, 0, NULL);
                else
                        http_json(res, 200, out);
                return;
        }
        struct exec_job *job = job_new(app, x->timeout_ms);
        if (!job) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
                return;
        }
        if (job_spawn(app, job, req->captures[0], &cmd, true, &err) < 0) {
                job_free(job);
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return;
        }
        if (http_stream(res, 200, "text/event-stream", &exec_stream_ops, job) == 0)
                http_response_header(res, "Cache-Control", "no-cache");
}

static void h_execute(struct http_request *req, struct http_response *res)
{
        _cleanup_json_ json_t *b = NULL;
        struct exec_req x = { 0 };
        struct sbx_info info;
        struct err err = {};
        struct app *app = req->app;
        /* An unknown sandbox is a 404 before any complaint about the body. */
        if (sbx_find(app->sandboxes, ctl_caller(req)->who.org_id, req->captures[0], &info, &err) < 0) {
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return;
        }
        uint64_t expires_at = info.expires_at;
        sbx_info_done(&info);
        if (!ctl_body_object(req, res, &b))
                return;
        const char *bad = parse_command(json_object_get(b, "command"), &x);
        if (!bad)
                bad = parse_env(json_object_get(b, "env"), &x);
        if (!bad)
                bad = parse_rest(b, &x);
        /* No command outlives its sandbox's deadline. */
        uint64_t now = wall_ms();
        if (!bad && expires_at && expires_at > now && expires_at - now < x.timeout_ms)
                x.timeout_ms = expires_at - now;
        if (bad)
                ctl_error(res, 400, "VALIDATION_ERROR", bad);
        else
                run_request(req, res, &x);
        free(x.argv);
}

CTL_BUDGETED(h_execute_budgeted, CTL_SLOT_EXECUTE, CTL_PREFIX "/sandbox/:id/execute", h_execute)
CTL_IDEMPOTENT(h_execute_idem, h_execute_budgeted)

static const struct route routes[] = {
        { "POST", CTL_PREFIX "/sandbox/:id/execute", h_execute_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
};

const struct route *ctl_execute_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
