/* What every client command shares: global options, the client, messages. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* Global options are taken wherever they stand, but never after a "--"
 * (what follows belongs to the command run in the sandbox). */
static int take_global_options(struct cli_ctx *ctx, int *argc, char **argv, const char **url, const char **key)
{
        int out = 1;
        bool rest = false;
        for (int i = 1; i < *argc; i++) {
                const char *a = argv[i];
                if (!rest && !strcmp(a, "--")) {
                        rest = true;
                } else if (!rest && (!strcmp(a, "--url") || !strcmp(a, "--key"))) {
                        if (i + 1 >= *argc)
                                return cli_usage_error(ctx, "%s needs a value", a);
                        *(a[2] == 'u' ? url : key) = argv[++i];
                        continue;
                } else if (!rest && (!strncmp(a, "--url=", 6) || !strncmp(a, "--key=", 6))) {
                        *(a[2] == 'u' ? url : key) = a + 6;
                        continue;
                } else if (!rest && !strcmp(a, "--json")) {
                        ctx->json = true;
                        continue;
                } else if (!rest && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
                        ctx->help = true;
                        continue;
                }
                argv[out++] = argv[i];
        }
        argv[out] = NULL;
        *argc = out;
        return 0;
}

int cli_ctx_open(struct cli_ctx *ctx, const char *name, int *argc, char **argv)
{
        memset(ctx, 0, sizeof(*ctx));
        ctx->name = name;
        ctx->tty_out = isatty(STDOUT_FILENO);
        ctx->tty_err = isatty(STDERR_FILENO);
        const char *url = NULL, *key = NULL;
        int r = take_global_options(ctx, argc, argv, &url, &key);
        if (r != 0 || ctx->help)
                return r;
        struct err err = { 0 };
        if (client_config_resolve(&ctx->cfg, url, key, &err) < 0 || client_new(&ctx->cfg, &ctx->client) < 0) {
                fprintf(stderr, "sandboxd %s: %s\n", name, err.msg[0] ? err.msg : "out of memory");
                err_done(&err);
                return 2;
        }
        return 0;
}

void cli_ctx_close(struct cli_ctx *ctx)
{
        client_free(ctx->client);
        ctx->client = NULL;
}

int cli_fail(const struct cli_ctx *ctx, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "sandboxd %s: ", ctx->name);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return 1;
}

int cli_usage_error(const struct cli_ctx *ctx, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "sandboxd %s: ", ctx->name);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n(sandboxd %s --help)\n", ctx->name);
        va_end(ap);
        return 2;
}

int cli_fail_reply(const struct cli_ctx *ctx, const struct client_reply *r)
{
        char msg[600];
        client_reply_message(r, msg, sizeof(msg));
        return cli_fail(ctx, "%s", msg);
}

int cli_fail_err(const struct cli_ctx *ctx, const struct err *err)
{
        if (err->reason == ERR_UNAVAILABLE)
                return cli_fail(ctx, "no answer from %s (%s); is the server running? (make run, or --url)",
                                ctx->cfg.url, err->msg);
        return cli_fail(ctx, "%s", err->msg);
}

void cli_print_json(const json_t *j)
{
        json_dumpf(j, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
}

int cli_call(struct cli_ctx *ctx, const char *method, const char *path, json_t *body, struct client_reply *out)
{
        struct err err = { 0 };
        if (client_json(ctx->client, method, path, body, out, &err) < 0) {
                int r = cli_fail_err(ctx, &err);
                err_done(&err);
                return r;
        }
        if (out->status < 200 || out->status >= 300) {
                int r = cli_fail_reply(ctx, out);
                client_reply_clear(out);
                return r;
        }
        return 0;
}
