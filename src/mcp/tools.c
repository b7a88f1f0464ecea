/* The tool table, tools/list and tools/call, and what every tool shares:
 * building the result's content and calling the API. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/utf8.h"
#include "mcp/internal.h"

/* ---- parameters ---- */

#define P_SANDBOX(req, what)                                                                                   \
        { "sandbox", MCP_P_STRING, req, what }
#define SANDBOX_ID "The sandbox id (from create_sandbox or list_sandboxes)."

static const struct mcp_param p_run_code[] = {
        { "language", MCP_P_STRING, true,
          "The language: python, javascript, typescript, ruby, perl, or shell (bash; stateless only - in a sandbox use "
          "run_command)." },
        { "code", MCP_P_STRING, true,
          "The code to run. The value of the last expression is returned as the result (python, javascript)." },
        P_SANDBOX(false, "Run in this sandbox (from create_sandbox): variables, imports and files persist between "
                         "calls, and python figures (matplotlib plt.show()) come back as PNG images. Without it the "
                         "code runs in a fresh interpreter and nothing is kept."),
        { "context", MCP_P_STRING, false,
          "A context id (from create_context) in the sandbox: its own variables and working directory. Default: "
          "the sandbox's first context of this language." },
        { NULL },
};

static const struct mcp_param p_run_command[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { "command", MCP_P_ARGV, true,
          "A bash command line (pipes, redirections and && work), or an argv array run as it is." },
        { "cwd", MCP_P_STRING, false, "Working directory, relative to /workspace (default /workspace)." },
        { "env", MCP_P_STRING_MAP, false, "Extra environment variables, e.g. {\"DEBUG\": \"1\"}." },
        { "timeout", MCP_P_INTEGER, false,
          "Seconds before the command is stopped (exit code 124). Default 60.", NULL, 1, 3600 },
        { NULL },
};

static const char *const encodings[] = { "utf-8", "base64", NULL };

static const struct mcp_param p_read_file[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { "path", MCP_P_STRING, true, "The file's path, relative to /workspace (or absolute under /workspace)." },
        { "encoding", MCP_P_STRING, false,
          "utf-8 (default: text; a binary file comes back as base64 anyway) or base64.", encodings },
        { NULL },
};

static const struct mcp_param p_write_file[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { "path", MCP_P_STRING, true,
          "The file's path, relative to /workspace. Missing parent directories are created." },
        { "content", MCP_P_STRING, true, "The file's new content (replaces the old one)." },
        { "encoding", MCP_P_STRING, false, "utf-8 (default) or base64 (content is base64 of binary data).",
          encodings },
        { NULL },
};

static const struct mcp_param p_list_files[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { "path", MCP_P_STRING, false, "A directory, relative to /workspace (default: /workspace itself)." },
        { "recursive", MCP_P_BOOLEAN, false, "List the whole tree below the directory (default false)." },
        { "include_hidden", MCP_P_BOOLEAN, false, "Include names starting with a dot (default false)." },
        { NULL },
};

static const struct mcp_param p_delete_file[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { "path", MCP_P_STRING, true, "The file or directory, relative to /workspace." },
        { "recursive", MCP_P_BOOLEAN, false, "Needed to delete a directory with everything in it." },
        { NULL },
};

static const struct mcp_param p_sandbox_only[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { NULL },
};

static const struct mcp_param p_none[] = {
        { NULL },
};

static const struct mcp_param p_create_context[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { "language", MCP_P_STRING, true, "The context's language: python, javascript, typescript, ruby or perl." },
        { "cwd", MCP_P_STRING, false, "Its working directory, under /workspace (default /workspace)." },
        { NULL },
};

static const struct mcp_param p_delete_context[] = {
        P_SANDBOX(true, SANDBOX_ID),
        { "context", MCP_P_STRING, true, "The context id (from create_context or list_contexts)." },
        { NULL },
};

/* ---- the table ---- */

static const struct mcp_tool tools[] = {
        { "run_code", "Run code",
          "Run python, javascript, typescript, ruby, perl or shell code and get its result, stdout, stderr and any "
          "error with its traceback. Pass a sandbox to keep state between calls and to get matplotlib figures as "
          "images.",
          p_run_code, 0, mcp_tool_run_code },
        { "run_command", "Run a shell command",
          "Run a bash command in a sandbox's /workspace and get its stdout, stderr and exit code (output streams "
          "as progress while it runs). Use it to run scripts, build and test programs, and inspect files (ls, grep, cat).",
          p_run_command, 0, mcp_tool_run_command },
        { "read_file", "Read a file", "Read a file of a sandbox (text, or base64 for binary data).", p_read_file,
          MCP_HINT_READ_ONLY, mcp_tool_read_file },
        { "write_file", "Write a file", "Create or replace a file in a sandbox's /workspace (text or base64).",
          p_write_file, MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT, mcp_tool_write_file },
        { "list_files", "List files", "List the files and directories under a directory of a sandbox.",
          p_list_files, MCP_HINT_READ_ONLY, mcp_tool_list_files },
        { "delete_file", "Delete a file", "Delete a file (or, with recursive, a directory) of a sandbox.",
          p_delete_file, MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT, mcp_tool_delete_file },
        { "create_sandbox", "Create a sandbox",
          "Create a new isolated sandbox (a /workspace directory, code contexts, shell) and return its id. Pass the "
          "id to the other tools; delete it with delete_sandbox when done.",
          p_none, 0, mcp_tool_create_sandbox },
        { "list_sandboxes", "List sandboxes", "List the existing sandboxes with their code contexts.", p_none,
          MCP_HINT_READ_ONLY, mcp_tool_list_sandboxes },
        { "delete_sandbox", "Delete a sandbox",
          "Delete a sandbox with all its files, contexts and running commands.", p_sandbox_only,
          MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT, mcp_tool_delete_sandbox },
        { "create_context", "Create a code context",
          "Create a separate code context (its own variables and working directory) in a sandbox; pass its id to "
          "run_code as context.",
          p_create_context, 0, mcp_tool_create_context },
        { "list_contexts", "List code contexts", "List a sandbox's code contexts.", p_sandbox_only,
          MCP_HINT_READ_ONLY, mcp_tool_list_contexts },
        { "delete_context", "Delete a code context", "Delete a code context of a sandbox and its variables.",
          p_delete_context, MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT, mcp_tool_delete_context },
};

const struct mcp_tool *mcp_tools(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(tools);
        return tools;
}

const struct mcp_tool *mcp_tool_find(const char *name)
{
        for (size_t i = 0; name && i < ARRAY_SIZE(tools); i++)
                if (!strcmp(tools[i].name, name))
                        return &tools[i];
        return NULL;
}

json_t *mcp_tools_list(json_t *params, int *code, char *msg, size_t len)
{
        (void)params;
        json_t *list = json_array();
        for (size_t i = 0; list && i < ARRAY_SIZE(tools); i++)
                if (json_array_append_new(list, mcp_tool_json(&tools[i])) < 0) {
                        json_decref(list);
                        list = NULL;
                }
        if (!list) {
                *code = MCP_INTERNAL_ERROR;
                snprintf(msg, len, "out of memory");
                return NULL;
        }
        return json_pack("{s:o}", "tools", list);
}

json_t *mcp_tools_call(struct client *client, const struct mcp_out *out, const atomic_bool *cancelled,
                       json_t *params, int *code, char *msg, size_t len)
{
        const char *name = json_string_value(json_object_get(params, "name"));
        const struct mcp_tool *t = mcp_tool_find(name);
        json_t *args = json_object_get(params, "arguments");
        *code = MCP_INVALID_PARAMS;
        if (!t) {
                snprintf(msg, len, "Unknown tool: %.100s", name ? name : "(params.name must be a string)");
                return NULL;
        }
        if (args && !json_is_object(args) && !json_is_null(args)) {
                snprintf(msg, len, "params.arguments must be an object");
                return NULL;
        }
        json_t *empty = json_object();
        struct mcp_call c = {
                .client = client, .out = out, .cancelled = cancelled, .content = json_array(),
                .progress_token = json_object_get(json_object_get(params, "_meta"), "progressToken"),
        };
        if (!json_is_object(args))
                args = empty;
        char why[400];
        /* A bad argument is the model's to fix: a tool error it can read. */
        if (mcp_args_check(t, args, why, sizeof(why)) < 0)
                mcp_call_error(&c, "%s", why);
        else
                t->run(&c, args);
        json_decref(empty);
        if (json_array_size(c.content) == 0)
                mcp_call_text(&c, "done", 4);
        return json_pack("{s:o, s:b}", "content", c.content, "isError", c.is_error);
}

/* ---- the content of a result ---- */

void mcp_call_text(struct mcp_call *c, const char *text, size_t len)
{
        size_t keep = len > MCP_TEXT_MAX ? utf8_complete_len(text, MCP_TEXT_MAX) : len;
        _cleanup_free_ char *s = malloc(keep * 3 + 100);
        if (!s)
                return;
        size_t n = utf8_sanitize(text, keep, s);
        if (keep < len)
                n += (size_t)sprintf(s + n, "\n[... %zu more bytes not shown]", len - keep);
        json_array_append_new(c->content, json_pack("{s:s, s:s%}", "type", "text", "text", s, n));
}

static void call_vtextf(struct mcp_call *c, const char *fmt, va_list ap)
{
        _cleanup_free_ char *s = NULL;
        int n = vasprintf(&s, fmt, ap);
        if (n >= 0)
                mcp_call_text(c, s, (size_t)n);
}

void mcp_call_textf(struct mcp_call *c, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        call_vtextf(c, fmt, ap);
        va_end(ap);
}

void mcp_call_error(struct mcp_call *c, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        c->is_error = true;
        call_vtextf(c, fmt, ap);
        va_end(ap);
}

void mcp_call_image(struct mcp_call *c, const char *b64, const char *mime)
{
        json_array_append_new(c->content, json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", mime));
}

void mcp_call_progress(struct mcp_call *c, double progress, const char *message)
{
        if (!c->progress_token || !c->out || !c->out->send)
                return;
        json_t *params = json_pack("{s:O, s:f}", "progressToken", c->progress_token, "progress", progress);
        if (params && message)
                json_object_set_new(params, "message", json_string(message));
        json_t *n = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", "notifications/progress", "params",
                              params);
        if (n)
                c->out->send(c->out->cls, n);
        json_decref(n);
}

const char *mcp_arg_str(json_t *args, const char *name)
{
        return json_string_value(json_object_get(args, name));
}

long long mcp_arg_int(json_t *args, const char *name, long long def)
{
        json_t *v = json_object_get(args, name);
        if (json_is_integer(v))
                return json_integer_value(v);
        return json_is_real(v) ? (long long)json_real_value(v) : def;
}

/* ---- the API ---- */

int mcp_reply_check(struct mcp_call *c, int r, struct client_reply *out, struct err *err)
{
        if (r < 0) {
                mcp_call_error(c, "the sandboxd server at %s did not answer: %s", client_url(c->client), err->msg);
        } else if (out->status < 200 || out->status >= 300) {
                char m[700];
                client_reply_message(out, m, sizeof(m));
                mcp_call_error(c, "%s", m);
                r = -1;
        }
        err_done(err);
        if (r < 0) {
                client_reply_clear(out);
                return -1;
        }
        return 0;
}

int mcp_api(struct mcp_call *c, const char *method, const char *path, json_t *body, struct client_reply *out)
{
        struct err err = { 0 };
        memset(out, 0, sizeof(*out));
        return mcp_reply_check(c, client_json(c->client, method, path, body, out, &err), out, &err);
}

/* The bridge's ids (its routes refuse others). */
bool mcp_bridge_id(const char *id)
{
        size_t n = strlen(id);
        return n > 0 && n <= 128 && strspn(id, "abcdefghijklmnopqrstuvwxyz234567") == n;
}

int mcp_gateway_path(struct mcp_call *c, char *out, size_t len, const char *lang, const char *id, const char *suffix)
{
        char eid[300];
        if (client_escape_path(id, eid, sizeof(eid)) < 0 || strchr(id, '/') || !id[0]) {
                mcp_call_error(c, "'%.100s' is not a sandbox id", id);
                return -1;
        }
        if ((size_t)snprintf(out, len, "/languages/%s/sandboxes/%s%s", lang, eid, suffix) >= len) {
                mcp_call_error(c, "path too long");
                return -1;
        }
        return 0;
}

/* Pages of GET /sandboxes until the id shows up. */
json_t *mcp_sandbox_find(struct mcp_call *c, const char *id)
{
        for (long offset = 0;;) {
                char path[100];
                struct client_reply r;
                snprintf(path, sizeof(path), "/sandboxes?limit=1000&offset=%ld", offset);
                if (mcp_api(c, "GET", path, NULL, &r) < 0)
                        return NULL;
                json_t *list = json_object_get(r.json, "sandboxes"), *sb;
                size_t i, n = json_array_size(list);
                json_array_foreach(list, i, sb) {
                        const char *sid = json_string_value(json_object_get(sb, "id"));
                        if (sid && !strcmp(sid, id)) {
                                json_incref(sb);
                                client_reply_clear(&r);
                                return sb;
                        }
                }
                long total = (long)json_integer_value(json_object_get(r.json, "total"));
                client_reply_clear(&r);
                offset += (long)n;
                if (n == 0 || offset >= total)
                        break;
        }
        mcp_call_error(c, "There is no sandbox '%.100s'. Create one with create_sandbox, or see list_sandboxes.", id);
        return NULL;
}
