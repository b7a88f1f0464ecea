/* Request validation shared by the facades, in the contract's order:
 * JSON → object → `input` → `language` → non-empty code → code size → envVars.
 * (Content-Type and body size are checked by the HTTP layer before.) */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/server.h"

struct exec_body {
        json_t *root;        /* owned */
        const char *code;    /* borrowed from root */
        json_t *env;         /* owned: validated {string: string} */
};

enum env_mode {
        ENV_DROP_BAD_KEYS,   /* stateless: bad keys silently dropped */
        ENV_REJECT_BAD_KEYS, /* sandbox: bad key → 400 */
};

/* Parses the body as a JSON object. On failure fills res and returns NULL. */
json_t *validate_json_object(struct http_request *req, struct http_response *res);
/* Checks `language` against the runtime that serves the path. */
bool validate_language(json_t *root, const char *runtime_id, struct http_response *res);
/* Full stateless /execute validation. */
bool validate_exec_body(struct http_request *req, const char *runtime_id, size_t code_limit,
                        struct exec_body *ret, struct http_response *res);
void exec_body_done(struct exec_body *b);
/* Validates an envVars object; values must be strings (null skipped, or kept
 * as JSON null when keep_null, meaning "unset"). Returns a new object or NULL
 * with res filled. */
json_t *validate_env(json_t *env, enum env_mode mode, bool keep_null, struct http_response *res);
bool env_key_valid(const char *key);
/* True if code has a non-whitespace character. */
bool code_non_empty(const char *code);
