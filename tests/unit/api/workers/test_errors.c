/* Unit tests for the domain error (src/base/err.c) and its mapping to the
 * sandbox-workers ErrorResponse (src/api/workers/errors.c), and for the JSON
 * views of the sandbox domain (src/api/workers/views.c). */
#include <errno.h>

#include "api/workers/errors.h"
#include "api/workers/views.h"
#include "base/util.h"
#include "tap.h"

static void map(enum err_reason reason, const char *op, int want_status, const char *want_code)
{
        struct err e = { 0 };
        err_set(&e, reason, 0, "m");
        e.op = op;
        int status;
        const char *code;
        workers_error_status(&e, &status, &code);
        if (status != want_status || strcmp(code, want_code) != 0)
                TAP_FAIL("reason %s op %s: %d %s, want %d %s", err_reason_name(reason), op ? op : "-", status, code,
                         want_status, want_code);
        err_done(&e);
}

TEST(reason_to_status_and_code)
{
        map(ERR_INVALID, NULL, 400, "VALIDATION_FAILED");
        map(ERR_LIMIT, "context.create", 400, "VALIDATION_FAILED");
        map(ERR_NOT_FOUND, "context.delete", 404, "CONTEXT_NOT_FOUND");
        map(ERR_NOT_FOUND, "file.read", 404, "FILE_NOT_FOUND");
        map(ERR_EXISTS, "file.rename", 409, "FILE_EXISTS");
        map(ERR_PERMISSION, "file.write", 403, "PERMISSION_DENIED");
        map(ERR_TOO_LARGE, "file.write", 413, "FILE_TOO_LARGE");
        map(ERR_NO_SPACE, "file.write", 500, "NO_SPACE");
        map(ERR_IS_DIR, "file.read", 400, "IS_DIRECTORY");
        map(ERR_NOT_DIR, "directory.list", 400, "NOT_DIRECTORY");
        map(ERR_FILESYSTEM, "directory.create", 500, "FILESYSTEM_ERROR");
        map(ERR_UNAVAILABLE, "context.execute", 502, "INTERNAL_ERROR");
        map(ERR_BUSY, NULL, 503, "OVERLOADED");
        map(ERR_INTERNAL, NULL, 500, "INTERNAL_ERROR");
        map(ERR_QUOTA, "sandbox.create", 429, "SANDBOX_LIMIT_EXCEEDED");
        map(ERR_STORAGE, "sandbox.create", 507, "INSUFFICIENT_STORAGE");
}

TEST(envelope_carries_details_and_operation)
{
        struct err e = { 0 };
        int r = err_set(&e, ERR_TOO_LARGE, EFBIG, "File exceeds %d bytes", 10);
        ASSERT_EQ(r, -EFBIG);
        e.op = "file.write";
        err_detail(&e, "path", "/workspace/a", (size_t)-1);
        err_detail_u64(&e, "maxSize", 10);
        err_detail(&e, "path", "/workspace/b", (size_t)-1); /* replaces, keeps its place */
        struct http_response res = { 0 };
        workers_error_from(&res, &e);
        ASSERT_EQ(res.status, 413);
        ASSERT_STREQ(json_string_value(json_object_get(res.json, "code")), "FILE_TOO_LARGE");
        ASSERT_STREQ(json_string_value(json_object_get(res.json, "message")), "File exceeds 10 bytes");
        ASSERT_STREQ(json_string_value(json_object_get(res.json, "operation")), "file.write");
        json_t *ctx = json_object_get(res.json, "context");
        ASSERT_STREQ(json_string_value(json_object_get(ctx, "path")), "/workspace/b");
        ASSERT_TRUE(json_is_integer(json_object_get(ctx, "maxSize")));
        ASSERT_EQ(json_integer_value(json_object_get(ctx, "maxSize")), 10);
        ASSERT_EQ(json_object_size(ctx), 2);
        json_decref(res.json);
        err_done(&e);
        ASSERT_EQ(e.ndetails, 0);
        ASSERT_EQ(e.reason, ERR_OK);
}

TEST(invalid_utf8_details_are_sanitised)
{
        struct err e = { 0 };
        err_set(&e, ERR_INVALID, 0, "bad \xff path");
        err_detail(&e, "path", "a\xffz", 3);
        struct http_response res = { 0 };
        workers_error_from(&res, &e);
        ASSERT_EQ(res.status, 400);
        json_t *ctx = json_object_get(res.json, "context");
        ASSERT_STREQ(json_string_value(json_object_get(ctx, "path")), "a\xef\xbf\xbdz");
        ASSERT_TRUE(json_string_value(json_object_get(res.json, "message")) != NULL);
        json_decref(res.json);
        err_done(&e);
}

TEST(message_truncation_keeps_utf8)
{
        struct err e = { 0 };
        char big[2 * ERR_MSG_MAX];
        size_t n = 0;
        while (n + 2 < sizeof(big) - 1) {
                big[n++] = '\xc3';
                big[n++] = '\xa9'; /* é */
        }
        big[n] = '\0';
        err_set(&e, ERR_INVALID, 0, "x%s", big);
        ASSERT_TRUE(strlen(e.msg) < ERR_MSG_MAX);
        ASSERT_TRUE(utf8_valid(e.msg, strlen(e.msg)));
        err_done(&e);
}

TEST(errno_reasons)
{
        ASSERT_EQ(err_reason_from_errno(ENOENT), ERR_NOT_FOUND);
        ASSERT_EQ(err_reason_from_errno(ELOOP), ERR_PERMISSION);
        ASSERT_EQ(err_reason_from_errno(EDQUOT), ERR_NO_SPACE);
        ASSERT_EQ(err_reason_from_errno(EIO), ERR_INTERNAL);
        ASSERT_STREQ(err_reason_name(ERR_NOT_FOUND), "not_found");
        ASSERT_STREQ(err_reason_name((enum err_reason)999), "internal");
}

TEST(details_are_bounded)
{
        struct err e = { 0 };
        static const char *keys[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" };
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                err_detail(&e, keys[i], "v", 1);
        ASSERT_EQ(e.ndetails, ERR_DETAILS_MAX);
        ASSERT_TRUE(err_detail_get(&e, "a") != NULL);
        ASSERT_TRUE(err_detail_get(&e, "j") == NULL);
        struct err moved = { 0 };
        err_move(&moved, &e);
        ASSERT_EQ(e.ndetails, 0);
        ASSERT_EQ(moved.ndetails, ERR_DETAILS_MAX);
        err_done(&moved);
}

TEST(snapshot_view_pages_and_build)
{
        struct sbx_snapshot none = { 0 };
        json_t *j = workers_snapshot_json(&none);
        ASSERT_TRUE(json_is_null(j));
        json_decref(j);
        struct sbx_snapshot s = { .taken_at = 1700000000000ULL, .cells = 3, .bytes = 65537, .stale = true };
        snprintf(s.build, sizeof(s.build), "python:CPython 3.11.2:kernel-0.2.0");
        j = workers_snapshot_json(&s);
        ASSERT_EQ(json_integer_value(json_object_get(j, "pages")), 2);
        ASSERT_EQ(json_integer_value(json_object_get(j, "bytes")), 65537);
        ASSERT_EQ(json_integer_value(json_object_get(j, "takenAt")), 1700000000000LL);
        ASSERT_TRUE(json_is_true(json_object_get(j, "stale")));
        ASSERT_STREQ(json_string_value(json_object_get(j, "build")), "python:CPython 3.11.2:kernel-0.2.0");
        json_decref(j);
}

TEST(sandbox_info_view)
{
        struct sbx_context_info ctx = { .created_at = 1000, .last_used = 2000, .executions = 4, .resident = true };
        snprintf(ctx.id, sizeof(ctx.id), "c1");
        snprintf(ctx.binding, sizeof(ctx.binding), "PYTHON");
        snprintf(ctx.language, sizeof(ctx.language), "python");
        snprintf(ctx.cwd, sizeof(ctx.cwd), "/workspace");
        struct sbx_info info = { .created_at = 1000, .last_used = 2000, .expires_at = 0, .contexts = &ctx,
                                 .ncontexts = 1, .ws_files = 2, .ws_bytes = 10 };
        snprintf(info.id, sizeof(info.id), "s1");
        snprintf(info.org_id, sizeof(info.org_id), "default");
        info.env = json_pack("{s:s}", "A", "1");
        json_t *j = workers_sandbox_info_json(&info);
        ASSERT_STREQ(json_string_value(json_object_get(j, "id")), "s1");
        ASSERT_STREQ(json_string_value(json_object_get(j, "createdAt")), "1970-01-01T00:00:01.000Z");
        ASSERT_TRUE(json_is_null(json_object_get(j, "expiresAt")));
        ASSERT_EQ(json_integer_value(json_object_get(json_object_get(j, "workspace"), "files")), 2);
        json_t *c = json_array_get(json_object_get(j, "contexts"), 0);
        ASSERT_STREQ(json_string_value(json_object_get(c, "binding")), "PYTHON");
        ASSERT_TRUE(json_is_true(json_object_get(c, "resident")));
        ASSERT_TRUE(json_is_null(json_object_get(c, "snapshot")));
        ASSERT_STREQ(json_string_value(json_object_get(json_object_get(j, "envVars"), "A")), "1");
        json_decref(j);
        json_decref(info.env);
}
