/* Inside the MCP server: the tool table, the arguments checker, and what a
 * running tool call shares with the helpers that talk to the API. Not for
 * other layers (they use mcp.h). */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "client/client.h"
#include "mcp/mcp.h"

/* ---- tool parameters (schema.c): a table, not hand-written JSON Schema,
 * so the schema a client sees and the checks a call gets cannot drift ---- */

enum mcp_param_type {
        MCP_P_STRING,
        MCP_P_INTEGER,
        MCP_P_BOOLEAN,
        MCP_P_ARGV,             /* a string, or a non-empty array of strings */
        MCP_P_STRING_MAP,       /* an object of string values */
        _MCP_P_TYPE_MAX
};

struct mcp_param {
        const char *name;               /* NULL ends a table */
        enum mcp_param_type type;
        bool required;
        const char *description;
        const char *const *choices;     /* strings: NULL-terminated allowed values, or NULL */
        long long min, max;             /* integers: inclusive bounds (both 0: none) */
};

enum {
        MCP_HINT_READ_ONLY = 1 << 0,
        MCP_HINT_DESTRUCTIVE = 1 << 1,
        MCP_HINT_IDEMPOTENT = 1 << 2,
};

struct mcp_call;

struct mcp_tool {
        const char *name;
        const char *title;
        const char *description;
        const struct mcp_param *params;
        unsigned hints;
        /* Fills c's content; a failure the model should read is
         * mcp_call_error(), never a JSON-RPC error. */
        void (*run)(struct mcp_call *c, json_t *args);
};

/* The tool's entry of tools/list: {name, title, description, inputSchema,
 * annotations}. New reference, or NULL (out of memory). */
json_t *mcp_tool_json(const struct mcp_tool *t);
/* Checks args (an object) against t's parameters: required ones present,
 * types, choices, bounds, no unknown names. Returns 0, or -EINVAL with a
 * sentence for the model in msg. */
int mcp_args_check(const struct mcp_tool *t, json_t *args, char *msg, size_t len);

/* The tool table (tools.c). */
const struct mcp_tool *mcp_tools(size_t *ret_n);
const struct mcp_tool *mcp_tool_find(const char *name);

/* ---- one tools/call ---- */

struct mcp_call {
        struct client *client;
        const struct mcp_out *out;
        json_t *progress_token;         /* borrowed, or NULL: no progress wanted */
        const atomic_bool *cancelled;   /* the client cancelled the call */
        json_t *content;                /* the result's content array (owned) */
        bool is_error;
};

/* Appends a text item; the text is cut (on a character boundary, with a
 * note) past MCP_TEXT_MAX bytes and made valid UTF-8. */
#define MCP_TEXT_MAX ((size_t)100 << 10)
void mcp_call_text(struct mcp_call *c, const char *text, size_t len);
void mcp_call_textf(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks the result an error and appends the message. */
void mcp_call_error(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends {type: image, data, mimeType}. */
void mcp_call_image(struct mcp_call *c, const char *b64, const char *mime);
/* notifications/progress when the caller asked for progress. */
void mcp_call_progress(struct mcp_call *c, double progress, const char *message);

/* One JSON call to the API. Returns 0 with a 2xx reply in out; else -1 after
 * mcp_call_error() with what went wrong (the API's own message), out
 * cleared. */
int mcp_api(struct mcp_call *c, const char *method, const char *path, json_t *body, struct client_reply *out);
/* After a client call returning r: 0 when r is 0 and out is 2xx; else -1
 * after mcp_call_error() (out cleared). err is done either way. */
int mcp_reply_check(struct mcp_call *c, int r, struct client_reply *out, struct err *err);
/* True for an id the bridge API takes (^[a-z2-7]{1,128}$). */
bool mcp_bridge_id(const char *id);
/* The sandbox's SandboxInfo from GET /sandboxes (new reference), or NULL
 * after mcp_call_error() ("no sandbox …"): the gateway creates a sandbox on
 * first use, so a tool must look before it touches one. */
json_t *mcp_sandbox_find(struct mcp_call *c, const char *id);
/* A path of the gateway API for sandbox id in language lang ("" suffix for
 * the sandbox itself): "/languages/<lang>/sandboxes/<id><suffix>". Returns
 * 0, or -1 after mcp_call_error() (an id that cannot be in a path). */
int mcp_gateway_path(struct mcp_call *c, char *out, size_t len, const char *lang, const char *id, const char *suffix);
/* A string argument, or NULL when absent (types are checked before run). */
const char *mcp_arg_str(json_t *args, const char *name);
/* An integer argument (a whole real too), or def when absent. */
long long mcp_arg_int(json_t *args, const char *name, long long def);

/* {id, language, cwd, executions} of each context of a SandboxInfo's
 * contexts array (sandboxes.c). New reference. */
json_t *mcp_contexts_summary(json_t *contexts);

/* ---- files (files.c), shared by the file tools and the resources ---- */

/* One op of the gateway's files API on sandbox (checked to exist first):
 * mcp_api()'s contract. */
int mcp_files_op(struct mcp_call *c, const char *sandbox, json_t *body, struct client_reply *out);

struct mcp_file {
        struct client_reply reply;
        const char *b64;        /* the content as base64 (in reply) */
        const char *mime;       /* the server's guess (in reply) */
        unsigned char *data;    /* decoded (owned) */
        size_t len;
        bool text;              /* valid UTF-8 without NULs */
};
/* Reads a file; 0, or -1 after mcp_call_error(). mcp_file_done() after 0. */
int mcp_file_read(struct mcp_call *c, const char *sandbox, const char *path, struct mcp_file *ret);
void mcp_file_done(struct mcp_file *f);

/* ---- resource URIs (resources.c) ---- */

/* Percent-decoding in place; -1 for a broken escape or an encoded NUL. */
int mcp_uri_unescape(char *s);
/* sandbox://<id>/<path> into id and path (both decoded); -1 when uri is
 * not one. */
int mcp_uri_parse(const char *uri, char *id, size_t id_len, char *path, size_t path_len);

/* ---- tool runners (one file per group) ---- */
void mcp_tool_run_code(struct mcp_call *c, json_t *args);
void mcp_tool_create_context(struct mcp_call *c, json_t *args);
void mcp_tool_list_contexts(struct mcp_call *c, json_t *args);
void mcp_tool_delete_context(struct mcp_call *c, json_t *args);
void mcp_tool_run_command(struct mcp_call *c, json_t *args);
void mcp_tool_read_file(struct mcp_call *c, json_t *args);
void mcp_tool_write_file(struct mcp_call *c, json_t *args);
void mcp_tool_list_files(struct mcp_call *c, json_t *args);
void mcp_tool_delete_file(struct mcp_call *c, json_t *args);
void mcp_tool_create_sandbox(struct mcp_call *c, json_t *args);
void mcp_tool_list_sandboxes(struct mcp_call *c, json_t *args);
void mcp_tool_delete_sandbox(struct mcp_call *c, json_t *args);

/* ---- methods other than the lifecycle (tools.c, resources.c). Each
 * returns the result (new reference), or NULL with *code and msg set to a
 * JSON-RPC error. ---- */
json_t *mcp_tools_list(json_t *params, int *code, char *msg, size_t len);
/* cancelled: set when the client cancels the call (tools stop early). */
json_t *mcp_tools_call(struct client *client, const struct mcp_out *out, const atomic_bool *cancelled,
                       json_t *params, int *code, char *msg, size_t len);
json_t *mcp_resources_list(struct client *client, json_t *params, int *code, char *msg, size_t len);
json_t *mcp_resource_templates_list(json_t *params, int *code, char *msg, size_t len);
json_t *mcp_resources_read(struct client *client, json_t *params, int *code, char *msg, size_t len);
