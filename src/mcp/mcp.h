/* An MCP server (Model Context Protocol: JSON-RPC 2.0 messages) whose tools
 * and resources are a sandboxd server's API, reached through a client
 * (src/client/). Transport-free: `sandboxd mcp` feeds it newline-delimited
 * JSON from stdin (cli/mcp.c); the daemon's `/mcp` route feeds it Streamable
 * HTTP requests (api/mcp/). The tools act with the client's key, so an MCP
 * client can do exactly what an API client with that key can. */
#pragma once

#include <jansson.h>

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
 * threads for one session. */
json_t *mcp_session_handle(struct mcp_session *s, struct client *client, json_t *msg, const struct mcp_out *out);

/* The protocol revision negotiated by `initialize`, or NULL before it. */
const char *mcp_session_protocol(const struct mcp_session *s);

/* A JSON-RPC error response (id may be NULL: null). */
json_t *mcp_error_response(json_t *id, int code, const char *message);
#define MCP_PARSE_ERROR -32700
#define MCP_INVALID_REQUEST -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS -32602
#define MCP_INTERNAL_ERROR -32603
