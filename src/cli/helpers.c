/* Small helpers the core commands share (run, exec, ls, rm, contexts,
 * keys): option parsing, help text, SANDBOX:PATH arguments, finding a
 * sandbox in GET /sandboxes, gateway paths, dates for tables. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "cli/cli.h"

int cli_getopt(const struct cli_ctx *ctx, int argc, char **argv, const char *shortopts, const struct option *longopts)
{
        opterr = 0;
        int c = getopt_long(argc, argv, shortopts, longopts, NULL);
        if (c != '?' && c != ':')
                return c;
        const char *bad = argv[optind - 1];
        if (c == ':')
                cli_usage_error(ctx, "%s needs a value", bad);
        else if (optopt && bad[0] == '-' && bad[1] != '-')
                cli_usage_error(ctx, "unknown option -%c", optopt);
        else
                cli_usage_error(ctx, "unknown option %s", bad);
        return CLI_OPT_ERROR;
}

int cli_print_help(const char *text)
{
        fputs(text, stdout);
        fputs("\nGlobal options (anywhere before --):\n"
              "  --url URL    the server (else SANDBOXD_URL, the config file, http://127.0.0.1:8787)\n"
              "  --key KEY    the API key (else SANDBOXD_API_KEY, the config file)\n"
              "  --json       machine-readable output on stdout\n"
              "  -h, --help   this help\n",
              stdout);
        return 0;
}

int cli_target_split(const char *arg, char *id, size_t idlen, const char **ret_path)
{
        const char *colon = strchr(arg, ':');
        size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
        if (n == 0 || n >= idlen)
                return -EINVAL;
        memcpy(id, arg, n);
        id[n] = '\0';
        *ret_path = colon ? colon + 1 : NULL;
        return colon ? 1 : 0;
}

const char *cli_workspace_path(const char *path)
{
        /* The files API resolves against /workspace and refuses "/": the
         * sandbox's root, to a user, is its workspace. */
        if (!path || !path[0] || !strcmp(path, "/"))
                return ".";
        return path;
}

int cli_gateway_path(char *out, size_t len, const char *lang, const char *id, const char *sub)
{
        char eid[256];
        if (client_escape_path(id, eid, sizeof(eid)) < 0)
                return -ENAMETOOLONG;
        if ((size_t)snprintf(out, len, "/languages/%s/sandboxes/%s%s", lang, eid, sub ? sub : "") >= len)
                return -ENAMETOOLONG;
        return 0;
}

int cli_sandboxes_all(struct cli_ctx *ctx, json_t **ret)
{
        json_auto_t *all = json_array();
        if (!all)
                return cli_fail(ctx, "out of memory");
        /* Pages of the server's maximum until the total is reached (or a
         * page comes back short: sandboxes may go away meanwhile). */
        for (size_t offset = 0;;) {
                char path[96];
                struct client_reply r;
                snprintf(path, sizeof(path), "/sandboxes?limit=1000&offset=%zu", offset);
                if (cli_call(ctx, "GET", path, NULL, &r) != 0)
                        return 1;
                json_t *page = json_object_get(r.json, "sandboxes");
                size_t n = json_array_size(page);
                json_int_t total = json_integer_value(json_object_get(r.json, "total"));
                json_array_extend(all, page);
                client_reply_clear(&r);
                offset += n;
                if (n == 0 || (json_int_t)offset >= total)
                        break;
        }
        *ret = TAKE_PTR(all);
        return 0;
}

int cli_sandbox_find(struct cli_ctx *ctx, const char *id, json_t **ret)
{
        json_auto_t *all = NULL;
        if (cli_sandboxes_all(ctx, &all) != 0)
                return 1;
        size_t i;
        json_t *s;
        json_array_foreach(all, i, s) {
                if (!strcmp(json_string_value(json_object_get(s, "id")) ?: "", id)) {
                        *ret = json_incref(s);
                        return 0;
                }
        }
        return cli_fail(ctx, "no sandbox '%s' (sandboxd ls lists them)", id);
}

int cli_sandbox_check(struct cli_ctx *ctx, const char *id)
{
        json_auto_t *info = NULL;
        return cli_sandbox_find(ctx, id, &info);
}

const char *cli_date(const char *iso, char *out, size_t len)
{
        /* "2026-12-01T20:38:51.358Z" → "2026-12-01 20:38:51" (UTC). */
        if (!iso || strlen(iso) < 19)
                return "-";
        snprintf(out, len, "%.10s %.8s", iso, iso + 11);
        return out;
}

int cli_read_input(const struct cli_ctx *ctx, const char *file, char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = -1;
        int in = STDIN_FILENO;
        if (strcmp(file, "-")) {
                fd = open(file, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return cli_fail(ctx, "%s: %s", file, strerror(errno));
                in = fd;
        }
        struct buf b;
        buf_init(&b, CLI_INPUT_MAX);
        char chunk[65536];
        for (;;) {
                ssize_t n = read(in, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || buf_append(&b, chunk, (size_t)n) < 0) {
                        int e = n < 0 ? errno : EFBIG;
                        buf_free(&b);
                        return cli_fail(ctx, "%s: %s", strcmp(file, "-") ? file : "stdin", strerror(e));
                }
                if (n == 0)
                        break;
        }
        /* buf keeps its data NUL-terminated; an empty input has none. */
        char *data = b.data ? b.data : strdup("");
        if (!data)
                return cli_fail(ctx, "out of memory");
        *ret_len = b.len;
        *ret = data;
        return 0;
}

int cli_env_add(const struct cli_ctx *ctx, json_t *env, const char *kv)
{
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
                return cli_usage_error(ctx, "-e needs NAME=VALUE, not '%s'", kv);
        json_t *v = json_string(eq + 1);
        if (!v || json_object_setn_new(env, kv, (size_t)(eq - kv), v) < 0)
                return cli_fail(ctx, "-e %s: not valid UTF-8", kv);
        return 0;
}

int cli_call_raw(struct cli_ctx *ctx, const char *method, const char *path, json_t *body, struct client_reply *reply)
{
        struct err err = { 0 };
        if (client_json(ctx->client, method, path, body, reply, &err) < 0) {
                cli_fail_err(ctx, &err);
                err_done(&err);
                return 1;
        }
        return reply->status >= 200 && reply->status < 300 ? 0 : -1;
}
