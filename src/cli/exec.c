/* `sandboxd exec SANDBOX [--cwd DIR] [-e K=V]… [--timeout MS] -- ARGV…`:
 * the bridge's POST /v1/sandbox/:id/exec (docs/bridge/exec.md). Its SSE
 * stream carries base64 of the exact bytes; they are written to our stdout
 * and stderr as each event arrives (no stdio buffering), and we exit with
 * the command's status (128 + N for a signal, as the bridge reports it). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/b64.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/io.h"
#include "base/utf8.h"
#include "cli/cli.h"

static const char help[] =
        "Usage: sandboxd exec SANDBOX [--cwd DIR] [-e K=V]... [--timeout MS] [--] ARGV...\n"
        "\n"
        "Runs a command in a sandbox (bash, as the user 'sandbox', in /workspace) with\n"
        "the bridge API, streaming its output as it comes. The sandbox is made on\n"
        "first use; its id is lowercase letters and digits 2-7 (what `POST /v1/sandbox`\n"
        "gives). Everything after SANDBOX (or after --) is the command's argv.\n"
        "\n"
        "Options:\n"
        "  -w, --cwd DIR        working directory, relative to /workspace\n"
        "  -e, --env K=V        an environment variable (repeatable; run with env(1))\n"
        "  -t, --timeout MS     SIGTERM after MS milliseconds, then SIGKILL (exit 124)\n"
        "\n"
        "Exit status: the command's own; 128+N when signal N killed it; 1 when the\n"
        "server refused or the command could not start; 2 for a usage error.\n"
        "--json prints {exit_code, stdout, stderr} at the end instead of streaming\n"
        "(stdout_base64/stderr_base64 for output that is not UTF-8).\n"
        "\n"
        "Examples:\n"
        "  sandboxd exec mybox -- ls -la\n"
        "  sandboxd exec mybox --cwd src -e DEBUG=1 -- make test\n"
        "  sandboxd exec mybox -- sh -c 'echo $HOME; exit 3'; echo $?\n";

struct exec_args {
        const char *sandbox, *cwd;
        long timeout_ms;
        json_t *env;
        char **argv;
        int argc;
};

static int parse(struct cli_ctx *ctx, int argc, char **argv, struct exec_args *a)
{
        static const struct option opts[] = {
                { "cwd", required_argument, NULL, 'w' },
                { "env", required_argument, NULL, 'e' },
                { "timeout", required_argument, NULL, 't' },
                { NULL, 0, NULL, 0 },
        };
        optind = 0;
        int c, r = 0;
        /* Operands come back in order ("-" mode): the first is the sandbox,
         * the second starts the command, and nothing after it is ours. */
        while (!a->argv && (c = cli_getopt(ctx, argc, argv, "-w:e:t:", opts)) != -1) {
                char *end;
                if (c == 1 && !a->sandbox) {
                        a->sandbox = optarg;
                } else if (c == 1) {
                        a->argv = &argv[optind - 1];
                        a->argc = argc - (optind - 1);
                } else if (c == 'w') {
                        a->cwd = optarg;
                } else if (c == 'e') {
                        r = cli_env_add(ctx, a->env, optarg);
                } else if (c == 't') {
                        a->timeout_ms = strtol(optarg, &end, 10);
                        if (*end || a->timeout_ms <= 0)
                                return cli_usage_error(ctx, "--timeout needs a positive number of milliseconds");
                } else {
                        return 2;
                }
                if (r != 0)
                        return r;
        }
        if (!a->argv && optind < argc) {
                a->argv = &argv[optind];
                a->argc = argc - optind;
        }
        if (!a->sandbox)
                return cli_usage_error(ctx, "which sandbox?");
        if (!a->argv)
                return cli_usage_error(ctx, "no command: sandboxd exec %s -- ARGV...", a->sandbox);
        return 0;
}

/* The request body: argv (behind `env K=V…` when -e was given: the bridge
 * has no env field), cwd, timeout_ms. */
static json_t *exec_body(const struct exec_args *a)
{
        json_t *argv = json_array();
        if (json_object_size(a->env) > 0) {
                const char *k;
                json_t *v;
                json_array_append_new(argv, json_string("env"));
                json_object_foreach(a->env, k, v) {
                        json_array_append_new(argv, json_sprintf("%s=%s", k, json_string_value(v)));
                }
        }
        for (int i = 0; i < a->argc; i++)
                if (json_array_append_new(argv, json_string(a->argv[i])) < 0) {
                        json_decref(argv);
                        return NULL;
                }
        json_t *body = json_pack("{s:o}", "argv", argv);
        if (body && a->cwd)
                json_object_set_new(body, "cwd", json_string(a->cwd));
        if (body && a->timeout_ms > 0)
                json_object_set_new(body, "timeout_ms", json_integer(a->timeout_ms));
        return body;
}

struct exec_state {
        const struct cli_ctx *ctx;
        int exit_code;          /* -1 until the exit event */
        unsigned events;        /* how many came: a cut stream is not "no server" */
        char error[512];
        struct buf out[2];      /* --json: stdout, stderr */
};

static int on_event(void *cls, const char *event, const char *data, size_t len)
{
        struct exec_state *s = cls;
        s->events++;
        int fd = !strcmp(event, "stdout") ? 1 : !strcmp(event, "stderr") ? 2 : 0;
        if (fd) {
                _cleanup_free_ unsigned char *bytes = NULL;
                size_t n;
                if (b64_decode(data, len, &bytes, &n) < 0)
                        return -EBADMSG;
                if (s->ctx->json)
                        return buf_append(&s->out[fd - 1], bytes, n) < 0 ? -ENOMEM : 0;
                /* A reader that left (EPIPE) ends us as it would a local
                 * command; the bridge then kills the command. */
                return write_all(fd, bytes, n) < 0 ? -errno : 0;
        }
        json_auto_t *j = json_loadb(data, len, 0, NULL);
        if (!strcmp(event, "exit")) {
                json_t *code = json_object_get(j, "exit_code");
                s->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 1;
        } else if (!strcmp(event, "error")) {
                snprintf(s->error, sizeof(s->error), "%s",
                         json_string_value(json_object_get(j, "error")) ?: "the command failed");
        }
        return 0;
}

static void json_output(json_t *o, const char *name, const struct buf *b)
{
        const char *data = b->data ? b->data : "";
        if (utf8_valid(data, b->len)) {
                json_object_set_new(o, name, json_stringn(data, b->len));
        } else {
                char key[32];
                _cleanup_free_ char *enc = b64_encode((const unsigned char *)data, b->len);
                snprintf(key, sizeof(key), "%s_base64", name);
                json_object_set_new(o, key, json_string(enc ? enc : ""));
        }
}

static int run_exec(struct cli_ctx *ctx, const struct exec_args *a)
{
        char eid[256], path[400];
        if (client_escape_path(a->sandbox, eid, sizeof(eid)) < 0)
                return cli_usage_error(ctx, "sandbox id too long");
        snprintf(path, sizeof(path), "/v1/sandbox/%s/exec", eid);
        json_auto_t *body = exec_body(a);
        if (!body)
                return cli_fail(ctx, "the command is not valid UTF-8");
        struct exec_state s = { .ctx = ctx, .exit_code = -1 };
        buf_init(&s.out[0], (size_t)1 << 30);
        buf_init(&s.out[1], (size_t)1 << 30);
        struct client_reply reply;
        struct err err = { 0 };
        int r = client_sse(ctx->client, "POST", path, body, on_event, &s, &reply, &err), status;
        if (r < 0 && !reply.status && s.events > 0)
                status = cli_fail(ctx, "the stream was cut before the command ended: %s", err.msg);
        else if (r < 0 && !reply.status)
                status = cli_fail_err(ctx, &err);
        else if (r < 0)
                status = cli_fail(ctx, "reading the output: %s", strerror(-r));
        else if (reply.status < 200 || reply.status >= 300)
                status = cli_fail_reply(ctx, &reply);
        else if (s.error[0])
                status = cli_fail(ctx, "%s", s.error);
        else if (s.exit_code < 0)
                status = cli_fail(ctx, "the stream ended without the command's exit status");
        else
                status = s.exit_code;
        bool finished = r == 0 && reply.status >= 200 && reply.status < 300 && !s.error[0] && s.exit_code >= 0;
        if (ctx->json && finished) {
                json_auto_t *o = json_pack("{s:i}", "exit_code", s.exit_code);
                json_output(o, "stdout", &s.out[0]);
                json_output(o, "stderr", &s.out[1]);
                cli_print_json(o);
        }
        buf_free(&s.out[0]);
        buf_free(&s.out[1]);
        client_reply_clear(&reply);
        err_done(&err);
        return status;
}

int cli_exec(int argc, char **argv)
{
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "exec", &argc, argv);
        if (r != 0 || ctx.help)
                return r ? r : cli_print_help(help);
        json_auto_t *env = json_object();
        struct exec_args a = { .env = env };
        r = parse(&ctx, argc, argv, &a);
        if (r == 0)
                r = run_exec(&ctx, &a);
        cli_ctx_close(&ctx);
        return r;
}
