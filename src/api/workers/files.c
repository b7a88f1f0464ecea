/* The /files request: parsing and validation as the reference does it, the
 * content encodings (utf-8 as TextDecoder decodes, base64 as atob()), the
 * response views, and the mapping of the domain error. */
#include "api/workers/files.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/workers/envelope.h"
#include "api/workers/errors.h"
#include "base/b64.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

enum op {
        OP_READ,
        OP_WRITE,
        OP_MKDIR,
        OP_DELETE,
        OP_RENAME,
        OP_MOVE,
        OP_LIST,
        OP_EXISTS,
        _OP_MAX,
};

static const struct {
        const char *name;
        const char *operation;
} op_table[_OP_MAX] = {
        [OP_READ] = { "read", FILES_OP_READ },
        [OP_WRITE] = { "write", FILES_OP_WRITE },
        [OP_MKDIR] = { "mkdir", FILES_OP_MKDIR },
        [OP_DELETE] = { "delete", FILES_OP_DELETE },
        [OP_RENAME] = { "rename", FILES_OP_RENAME },
        [OP_MOVE] = { "move", FILES_OP_MOVE },
        [OP_LIST] = { "list", FILES_OP_LIST },
        [OP_EXISTS] = { "exists", FILES_OP_STAT },
};

/* One parsed request. abs/new_abs are the normalised paths, empty when the
 * path escapes /workspace (the operation itself then reports that). */
struct req {
        enum op op;
        const struct files_root *root;
        uint64_t created_at_ms;
        char timestamp[32];
        const char *path;
        const char *new_path;
        char abs[PATH_MAX];
        char new_abs[PATH_MAX];
        bool escapes;
        const char *content;
        size_t content_len;
        bool base64;
        unsigned flags;
};

#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- request parsing ----------------------------------------------------- */

/* JavaScript truthiness, since the reference reads flags with `!!body.x`. */
static bool truthy(const json_t *v)
{
        if (!v)
                return false;
        switch (json_typeof(v)) {
        case JSON_TRUE:
        case JSON_OBJECT:
        case JSON_ARRAY:
                return true;
        case JSON_INTEGER:
                return json_integer_value(v) != 0;
        case JSON_REAL:
                return json_real_value(v) != 0 && !isnan(json_real_value(v));
        case JSON_STRING:
                return json_string_length(v) > 0;
        case JSON_FALSE:
        case JSON_NULL:
        default:
                return false;
        }
}

static int invalid(struct http_response *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int invalid(struct http_response *res, const char *fmt, ...)
{
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        workers_error(res, 400, "VALIDATION_FAILED", msg, NULL);
        return -1;
}

/* Checks one path field into out. NUL bytes, over-long and non-UTF-8 paths
 * are request-shape errors (400, res filled, -1). An escape is left to the
 * operation (1), which reports it as a permission failure with its
 * operation and path. */
static int check_path(const json_t *v, const char *field, char *out, struct http_response *res)
{
        if (strlen(json_string_value(v)) != json_string_length(v))
                return invalid(res, "%s must not contain NUL bytes", field);
        int r = files_normalize(json_string_value(v), out, PATH_MAX);
        if (r == -EACCES) {
                out[0] = '\0';
                return 1;
        }
        if (r == -ENAMETOOLONG)
                return invalid(res, "%s is too long", field);
        if (r < 0)
                return invalid(res, "%s is not a valid path", field);
        return 0;
}

static const json_t *required_string(json_t *request, const char *key)
{
        json_t *v = json_object_get(request, key);
        return json_is_string(v) && json_string_length(v) > 0 ? v : NULL;
}

static int parse_op(json_t *request, struct req *rq, struct http_response *res)
{
        const char *op = json_string_value(json_object_get(request, "op"));
        rq->op = _OP_MAX;
        for (int i = 0; op && i < _OP_MAX; i++)
                if (strcmp(op, op_table[i].name) == 0)
                        rq->op = (enum op)i;
        if (rq->op == _OP_MAX)
                return invalid(res, "Unknown op");
        return 0;
}

static int parse_content(json_t *request, struct req *rq, struct http_response *res)
{
        json_t *enc = json_object_get(request, "encoding");
        if (enc) {
                const char *s = json_string_value(enc);
                if (!s || (strcmp(s, "utf-8") != 0 && strcmp(s, "base64") != 0))
                        return invalid(res, "encoding must be utf-8 or base64");
                rq->base64 = strcmp(s, "base64") == 0;
        }
        json_t *content = json_object_get(request, "content");
        if (content && !json_is_null(content) && !json_is_string(content))
                return invalid(res, "content must be a string");
        rq->content = json_is_string(content) ? json_string_value(content) : "";
        rq->content_len = json_is_string(content) ? json_string_length(content) : 0;
        return 0;
}

/* Validation order follows the reference: op, path, newPath, encoding,
 * content, then the paths' shapes. */
static int parse_request(json_t *request, struct req *rq, struct http_response *res)
{
        if (!json_is_object(request))
                return invalid(res, "Expected an object");
        if (parse_op(request, rq, res) < 0)
                return -1;
        const json_t *path = required_string(request, "path");
        if (!path)
                return invalid(res, "path is required");
        bool two_paths = rq->op == OP_RENAME || rq->op == OP_MOVE;
        const json_t *new_path = two_paths ? required_string(request, "newPath") : NULL;
        if (two_paths && !new_path)
                return invalid(res, "newPath is required for %s", op_table[rq->op].name);
        if (parse_content(request, rq, res) < 0)
                return -1;
        if (truthy(json_object_get(request, "recursive")))
                rq->flags |= FILES_RECURSIVE;
        if (truthy(json_object_get(request, "force")))
                rq->flags |= FILES_FORCE;
        if (truthy(json_object_get(request, "includeHidden")))
                rq->flags |= FILES_INCLUDE_HIDDEN;

        rq->path = json_string_value(path);
        int r = check_path(path, "path", rq->abs, res);
        if (r == 0 && new_path) {
                rq->new_path = json_string_value(new_path);
                r = check_path(new_path, "newPath", rq->new_abs, res);
        }
        if (r < 0)
                return -1;
        rq->escapes = r > 0;
        return 0;
}

/* ---- responses ----------------------------------------------------------- */

static void put_utf8(char *out, size_t *o, uint32_t cp)
{
        if (cp < 0x80) {
                out[(*o)++] = (char)cp;
        } else if (cp < 0x800) {
                out[(*o)++] = (char)(0xC0 | (cp >> 6));
                out[(*o)++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
                out[(*o)++] = (char)(0xE0 | (cp >> 12));
                out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[(*o)++] = (char)(0x80 | (cp & 0x3F));
        } else {
                out[(*o)++] = (char)(0xF0 | (cp >> 18));
                out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[(*o)++] = (char)(0x80 | (cp & 0x3F));
        }
}

/* Lossy UTF-8 decoding exactly as the reference's TextDecoder("utf-8")
 * does it (WHATWG Encoding §4.2): a leading BOM is dropped and each maximal
 * invalid subpart becomes one U+FFFD. util.h's utf8_sanitize replaces per
 * byte, which differs for truncated sequences ("\xE2\x82" is one U+FFFD
 * here). out needs 3*len+1 bytes. Returns the output length. */
static size_t utf8_decode_lossy(const unsigned char *s, size_t len, char *out)
{
        size_t i = 0, o = 0;
        unsigned needed = 0, seen = 0;
        uint32_t cp = 0;
        unsigned char lower = 0x80, upper = 0xBF;

        if (len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
                i = 3;
        while (i < len) {
                unsigned char b = s[i];
                if (needed == 0) {
                        i++;
                        if (b <= 0x7F) {
                                out[o++] = (char)b;
                        } else if (b >= 0xC2 && b <= 0xDF) {
                                needed = 1, cp = b & 0x1F;
                        } else if (b >= 0xE0 && b <= 0xEF) {
                                if (b == 0xE0)
                                        lower = 0xA0;
                                if (b == 0xED)
                                        upper = 0x9F;
                                needed = 2, cp = b & 0x0F;
                        } else if (b >= 0xF0 && b <= 0xF4) {
                                if (b == 0xF0)
                                        lower = 0x90;
                                if (b == 0xF4)
                                        upper = 0x8F;
                                needed = 3, cp = b & 0x07;
                        } else {
                                put_utf8(out, &o, 0xFFFD);
                        }
                        continue;
                }
                if (b < lower || b > upper) {
                        /* Emit one U+FFFD for the broken prefix and
                         * reprocess b as the start of something new. */
                        needed = seen = 0, cp = 0, lower = 0x80, upper = 0xBF;
                        put_utf8(out, &o, 0xFFFD);
                        continue;
                }
                i++;
                lower = 0x80, upper = 0xBF;
                cp = (cp << 6) | (b & 0x3F);
                if (++seen == needed) {
                        put_utf8(out, &o, cp);
                        needed = seen = 0, cp = 0;
                }
        }
        if (needed)
                put_utf8(out, &o, 0xFFFD);
        out[o] = '\0';
        return o;
}

static json_t *response_new(const struct req *rq)
{
        json_t *o = json_object();
        if (o) {
                json_object_set_new(o, "success", json_true());
                json_object_set_new(o, "path", json_string(rq->abs));
        }
        return o;
}

static json_t *read_view(const struct req *rq, const struct files_blob *blob)
{
        bool binary = files_is_binary(blob->data, blob->len);
        _cleanup_free_ char *text = rq->base64 ? b64_encode(blob->data, blob->len) : malloc(3 * blob->len + 1);
        if (!text)
                return NULL;
        size_t text_len = rq->base64 ? strlen(text) : utf8_decode_lossy(blob->data, blob->len, text);
        json_t *o = response_new(rq);
        if (o) {
                json_object_set_new(o, "content", json_stringn_nocheck(text, text_len));
                json_object_set_new(o, "encoding", json_string(rq->base64 ? "base64" : "utf-8"));
                json_object_set_new(o, "isBinary", json_boolean(binary));
                json_object_set_new(o, "mimeType", json_string(files_mime_type(rq->abs, binary)));
                json_object_set_new(o, "size", json_integer((json_int_t)blob->len));
        }
        return o;
}

static json_t *file_info(const struct req *rq, const struct files_entry *en)
{
        const char *slash = strrchr(en->rel, '/');
        char when[32];
        uint64_t mtime_ms = en->mtime.tv_sec < 0 ? 0
                : (uint64_t)en->mtime.tv_sec * 1000ULL + (uint64_t)en->mtime.tv_nsec / 1000000ULL;
        iso8601_ms(en->dir ? rq->created_at_ms : mtime_ms, when);
        _cleanup_free_ char *abs = NULL;
        if (asprintf(&abs, "%s/%s", rq->abs, en->rel) < 0)
                return NULL;
        return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:{s:b,s:b,s:b}}",
                         "name", slash ? slash + 1 : en->rel,
                         "absolutePath", abs,
                         "relativePath", en->rel,
                         "type", en->dir ? "directory" : "file",
                         "size", (json_int_t)en->size,
                         "modifiedAt", when,
                         "mode", en->dir ? "drwxr-xr-x" : "-rw-r--r--",
                         "permissions", "readable", 1, "writable", 1, "executable", en->dir ? 1 : 0);
}

static json_t *list_view(const struct req *rq, const struct files_list *l)
{
        _cleanup_json_ json_t *files = json_array();
        if (!files)
                return NULL;
        for (size_t i = 0; i < l->n; i++)
                if (json_array_append_new(files, file_info(rq, &l->v[i])) < 0)
                        return NULL;
        json_t *o = response_new(rq);
        if (o) {
                json_object_set_new(o, "files", TAKE_PTR(files));
                json_object_set_new(o, "count", json_integer((json_int_t)l->n));
        }
        return o;
}

/* ---- operations ---------------------------------------------------------- */

static json_t *do_read(const struct req *rq, struct err *err)
{
        _cleanup_(files_blob_done) struct files_blob blob = { 0 };
        if (files_read(rq->root, rq->path, &blob, err) < 0)
                return NULL;
        return read_view(rq, &blob);
}

static json_t *do_write(const struct req *rq, struct err *err)
{
        _cleanup_free_ unsigned char *decoded = NULL;
        const void *data = rq->content;
        size_t len = rq->content_len;
        /* The path's own failures (an escape, the root) come first, as in
         * the reference: only a usable path gets its content decoded. */
        bool decode = rq->base64 && !rq->escapes && strcmp(rq->abs, FILES_ROOT) != 0;
        if (decode) {
                int r = b64_decode(rq->content, rq->content_len, &decoded, &len);
                if (r == -EINVAL)
                        files_fail(err, FILES_OP_WRITE, rq->abs, EINVAL, "Invalid base64 content");
                else if (r < 0)
                        files_fail(err, FILES_OP_WRITE, rq->abs, -r, NULL);
                if (r < 0)
                        return NULL;
                data = decoded;
        }
        if (files_write(rq->root, rq->path, data, len, err) < 0)
                return NULL;
        return response_new(rq);
}

static json_t *do_mkdir(const struct req *rq, struct err *err)
{
        if (files_mkdir(rq->root, rq->path, rq->flags, err) < 0)
                return NULL;
        json_t *o = response_new(rq);
        if (o)
                json_object_set_new(o, "recursive", json_boolean(rq->flags & FILES_RECURSIVE));
        return o;
}

static json_t *do_delete(const struct req *rq, struct err *err)
{
        if (files_delete(rq->root, rq->path, rq->flags, err) < 0)
                return NULL;
        return response_new(rq);
}

static json_t *do_rename(const struct req *rq, struct err *err)
{
        int r = rq->op == OP_MOVE ? files_move(rq->root, rq->path, rq->new_path, err)
                                  : files_rename(rq->root, rq->path, rq->new_path, err);
        if (r < 0)
                return NULL;
        json_t *o = response_new(rq);
        if (o)
                json_object_set_new(o, "newPath", json_string(rq->new_abs));
        return o;
}

static json_t *do_list(const struct req *rq, struct err *err)
{
        _cleanup_(files_list_done) struct files_list l = { 0 };
        if (files_list(rq->root, rq->path, rq->flags, &l, err) < 0)
                return NULL;
        return list_view(rq, &l);
}

static json_t *do_exists(const struct req *rq, struct err *err)
{
        bool exists;
        if (files_exists(rq->root, rq->path, &exists, err) < 0)
                return NULL;
        json_t *o = response_new(rq);
        if (o)
                json_object_set_new(o, "exists", json_boolean(exists));
        return o;
}

static json_t *(*const op_fns[_OP_MAX])(const struct req *, struct err *) = {
        [OP_READ] = do_read,     [OP_WRITE] = do_write,   [OP_MKDIR] = do_mkdir, [OP_DELETE] = do_delete,
        [OP_RENAME] = do_rename, [OP_MOVE] = do_rename,   [OP_LIST] = do_list,   [OP_EXISTS] = do_exists,
};

void workers_files_on(const struct files_root *root, uint64_t created_at_ms, json_t *request,
                      struct http_response *res)
{
        _cleanup_free_ struct req *rq = calloc(1, sizeof(*rq));
        if (!rq) {
                workers_error(res, 500, "FILESYSTEM_ERROR", "Out of memory", NULL);
                return;
        }
        rq->root = root;
        rq->created_at_ms = created_at_ms;
        iso8601_ms(wall_ms(), rq->timestamp);
        if (parse_request(request, rq, res) < 0)
                return;

        struct err err = { 0 };
        json_t *o = op_fns[rq->op](rq, &err);
        /* The timestamp goes last (the reference's key order). */
        if (o && json_object_set_new(o, "timestamp", json_string(rq->timestamp)) < 0) {
                json_decref(o);
                o = NULL;
        }
        if (o) {
                http_json(res, 200, o);
                return;
        }
        if (err.reason == ERR_OK) /* the view could not be built */
                files_fail(&err, op_table[rq->op].operation, rq->abs, ENOMEM, NULL);
        workers_error_from(res, &err);
        err_done(&err);
}

void workers_files(struct sandbox_mgr *m, const char *sandbox_id, json_t *request, struct http_response *res)
{
        struct sbx_workspace ws;
        struct err err = { 0 };
        if (sbx_workspace_acquire(m, sandbox_id, &ws, &err) < 0) {
                workers_error_from(res, &err);
                err_done(&err);
                return;
        }
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        workers_files_on(&root, ws.created_at, request, res);
        sbx_workspace_release(m, &ws);
}
