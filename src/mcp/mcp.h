/* An MCP server (Model Context Protocol: JSON-RPC 2.0 messages) whose tools
 * and resources are a sandboxd server's API, reached through a client
 * (src/client/). Transport-free: `sandboxd mcp` feeds it newline-delimited
 * JSON from stdin (cli/mcp.c); the daemon's `/mcp` route feeds it Streamable
 * HTTP requests (api/mcp/). The tools act with the client's key, so an MCP
 * client can do exactly what an API client with that key can. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "client/client.h"

struct mcp_session;

/* Messages the server sends while it handles a request (progress
 * notifications of a long tool call, log messages). msg is borrowed. May be
 * NULL: then nothing is sent before the response. */
struct mcp_out {
        void (*send)(void *cls, json_t *msg);
        void *cls;
};

int mcp_session_new(struct mcp_session **ret);
void mcp_session_free(struct mcp_session *s);

/* Handles one JSON-RPC message (an object; a transport splits batches).
 * Returns the response to send (owned), or NULL when none is due (a
 * notification, a response). Any bad input becomes a JSON-RPC error
 * response, never a failure of the session. client: whom the tools act as
 * (the stdio server's, or the HTTP caller's). Safe to call from several
 * threads for one session.
 *
 * Lifecycle: before `initialize`, only `initialize` and `ping` are served
 * (any other request: MCP_INVALID_REQUEST "not initialized"); a second
 * `initialize` is refused the same way. A `notifications/cancelled` handled
 * (on any thread) while its tools/call runs stops that call, whose
 * mcp_session_handle() then returns NULL: send nothing for it. */
json_t *mcp_session_handle(struct mcp_session *s, struct client *client, json_t *msg, const struct mcp_out *out);

/* mcp_session_handle() for one message or a batch (a JSON array, revisions
 * before 2025-06-18): a batch's answer is the array of its responses, or
 * NULL when it held only notifications; an empty batch or any other JSON
 * value is an MCP_INVALID_REQUEST response. */
json_t *mcp_session_handle_any(struct mcp_session *s, struct client *client, json_t *msg, const struct mcp_out *out);

/* The protocol revision negotiated by `initialize`, or NULL before it. */
const char *mcp_session_protocol(const struct mcp_session *s);

/* Protocol revisions: the newest that @modelcontextprotocol/sdk 1.32.2
 * speaks, and the older ones it lists (SUPPORTED_PROTOCOL_VERSIONS). */
#define MCP_PROTOCOL_LATEST "2025-11-25"
/* True when version is a revision this server speaks (e.g. to check a
 * Streamable HTTP request's MCP-Protocol-Version header). */
bool mcp_protocol_supported(const char *version);
/* What `initialize` answers a client asking for requested (may be NULL):
 * requested when supported, else MCP_PROTOCOL_LATEST. Static string. */
const char *mcp_protocol_negotiate(const char *requested);

/* A JSON-RPC error response (id may be NULL: null). */
json_t *mcp_error_response(json_t *id, int code, const char *message);
#define MCP_PARSE_ERROR -32700
#define MCP_INVALID_REQUEST -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS -32602
#define MCP_INTERNAL_ERROR -32603
#define MCP_RESOURCE_NOT_FOUND -32002    /* resources/read of a missing file or sandbox */
