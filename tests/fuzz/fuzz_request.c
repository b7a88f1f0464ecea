/* Fuzzes request decoding and validation (src/api/workers/validate.c): the input is
 * the body of a POST /execute/<lang> (or a sandbox /env call).
 *
 * Invariants:
 *  - validate_exec_body, for "python" and "javascript" and for a normal and
 *    a tiny code limit: on failure the response is 400 or 413 and its JSON
 *    is an ErrorResponse object with a string "message" (and serialises);
 *    on success code is a non-empty (non-whitespace), NUL-free string of at
 *    most the limit and env is an object of strings under valid keys.
 *  - validate_env on the parsed body, both modes, with and without
 *    keep_null: on failure 400 + message; on success an object of strings
 *    (or nulls when keep_null) under valid keys; in drop mode it never fails
 *    for an object whose values are strings.
 *  - http_errorf / http_error with the body as (part of) the message,
 *    as when a handler quotes a URL capture: still a full ErrorResponse.
 * Everything allocated is freed (LeakSanitizer checks that). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/workers/envelope.h"
#include "api/workers/validate.h"
#include "fuzz.h"
#include "http/server.h"

static void check_error_response(const struct http_response *res)
{
        CHECK(res->status == 400 || res->status == 413);
        CHECK(json_is_object(res->json));
        CHECK(json_is_string(json_object_get(res->json, "message")));
        CHECK(json_is_string(json_object_get(res->json, "code")));
        CHECK(json_integer_value(json_object_get(res->json, "httpStatus")) == res->status);
        /* What send_response() does with it. */
        char *text = json_dumps(res->json, HTTP_JSON_DUMP_FLAGS);
        CHECK(text != NULL);
        free(text);
}

static void check_env(json_t *env, bool keep_null)
{
        CHECK(json_is_object(env));
        const char *key;
        json_t *val;
        json_object_foreach(env, key, val) {
                CHECK(env_key_valid(key));
                if (keep_null && json_is_null(val))
                        continue;
                CHECK(json_is_string(val));
                CHECK(strlen(json_string_value(val)) == json_string_length(val));
        }
}

static bool all_string_values(json_t *obj)
{
        const char *key;
        json_t *val;
        json_object_foreach(obj, key, val)
                if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val))
                        return false;
        return true;
}

static void run_exec_body(struct http_request *req, const char *runtime_id, size_t limit)
{
        struct exec_body b;
        struct http_response res = { 0 };
        bool ok = validate_exec_body(req, runtime_id, limit, &b, &res);
        if (ok) {
                CHECK(res.json == NULL);
                CHECK(json_is_object(b.root));
                CHECK(b.code != NULL);
                json_t *code = json_object_get(b.root, "code");
                CHECK(json_is_string(code) && json_string_value(code) == b.code);
                size_t len = strlen(b.code);
                CHECK(len > 0 && len <= limit && len == json_string_length(code));
                CHECK(code_non_empty(b.code));
                CHECK(json_object_get(b.root, "input") == NULL);
                check_env(b.env, false);
        } else {
                check_error_response(&res);
                CHECK(b.root == NULL && b.env == NULL && b.code == NULL);
        }
        exec_body_done(&b);
        json_decref(res.json);
}

static void run_env(json_t *env, enum env_mode mode, bool keep_null)
{
        struct http_response res = { 0 };
        json_t *out = validate_env(env, mode, keep_null, &res);
        if (out) {
                CHECK(res.json == NULL);
                check_env(out, keep_null);
                if (mode == ENV_REJECT_BAD_KEYS && json_is_object(env))
                        CHECK(json_object_size(out) <= json_object_size(env));
        } else {
                check_error_response(&res);
                CHECK(res.status == 400);
                /* Dropping bad keys cannot fail on an object of strings. */
                if (mode == ENV_DROP_BAD_KEYS && json_is_object(env))
                        CHECK(!all_string_values(env));
        }
        json_decref(out);
        json_decref(res.json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* The HTTP layer hands handlers a NUL-terminated body. */
        char *body = malloc(size + 1);
        if (!body)
                return 0;
        memcpy(body, data, size);
        body[size] = '\0';

        static const char *const ids[] = { "python", "javascript" };
        for (size_t i = 0; i < 2; i++) {
                struct http_request req = {
                        .method = "POST",
                        .path = i == 0 ? "/execute/python" : "/execute/javascript",
                        .captures = { ids[i] },
                        .body = body,
                        .body_len = size,
                };
                run_exec_body(&req, ids[i], 64 * 1024);
                run_exec_body(&req, ids[i], 8); /* 413 paths */
        }

        /* validate_env on the body itself (the sandbox /env route passes
         * envVars; the stateless route the body's envVars member). */
        json_t *root = json_loadb(body, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
        json_t *targets[2] = { root, json_is_object(root) ? json_object_get(root, "envVars") : NULL };
        for (size_t t = 0; t < 2; t++) {
                run_env(targets[t], ENV_DROP_BAD_KEYS, false);
                run_env(targets[t], ENV_REJECT_BAD_KEYS, true);
                run_env(targets[t], ENV_REJECT_BAD_KEYS, false);
        }
        json_decref(root);

        /* Error messages quote client bytes (URL captures are decoded and
         * need not be UTF-8, keys can be long): the ErrorResponse must
         * still be built, whatever the bytes and wherever they get cut. */
        struct http_response res = { 0 };
        workers_errorf(&res, 400, "VALIDATION_FAILED", "Unsupported language: %s", body);
        check_error_response(&res);
        workers_error(&res, 404, "VALIDATION_FAILED", body, NULL);
        res.status = 400; /* check_error_response wants 400/413 */
        json_object_set_new(res.json, "httpStatus", json_integer(400));
        check_error_response(&res);
        json_decref(res.json);
        free(body);
        return 0;
}
