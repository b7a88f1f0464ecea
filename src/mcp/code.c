/* run_code and the code contexts: the runtime API (stateless /execute/<lang>)
 * and its gateway (a sandbox's contexts, with "display": true for figures). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "mcp/internal.h"

/* Language names go into a path: the server knows them, we only keep the
 * path a path. */
static bool language_name_ok(const char *l)
{
        size_t n = strlen(l);
        if (n == 0 || n > 32)
                return false;
        return strspn(l, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-") == n;
}

static bool is_shell(const char *l)
{
        return !strcmp(l, "shell") || !strcmp(l, "bash") || !strcmp(l, "sh");
}

/* Lines of a JSON array of strings (logs, tracebacks), each ending in \n. */
static void append_lines(struct buf *b, const char *title, json_t *lines)
{
        size_t i;
        json_t *l;
        if (json_array_size(lines) == 0)
                return;
        if (title)
                buf_printf(b, "%s%s\n", b->len ? "\n" : "", title);
        json_array_foreach(lines, i, l) {
                const char *s = json_string_value(l);
                size_t n = s ? strlen(s) : 0;
                buf_append(b, s ? s : "", n);
                if (n == 0 || s[n - 1] != '\n')
                        buf_append(b, "\n", 1);
        }
}

static void append_results(struct buf *b, json_t *results)
{
        size_t i;
        json_t *r;
        json_array_foreach(results, i, r) {
                const char *text = json_string_value(json_object_get(r, "text"));
                json_t *j = json_object_get(r, "json");
                char *dump = !text && j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
                if (text || dump)
                        buf_printf(b, "%s\n", text ? text : dump);
                free(dump);
        }
}

/* Figures shown by the cell, then the last expression's own image. */
static void add_images(struct mcp_call *c, json_t *result)
{
        size_t i;
        json_t *bundle;
        json_array_foreach(json_object_get(result, "display"), i, bundle) {
                const char *png = json_string_value(json_object_get(bundle, "image/png"));
                if (png)
                        mcp_call_image(c, png, "image/png");
        }
        const char *png = json_string_value(json_object_get(json_object_get(result, "data"), "image/png"));
        if (png)
                mcp_call_image(c, png, "image/png");
}

/* An ExecutionResult as the model reads it: the result, the streams, the
 * error with its traceback (a guest error makes the call an error), then
 * images. */
static void add_execution(struct mcp_call *c, json_t *result)
{
        struct buf b;
        buf_init(&b, (size_t)16 << 20);
        json_t *error = json_object_get(result, "error");
        append_results(&b, json_object_get(result, "results"));
        append_lines(&b, "[stdout]", json_object_get(json_object_get(result, "logs"), "stdout"));
        append_lines(&b, "[stderr]", json_object_get(json_object_get(result, "logs"), "stderr"));
        if (json_is_object(error)) {
                c->is_error = true;
                buf_printf(&b, "%s[error] %s: %s\n", b.len ? "\n" : "",
                           json_string_value(json_object_get(error, "name")) ?: "Error",
                           json_string_value(json_object_get(error, "message")) ?: "");
                append_lines(&b, NULL, json_object_get(error, "traceback"));
        }
        json_t *ctx = json_object_get(result, "context");
        if (json_is_object(ctx))
                buf_printf(&b, "%s[context %s, execution %lld]\n", b.len ? "\n" : "",
                           json_string_value(json_object_get(ctx, "id")) ?: "?",
                           (long long)json_integer_value(json_object_get(result, "executionCount")));
        if (b.len == 0)
                buf_printf(&b, "(no output)");
        mcp_call_text(c, b.data, b.len);
        buf_free(&b);
        add_images(c, result);
}

void mcp_tool_run_code(struct mcp_call *c, json_t *args)
{
        const char *lang = mcp_arg_str(args, "language"), *sandbox = mcp_arg_str(args, "sandbox"),
                   *context = mcp_arg_str(args, "context");
        char path[512];
        if (!language_name_ok(lang))
                return mcp_call_error(c, "Unsupported language: '%.40s' (python, javascript, typescript, ruby, perl, "
                                         "shell)", lang);
        if (context && !sandbox)
                return mcp_call_error(c, "A context belongs to a sandbox: pass sandbox too (list_contexts).");
        json_t *body = json_pack("{s:s}", "code", mcp_arg_str(args, "code"));
        if (!sandbox) {
                snprintf(path, sizeof(path), "/execute/%s", lang);
        } else if (is_shell(lang)) {
                json_decref(body);
                return mcp_call_error(c, "In a sandbox, run shell commands with run_command.");
        } else {
                json_t *info = mcp_sandbox_find(c, sandbox);
                json_decref(info);
                if (!info || mcp_gateway_path(c, path, sizeof(path), lang, sandbox, "/execute") < 0) {
                        json_decref(body);
                        return;
                }
                json_object_set_new(body, "display", json_true());
                if (context)
                        json_object_set_new(body, "contextId", json_string(context));
        }
        struct client_reply r;
        if (mcp_api(c, "POST", path, body, &r) == 0) {
                add_execution(c, r.json);
                client_reply_clear(&r);
        }
        json_decref(body);
}

static void add_json(struct mcp_call *c, const char *title, json_t *j)
{
        char *s = json_dumps(j, JSON_INDENT(1) | JSON_ENCODE_ANY);
        if (s)
                mcp_call_textf(c, "%s%s", title, s);
        free(s);
}

void mcp_tool_create_context(struct mcp_call *c, json_t *args)
{
        const char *lang = mcp_arg_str(args, "language"), *sandbox = mcp_arg_str(args, "sandbox");
        const char *cwd = mcp_arg_str(args, "cwd");
        char path[512];
        if (!language_name_ok(lang) || is_shell(lang))
                return mcp_call_error(c, "Contexts are for python, javascript, typescript, ruby or perl; not '%.40s'.",
                                      lang);
        json_t *info = mcp_sandbox_find(c, sandbox);
        json_decref(info);
        if (!info || mcp_gateway_path(c, path, sizeof(path), lang, sandbox, "/contexts") < 0)
                return;
        json_t *body = cwd ? json_pack("{s:s}", "cwd", cwd) : json_object();
        struct client_reply r;
        if (mcp_api(c, "POST", path, body, &r) == 0) {
                add_json(c, "Created the context (pass its id to run_code as context):\n", r.json);
                client_reply_clear(&r);
        }
        json_decref(body);
}

void mcp_tool_list_contexts(struct mcp_call *c, json_t *args)
{
        json_t *info = mcp_sandbox_find(c, mcp_arg_str(args, "sandbox"));
        if (!info)
                return;
        json_t *ctxs = mcp_contexts_summary(json_object_get(info, "contexts"));
        if (json_array_size(ctxs) == 0)
                mcp_call_textf(c, "No contexts yet (run_code makes one per language on first use).");
        else
                add_json(c, "", ctxs);
        json_decref(ctxs);
        json_decref(info);
}

void mcp_tool_delete_context(struct mcp_call *c, json_t *args)
{
        const char *sandbox = mcp_arg_str(args, "sandbox"), *id = mcp_arg_str(args, "context");
        json_t *info = mcp_sandbox_find(c, sandbox), *ctx;
        const char *lang = NULL;
        size_t i;
        char path[700], eid[200];
        if (!info)
                return;
        json_array_foreach(json_object_get(info, "contexts"), i, ctx)
                if (!strcmp(json_string_value(json_object_get(ctx, "id")) ?: "", id))
                        lang = json_string_value(json_object_get(ctx, "language"));
        if (!lang) {
                mcp_call_error(c, "Sandbox %s has no context '%.100s' (list_contexts).", sandbox, id);
        } else if (client_escape_path(id, eid, sizeof(eid)) < 0) {
                mcp_call_error(c, "'%.100s' is not a context id", id);
        } else {
                snprintf(path, sizeof(path), "/contexts/%s", eid);
                char full[1024];
                struct client_reply r;
                if (mcp_gateway_path(c, full, sizeof(full), lang, sandbox, path) == 0 &&
                    mcp_api(c, "DELETE", full, NULL, &r) == 0) {
                        mcp_call_textf(c, "Deleted context %s.", id);
                        client_reply_clear(&r);
                }
        }
        json_decref(info);
}
