/* `sandboxd ls`: the sandboxes (GET /sandboxes, every page) as a table, or
 * with SANDBOX[:PATH] the files of a sandbox (the gateway's files op
 * "list"). */
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "cli/cli.h"

static const char help[] =
        "Usage: sandboxd ls [--ids]\n"
        "       sandboxd ls [-a] SANDBOX[:PATH]\n"
        "\n"
        "Without a sandbox: every sandbox the server holds (id, created, last used,\n"
        "contexts). With one: the files in PATH (relative to /workspace; default the\n"
        "workspace itself).\n"
        "\n"
        "Options:\n"
        "  -a, --all     include hidden files (names starting with '.')\n"
        "      --ids     only the sandbox ids, one a line (for scripts and completion)\n"
        "\n"
        "--json prints {sandboxes: [SandboxInfo...], total}, or the files op's answer\n"
        "{path, files: [{name, type, size, mode, modifiedAt, ...}], count}.\n"
        "\n"
        "Examples:\n"
        "  sandboxd ls\n"
        "  sandboxd ls mybox\n"
        "  sandboxd ls mybox:src/lib\n"
        "  sandboxd ls --json | jq -r '.sandboxes[].id'\n";

/* "3 (python, javascript)": how many contexts, of which languages. */
static void contexts_summary(json_t *contexts, char *out, size_t len)
{
        json_auto_t *langs = json_object();
        size_t i, o = (size_t)snprintf(out, len, "%zu", json_array_size(contexts));
        json_t *c;
        json_array_foreach(contexts, i, c) {
                const char *lang = json_string_value(json_object_get(c, "language")) ?: "?";
                if (o >= len || json_object_get(langs, lang))
                        continue;
                o += (size_t)snprintf(out + o, len - o, "%s%s", json_object_size(langs) ? ", " : " (", lang);
                json_object_set_new(langs, lang, json_true());
        }
        if (o < len && json_object_size(langs))
                snprintf(out + o, len - o, ")");
}

static int list_sandboxes(struct cli_ctx *ctx, bool ids)
{
        json_auto_t *all = NULL;
        if (cli_sandboxes_all(ctx, &all) != 0)
                return 1;
        if (ctx->json) {
                json_auto_t *o = json_pack("{s:O, s:I}", "sandboxes", all, "total", (json_int_t)json_array_size(all));
                cli_print_json(o);
                return 0;
        }
        size_t i;
        json_t *s;
        if (!ids && json_array_size(all) == 0)
                fprintf(stderr, "no sandboxes\n");
        else if (!ids)
                printf("%-28s %-19s  %-19s  %s\n", "ID", "CREATED", "LAST USED", "CONTEXTS");
        json_array_foreach(all, i, s) {
                const char *id = json_string_value(json_object_get(s, "id")) ?: "?";
                if (ids) {
                        printf("%s\n", id);
                        continue;
                }
                char created[32], used[32], contexts[256];
                contexts_summary(json_object_get(s, "contexts"), contexts, sizeof(contexts));
                printf("%-28s %-19s  %-19s  %s\n", id,
                       cli_date(json_string_value(json_object_get(s, "createdAt")), created, sizeof(created)),
                       cli_date(json_string_value(json_object_get(s, "lastUsed")), used, sizeof(used)), contexts);
        }
        return 0;
}

static void print_file(json_t *f)
{
        char when[32];
        const char *type = json_string_value(json_object_get(f, "type")) ?: "";
        printf("%s %10lld  %s  %s%s\n", json_string_value(json_object_get(f, "mode")) ?: "?---------",
               (long long)json_integer_value(json_object_get(f, "size")),
               cli_date(json_string_value(json_object_get(f, "modifiedAt")), when, sizeof(when)),
               json_string_value(json_object_get(f, "name")) ?: "?", !strcmp(type, "directory") ? "/" : "");
}

static int files_list(struct cli_ctx *ctx, const char *id, const char *path, bool all, struct client_reply *reply)
{
        char url[512];
        if (cli_gateway_path(url, sizeof(url), "python", id, "/files") < 0)
                return cli_usage_error(ctx, "sandbox id too long");
        json_auto_t *body = json_pack("{s:s, s:s, s:b}", "op", "list", "path", path, "includeHidden", all);
        return cli_call_raw(ctx, "POST", url, body, reply) > 0 ? 1 : 0;
}

static bool reply_code_is(const struct client_reply *r, const char *code)
{
        return !strcmp(json_string_value(json_object_get(r->json, "code")) ?: "", code);
}

/* A PATH that is a file is shown as `ls FILE` shows it: its parent's
 * entry for it. */
static int list_one_file(struct cli_ctx *ctx, const char *id, const char *path, struct client_reply *reply)
{
        _cleanup_free_ char *d = strdup(path), *b = strdup(path);
        if (!d || !b)
                return cli_fail(ctx, "out of memory");
        const char *name = basename(b);
        client_reply_clear(reply);
        int r = files_list(ctx, id, dirname(d), true, reply);
        if (r != 0)
                return r;
        json_t *f;
        size_t i;
        json_array_foreach(json_object_get(reply->json, "files"), i, f) {
                if (strcmp(json_string_value(json_object_get(f, "name")) ?: "", name))
                        continue;
                if (ctx->json)
                        cli_print_json(f);
                else
                        print_file(f);
                return 0;
        }
        return cli_fail(ctx, "%s: no such file", path);
}

static int list_files(struct cli_ctx *ctx, const char *target, bool all)
{
        char id[128];
        const char *path = NULL;
        if (cli_target_split(target, id, sizeof(id), &path) < 0)
                return cli_usage_error(ctx, "'%s' is not SANDBOX[:PATH]", target);
        json_auto_t *info = NULL;
        /* The gateway would make an unknown sandbox: look first. */
        if (cli_sandbox_find(ctx, id, &info) != 0)
                return 1;
        path = cli_workspace_path(path);
        struct client_reply reply;
        int r = files_list(ctx, id, path, all, &reply);
        if (r != 0)
                return r;
        if (reply.status == 400 && reply_code_is(&reply, "NOT_DIRECTORY"))
                r = list_one_file(ctx, id, path, &reply);
        else if (reply.status != 200)
                r = cli_fail_reply(ctx, &reply);
        else if (ctx->json)
                cli_print_json(reply.json);
        else {
                size_t i;
                json_t *f;
                json_array_foreach(json_object_get(reply.json, "files"), i, f)
                        print_file(f);
        }
        client_reply_clear(&reply);
        return r;
}

int cli_ls(int argc, char **argv)
{
        static const struct option opts[] = {
                { "all", no_argument, NULL, 'a' },
                { "ids", no_argument, NULL, 'I' },
                { NULL, 0, NULL, 0 },
        };
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "ls", &argc, argv);
        if (r != 0 || ctx.help)
                return r ? r : cli_print_help(help);
        const char *target = NULL;
        bool all = false, ids = false;
        optind = 0;
        for (int c; r == 0 && (c = cli_getopt(&ctx, argc, argv, "-a", opts)) != -1;) {
                if (c == 1 && !target)
                        target = optarg;
                else if (c == 1)
                        r = cli_usage_error(&ctx, "one SANDBOX[:PATH] at a time");
                else if (c == 'a' || c == 'I')
                        *(c == 'a' ? &all : &ids) = true;
                else
                        r = 2;
        }
        if (r == 0 && optind < argc)
                r = cli_usage_error(&ctx, "one SANDBOX[:PATH] at a time");
        if (r == 0)
                r = target ? list_files(&ctx, target, all) : list_sandboxes(&ctx, ids);
        cli_ctx_close(&ctx);
        return r;
}
