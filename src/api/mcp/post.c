/* The Streamable HTTP transport of MCP (revision 2025-11-25, and the
 * earlier 2025-03-26 with its batches) on POST and DELETE /mcp.
 *
 * A POST carries one JSON-RPC message (or, before 2025-06-18, a batch).
 * Notifications and responses are handled at once and answered 202. A
 * POST holding requests is answered from a stream producer thread, as
 * application/json, or as text/event-stream (progress notifications, then
 * the response) for a tools/call whose client accepts it.
 *
 * Why a producer thread: every tool is an HTTP call back into this daemon
 * (src/mcp/ through src/client/). Run on a polling thread it would block
 * the thread that must read its own inner request; run on an execution
 * worker (ROUTE_BLOCKING) it would hold the worker its inner /execute
 * waits for, and with exec.workers such calls at once nothing could move.
 * Producers are threads of their own (http.max_streams, 503 beyond) and
 * hold neither, so the inner calls queue for workers like any API call.
 * Only notifications and responses, which make no call back, are handled
 * on the polling thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/common/auth.h"
#include "api/mcp/internal.h"
#include "base/util.h"
#include "client/client.h"

/* The first revision without JSON-RPC batches. */
#define MCP_NO_BATCH_REVISION "2025-06-18"

/* One POST holding requests, handed to its producer. */
struct call {
        struct api_mcp *m;
        struct mcp_entry *entry;    /* referenced */
        json_t *msgs;               /* array of the messages */
        bool batch, sse, fresh;     /* fresh: the entry is this initialize's */
        struct client *client;
        struct http_stream *stream;
        pthread_mutex_t lock;       /* one SSE event at a time */
};

enum msg_kind { MSG_REQUEST, MSG_NOTIFICATION, MSG_RESPONSE, MSG_INVALID };

static enum msg_kind msg_kind(const json_t *msg)
{
        if (!json_is_object(msg))
                return MSG_INVALID;
        const json_t *method = json_object_get(msg, "method");
        const json_t *id = json_object_get(msg, "id");
        if (json_is_string(method))
                return id ? MSG_REQUEST : MSG_NOTIFICATION;
        if (!method && id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
                return MSG_RESPONSE;
        return MSG_INVALID;
}

static bool msg_is(const json_t *msg, const char *method)
{
        return json_is_string(json_object_get(msg, "method")) &&
               strcmp(json_string_value(json_object_get(msg, "method")), method) == 0;
}

/* What a POST body holds. */
struct post_summary {
        size_t requests;
        bool initialize, tools_call;
};

static bool summarize(const json_t *msgs, struct post_summary *ret)
{
        size_t i;
        json_t *msg;
        *ret = (struct post_summary){ 0 };
        json_array_foreach (msgs, i, msg) {
                enum msg_kind k = msg_kind(msg);
                if (k == MSG_INVALID)
                        return false;
                if (k != MSG_REQUEST)
                        continue;
                ret->requests++;
                ret->initialize |= msg_is(msg, "initialize");
                ret->tools_call |= msg_is(msg, "tools/call");
        }
        return true;
}

/* The daemon's own address for the tools' calls back: the listening
 * host, or loopback when it listens on every address. */
static void self_url(const struct app *app, char *out, size_t len)
{
        char host[256];
        unsigned port;
        if (http_parse_listen(app->cfg->listen, host, sizeof(host), &port) < 0 || !host[0] ||
            !strcmp(host, "0.0.0.0"))
                snprintf(host, sizeof(host), "127.0.0.1");
        else if (!strcmp(host, "::"))
                snprintf(host, sizeof(host), "::1");
        snprintf(out, len, strchr(host, ':') ? "http://[%s]:%u" : "http://%s:%u", host,
                 http_server_port(app->srv));
}

/* A client acting as the caller: its own key, at this daemon. */
static int caller_client(struct http_request *req, struct client **ret)
{
        const struct app *app = req->app;
        struct client_config cfg = { 0 };
        self_url(app, cfg.url, sizeof(cfg.url));
        const char *token = app->cfg->api_key[0] ? api_bearer_token(http_header(req, "Authorization")) : NULL;
        snprintf(cfg.key, sizeof(cfg.key), "%s", token ? token : "");
        snprintf(cfg.source, sizeof(cfg.source), "mcp");
        int r = client_new(&cfg, ret);
        explicit_bzero(cfg.key, sizeof(cfg.key));
        return r;
}

static void send_event(void *cls, json_t *msg)
{
        struct call *c = cls;
        _cleanup_free_ char *text = http_json_dump(msg);
        if (!text)
                return;
        pthread_mutex_lock(&c->lock);
        http_sse_event(c->stream, NULL, NULL, text); /* -EPIPE: the client left; the call still ends */
        pthread_mutex_unlock(&c->lock);
}

static void write_json(struct call *c, json_t *j)
{
        _cleanup_free_ char *text = http_json_dump(j);
        if (text)
                http_stream_write(c->stream, text, strlen(text));
}

/* A failed initialize leaves no session behind. */
static void after_response(struct call *c, const json_t *msg, const json_t *response)
{
        if (c->fresh && msg_is(msg, "initialize") && (!response || json_object_get(response, "error")))
                mcp_table_drop(&c->m->table, c->entry);
}

static void call_run(struct http_stream *s, void *ctx)
{
        struct call *c = ctx;
        c->stream = s;
        struct mcp_out out = { .send = send_event, .cls = c };
        json_t *responses = json_array();
        size_t i;
        json_t *msg;
        json_array_foreach (c->msgs, i, msg) {
                json_t *r = mcp_session_handle(mcp_entry_session(c->entry), c->client, msg, c->sse ? &out : NULL);
                after_response(c, msg, r);
                if (!r) /* a notification, or a call cancelled: its answer is dropped */
                        continue;
                if (c->sse) {
                        send_event(c, r);
                        json_decref(r);
                } else if (responses) {
                        json_array_append_new(responses, r);
                } else {
                        json_decref(r);
                }
        }
        /* A lone cancelled call ends with an empty body: the client that
         * cancelled it expects no answer (and has normally hung up). */
        if (!c->sse && responses && (c->batch || json_array_size(responses)))
                write_json(c, c->batch ? responses : json_array_get(responses, 0));
        json_decref(responses);
}

static void call_free(void *ctx)
{
        struct call *c = ctx;
        client_free(c->client);
        mcp_table_put(&c->m->table, c->entry);
        json_decref(c->msgs);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

static const struct http_stream_ops call_ops = { .run = call_run, .free = call_free };

/* Notifications and responses only: handled here, answered 202. */
static void handle_notifications(struct http_request *req, struct http_response *res, struct mcp_entry *e,
                                 json_t *msgs)
{
        struct client *client = NULL;
        if (caller_client(req, &client) < 0) {
                mcp_http_error(res, 500, MCP_INTERNAL_ERROR, "Out of memory");
                return;
        }
        size_t i;
        json_t *msg;
        json_array_foreach (msgs, i, msg)
                json_decref(mcp_session_handle(mcp_entry_session(e), client, msg, NULL));
        client_free(client);
        http_bytes(res, 202, "application/json", "", 0);
}

/* Requests: answered by a producer (see the top of this file). Takes e's
 * reference and msgs. */
static void start_call(struct http_request *req, struct http_response *res, struct mcp_entry *e, json_t *msgs,
                       const struct post_summary *sum, bool batch, bool fresh)
{
        struct app *app = req->app;
        struct client *client = NULL;
        struct call *c = caller_client(req, &client) < 0 ? NULL : calloc(1, sizeof(*c));
        if (!c) {
                client_free(client);
                if (fresh)
                        mcp_table_drop(&app->mcp->table, e);
                mcp_table_put(&app->mcp->table, e);
                json_decref(msgs);
                mcp_http_error(res, 500, MCP_INTERNAL_ERROR, "Out of memory");
                return;
        }
        *c = (struct call){ .m = app->mcp, .entry = e, .msgs = msgs, .batch = batch, .fresh = fresh,
                            .client = client };
        c->sse = sum->tools_call && http_header_has_token(req, "Accept", "text/event-stream");
        pthread_mutex_init(&c->lock, NULL);
        if (fresh && http_response_header(res, "Mcp-Session-Id", mcp_entry_id(e)) < 0) {
                call_free(c);
                mcp_http_error(res, 500, MCP_INTERNAL_ERROR, "Out of memory");
                return;
        }
        http_stream(res, 200, c->sse ? NULL : "application/json", &call_ops, c); /* fails: a 500, c freed */
}

/* The session a non-initialize POST (or a DELETE) names, referenced; NULL
 * with res filled: 400 without the header, 404 for an unknown or ended one
 * (the client then initializes anew), 400 for a protocol revision that is
 * not the session's. */
static struct mcp_entry *session_of(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *sid = http_header(req, "Mcp-Session-Id");
        if (!sid || !sid[0]) {
                mcp_http_error(res, 400, MCP_HTTP_BAD_REQUEST, "Bad Request: Mcp-Session-Id header is required");
                return NULL;
        }
        struct mcp_entry *e = mcp_table_get(&app->mcp->table, sid);
        if (!e) {
                mcp_http_error(res, 404, MCP_HTTP_NO_SESSION, "Session not found: initialize a new one");
                return NULL;
        }
        const char *want = mcp_session_protocol(mcp_entry_session(e));
        const char *given = http_header(req, "MCP-Protocol-Version");
        if (given && want && strcmp(given, want) != 0) {
                char msg[160];
                snprintf(msg, sizeof(msg), "Bad Request: unsupported MCP-Protocol-Version '%.32s' (this session's: %s)",
                         given, want);
                mcp_table_put(&app->mcp->table, e);
                mcp_http_error(res, 400, MCP_HTTP_BAD_REQUEST, msg);
                return NULL;
        }
        return e;
}

/* The body as an array of messages; NULL with res filled. */
static json_t *parse_body(struct http_request *req, struct http_response *res, bool *ret_batch)
{
        json_error_t jerr;
        json_t *body = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, &jerr);
        if (!body) {
                char msg[256];
                snprintf(msg, sizeof(msg), "Parse error: %s", jerr.text);
                mcp_http_error(res, 400, MCP_PARSE_ERROR, msg);
                return NULL;
        }
        *ret_batch = json_is_array(body);
        if (*ret_batch && json_array_size(body) > 0)
                return body;
        if (json_is_object(body)) {
                json_t *one = json_array();
                if (one && json_array_append_new(one, body) == 0)
                        return one;
                json_decref(one);
                mcp_http_error(res, 500, MCP_INTERNAL_ERROR, "Out of memory");
                return NULL;
        }
        json_decref(body);
        mcp_http_error(res, 400, MCP_INVALID_REQUEST, "Invalid Request: expected a JSON-RPC message");
        return NULL;
}

static bool batch_allowed(struct mcp_entry *e)
{
        const char *rev = mcp_session_protocol(mcp_entry_session(e));
        return rev && strcmp(rev, MCP_NO_BATCH_REVISION) < 0;
}

static void handle_post(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        bool batch;
        json_t *msgs = parse_body(req, res, &batch);
        if (!msgs)
                return;
        struct post_summary sum;
        const char *refusal = !summarize(msgs, &sum) ? "Invalid Request: not a JSON-RPC request, notification or response"
                              : sum.initialize && batch ? "Invalid Request: initialize must not be part of a batch"
                                                        : NULL;
        if (refusal) {
                json_decref(msgs);
                mcp_http_error(res, 400, MCP_INVALID_REQUEST, refusal);
                return;
        }
        struct mcp_entry *e = NULL;
        if (sum.initialize) {
                int r = mcp_table_create(&app->mcp->table, &e);
                if (r < 0) {
                        json_decref(msgs);
                        mcp_http_error(res, r == -EBUSY ? 503 : 500, MCP_INTERNAL_ERROR,
                                       r == -EBUSY ? "Too many MCP sessions in use; retry later" : "Cannot start a session");
                        res->retry_after = r == -EBUSY ? 1 : 0;
                        return;
                }
                start_call(req, res, e, msgs, &sum, false, true);
                return;
        }
        e = session_of(req, res);
        if (e && batch && !batch_allowed(e)) {
                mcp_http_error(res, 400, MCP_INVALID_REQUEST,
                               "Invalid Request: JSON-RPC batches are not part of this protocol revision");
                mcp_table_put(&app->mcp->table, e);
                e = NULL;
        }
        if (!e) {
                json_decref(msgs);
                return;
        }
        if (sum.requests) {
                start_call(req, res, e, msgs, &sum, batch, false);
                return;
        }
        handle_notifications(req, res, e, msgs);
        mcp_table_put(&app->mcp->table, e);
        json_decref(msgs);
}

static void handle_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct mcp_entry *e = session_of(req, res);
        if (!e)
                return;
        mcp_table_remove(&app->mcp->table, mcp_entry_id(e));
        mcp_table_put(&app->mcp->table, e);
        http_bytes(res, 204, "application/json", "", 0);
}

/* Tool calls carry files (base64): the files API's cap, not the small
 * default of a JSON request. */
static size_t mcp_body_cap(const void *app)
{
        return ((const struct app *)app)->cfg->files_request_bytes;
}

const struct route *mcp_post_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/mcp", handle_post, ROUTE_JSON, mcp_body_cap },
                { "DELETE", "/mcp", handle_delete, 0, NULL },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
