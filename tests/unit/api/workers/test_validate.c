/* Unit tests for request validation (src/api/workers/validate.c) through its public
 * functions, with fake struct http_request values (body + body_len) and
 * zero-initialised responses. workers_error()/http_json() come from the
 * library's src/http/server.c. */
#include <errno.h>

#include "api/workers/validate.h"
#include "base/util.h"
#include "tap.h"

#define CODE_LIMIT (64 * 1024)

static struct http_request make_req(const char *body)
{
        return (struct http_request){ .method = "POST", .path = "/execute", .body = body,
                                      .body_len = strlen(body) };
}

/* Checks an ErrorResponse in res, then frees it. */
static void expect_error(struct http_response *res, int status, const char *message)
{
        if (res->status != status)
                TAP_FAIL("status %d, want %d (message '%s')", res->status, status,
                         json_string_value(json_object_get(res->json, "message")));
        ASSERT_TRUE(json_is_object(res->json));
        ASSERT_STREQ(json_string_value(json_object_get(res->json, "message")), message);
        ASSERT_STREQ(json_string_value(json_object_get(res->json, "code")), "VALIDATION_FAILED");
        ASSERT_EQ(json_integer_value(json_object_get(res->json, "httpStatus")), status);
        ASSERT_TRUE(json_is_object(json_object_get(res->json, "context")));
        const char *ts = json_string_value(json_object_get(res->json, "timestamp"));
        ASSERT_TRUE(ts && strlen(ts) == 24 && ts[23] == 'Z');
        json_decref(res->json);
        *res = (struct http_response){ 0 };
}

/* Runs validate_exec_body on body for runtime_id and expects a failure. */
static void exec_fails(const char *body, const char *runtime_id, int status, const char *message)
{
        struct http_request req = make_req(body);
        struct http_response res = { 0 };
        struct exec_body eb;
        memset(&eb, 0xAA, sizeof(eb));
        if (validate_exec_body(&req, runtime_id, CODE_LIMIT, &eb, &res))
                TAP_FAIL("accepted: %s", body);
        /* nothing is left owned by the caller on failure */
        ASSERT_TRUE(eb.root == NULL && eb.env == NULL && eb.code == NULL);
        expect_error(&res, status, message);
}

/* Runs validate_exec_body and expects success; returns the body. */
static void exec_ok(const char *body, const char *runtime_id, struct exec_body *eb)
{
        struct http_request req = make_req(body);
        struct http_response res = { 0 };
        if (!validate_exec_body(&req, runtime_id, CODE_LIMIT, eb, &res))
                TAP_FAIL("rejected (%d '%s'): %s", res.status,
                         json_string_value(json_object_get(res.json, "message")), body);
        ASSERT_EQ(res.status, 0);
        ASSERT_TRUE(res.json == NULL);
        ASSERT_TRUE(json_is_object(eb->root));
        ASSERT_TRUE(json_is_object(eb->env));
        ASSERT_TRUE(eb->code != NULL);
}

/* ---- small predicates ---- */

TEST(env_key_valid_table)
{
        static const struct {
                const char *key;
                bool ok;
        } cases[] = {
                { "A", true },        { "a", true },          { "_", true },
                { "_A1", true },      { "PATH", true },       { "abc_DEF_123", true },
                { "__proto__", true }, { "X9", true },
                { "", false },        { "1A", false },        { "9", false },
                { "A-B", false },     { "A B", false },       { "A=B", false },
                { "A.B", false },     { "-A", false },        { " A", false },
                { "A ", false },      { "A\n", false },       { "\xC3\x84", false },
                { "A\xC3\x84", false }, { "$A", false },      { "A$", false },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                if (env_key_valid(cases[i].key) != cases[i].ok)
                        TAP_FAIL("env_key_valid('%s') != %d", cases[i].key, cases[i].ok);
        ASSERT_TRUE(!env_key_valid(NULL));
}

TEST(code_non_empty_table)
{
        ASSERT_TRUE(!code_non_empty(""));
        ASSERT_TRUE(!code_non_empty(" "));
        ASSERT_TRUE(!code_non_empty(" \t\n\r\v\f"));
        ASSERT_TRUE(code_non_empty("x"));
        ASSERT_TRUE(code_non_empty("  \n  1"));
        ASSERT_TRUE(code_non_empty("print(1)   \n"));
        ASSERT_TRUE(code_non_empty("\xC2\xA0")); /* NBSP is not ASCII space */
}

/* ---- validate_env ---- */

TEST(validate_env_missing_or_null_is_empty)
{
        struct http_response res = { 0 };
        json_t *out = validate_env(NULL, ENV_REJECT_BAD_KEYS, false, &res);
        ASSERT_TRUE(json_is_object(out) && json_object_size(out) == 0);
        json_decref(out);
        json_t *n = json_null();
        out = validate_env(n, ENV_DROP_BAD_KEYS, true, &res);
        ASSERT_TRUE(json_is_object(out) && json_object_size(out) == 0);
        json_decref(out);
        ASSERT_EQ(res.status, 0);
        ASSERT_TRUE(res.json == NULL);
}

TEST(validate_env_drop_vs_reject_bad_keys)
{
        json_t *env = json_pack("{s:s, s:s, s:s, s:s}", "GOOD", "1", "1BAD", "2", "also-bad", "3", "_ok", "4");
        struct http_response res = { 0 };

        json_t *out = validate_env(env, ENV_DROP_BAD_KEYS, false, &res);
        ASSERT_TRUE(out != NULL);
        ASSERT_EQ(json_object_size(out), 2);
        ASSERT_STREQ(json_string_value(json_object_get(out, "GOOD")), "1");
        ASSERT_STREQ(json_string_value(json_object_get(out, "_ok")), "4");
        ASSERT_TRUE(json_object_get(out, "1BAD") == NULL);
        ASSERT_TRUE(res.json == NULL);
        json_decref(out);

        json_t *one_bad = json_pack("{s:s}", "1BAD", "2");
        ASSERT_TRUE(validate_env(one_bad, ENV_REJECT_BAD_KEYS, false, &res) == NULL);
        expect_error(&res, 400, "Invalid envVars key: 1BAD");
        json_decref(one_bad);

        /* the input is not modified */
        ASSERT_EQ(json_object_size(env), 4);
        json_decref(env);
}

TEST(validate_env_null_values)
{
        json_t *env = json_pack("{s:s, s:n}", "KEEP", "v", "UNSET");
        struct http_response res = { 0 };

        json_t *skip = validate_env(env, ENV_REJECT_BAD_KEYS, false, &res);
        ASSERT_TRUE(skip != NULL);
        ASSERT_EQ(json_object_size(skip), 1);
        ASSERT_TRUE(json_object_get(skip, "UNSET") == NULL);
        json_decref(skip);

        json_t *keep = validate_env(env, ENV_REJECT_BAD_KEYS, true, &res);
        ASSERT_TRUE(keep != NULL);
        ASSERT_EQ(json_object_size(keep), 2);
        ASSERT_TRUE(json_is_null(json_object_get(keep, "UNSET")));
        ASSERT_STREQ(json_string_value(json_object_get(keep, "KEEP")), "v");
        json_decref(keep);
        ASSERT_TRUE(res.json == NULL);
        json_decref(env);
}

TEST(validate_env_non_string_values)
{
        static const char *const bad[] = {
                "{\"N\": 5}", "{\"N\": true}", "{\"N\": 1.5}", "{\"N\": []}", "{\"N\": {}}",
                "{\"N\": \"a\\u0000b\"}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                json_t *env = json_loads(bad[i], JSON_ALLOW_NUL, NULL);
                ASSERT_TRUE(env != NULL);
                struct http_response res = { 0 };
                /* both modes, with and without keep_null: never accepted */
                for (int mode = 0; mode < 2; mode++) {
                        if (validate_env(env, mode ? ENV_REJECT_BAD_KEYS : ENV_DROP_BAD_KEYS, mode, &res))
                                TAP_FAIL("accepted %s", bad[i]);
                        expect_error(&res, 400, "envVars values must be strings (key: N)");
                }
                json_decref(env);
        }
}

TEST(validate_env_not_an_object)
{
        static const char *const bad[] = { "[]", "\"A=B\"", "5", "true" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                json_t *env = json_loads(bad[i], JSON_DECODE_ANY, NULL);
                ASSERT_TRUE(env != NULL);
                struct http_response res = { 0 };
                ASSERT_TRUE(validate_env(env, ENV_DROP_BAD_KEYS, false, &res) == NULL);
                expect_error(&res, 400, "envVars must be an object of strings");
                json_decref(env);
        }
}

/* A failing validation replaces a response that was already there. */
TEST(validate_env_overwrites_previous_response)
{
        struct http_response res = { 0 };
        http_json(&res, 200, json_pack("{s:s}", "old", "x"));
        json_t *env = json_pack("{s:i}", "K", 1);
        ASSERT_TRUE(validate_env(env, ENV_DROP_BAD_KEYS, false, &res) == NULL);
        ASSERT_TRUE(json_object_get(res.json, "old") == NULL);
        expect_error(&res, 400, "envVars values must be strings (key: K)");
        json_decref(env);
}

/* ---- validate_exec_body: each step of the contract ---- */

TEST(exec_body_invalid_json)
{
        static const char *const bad[] = { "", "{", "{\"code\": }", "{'code': 'x'}", "nul",
                                           "{\"code\":\"x\"} trailing", "\xFF" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct http_request req = make_req(bad[i]);
                struct http_response res = { 0 };
                struct exec_body eb;
                ASSERT_TRUE(!validate_exec_body(&req, "python", CODE_LIMIT, &eb, &res));
                /* the parser's detail goes in the context */
                const char *detail = json_string_value(
                        json_object_get(json_object_get(res.json, "context"), "detail"));
                ASSERT_TRUE(detail && detail[0]);
                expect_error(&res, 400, "Invalid JSON");
        }
}

TEST(exec_body_uses_body_len_not_nul)
{
        /* body_len shorter than the string: only the prefix is parsed */
        const char *body = "{\"code\":\"1\"}garbage";
        struct http_request req = make_req(body);
        req.body_len = strlen("{\"code\":\"1\"}");
        struct http_response res = { 0 };
        struct exec_body eb;
        ASSERT_TRUE(validate_exec_body(&req, "python", CODE_LIMIT, &eb, &res));
        ASSERT_STREQ(eb.code, "1");
        exec_body_done(&eb);
        /* and a cut-off document is invalid */
        req.body_len = 5;
        ASSERT_TRUE(!validate_exec_body(&req, "python", CODE_LIMIT, &eb, &res));
        expect_error(&res, 400, "Invalid JSON");
}

TEST(exec_body_not_an_object)
{
        static const char *const bad[] = { "[]", "[{\"code\":\"x\"}]", "\"code\"", "42", "null", "true" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                exec_fails(bad[i], "python", 400, "Expected an object");
}

TEST(exec_body_duplicate_keys)
{
        exec_fails("{\"code\":\"print(1)\",\"code\":\"print(2)\"}", "python", 400, "Invalid JSON");
        exec_fails("{\"code\":\"x\",\"envVars\":{\"A\":\"1\",\"A\":\"2\"}}", "python", 400, "Invalid JSON");
}

TEST(exec_body_input_rejected)
{
        const char *msg = "input is no longer supported; pass data with envVars";
        exec_fails("{\"code\":\"x\",\"input\":\"data\"}", "python", 400, msg);
        exec_fails("{\"code\":\"x\",\"input\":null}", "python", 400, msg);
        /* input is checked before language, code and envVars */
        exec_fails("{\"input\":1,\"language\":\"ruby\"}", "python", 400, msg);
        exec_fails("{\"input\":1,\"code\":\"\",\"envVars\":7}", "python", 400, msg);
}

TEST(exec_body_language_mismatch)
{
        exec_fails("{\"code\":\"x\",\"language\":\"ruby\"}", "python", 400,
                   "Unsupported language 'ruby' on this runtime (python)");
        exec_fails("{\"code\":\"x\",\"language\":\"python\"}", "javascript", 400,
                   "Unsupported language 'python' on this runtime (javascript)");
        exec_fails("{\"code\":\"x\",\"language\":\"typescript\"}", "python", 400,
                   "Unsupported language 'typescript' on this runtime (python)");
        exec_fails("{\"code\":\"x\",\"language\":\"cobol\"}", "python", 400,
                   "Unsupported language 'cobol' on this runtime (python)");
        exec_fails("{\"code\":\"x\",\"language\":\"__proto__\"}", "javascript", 400,
                   "Unsupported language '__proto__' on this runtime (javascript)");
        exec_fails("{\"code\":\"x\",\"language\":\"\"}", "python", 400,
                   "Unsupported language '' on this runtime (python)");
        exec_fails("{\"code\":\"x\",\"language\":5}", "python", 400,
                   "Unsupported language '(not a string)' on this runtime (python)");
        exec_fails("{\"code\":\"x\",\"language\":null}", "python", 400,
                   "Unsupported language '(not a string)' on this runtime (python)");
        /* language is checked before code */
        exec_fails("{\"language\":\"ruby\"}", "python", 400,
                   "Unsupported language 'ruby' on this runtime (python)");
}

TEST(exec_body_language_aliases_accepted)
{
        static const struct {
                const char *lang, *runtime;
        } ok[] = {
                { "python", "python" },     { "python3", "python" },       { "PY", "python" },
                { "Python3", "python" },    { "javascript", "javascript" }, { "js", "javascript" },
                { "JS", "javascript" },     { "node", "javascript" },      { "ts", "javascript" },
                { "TypeScript", "javascript" }, { "perl", "perl" },        { "rb", "ruby" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                char body[128];
                snprintf(body, sizeof(body), "{\"code\":\"1\",\"language\":\"%s\"}", ok[i].lang);
                struct exec_body eb;
                exec_ok(body, ok[i].runtime, &eb);
                ASSERT_STREQ(eb.code, "1");
                exec_body_done(&eb);
        }
}

TEST(exec_body_code_required)
{
        const char *msg = "Non-empty code is required";
        exec_fails("{}", "python", 400, msg);
        exec_fails("{\"code\":\"\"}", "python", 400, msg);
        exec_fails("{\"code\":\"   \"}", "python", 400, msg);
        exec_fails("{\"code\":\" \\n\\t\\r \"}", "python", 400, msg);
        exec_fails("{\"code\":null}", "python", 400, msg);
        exec_fails("{\"code\":5}", "python", 400, msg);
        exec_fails("{\"code\":[\"print(1)\"]}", "python", 400, msg);
        /* an embedded NUL never reaches the code check: the parser rejects it */
        exec_fails("{\"code\":\"print(1)\\u0000\"}", "python", 400, "Invalid JSON");
        exec_fails("{\"Code\":\"print(1)\"}", "python", 400, msg);
        /* code is checked before envVars */
        exec_fails("{\"code\":\"\",\"envVars\":[]}", "python", 400, msg);
}

/* Builds {"code": "<n copies of unit>", ...extra} */
static char *big_body(size_t n, const char *unit, const char *extra)
{
        size_t ul = strlen(unit);
        char *b = malloc(n * ul + strlen(extra) + 32);
        ASSERT_TRUE(b != NULL);
        char *p = b + sprintf(b, "{\"code\":\"");
        for (size_t i = 0; i < n; i++, p += ul)
                memcpy(p, unit, ul);
        sprintf(p, "\"%s}", extra);
        return b;
}

TEST(exec_body_code_limit)
{
        struct exec_body eb;
        /* exactly at the limit: accepted */
        char *b = big_body(CODE_LIMIT, "x", "");
        exec_ok(b, "python", &eb);
        ASSERT_EQ(strlen(eb.code), CODE_LIMIT);
        exec_body_done(&eb);
        free(b);
        /* one byte over */
        b = big_body(CODE_LIMIT + 1, "x", "");
        exec_fails(b, "python", 413, "Code exceeds 64 KiB");
        free(b);
        /* the limit counts UTF-8 bytes, not characters: 32769 × 'é' = 65538 bytes */
        b = big_body(32769, "\xC3\xA9", "");
        exec_fails(b, "python", 413, "Code exceeds 64 KiB");
        free(b);
        /* size is checked before envVars */
        b = big_body(CODE_LIMIT + 1, "x", ",\"envVars\":5");
        exec_fails(b, "python", 413, "Code exceeds 64 KiB");
        free(b);
        /* the message follows the configured limit */
        b = big_body(2049, "x", "");
        struct http_request req = make_req(b);
        struct http_response res = { 0 };
        ASSERT_TRUE(!validate_exec_body(&req, "python", 2048, &eb, &res));
        expect_error(&res, 413, "Code exceeds 2 KiB");
        free(b);
        b = big_body(2048, "x", "");
        req = make_req(b);
        ASSERT_TRUE(validate_exec_body(&req, "python", 2048, &eb, &res));
        ASSERT_TRUE(res.json == NULL);
        exec_body_done(&eb);
        free(b);
}

TEST(exec_body_env_errors)
{
        exec_fails("{\"code\":\"x\",\"envVars\":[]}", "python", 400, "envVars must be an object of strings");
        exec_fails("{\"code\":\"x\",\"envVars\":\"A=1\"}", "python", 400,
                   "envVars must be an object of strings");
        exec_fails("{\"code\":\"x\",\"envVars\":{\"A\":1}}", "python", 400,
                   "envVars values must be strings (key: A)");
        exec_fails("{\"code\":\"x\",\"envVars\":{\"OK\":\"1\",\"B\":{\"nested\":\"x\"}}}", "python", 400,
                   "envVars values must be strings (key: B)");
}

TEST(exec_body_success_fields)
{
        struct exec_body eb;
        exec_ok("{\"code\":\"print(1)\",\"language\":\"python3\",\"envVars\":"
                "{\"NAME\":\"v\",\"bad-key\":\"dropped\",\"EMPTY\":\"\",\"GONE\":null},\"extra\":true}",
                "python", &eb);
        ASSERT_STREQ(eb.code, "print(1)");
        ASSERT_EQ(json_object_size(eb.env), 2);
        ASSERT_STREQ(json_string_value(json_object_get(eb.env, "NAME")), "v");
        ASSERT_STREQ(json_string_value(json_object_get(eb.env, "EMPTY")), "");
        ASSERT_TRUE(json_object_get(eb.env, "bad-key") == NULL);
        ASSERT_TRUE(json_object_get(eb.env, "GONE") == NULL);
        /* code is borrowed from root */
        ASSERT_TRUE(eb.code == json_string_value(json_object_get(eb.root, "code")));
        exec_body_done(&eb);
        ASSERT_TRUE(eb.root == NULL && eb.env == NULL && eb.code == NULL);
        exec_body_done(&eb); /* idempotent */

        /* no envVars / envVars null → empty env object */
        exec_ok("{\"code\":\"1\"}", "ruby", &eb);
        ASSERT_EQ(json_object_size(eb.env), 0);
        exec_body_done(&eb);
        exec_ok("{\"code\":\"1\",\"envVars\":null}", "perl", &eb);
        ASSERT_EQ(json_object_size(eb.env), 0);
        exec_body_done(&eb);
}

TEST(validate_language_direct)
{
        struct http_response res = { 0 };
        json_t *root = json_pack("{s:s}", "code", "x");
        ASSERT_TRUE(validate_language(root, "python", &res)); /* absent → ok */
        json_object_set_new(root, "language", json_string("ts"));
        ASSERT_TRUE(validate_language(root, "javascript", &res));
        ASSERT_TRUE(!validate_language(root, "perl", &res));
        expect_error(&res, 400, "Unsupported language 'ts' on this runtime (perl)");
        json_decref(root);
}

TEST(validate_json_object_direct)
{
        struct http_request req = make_req("{\"a\":1}");
        struct http_response res = { 0 };
        json_t *o = validate_json_object(&req, &res);
        ASSERT_TRUE(json_is_object(o));
        ASSERT_EQ(json_integer_value(json_object_get(o, "a")), 1);
        json_decref(o);
        req = make_req("[1]");
        ASSERT_TRUE(validate_json_object(&req, &res) == NULL);
        expect_error(&res, 400, "Expected an object");
}
