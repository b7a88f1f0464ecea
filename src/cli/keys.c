/* `sandboxd keys [create NAME | rm ID | regenerate ID]`: the controller
 * API's org keys (/api/v1/api-keys, docs/controller-api.md). The key given
 * (--key, SANDBOXD_API_KEY, the config file) must be a controller credential
 * here: an org key sk_… or a session token, not the operator key. */
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "cli/cli.h"

static const char help[] =
        "Usage: sandboxd keys\n"
        "       sandboxd keys create NAME\n"
        "       sandboxd keys rm ID\n"
        "       sandboxd keys regenerate ID\n"
        "\n"
        "The API keys of your organisation on the controller API (/api/v1). Pass one\n"
        "of the org's keys (sk_...) or a session token as --key (or SANDBOXD_API_KEY,\n"
        "or key = ... in the config file); POST /api/v1/register gives the first.\n"
        "create and regenerate print the new secret on stdout: it is shown this once.\n"
        "rm revokes a key at once (a key may revoke itself).\n"
        "\n"
        "--json prints the API's answers ({data: [...], total, ...} for the list).\n"
        "\n"
        "Examples:\n"
        "  sandboxd keys --key sk_...\n"
        "  SANDBOXD_API_KEY=sk_... sandboxd keys create ci\n"
        "  sandboxd keys regenerate 0c6a...\n";

#define KEYS "/api/v1/api-keys"

/* cli_call, with a word on what a 401 from /api/v1 means here. */
static int keys_call(struct cli_ctx *ctx, const char *method, const char *path, json_t *body,
                     struct client_reply *reply)
{
        int r = cli_call_raw(ctx, method, path, body, reply);
        if (r >= 0)
                return r;
        if (reply->status == 401) {
                char msg[600];
                client_reply_message(reply, msg, sizeof(msg));
                cli_fail(ctx, "%s", msg);
                fprintf(stderr, "%s\n",
                        ctx->cfg.key[0] ? "The key given is not a controller credential of an org (an org API key "
                                          "sk_... or a session token); the operator key opens only the runtime "
                                          "and bridge APIs."
                                        : "keys needs a controller credential: --key sk_... (an org API key) or a "
                                          "session token.");
        } else {
                cli_fail_reply(ctx, reply);
        }
        client_reply_clear(reply);
        return 1;
}

static int list(struct cli_ctx *ctx)
{
        struct client_reply reply;
        if (keys_call(ctx, "GET", KEYS "?limit=1000", NULL, &reply) != 0)
                return 1;
        if (ctx->json) {
                cli_print_json(reply.json);
        } else {
                printf("%-36s  %-24s  %-12s  %s\n", "ID", "NAME", "PREFIX", "CREATED");
                size_t i;
                json_t *k;
                json_array_foreach(json_object_get(reply.json, "data"), i, k) {
                        char when[32];
                        printf("%-36s  %-24s  %-12s  %s\n", json_string_value(json_object_get(k, "id")) ?: "?",
                               json_string_value(json_object_get(k, "name")) ?: "",
                               json_string_value(json_object_get(k, "key_prefix")) ?: "",
                               cli_date(json_string_value(json_object_get(k, "created_at")), when, sizeof(when)));
                }
        }
        client_reply_clear(&reply);
        return 0;
}

/* create, rm, regenerate: one call; the secret (if any) or the id printed. */
static int act(struct cli_ctx *ctx, const char *method, const char *path, json_t *body)
{
        struct client_reply reply;
        if (keys_call(ctx, method, path, body, &reply) != 0)
                return 1;
        const char *key = json_string_value(json_object_get(reply.json, "key"));
        if (ctx->json)
                cli_print_json(reply.json);
        else if (key)
                printf("%s\n", key);
        else
                printf("revoked %s\n", json_string_value(json_object_get(reply.json, "id")) ?: "");
        if (key && !ctx->json && ctx->tty_out)
                fprintf(stderr, "(the key is shown this once: keep it now)\n");
        client_reply_clear(&reply);
        return 0;
}

static int dispatch(struct cli_ctx *ctx, int argc, char **argv)
{
        if (argc == 1)
                return list(ctx);
        const char *verb = argv[1];
        if (argc != 3 || (strcmp(verb, "create") && strcmp(verb, "rm") && strcmp(verb, "regenerate")))
                return cli_usage_error(ctx, "expected nothing, create NAME, rm ID or regenerate ID");
        if (argv[2][0] == '-')
                return cli_usage_error(ctx, "unknown option %s", argv[2]);
        if (!strcmp(verb, "create")) {
                json_auto_t *body = json_pack("{s:s}", "name", argv[2]);
                return body ? act(ctx, "POST", KEYS, body) : cli_fail(ctx, "the name is not valid UTF-8");
        }
        char eid[256], path[400];
        if (client_escape_path(argv[2], eid, sizeof(eid)) < 0)
                return cli_usage_error(ctx, "id too long");
        snprintf(path, sizeof(path), KEYS "/%s%s", eid, !strcmp(verb, "rm") ? "" : "/regenerate");
        return act(ctx, !strcmp(verb, "rm") ? "DELETE" : "POST", path, NULL);
}

int cli_keys(int argc, char **argv)
{
        struct cli_ctx ctx;
        int r = cli_ctx_open(&ctx, "keys", &argc, argv);
        if (r != 0 || ctx.help)
                return r ? r : cli_print_help(help);
        if (argc > 1 && argv[1][0] == '-')
                r = cli_usage_error(&ctx, "unknown option %s", argv[1]);
        else
                r = dispatch(&ctx, argc, argv);
        cli_ctx_close(&ctx);
        return r;
}
