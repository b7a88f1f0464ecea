/* `sandboxd contexts SANDBOX [create LANG [--cwd DIR] | rm ID]`: a
 * sandbox's code contexts in every language (from GET /sandboxes: the
 * gateway's own list is one language's), made and deleted through the
 * gateway (/languages/<lang>/sandboxes/<id>/contexts). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "cli/cli.h"

static const char help[] =
        "Usage: sandboxd contexts SANDBOX\n"
        "       sandboxd contexts SANDBOX create LANG [--cwd DIR]\n"
        "       sandboxd contexts SANDBOX rm CONTEXT_ID...\n"
        "\n"
        "A code context is a running interpreter of one language in a sandbox: its\n"
        "variables and imports stay between runs (sandboxd run LANG --sandbox ID\n"
        "--context CID). Lists them (all languages), makes one (the sandbox too, when\n"
        "it does not exist yet; its id is printed), or deletes them.\n"
        "\n"
        "Options:\n"
        "  -w, --cwd DIR   the new context's directory, in /workspace (default: /workspace)\n"
        "\n"
        "--json prints {contexts: [...]}, the new context, or {deleted: [...]}.\n"
        "\n"
        "Examples:\n"
        "  sandboxd contexts mybox\n"
        "  cid=$(sandboxd contexts mybox create python --cwd src)\n"
        "  sandboxd run python --sandbox mybox --context \"$cid\" -c 'import os; os.getcwd()'\n"
        "  sandboxd contexts mybox rm \"$cid\"\n";

static int list(struct cli_ctx *ctx, const char *id)
{
        json_auto_t *info = NULL;
        if (cli_sandbox_find(ctx, id, &info) != 0)
                return 1;
        json_t *contexts = json_object_get(info, "contexts");
        if (ctx->json) {
                json_auto_t *o = json_pack("{s:O}", "contexts", contexts ? contexts : json_array());
                cli_print_json(o);
                return 0;
        }
        if (json_array_size(contexts) == 0) {
                fprintf(stderr, "no contexts in %s (sandboxd contexts %s create LANG)\n", id, id);
                return 0;
        }
        printf("%-36s  %-10s  %-20s  %5s  %s\n", "ID", "LANGUAGE", "CWD", "RUNS", "LAST USED");
        size_t i;
        json_t *c;
        json_array_foreach(contexts, i, c) {
                char used[32];
                printf("%-36s  %-10s  %-20s  %5lld  %s\n", json_string_value(json_object_get(c, "id")) ?: "?",
                       json_string_value(json_object_get(c, "language")) ?: "?",
                       json_string_value(json_object_get(c, "cwd")) ?: "?",
                       (long long)json_integer_value(json_object_get(c, "executions")),
                       cli_date(json_string_value(json_object_get(c, "lastUsed")), used, sizeof(used)));
        }
        return 0;
}

static int create(struct cli_ctx *ctx, const char *id, const char *lang, const char *cwd)
{
        char path[512];
        if (cli_gateway_path(path, sizeof(path), lang, id, "/contexts") < 0)
                return cli_usage_error(ctx, "sandbox id or language too long");
        json_auto_t *body = json_object();
        if (cwd)
                json_object_set_new(body, "cwd", json_string(cwd));
        struct client_reply reply;
        if (cli_call(ctx, "POST", path, body, &reply) != 0)
                return 1;
        if (ctx->json)
                cli_print_json(reply.json);
        else
                printf("%s\n", json_string_value(json_object_get(reply.json, "id")) ?: "");
        client_reply_clear(&reply);
        return 0;
}

/* The gateway deletes a context through its own language: find it. */
static int remove_one(struct cli_ctx *ctx, const char *id, json_t *contexts, const char *cid)
{
        size_t i;
        json_t *c;
        json_array_foreach(contexts, i, c) {
                if (strcmp(json_string_value(json_object_get(c, "id")) ?: "", cid))
                        continue;
                char sub[200], path[512];
                const char *lang = json_string_value(json_object_get(c, "language")) ?: "python";
                if ((size_t)snprintf(sub, sizeof(sub), "/contexts/%s", cid) >= sizeof(sub) ||
                    cli_gateway_path(path, sizeof(path), lang, id, sub) < 0)
                        return cli_fail(ctx, "context id too long");
                struct client_reply reply;
                if (cli_call(ctx, "DELETE", path, NULL, &reply) != 0)
                        return 1;
                client_reply_clear(&reply);
                return 0;
        }
        return cli_fail(ctx, "no context '%s' in %s", cid, id);
}

static int remove_all(struct cli_ctx *ctx, const char *id, char **cids, int n)
{
        json_auto_t *info = NULL, *deleted = json_array();
        if (cli_sandbox_find(ctx, id, &info) != 0)
                return 1;
        int status = 0;
        for (int i = 0; i < n; i++) {
                if (remove_one(ctx, id, json_object_get(info, "contexts"), cids[i]) == 0)
                        json_array_append_new(deleted, json_string(cids[i]));
                else
                        status = 1;
        }
        if (ctx->json) {
                json_auto_t *o = json_pack("{s:O}", "deleted", deleted);
                cli_print_json(o);
        }
        return status;
}

static int dispatch(struct cli_ctx *ctx, char **args, int n, const char *cwd)
{
        if (n < 1)
                return cli_usage_error(ctx, "which sandbox?");
        if (n == 1)
                return cwd ? cli_usage_error(ctx, "--cwd goes with create") : list(ctx, args[0]);
        if (!strcmp(args[1], "create") && n == 3)
                return create(ctx, args[0], args[2], cwd);
        if (!strcmp(args[1], "create"))
                return cli_usage_error(ctx, "create needs one LANG");
        if (!strcmp(args[1], "rm") && n >= 3 && !cwd)
                return remove_all(ctx, args[0], args + 2, n - 2);
        if (!strcmp(args[1], "rm"))
                return cli_usage_error(ctx, "rm needs CONTEXT_ID...");
        return cli_usage_error(ctx, "unknown action '%s' (create, rm)", args[1]);
}

int cli_contexts(int argc, char **argv)
{
        static const struct option opts[] = {
                { "cwd", required_argument, NULL, 'w' },
                { NULL, 0, NULL, 0 },
        };
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "contexts", &argc, argv);
        if (r != 0 || ctx.help)
                return r ? r : cli_print_help(help);
        const char *cwd = NULL;
        optind = 0;
        for (int c; r == 0 && (c = cli_getopt(&ctx, argc, argv, "w:", opts)) != -1;) {
                if (c == 'w')
                        cwd = optarg;
                else
                        r = 2;
        }
        if (r == 0)
                r = dispatch(&ctx, argv + optind, argc - optind, cwd);
        cli_ctx_close(&ctx);
        return r;
}
