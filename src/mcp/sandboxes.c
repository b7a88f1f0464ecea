/* create_sandbox, list_sandboxes, delete_sandbox: a sandbox is made by the
 * bridge API (POST /v1/sandbox: an id every API serves, with the bridge's
 * container-like limits) and listed by GET /sandboxes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/internal.h"

void mcp_tool_create_sandbox(struct mcp_call *c, json_t *args)
{
        (void)args;
        struct client_reply r;
        if (mcp_api(c, "POST", "/v1/sandbox", NULL, &r) < 0)
                return;
        const char *id = json_string_value(json_object_get(r.json, "id"));
        if (id)
                mcp_call_textf(c, "Created sandbox %s. Pass sandbox: \"%s\" to run_code, run_command and the file "
                                  "tools; its files live in /workspace.", id, id);
        else
                mcp_call_error(c, "the server answered without a sandbox id");
        client_reply_clear(&r);
}

json_t *mcp_contexts_summary(json_t *contexts)
{
        json_t *list = json_array(), *ctx;
        size_t i;
        json_array_foreach(contexts, i, ctx)
                json_array_append_new(list, json_pack("{s:O?, s:O?, s:O?, s:O?}", "id", json_object_get(ctx, "id"),
                                                      "language", json_object_get(ctx, "language"), "cwd",
                                                      json_object_get(ctx, "cwd"), "executions",
                                                      json_object_get(ctx, "executions")));
        return list;
}

/* What a model needs of a SandboxInfo. */
static json_t *sandbox_summary(json_t *sb)
{
        json_t *ctxs = mcp_contexts_summary(json_object_get(sb, "contexts"));
        return json_pack("{s:O?, s:O?, s:O?, s:O?, s:o}", "id", json_object_get(sb, "id"), "createdAt",
                         json_object_get(sb, "createdAt"), "lastUsed", json_object_get(sb, "lastUsed"), "expiresAt",
                         json_object_get(sb, "expiresAt"), "contexts", ctxs);
}

void mcp_tool_list_sandboxes(struct mcp_call *c, json_t *args)
{
        (void)args;
        struct client_reply r;
        if (mcp_api(c, "GET", "/sandboxes?limit=200", NULL, &r) < 0)
                return;
        json_t *list = json_array(), *sb;
        size_t i;
        json_array_foreach(json_object_get(r.json, "sandboxes"), i, sb)
                json_array_append_new(list, sandbox_summary(sb));
        long long total = json_integer_value(json_object_get(r.json, "total"));
        if (json_array_size(list) == 0) {
                mcp_call_textf(c, "No sandboxes. Create one with create_sandbox.");
        } else {
                char *s = json_dumps(list, JSON_INDENT(1));
                mcp_call_textf(c, "%lld sandbox%s%s:\n%s", total, total == 1 ? "" : "es",
                               (size_t)total > json_array_size(list) ? " (the oldest 200 shown)" : "", s ?: "");
                free(s);
        }
        json_decref(list);
        client_reply_clear(&r);
}

void mcp_tool_delete_sandbox(struct mcp_call *c, json_t *args)
{
        const char *id = mcp_arg_str(args, "sandbox");
        char path[512];
        json_t *info = mcp_sandbox_find(c, id);
        json_decref(info);
        if (!info)
                return;
        /* The bridge's DELETE also stops the sandbox's commands and terminals. */
        if (mcp_bridge_id(id))
                snprintf(path, sizeof(path), "/v1/sandbox/%s", id);
        else if (mcp_gateway_path(c, path, sizeof(path), "python", id, "") < 0)
                return;
        struct client_reply r;
        if (mcp_api(c, "DELETE", path, NULL, &r) == 0) {
                mcp_call_textf(c, "Deleted sandbox %s.", id);
                client_reply_clear(&r);
        }
}
