/* run_command: the bridge's POST /v1/sandbox/:id/exec, whose server-sent
 * events carry the output as it is produced; each chunk becomes a progress
 * notification when the caller asked for progress. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/buf.h"
#include "base/utf8.h"
#include "mcp/internal.h"

/* Output kept for the result, per stream: its start and its end (where a
 * build's errors are); what lies between is counted, not kept. Both streams
 * fit the result's text (MCP_TEXT_MAX). */
#define KEEP_HEAD ((size_t)12 << 10)
#define KEEP_TAIL ((size_t)32 << 10)
/* Text of one progress message. */
#define PROGRESS_TEXT_MAX 2000

struct run {
        struct mcp_call *c;
        struct stream {
                struct buf head, tail;  /* tail: up to 2 * KEEP_TAIL, the last KEEP_TAIL shown */
                size_t total;
        } out[2];                       /* stdout, stderr */
        size_t bytes;           /* both streams, for progress */
        long long exit_code;
        bool exited;
        char error[400];
};

static void run_chunk(struct run *run, int stream, const unsigned char *p, size_t n)
{
        struct stream *st = &run->out[stream];
        size_t room = KEEP_HEAD - st->head.len, head = n < room ? n : room;
        buf_append(&st->head, p, head);
        for (size_t i = head; i < n;) {
                if (st->tail.len >= 2 * KEEP_TAIL) {
                        memmove(st->tail.data, st->tail.data + st->tail.len - KEEP_TAIL, KEEP_TAIL);
                        st->tail.len = KEEP_TAIL;
                }
                size_t take = n - i < 2 * KEEP_TAIL - st->tail.len ? n - i : 2 * KEEP_TAIL - st->tail.len;
                buf_append(&st->tail, p + i, take);
                i += take;
        }
        st->total += n;
        run->bytes += n;
        if (!run->c->progress_token)
                return;
        size_t show = utf8_complete_len((const char *)p, n < PROGRESS_TEXT_MAX ? n : PROGRESS_TEXT_MAX);
        char *text = malloc(show * 3 + 1);
        if (!text)
                return;
        text[utf8_sanitize((const char *)p, show, text)] = '\0';
        mcp_call_progress(run->c, (double)run->bytes, text);
        free(text);
}

static int on_event(void *cls, const char *event, const char *data, size_t len)
{
        struct run *run = cls;
        int stream = !strcmp(event, "stdout") ? 0 : !strcmp(event, "stderr") ? 1 : -1;
        if (stream >= 0) {
                unsigned char *bytes = NULL;
                size_t n = 0;
                if (b64_decode(data, len, &bytes, &n) == 0)
                        run_chunk(run, stream, bytes, n);
                free(bytes);
                return 0;
        }
        json_t *j = json_loadb(data, len, 0, NULL);
        if (!strcmp(event, "exit")) {
                run->exited = true;
                run->exit_code = json_integer_value(json_object_get(j, "exit_code"));
        } else if (!strcmp(event, "error")) {
                snprintf(run->error, sizeof(run->error), "%s",
                         json_string_value(json_object_get(j, "error")) ?: "the command could not run");
        }
        json_decref(j);
        return 0;
}

static bool env_name_ok(const char *k)
{
        size_t n = strlen(k);
        return n > 0 && (k[0] < '0' || k[0] > '9') &&
               strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

/* The argv the bridge quotes into its command line: env K=V … first, then
 * the argv given, or bash -c for a command line. */
static json_t *command_argv(struct mcp_call *c, json_t *args)
{
        json_t *argv = json_array(), *cmd = json_object_get(args, "command"), *v;
        json_t *env = json_object_get(args, "env");
        const char *k;
        size_t i;
        if (json_object_size(env) > 0)
                json_array_append_new(argv, json_string("env"));
        json_object_foreach(env, k, v) {
                if (!env_name_ok(k)) {
                        mcp_call_error(c, "'%.100s' is not an environment variable name", k);
                        json_decref(argv);
                        return NULL;
                }
                char *kv = NULL;
                if (asprintf(&kv, "%s=%s", k, json_string_value(v)) >= 0)
                        json_array_append_new(argv, json_string(kv));
                free(kv);
        }
        if (json_is_string(cmd)) {
                json_array_append_new(argv, json_string("bash"));
                json_array_append_new(argv, json_string("-c"));
                json_array_append(argv, cmd);
        } else {
                json_array_foreach(cmd, i, v) json_array_append(argv, v);
        }
        return argv;
}

static void stream_text(struct buf *b, const char *name, const struct stream *st)
{
        if (st->total == 0)
                return;
        size_t tail = st->tail.len < KEEP_TAIL ? st->tail.len : KEEP_TAIL;
        const char *end = st->tail.data ? st->tail.data + st->tail.len - tail : "";
        buf_printf(b, "[%s]\n", name);
        buf_append(b, st->head.data, st->head.len);
        if (st->total > st->head.len + tail)
                buf_printf(b, "\n[... %zu bytes of %s not shown ...]\n", st->total - st->head.len - tail, name);
        buf_append(b, end, tail);
        if (b->data[b->len - 1] != '\n')
                buf_append(b, "\n", 1);
}

static void run_result(struct run *run)
{
        struct buf b;
        buf_init(&b, 4 * (KEEP_HEAD + KEEP_TAIL));
        if (run->exited)
                buf_printf(&b, "exit code: %lld\n", run->exit_code);
        stream_text(&b, "stdout", &run->out[0]);
        stream_text(&b, "stderr", &run->out[1]);
        if (run->error[0]) {
                run->c->is_error = true;
                buf_printf(&b, "error: %s\n", run->error);
        } else if (!run->exited) {
                run->c->is_error = true;
                buf_printf(&b, "error: the command's stream ended without an exit code\n");
        }
        mcp_call_text(run->c, b.data ?: "", b.len);
        buf_free(&b);
}

void mcp_tool_run_command(struct mcp_call *c, json_t *args)
{
        const char *id = mcp_arg_str(args, "sandbox"), *cwd = mcp_arg_str(args, "cwd");
        if (!mcp_bridge_id(id))
                return mcp_call_error(c, "run_command needs a sandbox made by create_sandbox (ids of lowercase letters "
                                         "and digits 2-7); '%.100s' is not one.", id);
        json_t *info = mcp_sandbox_find(c, id);
        json_decref(info);
        if (!info)
                return;
        json_t *argv = command_argv(c, args);
        if (!argv)
                return;
        json_t *body = json_pack("{s:o, s:I}", "argv", argv, "timeout_ms",
                                 (json_int_t)mcp_arg_int(args, "timeout", 60) * 1000);
        if (cwd)
                json_object_set_new(body, "cwd", json_string(cwd));
        char path[300];
        snprintf(path, sizeof(path), "/v1/sandbox/%s/exec", id);
        struct run run = { .c = c };
        struct client_reply reply = { 0 };
        struct err err = { 0 };
        for (int i = 0; i < 2; i++) {
                buf_init(&run.out[i].head, KEEP_HEAD);
                buf_init(&run.out[i].tail, 2 * KEEP_TAIL);
        }
        int r = client_sse_stoppable(c->client, "POST", path, body, on_event, &run, c->cancelled, &reply, &err);
        if (mcp_reply_check(c, r, &reply, &err) == 0) {
                run_result(&run);
                client_reply_clear(&reply);
        }
        for (int i = 0; i < 2; i++) {
                buf_free(&run.out[i].head);
                buf_free(&run.out[i].tail);
        }
        json_decref(body);
}
