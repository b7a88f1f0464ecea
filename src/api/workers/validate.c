#include "api/workers/envelope.h"
#include "api/workers/validate.h"

#include <ctype.h>
#include <string.h>

#include "runtimes/runtime.h"

bool env_key_valid(const char *key)
{
        if (!key || !(isalpha((unsigned char)key[0]) || key[0] == '_'))
                return false;
        for (const char *p = key + 1; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '_'))
                        return false;
        return true;
}

bool code_non_empty(const char *code)
{
        for (const char *p = code; *p; p++)
                if (!isspace((unsigned char)*p))
                        return true;
        return false;
}

json_t *validate_json_object(struct http_request *req, struct http_response *res)
{
        json_error_t err;
        /* JSON_REJECT_DUPLICATES: two "code" keys must not mean two things to
         * two parsers. jansson caps nesting depth itself. */
        json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
        if (!root) {
                workers_error(res, 400, "VALIDATION_FAILED", "Invalid JSON", json_pack("{s:s}", "detail", err.text));
                return NULL;
        }
        if (!json_is_object(root)) {
                json_decref(root);
                workers_error(res, 400, "VALIDATION_FAILED", "Expected an object", NULL);
                return NULL;
        }
        return root;
}

bool validate_language(json_t *root, const char *runtime_id, struct http_response *res)
{
        json_t *lang = json_object_get(root, "language");
        if (!lang)
                return true;
        const char *given = json_is_string(lang) ? json_string_value(lang) : NULL;
        const char *norm = given ? runtime_normalize(given) : NULL;
        bool ok = norm && (strcmp(norm, runtime_id) == 0 ||
                           (strcmp(norm, "typescript") == 0 && strcmp(runtime_id, "javascript") == 0));
        if (!ok)
                workers_errorf(res, 400, "VALIDATION_FAILED", "Unsupported language '%s' on this runtime (%s)",
                            given ? given : "(not a string)", runtime_id);
        return ok;
}

json_t *validate_env(json_t *env, enum env_mode mode, bool keep_null, struct http_response *res)
{
        if (!env || json_is_null(env))
                return json_object();
        if (!json_is_object(env)) {
                workers_error(res, 400, "VALIDATION_FAILED", "envVars must be an object of strings", NULL);
                return NULL;
        }
        json_t *out = json_object();
        const char *key;
        json_t *val;
        json_object_foreach(env, key, val) {
                if (!env_key_valid(key)) {
                        if (mode == ENV_DROP_BAD_KEYS)
                                continue;
                        json_decref(out);
                        workers_errorf(res, 400, "VALIDATION_FAILED", "Invalid envVars key: %s", key);
                        return NULL;
                }
                if (json_is_null(val)) {
                        if (keep_null)
                                json_object_set_new(out, key, json_null());
                        continue;
                }
                if (!json_is_string(val) || memchr(json_string_value(val), '\0', json_string_length(val))) {
                        json_decref(out);
                        workers_errorf(res, 400, "VALIDATION_FAILED", "envVars values must be strings (key: %s)", key);
                        return NULL;
                }
                json_object_set(out, key, val);
        }
        return out;
}

bool validate_exec_body(struct http_request *req, const char *runtime_id, size_t code_limit,
                        struct exec_body *ret, struct http_response *res)
{
        *ret = (struct exec_body){ 0 };
        json_t *root = validate_json_object(req, res);
        if (!root)
                return false;
        ret->root = root;
        if (json_object_get(root, "input")) {
                workers_error(res, 400, "VALIDATION_FAILED", "input is no longer supported; pass data with envVars", NULL);
                goto fail;
        }
        if (!validate_language(root, runtime_id, res))
                goto fail;
        json_t *code = json_object_get(root, "code");
        if (!json_is_string(code) || !code_non_empty(json_string_value(code)) ||
            memchr(json_string_value(code), '\0', json_string_length(code))) {
                workers_error(res, 400, "VALIDATION_FAILED", "Non-empty code is required", NULL);
                goto fail;
        }
        if (json_string_length(code) > code_limit) {
                workers_errorf(res, 413, "VALIDATION_FAILED", "Code exceeds %zu KiB", code_limit / 1024);
                goto fail;
        }
        ret->code = json_string_value(code);
        ret->env = validate_env(json_object_get(root, "envVars"), ENV_DROP_BAD_KEYS, false, res);
        if (!ret->env)
                goto fail;
        return true;
fail:
        exec_body_done(ret);
        return false;
}

void exec_body_done(struct exec_body *b)
{
        json_decref(b->root);
        json_decref(b->env);
        *b = (struct exec_body){ 0 };
}
