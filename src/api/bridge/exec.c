/* POST /v1/sandbox/:id/exec: argv quoted into one bash command line (the
 * anchor's shellQuote), run in the sandbox's jail, its output streamed as
 * SSE: stdout/stderr events carrying base64 of the exact bytes, then one
 * terminal exit {exit_code} or error event. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/b64.h"
#include "base/buf.h"
#include "base/util.h"
#include "engine/proc.h"
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
        struct proc *proc;
};

static int send_chunk(struct http_stream *s, const char *event, const unsigned char *data, size_t len)
{
        _cleanup_free_ char *b64 = b64_encode(data, len);
        return b64 ? http_sse_event(s, event, NULL, b64) : -ENOMEM;
}

/* Reads what fd `which` has now; 0 at EOF (the fd is then done). */
static ssize_t pump(struct http_stream *s, struct proc *p, int which)
{
        unsigned char chunk[16384];
        ssize_t n = proc_read(p, which, chunk, sizeof(chunk));
        if (n > 0 && send_chunk(s, which == 2 ? "stderr" : "stdout", chunk, (size_t)n) < 0)
                return -EPIPE;
        return n;
}

static void exec_run(struct http_stream *s, void *ctx)
{
        struct exec_job *job = ctx;
        struct proc_fds fds;
        proc_fds(job->proc, &fds);
        bool out_open = fds.stdout_fd >= 0, err_open = fds.stderr_fd >= 0;
        while (out_open || err_open) {
                struct pollfd pf[2] = { { out_open ? fds.stdout_fd : -1, POLLIN, 0 },
                                        { err_open ? fds.stderr_fd : -1, POLLIN, 0 } };
                if (poll(pf, 2, -1) < 0)
                        continue;
                for (int i = 0; i < 2; i++) {
                        if (!pf[i].revents)
                                continue;
                        ssize_t n = pump(s, job->proc, i + 1);
                        if (n == -EPIPE)
                                return;
                        if (n == 0 || (n < 0 && n != -EAGAIN && n != -EINTR))
                                *(i ? &err_open : &out_open) = false;
                }
        }
        struct proc_status st;
        proc_wait(job->proc, -1, &st);
        char data[64];
        snprintf(data, sizeof(data), "{\"exit_code\":%d}", st.signal ? 128 + st.signal : st.code);
        http_sse_event(s, "exit", NULL, data);
}

static void exec_disconnect(void *ctx)
{
        struct exec_job *job = ctx;
        proc_signal(job->proc, SIGKILL);
}

static void exec_free(void *ctx)
{
        struct exec_job *job = ctx;
        proc_bury(job->proc);
        free(job);
}

static const struct http_stream_ops exec_ops = { exec_run, exec_disconnect, exec_free };

static void h_exec(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                return;
        json_error_t jerr;
        json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *argv = json_object_get(root, "argv");
        if (!json_is_array(argv) || json_array_size(argv) == 0) {
                json_decref(root);
                bridge_error(res, 400, "invalid_request", "argv must be a non-empty array");
                return;
        }
        struct buf cmd;
        buf_init(&cmd, 1 << 20);
        size_t i;
        json_t *a;
        json_array_foreach(argv, i, a)
        {
                if (!json_is_string(a) || (i && buf_append(&cmd, " ", 1) < 0) ||
                    bridge_quote(json_string_value(a), &cmd) < 0) {
                        buf_free(&cmd);
                        json_decref(root);
                        bridge_error(res, 400, "invalid_request", "argv must be a non-empty array of strings");
                        return;
                }
        }
        buf_append(&cmd, "", 1);
        const char *args[] = { "/bin/bash", "-c", cmd.data, NULL };
        struct sbx_command c = { .argv = args };
        struct exec_job *job = calloc(1, sizeof(*job));
        struct err err = { 0 };
        int r = job ? sbx_spawn(app->sandboxes, req->captures[0], &c, &job->proc, &err) : -ENOMEM;
        buf_free(&cmd);
        json_decref(root);
        if (r < 0) {
                free(job);
                bridge_error_from(res, &err, "exec_error");
                err_done(&err);
                return;
        }
        http_stream(res, 200, "text/event-stream", &exec_ops, job);
        http_response_header(res, "Cache-Control", "no-cache");
}

const struct route *bridge_exec_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox/:id/exec", h_exec, ROUTE_BLOCKING, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
