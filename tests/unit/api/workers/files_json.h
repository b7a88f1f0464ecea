/* The JSON side of the files tests: runs /files request objects through
 * workers_files_on() (src/api/workers/files.c) and splits each answer into a
 * response, or an api_error taken from the ErrorResponse body. */
#pragma once

#include <jansson.h>
#include <sys/fsuid.h>

#include "api/workers/files.h"
#include "sandbox/files_fixture.h"

struct api_error {
        int http_status;
        const char *code;
        char message[512];
        json_t *context;            /* borrowed from body */
        const char *operation;      /* the envelope's "operation", or NULL */
        json_t *body;               /* owned */
};

static inline void api_error_done(struct api_error *e)
{
        json_decref(e->body);
        *e = (struct api_error){ 0 };
}

/* Everything the daemon said (response or error), to grep for leaks. */
static char transcript[1 << 20];
static size_t transcript_len;

static inline void record(const json_t *j, const struct api_error *err)
{
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        char *c = !j && err->context ? json_dumps(err->context, JSON_COMPACT) : NULL;
        int n = snprintf(transcript + transcript_len, sizeof(transcript) - transcript_len, "%s|%s|%s\n",
                         s ? s : "", j ? "" : err->message, c ? c : "");
        if (n > 0 && (size_t)n < sizeof(transcript) - transcript_len)
                transcript_len += (size_t)n;
        free(s);
        free(c);
}

/* Splits an ErrorResponse into err (status, code, message, context,
 * operation), checking the envelope's own fields. */
static inline void take_error(struct http_response *res, struct api_error *err)
{
        json_t *body = res->json;
        ASSERT_TRUE(json_is_object(body));
        err->body = body;
        err->http_status = res->status;
        err->code = json_string_value(json_object_get(body, "code"));
        ASSERT_TRUE(err->code != NULL);
        snprintf(err->message, sizeof(err->message), "%s", json_string_value(json_object_get(body, "message")));
        err->context = json_object_get(body, "context");
        ASSERT_TRUE(json_is_object(err->context));
        err->operation = json_string_value(json_object_get(body, "operation"));
        ASSERT_EQ(json_integer_value(json_object_get(body, "httpStatus")), res->status);
        const char *ts = json_string_value(json_object_get(body, "timestamp"));
        ASSERT_TRUE(ts && strlen(ts) == 24 && ts[23] == 'Z');
}

/* Runs one request (reference stolen). Returns the response or NULL with
 * err filled; the caller owns both. */
static inline json_t *run(struct ws *w, json_t *req, struct api_error *err)
{
        ASSERT_TRUE(req != NULL);
        struct files_root root = root_of(w);
        struct http_response res = { 0 };
        *err = (struct api_error){ 0 };
        workers_files_on(&root, CREATED_AT, req, &res);
        json_decref(req);
        ASSERT_TRUE(res.json != NULL);
        json_t *ok_body = NULL;
        if (res.status == 200)
                ok_body = res.json;
        else
                take_error(&res, err);
        record(ok_body, err);
        /* The identity switch must never leak out of an operation. */
        if (geteuid() == 0) {
                ASSERT_EQ(setfsuid((uid_t)-1), 0);
                ASSERT_EQ(setfsgid((gid_t)-1), 0);
        }
        return ok_body;
}

static inline json_t *ok(struct ws *w, json_t *req)
{
        struct api_error err;
        json_t *res = run(w, req, &err);
        if (!res)
                TAP_FAIL("unexpected error %d %s: %s", err.http_status, err.code, err.message);
        ASSERT_TRUE(json_is_true(json_object_get(res, "success")));
        const char *ts = json_string_value(json_object_get(res, "timestamp"));
        ASSERT_TRUE(ts != NULL);
        ASSERT_EQ(strlen(ts), 24);
        ASSERT_EQ(ts[23], 'Z');
        ASSERT_EQ(ts[10], 'T');
        return res;
}

static inline const char *sget(const json_t *o, const char *key)
{
        return json_string_value(json_object_get(o, key));
}

static inline long long iget(const json_t *o, const char *key)
{
        const json_t *v = json_object_get(o, key);
        if (!json_is_integer(v))
                TAP_FAIL("'%s' is not an integer", key);
        return json_integer_value(v);
}

static inline bool bget(const json_t *o, const char *key)
{
        const json_t *v = json_object_get(o, key);
        if (!json_is_boolean(v))
                TAP_FAIL("'%s' is not a boolean", key);
        return json_is_true(v);
}

/* Expects an error; checks status, code and (when errno_name is non-NULL)
 * the {path, operation, errno} context. Returns err for more checks. */
static inline void expect_err(struct ws *w, json_t *req, int status, const char *code, const char *path,
                       const char *operation, const char *errno_name, struct api_error *err)
{
        json_t *res = run(w, req, err);
        if (res) {
                char *s = json_dumps(res, 0);
                TAP_FAIL("expected %s, got success %s", code, s);
        }
        if (err->http_status != status || strcmp(err->code, code) != 0)
                TAP_FAIL("expected %d %s, got %d %s: %s", status, code, err->http_status, err->code,
                         err->message);
        ASSERT_TRUE(err->context != NULL);
        if (errno_name) {
                ASSERT_STREQ(sget(err->context, "errno"), errno_name);
                ASSERT_STREQ(sget(err->context, "operation"), operation);
                ASSERT_STREQ(err->operation, operation);
                ASSERT_STREQ(sget(err->context, "path"), path);
        }
}

static inline void expect_err_done(struct ws *w, json_t *req, int status, const char *code, const char *path,
                            const char *operation, const char *errno_name)
{
        struct api_error err;
        expect_err(w, req, status, code, path, operation, errno_name, &err);
        api_error_done(&err);
}

#define R(...) json_pack(__VA_ARGS__)

static inline void assert_nothing_leaked(void)
{
        transcript[transcript_len] = '\0';
        ASSERT_TRUE(strstr(transcript, "TOPSECRET") == NULL);
        ASSERT_TRUE(strstr(transcript, "root:x:0:0") == NULL);
        /* base64 of the sentinel's first bytes, in case it was encoded */
        ASSERT_TRUE(strstr(transcript, "VE9QU0VDUkVU") == NULL);
}

static inline const json_t *find_entry(const json_t *files, const char *rel)
{
        size_t i;
        const json_t *v;
        json_array_foreach(files, i, v)
        if (strcmp(sget(v, "relativePath"), rel) == 0)
                return v;
        return NULL;
}
