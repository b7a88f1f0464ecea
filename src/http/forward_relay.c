/* The forwarded reply's body, relayed as it comes (forward.c): a stream
 * producer that copies (and un-chunks: MHD chunks it again) what the other
 * node sends, write by write, so an SSE event crosses as soon as it is
 * sent; and the raw upgrade that splices a WebSocket's bytes both ways. */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/io.h"
#include "http/forward.h"
#include "http/internal.h"

#define RELAY_CHUNK (16 * 1024)

/* Copies n bytes (or, with n UINT64_MAX, everything up to EOF) from c to
 * write(cls, …). 0, -EPROTO when the body ends early, or the write's error. */
static int copy_body(struct fwd_conn *c, uint64_t n, int (*sink)(void *cls, const void *p, size_t len), void *cls)
{
        char buf[RELAY_CHUNK];
        while (n > 0) {
                ssize_t k = fwd_read(c, buf, n < sizeof(buf) ? (size_t)n : sizeof(buf));
                if (k == 0 && n == UINT64_MAX)
                        return 0;
                if (k <= 0)
                        return k < 0 ? (int)k : -EPROTO;
                int r = sink(cls, buf, (size_t)k);
                if (r < 0)
                        return r;
                if (n != UINT64_MAX)
                        n -= (uint64_t)k;
        }
        return 0;
}

/* One CRLF-terminated line (without it), byte by byte: chunk-size lines
 * are short, and reading past them would steal the chunk's bytes. */
static int read_line(struct fwd_conn *c, char *line, size_t max)
{
        size_t n = 0;
        for (;;) {
                char ch;
                ssize_t k = fwd_read(c, &ch, 1);
                if (k <= 0)
                        return k < 0 ? (int)k : -EPROTO;
                if (ch == '\n')
                        break;
                if (n + 1 >= max)
                        return -EPROTO;
                line[n++] = ch;
        }
        if (n && line[n - 1] == '\r')
                n--;
        line[n] = '\0';
        return 0;
}

/* RFC 9112 §7.1: size [;ext] CRLF data CRLF … 0 CRLF [trailers] CRLF. */
static int copy_chunked(struct fwd_conn *c, int (*sink)(void *cls, const void *p, size_t len), void *cls)
{
        char line[256];
        for (;;) {
                int r = read_line(c, line, sizeof(line));
                if (r < 0)
                        return r;
                char *end;
                unsigned long long size = strtoull(line, &end, 16);
                if (end == line)
                        return -EPROTO;
                if (size == 0)
                        break;
                if ((r = copy_body(c, size, sink, cls)) < 0 || (r = read_line(c, line, sizeof(line))) < 0)
                        return r;
        }
        do { /* trailers, dropped */
                int r = read_line(c, line, sizeof(line));
                if (r < 0)
                        return r;
        } while (line[0]);
        return 0;
}

static int copy_framed(struct fwd_conn *c, const struct fwd_body *b,
                       int (*sink)(void *cls, const void *p, size_t len), void *cls)
{
        if (b->chunked)
                return copy_chunked(c, sink, cls);
        return copy_body(c, b->has_length ? b->length : UINT64_MAX, sink, cls);
}

static int append_to_buf(void *cls, const void *p, size_t len)
{
        return buf_append(cls, p, len);
}

int fwd_read_body(struct fwd_conn *c, const struct fwd_body *body, char **ret, size_t *ret_len)
{
        struct buf b;
        buf_init(&b, SIZE_MAX);
        int r = copy_framed(c, body, append_to_buf, &b);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        *ret = b.data;
        *ret_len = b.len;
        return 0;
}

/* ---- streamed bodies ---- */

struct relay_stream {
        struct fwd_conn c;
        struct fwd_body body;
};

static int to_stream(void *cls, const void *p, size_t len)
{
        return http_stream_write(cls, p, len);
}

static void relay_run(struct http_stream *s, void *ctx)
{
        struct relay_stream *rs = ctx;
        /* An early end just ends the client's stream too: its framing
         * (MHD's chunks) cannot say more. */
        (void)copy_framed(&rs->c, &rs->body, to_stream, s);
}

/* The client left: the read in relay_run ends (the fd stays open until free). */
static void relay_disconnect(void *ctx)
{
        struct relay_stream *rs = ctx;
        shutdown(rs->c.fd, SHUT_RDWR);
}

static void relay_free(void *ctx)
{
        struct relay_stream *rs = ctx;
        fwd_conn_close(&rs->c);
        free(rs);
}

int fwd_relay_stream(struct http_response *res, int status, const char *content_type, struct fwd_conn *c,
                     const struct fwd_body *body)
{
        static const struct http_stream_ops ops = { relay_run, relay_disconnect, relay_free };
        struct relay_stream *rs = calloc(1, sizeof(*rs));
        if (!rs) {
                fwd_conn_close(c);
                return -ENOMEM;
        }
        rs->c = *c;
        rs->body = *body;
        *c = (struct fwd_conn){ .fd = -1 };
        return http_stream(res, status, content_type, &ops, rs);
}

/* ---- upgrades ---- */

/* Moves what one side sends to the other; false once either is done. */
static bool pump(int from, int to)
{
        char buf[RELAY_CHUNK];
        ssize_t n = recv(from, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
                return true;
        return n > 0 && send_all(to, buf, (size_t)n) == 0;
}

void http_splice(int a, int b)
{
        struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
        for (;;) {
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                /* Either side closing ends both: a WebSocket has no half-close. */
                if (p[0].revents && !pump(a, b))
                        return;
                if (p[1].revents && !pump(b, a))
                        return;
        }
}

static void splice_run(int fd, const void *extra, size_t extra_len, void *ctx)
{
        struct fwd_conn *c = ctx;
        const char *early = c->pending ? c->pending + c->pending_off : NULL;
        if ((extra_len && send_all(c->fd, extra, extra_len) < 0) ||
            (early && c->pending_len > c->pending_off && send_all(fd, early, c->pending_len - c->pending_off) < 0))
                return;
        http_splice(fd, c->fd);
}

static void splice_free(void *ctx)
{
        fwd_conn_close(ctx);
        free(ctx);
}

int fwd_relay_upgrade(struct http_response *res, struct fwd_conn *c)
{
        static const struct http_upgrade_ops ops = { splice_run, splice_free };
        struct fwd_conn *own = malloc(sizeof(*own));
        if (!own) {
                fwd_conn_close(c);
                return -ENOMEM;
        }
        *own = *c;
        *c = (struct fwd_conn){ .fd = -1 };
        return http_upgrade_raw(res, &ops, own);
}
