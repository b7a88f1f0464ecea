/* The Cloudflare Sandbox bridge facade (seed 004; condensed in
 * cloudflare-bridge.md): /v1/sandbox/:id/{exec,file,persist,hydrate,
 * session,pty,mount,unmount,tunnel,running}, /v1/pool/stats|prime|shutdown-prewarmed, /v1/openapi.
 * Shared between the files of api/bridge/ only. Errors go out as
 * {"error": text, "code": code} with the bridge's codes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "http/server.h"

struct app;

/* Adds the /v1 group (auth: the API key as Bearer; sandbox ids checked
 * before auth). app must outlive the server. */
int api_bridge_register(struct http_server *srv, struct app *app);

/* {"error": message, "code": code}; message need not be valid UTF-8. */
void bridge_error(struct http_response *res, int status, const char *code, const char *message);
void bridge_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* The domain error e as the bridge answers it: invalid input 400
 * invalid_request, a refused path 403, a missing file 404
 * workspace_read_not_found, too large 413 payload_too_large, the
 * service's caps 503 capacity_exceeded; anything else 502 with
 * upstream_code (the route's own: exec_error, session_error, …). */
void bridge_error_from(struct http_response *res, const struct err *e, const char *upstream_code);

/* ^[a-z2-7]{1,128}$ */
bool bridge_id_valid(const char *id);
/* A fresh id: 16 random bytes as lowercase base32 (26 characters). */
int bridge_id_new(char out[27]);

/* Route tables, one per file. */
const struct route *bridge_sandbox_routes(size_t *ret_n);
const struct route *bridge_exec_routes(size_t *ret_n);
const struct route *bridge_pool_routes(size_t *ret_n);

struct buf;
/* Appends arg quoted as the anchor's shellQuote does (exec.c). 0 or -errno. */
int bridge_quote(const char *arg, struct buf *out);
