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

/* Every /v1/sandbox/:id route provisions its sandbox first, as the
 * anchor's pool does: created on first use with the bridge's limits
 * (bridge.workspace_bytes, …; a sandbox made by another API keeps its own).
 * false: res holds the error. */
bool bridge_sandbox_ready(struct http_request *req, struct http_response *res, const char *id);

/* Runs fn(root, req, res, ud, err) on the workspace of the sandbox
 * req->captures[0] (provisioned first by bridge_sandbox_ready), locked
 * for the call; fn answers its success in res. A failure (err filled) is
 * answered with bridge_error_from(upstream_code). Returns fn's result. */
struct files_root;
typedef int (*bridge_ws_fn)(const struct files_root *root, struct http_request *req, struct http_response *res,
                            void *ud, struct err *err);
int bridge_on_workspace(struct http_request *req, struct http_response *res, bridge_ws_fn fn, void *ud,
                        const char *upstream_code);
/* The body cap of PUT /file and /hydrate, the anchor's 32 MiB
 * (33 554 432 bytes): above it the HTTP layer answers 413
 * payload_too_large before reading the body (a route's max_body). */
#define BRIDGE_BODY_MAX (32u << 20)
size_t bridge_body_cap(const void *app);

/* ^[a-z2-7]{1,128}$ */
bool bridge_id_valid(const char *id);
/* A fresh id: 16 random bytes as lowercase base32 (26 characters). */
int bridge_id_new(char out[27]);

/* Route tables, one per file. */
const struct route *bridge_sandbox_routes(size_t *ret_n);
const struct route *bridge_exec_routes(size_t *ret_n);
const struct route *bridge_file_routes(size_t *ret_n);
const struct route *bridge_archive_routes(size_t *ret_n);
const struct route *bridge_mount_routes(size_t *ret_n);
const struct route *bridge_openapi_routes(size_t *ret_n);
const struct route *bridge_tunnel_routes(size_t *ret_n);
const struct route *bridge_pty_routes(size_t *ret_n);
const struct route *bridge_pool_routes(size_t *ret_n);

struct buf;
/* Appends arg quoted as the anchor's shellQuote does (exec.c). 0 or -errno. */
int bridge_quote(const char *arg, struct buf *out);

/* A preview request's body cap (tunnel.c): it is buffered, then forwarded. */
#define BRIDGE_PREVIEW_MAX_BODY (32u << 20)
/* Forwards req to the server at the other end of fd (a connected TCP
 * socket in a sandbox, taken) as /<path> plus the query, and fills res
 * with its answer: bytes, a stream, or a raw upgrade spliced both ways
 * (WebSocket). 502 tunnel_error when the server answers nothing usable
 * (proxy.c). */
void bridge_proxy(struct http_request *req, struct http_response *res, int fd, unsigned port, const char *path);

/* A Session-Id as the anchor takes it (/exec, /file, /pty):
 * ^[a-zA-Z0-9._-]{1,128}$ and no "..". Else 400 "Invalid session ID format". */
bool bridge_session_id_valid(const char *sid);
/* The Session-Id header (NULL: none) into *ret; false with res filled (400
 * "Invalid session ID format") when it is malformed. */
bool bridge_session_header(struct http_request *req, struct http_response *res, const char **ret);
const struct route *bridge_session_routes(size_t *ret_n);
