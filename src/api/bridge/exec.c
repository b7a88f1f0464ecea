/* POST /v1/sandbox/:id/exec: argv quoted into one bash command line (the
 * anchor's shellQuote), run by bash in the sandbox's jail (in a session's
 * state with Session-Id: sandbox/shell.c), its output streamed as SSE as it
 * is produced: stdout/stderr events carrying base64 of the exact bytes, then
 * exactly one terminal exit {exit_code} or error event. timeout_ms: SIGTERM,
 * bridge.exec_grace_ms, SIGKILL, exit 124. A client that leaves kills it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/b64.h"
#include "base/buf.h"
#include "base/time.h"
#include "base/util.h"
#include "engine/proc.h"
#include "sandbox/runner.h"
#include "sandbox/sandbox.h"

/* ^[A-Za-z0-9@%+=:,./-]+$ passes as is; anything else becomes $'…' with
 * \ ' LF CR TAB escaped (in that order), the rest literal. */
static bool quote_plain(const char *s)
{
        return *s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789@%+=:,./-") ==
                             strlen(s);
}

int bridge_quote(const char *arg, struct buf *out)
{
        if (quote_plain(arg))
                return buf_append(out, arg, strlen(arg));
        int r = buf_append(out, "$'", 2);
        for (const char *p = arg; r == 0 && *p; p++) {
                switch (*p) {
                case '\\': r = buf_append(out, "\\\\", 2); break;
                case '\'': r = buf_append(out, "\\'", 2); break;
                case '\n': r = buf_append(out, "\\n", 2); break;
                case '\r': r = buf_append(out, "\\r", 2); break;
                case '\t': r = buf_append(out, "\\t", 2); break;
                default: r = buf_append(out, p, 1); break;
                }
        }
        return r ? r : buf_append(out, "'", 1);
}

struct exec_job {
        struct sandbox_mgr *mgr;
        struct sbx_shell *sh;
        struct http_stream *s;
        uint64_t timeout_ms;         /* 0: none */
        uint64_t grace_ms;
};

static int send_chunk(struct http_stream *s, const char *event, const unsigned char *data, size_t len)
{
        _cleanup_free_ char *b64 = b64_encode(data, len);
        return b64 ? http_sse_event(s, event, NULL, b64) : -ENOMEM;
}

static int send_error(struct http_stream *s, const char *msg)
{
        json_t *j = json_pack("{s:s, s:s}", "error", msg, "code", "exec_error");
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return http_sse_event(s, "error", NULL, text ? text : "{\"error\":\"out of memory\",\"code\":\"exec_error\"}");
}

/* The runner's ops (sandbox/runner.h): base64 events, SSE comments as the
 * heartbeat, the session's state channel pumped while the shell runs. */
static int on_output(void *ctx, int fd, const unsigned char *data, size_t len)
{
        struct exec_job *job = ctx;
        return send_chunk(job->s, fd == 2 ? "stderr" : "stdout", data, len) < 0 ? -EPIPE : 0;
}

static int on_heartbeat(void *ctx)
{
        struct exec_job *job = ctx;
        return http_sse_comment(job->s, "") < 0 ? -EPIPE : 0;
}

static bool on_side(void *ctx)
{
        struct exec_job *job = ctx;
        return sbx_shell_pump_state(job->sh);
}

static const struct sbx_run_ops run_ops = { on_output, on_heartbeat, on_side };

static void exec_run(struct http_stream *s, void *ctx)
{
        struct exec_job *job = ctx;
        struct err err = { 0 };
        int r;
        job->s = s;
        while ((r = sbx_shell_start(job->mgr, job->sh, SBX_RUN_HEARTBEAT_MS, &err)) == -ETIMEDOUT)
                if (http_sse_comment(s, "") < 0)
                        return; /* the session's previous command still runs */
        if (r < 0) {
                send_error(s, err.msg[0] ? err.msg : "Cannot start the command");
                err_done(&err);
                return;
        }
        struct sbx_run run = { sbx_shell_proc(job->sh), job->timeout_ms, job->grace_ms, &run_ops, job };
        struct sbx_run_result rr;
        if (sbx_run_wait(&run, &rr) < 0)
                return;
        if (rr.timed_out) {
                char line[96];
                size_t n = sbx_run_timeout_message(job->timeout_ms, line, sizeof(line));
                if (send_chunk(s, "stderr", (const unsigned char *)line, n) < 0)
                        return;
        }
        sbx_shell_save_state(job->sh);
        char data[64];
        snprintf(data, sizeof(data), "{\"exit_code\":%d}", rr.exit_code);
        http_sse_event(s, "exit", NULL, data);
}

static void exec_disconnect(void *ctx)
{
        struct exec_job *job = ctx;
        struct proc *p = sbx_shell_proc(job->sh);
        if (p)
                proc_signal(p, SIGKILL);
}

static void exec_free(void *ctx)
{
        struct exec_job *job = ctx;
        sbx_shell_end(job->mgr, job->sh);
        free(job);
}

static const struct http_stream_ops exec_ops = { exec_run, exec_disconnect, exec_free };

/* argv joined as quoted words into cmd (NUL-terminated). 0, or a message
 * for the client's 400. */
static const char *build_command(json_t *argv, struct buf *cmd)
{
        if (!json_is_array(argv) || json_array_size(argv) == 0)
                return "argv must be a non-empty array";
        size_t i;
        json_t *a;
        json_array_foreach(argv, i, a)
        {
                if (!json_is_string(a))
                        return "argv must be a non-empty array of strings";
                if (strlen(json_string_value(a)) != json_string_length(a))
                        return "argv strings cannot contain NUL bytes";
                if ((i && buf_append(cmd, " ", 1) < 0) || bridge_quote(json_string_value(a), cmd) < 0)
                        return "argv is too large";
        }
        return buf_append(cmd, "\n", 2) < 0 ? "argv is too large" : NULL;
}

static uint64_t timeout_of(json_t *v)
{
        double ms = json_is_number(v) ? json_number_value(v) : 0;
        /* Not a positive number: no timeout (the anchor ignores anything
         * that is not a number). Days at most. */
        return ms >= 1 ? (uint64_t)(ms < 30.0 * 86400000 ? ms : 30.0 * 86400000) : 0;
}

/* The parts of the request after argv: Session-Id, cwd. false: answered. */
static bool exec_target(struct http_request *req, struct http_response *res, json_t *root, const char **ret_sid,
                        char *cwd, size_t cwd_len)
{
        const char *sid;
        if (!bridge_session_header(req, res, &sid))
                return false;
        *ret_sid = sid && strcmp(sid, SBX_SESSION_DISABLED) != 0 ? sid : NULL;
        json_t *c = json_object_get(root, "cwd");
        cwd[0] = '\0';
        if (json_is_string(c) && (strlen(json_string_value(c)) != json_string_length(c) ||
                                  sbx_workspace_path(json_string_value(c), cwd, cwd_len) < 0)) {
                bridge_error(res, 403, "invalid_request", "cwd must resolve to a location within /workspace");
                return false;
        }
        return true;
}

static void exec_request(struct http_request *req, struct http_response *res, json_t *root)
{
        struct app *app = req->app;
        struct buf cmd;
        buf_init(&cmd, app->cfg->bridge_exec_command_bytes + 2); /* + "\n" and NUL */
        const char *bad = build_command(json_object_get(root, "argv"), &cmd);
        const char *sid = NULL;
        char cwd[4096];
        if (bad)
                bridge_error(res, 400, "invalid_request", bad);
        if (bad || !exec_target(req, res, root, &sid, cwd, sizeof(cwd))) {
                buf_free(&cmd);
                return;
        }
        struct exec_job *job = calloc(1, sizeof(*job));
        struct err err = { 0 };
        int r = job ? sbx_shell_open(app->sandboxes, req->captures[0], sid, cmd.data, cwd[0] ? cwd : NULL, &job->sh,
                                     &err)
                    : err_set(&err, ERR_INTERNAL, ENOMEM, "out of memory");
        buf_free(&cmd);
        if (r < 0) {
                free(job);
                bridge_error_from(res, &err, "exec_error");
                err_done(&err);
                return;
        }
        job->mgr = app->sandboxes;
        job->timeout_ms = timeout_of(json_object_get(root, "timeout_ms"));
        job->grace_ms = app->cfg->bridge_exec_grace_ms;
        if (http_stream(res, 200, "text/event-stream", &exec_ops, job) == 0)
                http_response_header(res, "Cache-Control", "no-cache");
}

static void h_exec(struct http_request *req, struct http_response *res)
{
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                return;
        json_error_t jerr;
        json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
        if (!json_is_object(root))
                bridge_error(res, 400, "invalid_request", "Invalid JSON body");
        else
                exec_request(req, res, root);
        json_decref(root);
}

/* JSON escapes a byte in at most 6 ("\u0001"). */
static size_t exec_body_cap(const void *app)
{
        return ((const struct app *)app)->cfg->bridge_exec_command_bytes * 6 + 64 * 1024;
}

const struct route *bridge_exec_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox/:id/exec", h_exec, ROUTE_BLOCKING, exec_body_cap },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
