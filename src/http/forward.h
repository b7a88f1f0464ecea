/* What forward.c and forward_relay.c share; nothing outside http/ includes it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "http/server.h"

/* The connection to the other node, past its reply's head: pending holds
 * the body bytes already read with the head. */
struct fwd_conn {
        int fd;
        char *pending;
        size_t pending_len, pending_off;
};

/* The body framing of the other node's reply. */
struct fwd_body {
        bool chunked;
        bool has_length;
        unsigned long long length;
};

/* Reads up to max bytes (pending ones first). >0, 0 at EOF, or -errno. */
ssize_t fwd_read(struct fwd_conn *c, void *dst, size_t max);
void fwd_conn_close(struct fwd_conn *c);

/* forward_relay.c: the reply kinds that take c over (closed/freed in every
 * case). 0, or -errno with res holding a 500. */
int fwd_relay_stream(struct http_response *res, int status, const char *content_type, struct fwd_conn *c,
                     const struct fwd_body *body);
int fwd_relay_upgrade(struct http_response *res, struct fwd_conn *c);
/* Reads the whole body into *ret (malloc'ed) — for the small replies with
 * a Content-Length. 0 or -errno. */
int fwd_read_body(struct fwd_conn *c, const struct fwd_body *body, char **ret, size_t *ret_len);
