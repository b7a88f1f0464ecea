/* The MCP facade: the daemon's own MCP server over Streamable HTTP at /mcp
 * (docs/mcp.md), behind the runtime and bridge APIs' auth. Its tools call
 * this daemon's APIs back over HTTP with the caller's key (src/mcp/). */
#pragma once

#include "http/server.h"

struct app;

/* Registers the /mcp group; its state (the MCP sessions) is app->mcp.
 * 0 or -ENOMEM. */
int api_mcp_register(struct http_server *srv, struct app *app);
/* Ends every MCP session. Call after http_server_stop (no request may be
 * running). NULL-safe. */
void api_mcp_free(struct app *app);
