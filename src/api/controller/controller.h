/* The StateSet controller facade (seed 003; issue 12) under /api/v1:
 * identity (register, login, sessions), API keys, and — built on this
 * header — sandboxes, execute, files, REPL sessions, secrets. Shared
 * between the files of api/controller/ only.
 *
 * Every route of the group except ROUTE_PUBLIC ones runs after the auth
 * hook (auth.c) found who calls: read it with ctl_caller(req) and scope
 * every row by its org_id (another org's object is a 404, never a 403).
 * Errors go out as {"error": {"code", "message"}} (errors.c); lists as
 * {data, total, limit, offset, has_more} (pages.c). Every reply carries
 * X-Request-Id (the client's, else a fresh one). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "http/server.h"
#include "tenant/tenant.h"

struct app;

#define CTL_PREFIX "/api/v1"
#define CTL_SESSION_COOKIE "stateset_session"
#define CTL_CSRF_COOKIE "__stateset_csrf"
/* The one route that also takes its credential from the query (auth.c). */
#define CTL_EVENTS_STREAM CTL_PREFIX "/events/stream"

/* Adds the /api/v1 group. app (with app->tenant) must outlive the server. */
int api_controller_register(struct http_server *srv, struct app *app);

/* ---- who calls (auth.c) ---- */
enum ctl_via {
        CTL_VIA_API_KEY,   /* Authorization: ApiKey sk_… (or Bearer sk_…) */
        CTL_VIA_BEARER,    /* Authorization: Bearer <session JWT> */
        CTL_VIA_COOKIE,    /* the stateset_session cookie (writes need X-CSRF-Token) */
};
struct ctl_caller {
        struct tenant_principal who;   /* org_id always; user_id for sessions */
        enum ctl_via via;
};
/* The caller of a non-public route (never NULL there); NULL on a public
 * route. Valid until the request is over. */
const struct ctl_caller *ctl_caller(const struct http_request *req);
/* Cluster mode, for a handler that finds the sandbox it acts on only
 * after parsing (a body's sandbox_id, a checkpoint's sandbox): true when
 * another node owns sandbox_id and res holds that node's answer (or a
 * 502/503); false: act here (cluster mode off, the sandbox is ours or
 * unknown, or req itself was forwarded). */
bool ctl_cluster_forward(struct http_request *req, struct http_response *res, const char *sandbox_id);
/* The group's auth hook (struct http_group_ops.auth); cls is the app. */
bool ctl_auth_hook(void *cls, struct http_request *req, struct http_response *res);
/* A session is required (not an API key): false with a 401 in res. */
bool ctl_require_session(struct http_request *req, struct http_response *res);

/* Whether req may use an internal route (metrics.c; seed "Internal auth"):
 * X-Internal-Token or Authorization: Bearer equal to
 * controller.internal_token; with none configured, loopback clients only. */
/* An internal route's caller (metrics.c): X-Internal-Token or Bearer of
 * controller.internal_token; with none configured, loopback clients. */
bool ctl_internal_allowed(struct http_request *req);

/* ---- errors (errors.c) ---- */
/* {"error": {"code": code, "message": message}}; message need not be
 * valid UTF-8. Codes: VALIDATION_ERROR 400, AUTH_REQUIRED /
 * INVALID_CREDENTIALS / SESSION_EXPIRED 401, CSRF_TOKEN_INVALID /
 * FORBIDDEN 403, NOT_FOUND 404, METHOD_NOT_ALLOWED 405, CONFLICT /
 * EMAIL_ALREADY_EXISTS / IDEMPOTENCY_KEY_REUSE_MISMATCH 409,
 * PAYLOAD_TOO_LARGE 413, UNSUPPORTED_MEDIA_TYPE 415, RATE_LIMITED /
 * QUOTA_EXCEEDED 429, INTERNAL_ERROR 500, SERVICE_UNAVAILABLE 503. */
void ctl_error(struct http_response *res, int status, const char *code, const char *message);
void ctl_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* A domain error: ERR_INVALID/LIMIT 400, NOT_FOUND 404, EXISTS 409,
 * PERMISSION 403, TOO_LARGE 413, BUSY 429 + Retry-After when it has a
 * "retry_after" detail (else 503), QUOTA 429, UNAVAILABLE 503, else 500. */
void ctl_error_from(struct http_response *res, const struct err *e);
/* Answers e and frees it (err_done): with status/code when its reason is
 * `reason` (a route's own meaning: ERR_PERMISSION at login is a 401),
 * else as ctl_error_from. reason ERR_OK: always ctl_error_from. */
void ctl_error_done(struct http_response *res, struct err *e, enum err_reason reason, int status, const char *code);
/* The envelope of the errors the HTTP layer answers itself. */
void ctl_envelope(void *cls, struct http_response *res, int status, const char *message);

/* ---- request bodies ---- */
/* The body as a JSON object (*ret owned), or false with a 400 in res. */
bool ctl_body_object(struct http_request *req, struct http_response *res, json_t **ret);
/* A string member, NULL when absent; false with a 400 when not a string. */
bool ctl_opt_string(json_t *obj, const char *name, const char **ret, struct http_response *res);
struct ctl_string_field {
        const char *name;
        const char **value;
};
/* The body as a JSON object and its string members fields[i].name into
 * *fields[i].value (NULL when absent or null); false with a 400 in res
 * (and *ret_body NULL). The strings live as long as *ret_body. */
bool ctl_body_strings(struct http_request *req, struct http_response *res, json_t **ret_body,
                      const struct ctl_string_field *fields, size_t n);
/* A user path normalised into out[PATH_MAX] ("/workspace/…"), or false
 * with a 400 (missing, leaving /workspace, too long, not UTF-8). files.c. */
bool ctl_user_path(const char *path, struct http_response *res, char *out);
static inline void ctl_json_decrefp(json_t **j)
{
        json_decref(*j);
}
#define _cleanup_json_ __attribute__((cleanup(ctl_json_decrefp)))

/* ---- pagination (pages.c) ---- */
#define CTL_PAGE_DEFAULT 100
#define CTL_PAGE_MAX 1000
struct ctl_page {
        uint64_t limit, offset;
};
/* ?limit (1…, above CTL_PAGE_MAX is clamped to it; default 100) and
 * ?offset (0…); anything else (negative, not a number) false + 400. */
bool ctl_page_parse(struct http_request *req, struct http_response *res, struct ctl_page *ret);
/* {data, total, limit, offset, has_more}; takes data. */
json_t *ctl_page_body(json_t *data, uint64_t total, const struct ctl_page *p);
/* A list route's whole answer: ?limit/?offset parsed, fill appends one
 * page of views to data and sets *ret_total (0 or -errno with err
 * filled), then the page body or the error. */
typedef int (*ctl_page_fill)(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                             struct err *err);
void ctl_page_reply(struct http_request *req, struct http_response *res, ctl_page_fill fill);

/* ---- cookies (cookie.c) ---- */
/* The value of cookie name in a Cookie header (RFC 6265 §4.2: pairs split
 * by ';', optional blanks, a value in DQUOTEs unquoted; first one wins).
 * 0, -ENOENT (absent or header NULL), -ENOBUFS (value longer than cap-1),
 * -EINVAL (a pair of that name that is not a cookie-value). */
int ctl_cookie_get(const char *header, const char *name, char *out, size_t cap);
/* Set-Cookie for the session (HttpOnly; SameSite=Lax; Path=/; Max-Age;
 * Secure when controller.cookie_secure), and the CSRF cookie (readable by
 * scripts). max_age 0 clears. 0 or -errno. */
int ctl_set_session_cookie(struct http_response *res, const struct app *app, const char *token, uint64_t max_age);
int ctl_set_csrf_cookie(struct http_response *res, const struct app *app, const char *token, uint64_t max_age);
/* Any cookie, as those (SameSite=Lax; Secure when configured) on path. */
int ctl_set_cookie(struct http_response *res, const struct app *app, const char *name, const char *value,
                   const char *path, uint64_t max_age, bool http_only);
/* A new login's cookies (identity.c): the session cookie, the CSRF cookie
 * and the X-CSRF-Token header. */
void ctl_start_cookie_session(struct http_response *res, struct app *app, const struct tenant_session *s);
/* The body of GET /auth/providers (sso.c). */
json_t *ctl_sso_providers(const struct app *app);

/* ---- Idempotency-Key (idempotency.c) ---- */
/* Runs fn under the seed's Idempotency-Key rules (POST, authenticated
 * routes; 24 h per org + key + route; Idempotency-Status: stored|replayed;
 * 409 IDEMPOTENCY_KEY_REUSE_MISMATCH on another body). */
void ctl_idempotent(struct http_request *req, struct http_response *res, http_handler fn);
/* Defines handler `name` as fn wrapped by ctl_idempotent, for a route
 * table: CTL_IDEMPOTENT(h_create_idem, h_create). */
#define CTL_IDEMPOTENT(name, fn)                                                      \
        static void name(struct http_request *req, struct http_response *res)     \
        {                                                                             \
                ctl_idempotent(req, res, fn);                                         \
        }

/* ---- concurrency budgets and queue mode (queue.c) ---- */
/* What a budget counts: sandboxes an org holds, executions it runs. */
enum ctl_slot {
        CTL_SLOT_SANDBOX,
        CTL_SLOT_EXECUTE,
        _CTL_SLOT_MAX,
};
/* Runs fn within the caller's org budget of kind (seed "Concurrency
 * Budgets & Queue Mode"): at once when a slot is free and nothing of the
 * org waits; else 429 CONCURRENT_LIMIT_EXCEEDED, or in queue mode 202
 * {status: queued, requestId, …} and the request runs later, in order (a
 * stream is never queued). */
void ctl_budgeted(struct http_request *req, struct http_response *res, enum ctl_slot kind, http_handler fn);
/* Registers fn as the handler of the route pattern (":name" segments): a
 * queued request of that path runs it later, after a restart too. */
void ctl_budget_handler(enum ctl_slot kind, const char *pattern, http_handler fn);
/* Across a cluster (budget_shared.c): whether kind is counted in the
 * store's exec_slots (cluster mode, executions); a take there (false at
 * the org's limit or on a store failure; ticket: the slot's id) and its
 * give; the org's slots of kind on every node. */
bool ctl_slot_shared(const struct app *app, enum ctl_slot kind);
bool ctl_slot_take_shared(struct app *app, const char *org_id, const char *kind, uint64_t limit,
                          char ticket[static STORE_ID_MAX]);
void ctl_slot_give_shared(struct app *app, const char *ticket);
uint64_t ctl_slots_in_use(struct app *app, const char *org_id, const char *kind);
/* This node's cluster id, "" outside a cluster. */
const char *ctl_node_id(const struct app *app);
/* Fails the queued requests dead nodes were running (and at_start this
 * node's own, from its previous run) with status/body. */
void ctl_queue_fail_dead(struct app *app, bool at_start, uint32_t status, const char *body, uint64_t now);
/* Defines handler `name`: fn, the handler of route pattern, within the
 * budget of kind. */
#define CTL_BUDGETED(name, kind, pattern, fn)                                         \
        __attribute__((constructor)) static void name##_register(void)                \
        {                                                                             \
                ctl_budget_handler(kind, pattern, fn);                                \
        }                                                                             \
        static void name(struct http_request *req, struct http_response *res)        \
        {                                                                             \
                ctl_budgeted(req, res, kind, fn);                                     \
        }
/* Starts (at registration) the queue runner; halts it (no queued request
 * starts any more: before the engine kills what runs); stops and frees it
 * (after the HTTP server stopped: no handler may give a slot back later). */
int ctl_queue_start(struct app *app);
void ctl_queue_halt(struct app *app);
void ctl_queue_stop(struct app *app);
/* Queued requests being run now (a drain waits for them as for HTTP
 * requests: they are not the HTTP server's). 0 without a queue. */
unsigned ctl_queue_running(struct app *app);
/* ---- making sandboxes (sandboxes.c; templates and checkpoints too) ---- */
/* A fresh sandbox id: a random (version 4) UUID, as the seed's (and
 * sbx_id_valid's). 0 or -EIO. */
int ctl_sandbox_id_new(char out[37]);
/* j[name] = ms (epoch ms) as an ISO 8601 string, or null when 0. */
void ctl_put_time(json_t *j, const char *name, uint64_t ms);
/* Creates a sandbox in the caller's org from b's create options (cpus,
 * memory, timeout_seconds, isolation, env: POST /sandbox/create's body);
 * env_base (may be NULL) is its env under b's. true with *ret_view (owned:
 * the 201 body of POST /sandbox/create, "sandbox_id" its id); false with
 * the error in res. */
bool ctl_sandbox_create(struct http_request *req, struct http_response *res, json_t *b, json_t *env_base,
                        json_t **ret_view);
/* Runs cmd in org_id's sandbox id to its end, output collected as
 * POST /sandbox/:id/execute's (each stream capped): *ret is {exit_code,
 * stdout, stderr, timed_out, stdout_truncated, stderr_truncated} (owned).
 * 0 or -errno with err filled. */
struct sbx_command;
int ctl_run_collected(struct app *app, const char *id, const struct sbx_command *cmd, uint64_t timeout_ms,
                      json_t **ret, struct err *err);
/* Artifacts (artifact_blob.c): mounts the artifacts bucket when one is
 * configured and starts the expiry sweeper; stop undoes both (NULL-safe,
 * idempotent). */
int ctl_artifacts_start(struct app *app);
void ctl_artifacts_stop(struct app *app);

/* ---- route tables, one per file ---- */
const struct route *ctl_identity_routes(size_t *ret_n);
const struct route *ctl_key_routes(size_t *ret_n);
const struct route *ctl_health_routes(size_t *ret_n);
const struct route *ctl_repl_routes(size_t *ret_n);
const struct route *ctl_sandbox_routes(size_t *ret_n);
const struct route *ctl_execute_routes(size_t *ret_n);
const struct route *ctl_file_routes(size_t *ret_n);
const struct route *ctl_secret_routes(size_t *ret_n);
const struct route *ctl_metrics_routes(size_t *ret_n);
const struct route *ctl_openapi_routes(size_t *ret_n);
const struct route *ctl_queue_routes(size_t *ret_n);
const struct route *ctl_template_routes(size_t *ret_n);
const struct route *ctl_checkpoint_routes(size_t *ret_n);
const struct route *ctl_event_routes(size_t *ret_n);
const struct route *ctl_audit_routes(size_t *ret_n);
const struct route *ctl_webhook_routes(size_t *ret_n);
/* The webhook dispatcher (webhooks.c): started at registration, stopped
 * after the drain, before the store closes. */
int ctl_webhooks_start(struct app *app);
void ctl_webhooks_stop(struct app *app);

/* ---- audit (audit.c) ---- */
/* From the group's finish hook: one audit row for an authenticated write
 * (anything but GET/HEAD/OPTIONS) when controller.audit_enabled. */
void ctl_audit_record(struct app *app, struct http_request *req, const struct http_response *res,
                      const char *request_id);
const struct route *ctl_artifact_routes(size_t *ret_n);
const struct route *ctl_artifact_upload_routes(size_t *ret_n);
const struct route *ctl_snapshot_routes(size_t *ret_n);
const struct route *ctl_github_routes(size_t *ret_n);
const struct route *ctl_egress_routes(size_t *ret_n);
/* Egress (egress.c): with controller.egress_enabled and a mode other than
 * off, starts the data path and gives it to app->sandboxes. Stop after
 * the sandbox manager is freed (its links are gone then). 0 or -errno. */
int ctl_egress_start(struct app *app);
void ctl_egress_stop(void);
const struct route *ctl_sso_routes(size_t *ret_n);
