/* A sandbox's files as MCP resources: sandbox://<sandbox id>/<path under
 * /workspace>, the path percent-encoded as in a URL. resources/list names
 * the files of the newest sandboxes within a cap; any file can be read
 * through the template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "mcp/internal.h"

#define SCHEME "sandbox://"
/* resources/list walks at most this many sandboxes and names at most this
 * many files: a client may call it often, and a list is no file browser. */
#define LIST_SANDBOXES 20
#define LIST_FILES 500

static json_t *rpc_fail(int *code, char *msg, size_t len, int c, const char *text)
{
        *code = c;
        snprintf(msg, len, "%s", text);
        return NULL;
}

/* The text a failed call left for the model, for a JSON-RPC error. */
static const char *call_error_text(struct mcp_call *c)
{
        json_t *last = json_array_get(c->content, json_array_size(c->content) - 1);
        return json_string_value(json_object_get(last, "text")) ?: "failed";
}

static void add_sandbox_files(struct mcp_call *c, const char *id, json_t *list)
{
        json_t *body = json_pack("{s:s, s:s, s:b}", "op", "list", "path", "/workspace", "recursive", 1), *f;
        struct client_reply r;
        size_t i;
        char gw[512], uri[2048], epath[1500];
        int rc = mcp_gateway_path(c, gw, sizeof(gw), "python", id, "/files");
        if (rc == 0)
                rc = mcp_api(c, "POST", gw, body, &r);
        json_decref(body);
        if (rc < 0)
                return;
        json_array_foreach(json_object_get(r.json, "files"), i, f) {
                const char *rel = json_string_value(json_object_get(f, "relativePath"));
                if (json_array_size(list) >= LIST_FILES)
                        break;
                if (!rel || strcmp(json_string_value(json_object_get(f, "type")) ?: "", "file") ||
                    client_escape_path(rel, epath, sizeof(epath)) < 0)
                        continue;
                snprintf(uri, sizeof(uri), SCHEME "%s/%s", id, epath);
                char name[1200];
                snprintf(name, sizeof(name), "%s:%s", id, rel);
                json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:O?}", "uri", uri, "name", name, "title",
                                                      name, "size", json_object_get(f, "size")));
        }
        client_reply_clear(&r);
}

json_t *mcp_resources_list(struct client *client, json_t *params, int *code, char *msg, size_t len)
{
        (void)params;
        struct mcp_call c = { .client = client, .content = json_array() };
        json_t *list = json_array(), *sb;
        struct client_reply r;
        size_t i;
        char path[64];
        snprintf(path, sizeof(path), "/sandboxes?limit=%d", LIST_SANDBOXES);
        if (mcp_api(&c, "GET", path, NULL, &r) < 0) {
                rpc_fail(code, msg, len, MCP_INTERNAL_ERROR, call_error_text(&c));
                json_decref(c.content);
                json_decref(list);
                return NULL;
        }
        json_array_foreach(json_object_get(r.json, "sandboxes"), i, sb) {
                const char *id = json_string_value(json_object_get(sb, "id"));
                if (id)
                        add_sandbox_files(&c, id, list);
        }
        client_reply_clear(&r);
        json_decref(c.content);
        return json_pack("{s:o}", "resources", list);
}

json_t *mcp_resource_templates_list(json_t *params, int *code, char *msg, size_t len)
{
        (void)params, (void)code, (void)msg, (void)len;
        return json_pack("{s:[{s:s, s:s, s:s, s:s}]}", "resourceTemplates", "uriTemplate", SCHEME "{sandbox}/{+path}",
                         "name", "sandbox-file", "title", "A file of a sandbox", "description",
                         "A file under a sandbox's /workspace: sandbox://<sandbox id>/<path relative to /workspace>. "
                         "Text comes back as text, anything else as a base64 blob.");
}

static int unhex(char ch)
{
        return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                                 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* Percent-decoding in place; -1 for a broken escape or a NUL. */
int mcp_uri_unescape(char *s)
{
        char *o = s;
        for (const char *p = s; *p; p++) {
                if (*p != '%') {
                        *o++ = *p;
                        continue;
                }
                int hi = unhex(p[1]), lo = hi < 0 ? -1 : unhex(p[2]);
                if (lo < 0 || (hi == 0 && lo == 0))
                        return -1;
                *o++ = (char)(hi << 4 | lo);
                p += 2;
        }
        *o = '\0';
        return 0;
}

/* sandbox://<id>/<path> into id and path (both decoded). */
int mcp_uri_parse(const char *uri, char *id, size_t id_len, char *path, size_t path_len)
{
        size_t n = strlen(SCHEME);
        if (strncmp(uri, SCHEME, n))
                return -1;
        const char *slash = strchr(uri + n, '/');
        if (!slash || slash == uri + n || (size_t)(slash - uri - n) >= id_len || !slash[1] ||
            strlen(slash + 1) >= path_len)
                return -1;
        snprintf(id, id_len, "%.*s", (int)(slash - uri - n), uri + n);
        snprintf(path, path_len, "%s", slash + 1);
        return mcp_uri_unescape(id) < 0 || mcp_uri_unescape(path) < 0 || !id[0] ? -1 : 0;
}

json_t *mcp_resources_read(struct client *client, json_t *params, int *code, char *msg, size_t len)
{
        const char *uri = json_string_value(json_object_get(params, "uri"));
        char id[256], path[4096];
        if (!uri)
                return rpc_fail(code, msg, len, MCP_INVALID_PARAMS, "resources/read needs params.uri (a string)");
        if (mcp_uri_parse(uri, id, sizeof(id), path, sizeof(path)) < 0)
                return rpc_fail(code, msg, len, MCP_INVALID_PARAMS,
                                "a resource URI is sandbox://<sandbox id>/<path under /workspace>");
        struct mcp_call c = { .client = client, .content = json_array() };
        struct mcp_file f = { 0 };
        json_t *res = NULL;
        if (mcp_file_read(&c, id, path, &f) < 0) {
                /* -32002: the spec's "Resource not found". */
                rpc_fail(code, msg, len, MCP_RESOURCE_NOT_FOUND, call_error_text(&c));
        } else if (f.text) {
                res = json_pack("{s:[{s:s, s:s, s:s%}]}", "contents", "uri", uri, "mimeType", f.mime, "text",
                                (const char *)f.data, f.len);
        } else {
                res = json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", f.mime, "blob", f.b64);
        }
        mcp_file_done(&f);
        json_decref(c.content);
        return res;
}
