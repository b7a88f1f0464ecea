/* JSON-RPC 2.0 and the MCP lifecycle: one message in, its response out.
 * The methods are a table; the tools and resources live in their own
 * files. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/version.h"
#include "mcp/internal.h"
#include "mcp/mcp.h"

static const char *const protocols[] = { MCP_PROTOCOL_LATEST, "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07" };

/* What `initialize` tells the model about using the tools. */
static const char instructions[] =
        "sandboxd runs code and shell commands in isolated Linux sandboxes. "
        "For one-off code, call run_code with a language and code (no sandbox: a fresh interpreter, nothing is kept). "
        "To keep state, call create_sandbox once and pass its id to later calls: run_code keeps variables between "
        "calls in the sandbox's context (create_context for separate ones), run_command runs bash in the sandbox's "
        "/workspace, and read_file / write_file / list_files / delete_file work on files under /workspace, which "
        "run_code and run_command see too. Python figures (matplotlib) shown in a sandbox come back as PNG images. "
        "Files are also resources: sandbox://<sandbox id>/<path>. Delete sandboxes you no longer need "
        "(delete_sandbox). Limits (time, memory, output, file sizes, sandboxes at once) are the server's; a "
        "refused call says why.";

/* A tools/call in flight, so notifications/cancelled can stop it. */
struct inflight {
        json_t *id;
        atomic_bool cancelled;
        struct inflight *next;
};

/* protocol is an atomic, not under the lock: mcp_session_protocol() is read
 * by transports on every message, and it is set once.
 * (notifications/initialized changes nothing here: we send no requests that
 * would wait for it.) */
struct mcp_session {
        _Atomic(const char *) protocol;  /* an entry of protocols[], NULL until initialize */
        pthread_mutex_t lock;
        struct inflight *calls;
};

bool mcp_protocol_supported(const char *version)
{
        for (size_t i = 0; version && i < ARRAY_SIZE(protocols); i++)
                if (!strcmp(protocols[i], version))
                        return true;
        return false;
}

const char *mcp_protocol_negotiate(const char *requested)
{
        for (size_t i = 0; requested && i < ARRAY_SIZE(protocols); i++)
                if (!strcmp(protocols[i], requested))
                        return protocols[i];
        return MCP_PROTOCOL_LATEST;
}

int mcp_session_new(struct mcp_session **ret)
{
        struct mcp_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        atomic_init(&s->protocol, NULL);
        pthread_mutex_init(&s->lock, NULL);
        *ret = s;
        return 0;
}

void mcp_session_free(struct mcp_session *s)
{
        if (!s)
                return;
        pthread_mutex_destroy(&s->lock);
        free(s);
}

const char *mcp_session_protocol(const struct mcp_session *s)
{
        return atomic_load(&((struct mcp_session *)s)->protocol);
}

json_t *mcp_error_response(json_t *id, int code, const char *message)
{
        return json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", code, "message",
                         message);
}

/* ---- the methods ---- */

struct rpc {
        struct mcp_session *s;
        json_t *id;
        bool cancelled;         /* the call was cancelled: no response */
        struct client *client;
        const struct mcp_out *out;
        json_t *params;         /* an object or NULL */
        int code;               /* the error when a method returns NULL */
        char msg[300];
};

static json_t *m_initialize(struct rpc *rq)
{
        const char *asked = json_string_value(json_object_get(rq->params, "protocolVersion"));
        if (!asked) {
                rq->code = MCP_INVALID_PARAMS;
                snprintf(rq->msg, sizeof(rq->msg), "initialize needs params.protocolVersion (a string)");
                return NULL;
        }
        const char *version = mcp_protocol_negotiate(asked);
        const char *none = NULL;
        if (!atomic_compare_exchange_strong(&rq->s->protocol, &none, version)) {
                rq->code = MCP_INVALID_REQUEST;
                snprintf(rq->msg, sizeof(rq->msg), "this session is initialized already");
                return NULL;
        }
        return json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                         "capabilities", "tools", "listChanged", 0, "resources", "subscribe", 0, "listChanged", 0,
                         "serverInfo", "name", "sandboxd", "title", "sandboxd", "version", SANDBOXD_VERSION,
                         "instructions", instructions);
}

static json_t *m_ping(struct rpc *rq)
{
        (void)rq;
        return json_object();
}

#define RPC_CALL(fn, ...) fn(__VA_ARGS__ rq->params, &rq->code, rq->msg, sizeof(rq->msg))

static json_t *m_tools_list(struct rpc *rq)
{
        return RPC_CALL(mcp_tools_list, );
}

static json_t *m_tools_call(struct rpc *rq)
{
        struct inflight me = { .id = rq->id };
        atomic_init(&me.cancelled, false);
        pthread_mutex_lock(&rq->s->lock);
        me.next = rq->s->calls;
        rq->s->calls = &me;
        pthread_mutex_unlock(&rq->s->lock);
        json_t *result = RPC_CALL(mcp_tools_call, rq->client, rq->out, &me.cancelled, );
        pthread_mutex_lock(&rq->s->lock);
        for (struct inflight **p = &rq->s->calls; *p; p = &(*p)->next)
                if (*p == &me) {
                        *p = me.next;
                        break;
                }
        pthread_mutex_unlock(&rq->s->lock);
        /* The client gave up on it: it wants no answer. */
        rq->cancelled = atomic_load(&me.cancelled);
        return result;
}

static void cancel_call(struct mcp_session *s, json_t *params)
{
        json_t *id = json_object_get(params, "requestId");
        if (!id)
                return;
        pthread_mutex_lock(&s->lock);
        for (struct inflight *c = s->calls; c; c = c->next)
                if (json_equal(c->id, id))
                        atomic_store(&c->cancelled, true);
        pthread_mutex_unlock(&s->lock);
}

static json_t *m_resources_list(struct rpc *rq)
{
        return RPC_CALL(mcp_resources_list, rq->client, );
}

static json_t *m_resource_templates_list(struct rpc *rq)
{
        return RPC_CALL(mcp_resource_templates_list, );
}

static json_t *m_resources_read(struct rpc *rq)
{
        return RPC_CALL(mcp_resources_read, rq->client, );
}

static const struct method {
        const char *name;
        bool before_init;       /* served before initialize */
        json_t *(*fn)(struct rpc *rq);
} methods[] = {
        { "initialize", true, m_initialize },
        { "ping", true, m_ping },
        { "tools/list", false, m_tools_list },
        { "tools/call", false, m_tools_call },
        { "resources/list", false, m_resources_list },
        { "resources/templates/list", false, m_resource_templates_list },
        { "resources/read", false, m_resources_read },
};

static json_t *dispatch(struct rpc *rq, json_t *id, const char *method)
{
        const struct method *m = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                if (!strcmp(methods[i].name, method))
                        m = &methods[i];
        if (!m) {
                char msg[200];
                snprintf(msg, sizeof(msg), "Method not found: %.150s", method);
                return mcp_error_response(id, MCP_METHOD_NOT_FOUND, msg);
        }
        if (!m->before_init && !mcp_session_protocol(rq->s))
                return mcp_error_response(id, MCP_INVALID_REQUEST, "not initialized: send initialize first");
        json_t *result = m->fn(rq);
        if (rq->cancelled) {
                json_decref(result);
                return NULL;
        }
        if (!result)
                return mcp_error_response(id, rq->code ? rq->code : MCP_INTERNAL_ERROR,
                                          rq->msg[0] ? rq->msg : "out of memory");
        json_t *res = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
        return res ? res : mcp_error_response(id, MCP_INTERNAL_ERROR, "out of memory");
}

json_t *mcp_session_handle(struct mcp_session *s, struct client *client, json_t *msg, const struct mcp_out *out)
{
        if (!json_is_object(msg))
                return mcp_error_response(NULL, MCP_INVALID_REQUEST, "a JSON-RPC message is an object");
        json_t *id = json_object_get(msg, "id");
        json_t *method = json_object_get(msg, "method");
        /* An id we cannot echo is answered with null, as JSON-RPC says for
         * an id that could not be read. */
        bool id_ok = json_is_string(id) || json_is_integer(id) || json_is_real(id);
        if (!json_is_string(method)) {
                /* A response to a request of ours (we send none) or junk. */
                if (!method && id_ok && (json_object_get(msg, "result") || json_object_get(msg, "error")))
                        return NULL;
                return mcp_error_response(id_ok ? id : NULL, MCP_INVALID_REQUEST, "method must be a string");
        }
        const char *jsonrpc = json_string_value(json_object_get(msg, "jsonrpc"));
        if (!jsonrpc || strcmp(jsonrpc, "2.0"))
                return id ? mcp_error_response(id_ok ? id : NULL, MCP_INVALID_REQUEST, "jsonrpc must be \"2.0\"") : NULL;
        /* Notifications get no answer; of those we know, only a cancel
         * does anything here. */
        if (!id) {
                if (!strcmp(json_string_value(method), "notifications/cancelled"))
                        cancel_call(s, json_object_get(msg, "params"));
                return NULL;
        }
        if (!id_ok)
                return mcp_error_response(NULL, MCP_INVALID_REQUEST, "id must be a string or a number");
        json_t *params = json_object_get(msg, "params");
        if (params && !json_is_object(params))
                return mcp_error_response(id, MCP_INVALID_PARAMS, "params must be an object");
        struct rpc rq = { .s = s, .id = id, .client = client, .out = out, .params = params };
        return dispatch(&rq, id, json_string_value(method));
}

json_t *mcp_session_handle_any(struct mcp_session *s, struct client *client, json_t *msg, const struct mcp_out *out)
{
        if (!json_is_array(msg))
                return mcp_session_handle(s, client, msg, out);
        if (json_array_size(msg) == 0)
                return mcp_error_response(NULL, MCP_INVALID_REQUEST, "an empty batch");
        json_t *responses = json_array(), *m;
        size_t i;
        json_array_foreach(msg, i, m) {
                json_t *r = mcp_session_handle(s, client, m, out);
                if (r)
                        json_array_append_new(responses, r);
        }
        if (json_array_size(responses) == 0) {
                json_decref(responses);
                return NULL;
        }
        return responses;
}
