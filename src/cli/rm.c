/* `sandboxd rm SANDBOX…` deletes sandboxes (the bridge's DELETE
 * /v1/sandbox/:id, which also ends their commands, terminals and tunnels;
 * the gateway's DELETE for ids the bridge does not take); `rm
 * SANDBOX:PATH… [-r]` deletes files and folders (the files op "delete"). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "cli/cli.h"

static const char help[] =
        "Usage: sandboxd rm [-f] SANDBOX...\n"
        "       sandboxd rm [-r] [-f] SANDBOX:PATH...\n"
        "\n"
        "Deletes sandboxes (their workspace, contexts, commands, terminals), or files\n"
        "and folders in a sandbox (PATH relative to /workspace).\n"
        "\n"
        "Options:\n"
        "  -r, --recursive   delete a folder and everything in it\n"
        "  -f, --force       no error for a sandbox or file that does not exist\n"
        "\n"
        "Exit status: 0 when every one was deleted, 1 otherwise (the others are still\n"
        "deleted), 2 for a usage error. --json prints {deleted: [...], failed: [...]}.\n"
        "\n"
        "Examples:\n"
        "  sandboxd rm mybox\n"
        "  sandboxd rm mybox:out.log\n"
        "  sandboxd rm -r mybox:build\n";

struct rm_opts {
        bool recursive, force;
        json_t *all;            /* the sandboxes, fetched once */
        json_t *deleted, *failed;
};

static bool sandbox_listed(json_t *all, const char *id)
{
        size_t i;
        json_t *s;
        json_array_foreach(all, i, s)
                if (!strcmp(json_string_value(json_object_get(s, "id")) ?: "", id))
                        return true;
        return false;
}

/* The bridge's id form (docs/bridge-api.md): ^[a-z2-7]{1,128}$. */
static bool bridge_id(const char *id)
{
        return strlen(id) <= 128 && strspn(id, "abcdefghijklmnopqrstuvwxyz234567") == strlen(id);
}

static int rm_sandbox(struct cli_ctx *ctx, struct rm_opts *o, const char *id)
{
        if (!sandbox_listed(o->all, id))
                return o->force ? 0 : cli_fail(ctx, "no sandbox '%s'", id);
        char path[512], eid[256];
        if (client_escape_path(id, eid, sizeof(eid)) < 0)
                return cli_fail(ctx, "sandbox id too long: %s", id);
        if (bridge_id(id))
                snprintf(path, sizeof(path), "/v1/sandbox/%s", eid);
        else
                cli_gateway_path(path, sizeof(path), "python", id, NULL);
        struct client_reply reply;
        int r = cli_call_raw(ctx, "DELETE", path, NULL, &reply);
        if (r < 0)
                r = cli_fail_reply(ctx, &reply);
        client_reply_clear(&reply);
        return r;
}

static int rm_path(struct cli_ctx *ctx, struct rm_opts *o, const char *id, const char *path)
{
        if (!sandbox_listed(o->all, id))
                return o->force ? 0 : cli_fail(ctx, "no sandbox '%s'", id);
        path = cli_workspace_path(path);
        if (!strcmp(path, "."))
                return cli_fail(ctx, "%s: will not delete the workspace itself (rm %s deletes the sandbox)", id, id);
        char url[512];
        if (cli_gateway_path(url, sizeof(url), "python", id, "/files") < 0)
                return cli_fail(ctx, "sandbox id too long: %s", id);
        json_auto_t *body = json_pack("{s:s, s:s, s:b}", "op", "delete", "path", path, "recursive", o->recursive);
        struct client_reply reply;
        int r = cli_call_raw(ctx, "POST", url, body, &reply);
        if (r < 0 && o->force && reply.status == 404)
                r = 0;
        else if (r < 0 && reply.status == 400 && !o->recursive &&
                 !strcmp(json_string_value(json_object_get(reply.json, "code")) ?: "", "IS_DIRECTORY"))
                r = cli_fail(ctx, "%s:%s is a folder (rm -r deletes it)", id, path);
        else if (r < 0)
                r = cli_fail_reply(ctx, &reply);
        client_reply_clear(&reply);
        return r;
}

static int rm_one(struct cli_ctx *ctx, struct rm_opts *o, const char *target)
{
        char id[128];
        const char *path;
        int k = cli_target_split(target, id, sizeof(id), &path);
        if (k < 0)
                return cli_fail(ctx, "'%s' is not SANDBOX or SANDBOX:PATH", target);
        int r = k ? rm_path(ctx, o, id, path) : rm_sandbox(ctx, o, id);
        json_array_append_new(r == 0 ? o->deleted : o->failed, json_string(target));
        return r;
}

int cli_rm(int argc, char **argv)
{
        static const struct option opts[] = {
                { "recursive", no_argument, NULL, 'r' },
                { "force", no_argument, NULL, 'f' },
                { NULL, 0, NULL, 0 },
        };
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "rm", &argc, argv);
        if (r != 0 || ctx.help)
                return r ? r : cli_print_help(help);
        json_auto_t *deleted = json_array(), *failed = json_array();
        struct rm_opts o = { .deleted = deleted, .failed = failed };
        optind = 0;
        /* getopt permutes: options may follow the targets ("--" ends them,
         * for a path that starts with '-'). */
        for (int c; r == 0 && (c = cli_getopt(&ctx, argc, argv, "rRf", opts)) != -1;) {
                if (c == 'r' || c == 'R')
                        o.recursive = true;
                else if (c == 'f')
                        o.force = true;
                else
                        r = 2;
        }
        if (r == 0 && optind >= argc)
                r = cli_usage_error(&ctx, "what to delete? SANDBOX or SANDBOX:PATH");
        json_auto_t *all = NULL;
        if (r == 0)
                r = cli_sandboxes_all(&ctx, &all);
        o.all = all;
        for (int i = optind; r == 0 && i < argc; i++)
                rm_one(&ctx, &o, argv[i]);
        if (r == 0 && json_array_size(failed) > 0)
                r = 1;
        if (ctx.json && all) {
                json_auto_t *out = json_pack("{s:O, s:O}", "deleted", deleted, "failed", failed);
                cli_print_json(out);
        }
        cli_ctx_close(&ctx);
        return r;
}
