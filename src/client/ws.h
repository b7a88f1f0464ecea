/* A WebSocket client (RFC 6455) of a sandboxd server: the bridge's
 * terminal (`/v1/sandbox/:id/pty`) for `sandboxd shell`.
 *
 * The HTTP/1.1 Upgrade handshake is done here on a plain TCP socket
 * (libcurl has no stable WebSocket API in Debian 12's build); frames are
 * wslay's. Only http:// servers: an https:// URL is refused with a clear
 * message (TLS would need a TLS socket under wslay's callbacks).
 *
 * Use: client_ws_connect(); then poll client_ws_fd() for POLLIN, and for
 * POLLOUT when client_ws_want_write(); call client_ws_pump() with what
 * poll said. Messages arrive through the callback, inside client_ws_pump. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/client.h"

struct client_ws;

/* One text or binary message from the server (fragments already joined). */
typedef void (*client_ws_message_fn)(void *cls, bool binary, const void *data, size_t len);

/* Connects to path (query allowed) on the client's server, with its key as
 * `Authorization: Bearer`, and extra headers ("Name: value", NULL-ended, or
 * NULL). On 0, *ret is open. When the server answers but does not switch
 * protocols, returns -EPROTO with its answer in out (status, body, JSON),
 * for client_reply_message(); no answer at all is err (ERR_UNAVAILABLE). */
int client_ws_connect(struct client *c, const char *path, const char *const *headers, client_ws_message_fn fn,
                      void *cls, struct client_ws **ret, struct client_reply *out, struct err *err);
void client_ws_free(struct client_ws *ws);

int client_ws_fd(const struct client_ws *ws);
bool client_ws_want_write(const struct client_ws *ws);
/* Queues one message (sent by the next pumps). 0 or -errno (-EPIPE once
 * closing). */
int client_ws_send(struct client_ws *ws, bool binary, const void *data, size_t len);
/* Queues a close frame with code (1000 = normal). */
int client_ws_close(struct client_ws *ws, uint16_t code);
/* Reads (revents has POLLIN/POLLHUP/POLLERR) and writes what is queued.
 * Returns 1 while the connection is open, 0 once it is over (closed by
 * either side, or cut), -errno on a local failure. */
int client_ws_pump(struct client_ws *ws, short revents);
/* The close code the server sent, or 0 (none: the connection was cut). */
uint16_t client_ws_close_code(const struct client_ws *ws);
