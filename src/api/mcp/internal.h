/* The MCP facade's parts: the session table (sessions.c), the transport
 * (post.c) and the group (routes.c). */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/server.h"
#include "mcp/mcp.h"

/* 128 random bits in hex: unguessable, and visible ASCII as the transport
 * requires of a session id. */
#define MCP_HTTP_ID_BYTES 16
#define MCP_HTTP_ID_LEN (2 * MCP_HTTP_ID_BYTES)

/* JSON-RPC codes of the transport's own errors (the server error range). */
#define MCP_HTTP_BAD_REQUEST -32000
#define MCP_HTTP_NO_SESSION -32001

struct mcp_entry;

struct mcp_table {
        pthread_mutex_t lock;
        struct mcp_entry *list;     /* most recently used first */
        size_t n;
        size_t max;
        uint64_t idle_ms;
};

void mcp_table_init(struct mcp_table *t, size_t max, uint64_t idle_ms);
/* Ends every session (running calls keep theirs until they return). */
void mcp_table_done(struct mcp_table *t);
/* A new session under a fresh id, in the table, referenced for the
 * caller. When the table is full the least recently used idle session
 * ends; -EBUSY when every one is in use. 0 or -errno. */
int mcp_table_create(struct mcp_table *t, struct mcp_entry **ret);
/* The live session of id, referenced, or NULL (unknown, ended, expired). */
struct mcp_entry *mcp_table_get(struct mcp_table *t, const char *id);
/* Drops the caller's reference; the session counts as used now. */
void mcp_table_put(struct mcp_table *t, struct mcp_entry *e);
/* Ends the session of id. false when there is none. */
bool mcp_table_remove(struct mcp_table *t, const char *id);
/* Ends e's session if it is still in the table (a failed initialize). */
void mcp_table_drop(struct mcp_table *t, struct mcp_entry *e);

struct mcp_session *mcp_entry_session(struct mcp_entry *e);
const char *mcp_entry_id(const struct mcp_entry *e);

/* The facade's state (app->mcp). */
struct api_mcp {
        struct mcp_table table;
};

/* A JSON-RPC error reply of the transport (id null) with an HTTP status. */
void mcp_http_error(struct http_response *res, int status, int code, const char *message);

const struct route *mcp_post_routes(size_t *ret_n);
