/* The file tools: the gateway's JSON files API (POST …/sandboxes/:id/files,
 * paths under /workspace, content as base64 both ways so binary data
 * survives). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/buf.h"
#include "base/utf8.h"
#include "mcp/internal.h"

/* One op on a sandbox known to exist. */
static int files_post(struct mcp_call *c, const char *sandbox, json_t *body, struct client_reply *out)
{
        char path[512];
        if (mcp_gateway_path(c, path, sizeof(path), "python", sandbox, "/files") < 0)
                return -1;
        return mcp_api(c, "POST", path, body, out);
}

int mcp_files_op(struct mcp_call *c, const char *sandbox, json_t *body, struct client_reply *out)
{
        json_t *info = mcp_sandbox_find(c, sandbox);
        json_decref(info);
        return info ? files_post(c, sandbox, body, out) : -1;
}

int mcp_file_read(struct mcp_call *c, const char *sandbox, const char *path, struct mcp_file *ret)
{
        json_t *body = json_pack("{s:s, s:s, s:s}", "op", "read", "path", path, "encoding", "base64");
        int r = mcp_files_op(c, sandbox, body, &ret->reply);
        json_decref(body);
        if (r < 0)
                return r;
        const char *b64 = json_string_value(json_object_get(ret->reply.json, "content"));
        ret->b64 = b64 ? b64 : "";
        ret->mime = json_string_value(json_object_get(ret->reply.json, "mimeType")) ?: "application/octet-stream";
        if (b64_decode(ret->b64, strlen(ret->b64), &ret->data, &ret->len) < 0) {
                client_reply_clear(&ret->reply);
                mcp_call_error(c, "the server sent a file that is not base64");
                return -1;
        }
        /* Text is what decodes as UTF-8 without NULs. */
        ret->text = utf8_valid((const char *)ret->data, ret->len) && !memchr(ret->data, 0, ret->len);
        return 0;
}

void mcp_file_done(struct mcp_file *f)
{
        client_reply_clear(&f->reply);
        free(f->data);
        f->data = NULL;
}

void mcp_tool_read_file(struct mcp_call *c, json_t *args)
{
        const char *enc = mcp_arg_str(args, "encoding"), *path = mcp_arg_str(args, "path");
        struct mcp_file f = { 0 };
        if (mcp_file_read(c, mcp_arg_str(args, "sandbox"), path, &f) < 0)
                return;
        bool want_b64 = enc && !strcmp(enc, "base64");
        if (f.text && !want_b64) {
                mcp_call_text(c, (const char *)f.data, f.len);
        } else {
                mcp_call_textf(c, "%s: %zu bytes of %s%s, base64:", path, f.len, f.text ? "text " : "binary data ",
                               f.mime);
                mcp_call_text(c, f.b64, strlen(f.b64));
                if (!strncmp(f.mime, "image/", 6) && strcmp(f.mime, "image/svg+xml"))
                        mcp_call_image(c, f.b64, f.mime);
        }
        mcp_file_done(&f);
}

void mcp_tool_write_file(struct mcp_call *c, json_t *args)
{
        const char *enc = mcp_arg_str(args, "encoding") ?: "utf-8", *path = mcp_arg_str(args, "path");
        const char *sandbox = mcp_arg_str(args, "sandbox"), *slash = strrchr(path, '/');
        struct client_reply r;
        json_t *info = mcp_sandbox_find(c, sandbox);
        json_decref(info);
        if (!info)
                return;
        /* The files API writes into existing directories only. */
        if (slash && slash != path) {
                json_t *mk = json_pack("{s:s, s:s%, s:b}", "op", "mkdir", "path", path, (size_t)(slash - path),
                                       "recursive", 1);
                int rc = files_post(c, sandbox, mk, &r);
                json_decref(mk);
                if (rc < 0)
                        return;
                client_reply_clear(&r);
        }
        json_t *body = json_pack("{s:s, s:s, s:s, s:s}", "op", "write", "path", path, "content",
                                 mcp_arg_str(args, "content"), "encoding", enc);
        if (files_post(c, sandbox, body, &r) == 0) {
                mcp_call_textf(c, "Wrote %s.", json_string_value(json_object_get(r.json, "path")) ?: path);
                client_reply_clear(&r);
        }
        json_decref(body);
}

void mcp_tool_list_files(struct mcp_call *c, json_t *args)
{
        const char *path = mcp_arg_str(args, "path") ?: "/workspace";
        json_t *body = json_pack("{s:s, s:s, s:O?, s:O?}", "op", "list", "path", path, "recursive",
                                 json_object_get(args, "recursive"), "includeHidden",
                                 json_object_get(args, "include_hidden"));
        struct client_reply r;
        if (mcp_files_op(c, mcp_arg_str(args, "sandbox"), body, &r) == 0) {
                struct buf b;
                json_t *f;
                size_t i;
                buf_init(&b, (size_t)16 << 20);
                json_t *files = json_object_get(r.json, "files");
                buf_printf(&b, "%s: %zu entr%s\n", json_string_value(json_object_get(r.json, "path")) ?: path,
                           json_array_size(files), json_array_size(files) == 1 ? "y" : "ies");
                json_array_foreach(files, i, f) {
                        bool dir = !strcmp(json_string_value(json_object_get(f, "type")) ?: "", "directory");
                        const char *rel = json_string_value(json_object_get(f, "relativePath")) ?: "?";
                        if (dir)
                                buf_printf(&b, "%s/\n", rel);
                        else
                                buf_printf(&b, "%s  (%lld bytes)\n", rel,
                                           (long long)json_integer_value(json_object_get(f, "size")));
                }
                mcp_call_text(c, b.data, b.len);
                buf_free(&b);
                client_reply_clear(&r);
        }
        json_decref(body);
}

void mcp_tool_delete_file(struct mcp_call *c, json_t *args)
{
        const char *path = mcp_arg_str(args, "path");
        json_t *body = json_pack("{s:s, s:s, s:O?}", "op", "delete", "path", path, "recursive",
                                 json_object_get(args, "recursive"));
        struct client_reply r;
        if (mcp_files_op(c, mcp_arg_str(args, "sandbox"), body, &r) == 0) {
                mcp_call_textf(c, "Deleted %s.", json_string_value(json_object_get(r.json, "path")) ?: path);
                client_reply_clear(&r);
        }
        json_decref(body);
}
