/* The preview proxy: one request forwarded to a server inside a sandbox
 * over a socket connected in its namespace (sbx_tunnel_connect), its answer
 * relayed back.
 *
 * Plain requests go upstream as HTTP/1.0 (as nginx's default): the answer
 * is then delimited by Content-Length or by the server closing, never
 * chunked, and the connection is used once. A small answer with a length
 * is relayed with that length; anything else streams (chunked to the
 * client). An Upgrade request goes as HTTP/1.1 with its Upgrade headers;
 * once the server answers 101, the client gets the same 101 and bytes are
 * spliced both ways until either side closes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "api/bridge/bridge.h"
#include "base/buf.h"
#include "base/util.h"

/* The server's answer must start within this; its body may take longer. */
#define PROXY_HEAD_TIMEOUT_S 60
#define PROXY_MAX_HEAD (64u << 10)
/* Answers up to this size with a Content-Length are relayed in one piece. */
#define PROXY_INLINE_MAX (1u << 20)

/* Headers that describe one hop, not the message (RFC 9110 §7.6.1), and
 * those the proxy sets itself. */
static bool hop_header(const char *name)
{
        static const char *const hop[] = {
                "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Expect",
                "Upgrade", "Proxy-Authorization", "Proxy-Authenticate", "Content-Length",
                "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
        };
        for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
                if (strcasecmp(name, hop[i]) == 0)
                        return true;
        return false;
}

/* Path characters sent as they are; the rest (decoded by the HTTP layer)
 * is percent-encoded again. */
static int append_path(struct buf *b, const char *path)
{
        static const char hex[] = "0123456789ABCDEF";
        int r = buf_append(b, "/", 1);
        for (const unsigned char *p = (const unsigned char *)path; r == 0 && *p; p++) {
                if (*p > 0x20 && *p < 0x7f && !strchr("%\"<>\\^`{|}#?", *p)) {
                        r = buf_append(b, p, 1);
                } else {
                        char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
                        r = buf_append(b, e, 3);
                }
        }
        return r;
}

struct head_ctx {
        struct buf *b;
        int r;
};

static bool copy_header(void *cls, const char *name, const char *value)
{
        struct head_ctx *h = cls;
        if (hop_header(name) || strcasecmp(name, "Host") == 0)
                return true;
        /* The layer joins nothing and a value cannot hold CR or LF here
         * (MHD's parser), so the line is copied as it came. */
        h->r = buf_printf(h->b, "%s: %s\r\n", name, value);
        return h->r == 0;
}

static int build_head(struct http_request *req, unsigned port, const char *path, bool upgrade, struct buf *b)
{
        _cleanup_free_ char *query = http_query_string(req);
        if (!query)
                return -ENOMEM;
        int r = buf_printf(b, "%s ", req->method);
        if (r == 0)
                r = append_path(b, path);
        if (r == 0 && *query)
                r = buf_printf(b, "?%s", query);
        if (r == 0)
                r = buf_printf(b, " HTTP/1.%d\r\n", upgrade ? 1 : 0);
        const char *host = http_header(req, "Host");
        char client[64];
        http_client_addr(req, client, sizeof(client));
        if (r == 0 && host)
                r = buf_printf(b, "Host: %s\r\nX-Forwarded-Host: %s\r\n", host, host);
        else if (r == 0)
                r = buf_printf(b, "Host: 127.0.0.1:%u\r\n", port);
        if (r == 0)
                r = buf_printf(b, "X-Forwarded-For: %s\r\nX-Forwarded-Proto: http\r\n", client[0] ? client : "unknown");
        struct head_ctx h = { b, 0 };
        if (r == 0)
                http_headers_each(req, copy_header, &h);
        if (r == 0)
                r = h.r;
        if (r == 0 && upgrade)
                r = buf_printf(b, "Connection: Upgrade\r\nUpgrade: %s\r\n", http_header(req, "Upgrade"));
        else if (r == 0)
                r = buf_printf(b, "Connection: close\r\n");
        bool has_body = req->body_len > 0 || !strcmp(req->method, "POST") || !strcmp(req->method, "PUT") ||
                        !strcmp(req->method, "PATCH");
        if (r == 0 && has_body)
                r = buf_printf(b, "Content-Length: %zu\r\n", req->body_len);
        return r == 0 ? buf_append(b, "\r\n", 2) : r;
}

/* The server's answer head, parsed in place. */
struct upstream {
        int fd;
        char head[PROXY_MAX_HEAD + 1];
        size_t head_len;           /* through the blank line */
        size_t got;                /* bytes read into head (body bytes after head_len) */
        int status;
        int64_t length;            /* Content-Length, -1: none */
        char *lines;               /* the header lines, after the status line */
};

/* Reads until the blank line that ends the head. 0 or -errno (-EPROTO:
 * too long or the server closed first). */
static int read_head(struct upstream *u)
{
        for (;;) {
                char *end = memmem(u->head, u->got, "\r\n\r\n", 4);
                if (end) {
                        u->head_len = (size_t)(end - u->head) + 4;
                        return 0;
                }
                if (u->got >= PROXY_MAX_HEAD)
                        return -EPROTO;
                ssize_t n = recv(u->fd, u->head + u->got, PROXY_MAX_HEAD - u->got, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EPROTO;
                u->got += (size_t)n;
        }
}

static int parse_head(struct upstream *u)
{
        char saved = u->head[u->head_len];
        u->head[u->head_len] = '\0';
        int minor, status;
        if (sscanf(u->head, "HTTP/1.%d %3d", &minor, &status) != 2 || status < 100 || status > 999) {
                u->head[u->head_len] = saved;
                return -EPROTO;
        }
        u->head[u->head_len] = saved;
        u->status = status;
        u->lines = strstr(u->head, "\r\n") + 2;
        u->length = -1;
        return 0;
}

/* Calls fn for each header line of u's head ("Name: value"). */
static void upstream_headers(struct upstream *u, void (*fn)(void *cls, const char *name, const char *value),
                             void *cls)
{
        char *p = u->lines, *end = u->head + u->head_len - 2;
        while (p < end) {
                char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
                if (!eol)
                        break;
                *eol = '\0';
                char *colon = strchr(p, ':');
                if (colon) {
                        *colon = '\0';
                        char *v = colon + 1 + strspn(colon + 1, " \t");
                        size_t vl = strlen(v);
                        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                                v[--vl] = '\0';
                        fn(cls, p, v);
                        *colon = ':';
                }
                *eol = '\r';
                p = eol + 2;
        }
}

struct reply_ctx {
        struct upstream *u;
        struct http_response *res;
        bool upgrade;              /* a 101: keep Upgrade and Sec-* headers */
        char ctype[128];
};

static void relay_header(void *cls, const char *name, const char *value)
{
        struct reply_ctx *c = cls;
        if (strcasecmp(name, "Content-Length") == 0) {
                c->u->length = strtoll(value, NULL, 10);
                return;
        }
        if (strcasecmp(name, "Content-Type") == 0) {
                snprintf(c->ctype, sizeof(c->ctype), "%s", value);
                return;
        }
        if (c->upgrade && strcasecmp(name, "Upgrade") == 0) {
                http_response_header(c->res, name, value);
                return;
        }
        if (hop_header(name) || strcasecmp(name, "Date") == 0 || strcasecmp(name, "Server") == 0)
                return;
        http_response_header(c->res, name, value);
}

/* ---- the body, streamed; upgrades ---- */

/* The server's connection once the answer's head is read, for a stream or
 * an upgrade's thread. */
struct relay_conn {
        int fd;
        int64_t left;              /* body bytes still to come; -1: until the server closes */
        char *pending;             /* bytes read with the head */
        size_t npending;
};

/* Takes u's connection and the bytes read past its head. NULL on ENOMEM. */
static struct relay_conn *relay_conn_take(struct upstream *u)
{
        struct relay_conn *c = calloc(1, sizeof(*c));
        size_t extra = u->got - u->head_len;
        if (c && extra && !(c->pending = malloc(extra))) {
                free(c);
                return NULL;
        }
        if (!c)
                return NULL;
        if (extra)
                memcpy(c->pending, u->head + u->head_len, extra);
        c->npending = extra;
        c->left = u->length >= 0 ? u->length - (int64_t)extra : -1;
        c->fd = TAKE_FD(u->fd);
        return c;
}

static void relay_conn_free(void *ctx)
{
        struct relay_conn *c = ctx;
        close(c->fd);
        free(c->pending);
        free(c);
}

static void pump_run(struct http_stream *s, void *ctx)
{
        struct relay_conn *p = ctx;
        if (p->npending && http_stream_write(s, p->pending, p->npending) < 0)
                return;
        char chunk[16384];
        while (p->left != 0) {
                size_t want = p->left > 0 && (uint64_t)p->left < sizeof(chunk) ? (size_t)p->left : sizeof(chunk);
                ssize_t n = recv(p->fd, chunk, want, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0 || http_stream_write(s, chunk, (size_t)n) < 0)
                        return;
                if (p->left > 0)
                        p->left -= n;
        }
}

/* The client left: the blocked recv must end. */
static void pump_disconnect(void *ctx)
{
        struct relay_conn *p = ctx;
        shutdown(p->fd, SHUT_RDWR);
}

static const struct http_stream_ops pump_ops = { pump_run, pump_disconnect, relay_conn_free };

static void splice_run(int client, const void *extra, size_t extra_len, void *ctx)
{
        struct relay_conn *sp = ctx;
        if (send_all(client, sp->pending, sp->npending) < 0 || send_all(sp->fd, extra, extra_len) < 0)
                return;
        http_splice(client, sp->fd);
        /* Either side is gone: tell the other one. */
        shutdown(sp->fd, SHUT_RDWR);
}

static const struct http_upgrade_ops splice_ops = { splice_run, relay_conn_free };

/* A stream (chunked to the client) or, after a 101, the splice. */
static void relay_conn(struct upstream *u, struct http_response *res, const char *ctype, bool upgrade)
{
        struct relay_conn *c = relay_conn_take(u);
        if (!c)
                bridge_error(res, 502, "tunnel_error", "Out of memory");
        else if (upgrade)
                http_upgrade_raw(res, &splice_ops, c);
        else /* the handler's headers survive the kind change */
                http_stream(res, u->status, ctype, &pump_ops, c);
}

/* A body with a small Content-Length: relayed with its length. */
static void relay_inline(struct upstream *u, struct http_response *res, const char *ctype, bool head_only)
{
        size_t want = head_only ? 0 : (size_t)u->length, have = u->got - u->head_len;
        char *body = malloc(want + 1);
        if (!body) {
                bridge_error(res, 502, "tunnel_error", "Out of memory");
                return;
        }
        memcpy(body, u->head + u->head_len, have < want ? have : want);
        while (have < want) {
                ssize_t n = recv(u->fd, body + have, want - have, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                have += (size_t)n;
        }
        if (have < want)
                bridge_error(res, 502, "tunnel_error", "The server in the sandbox closed before its whole answer");
        else
                http_bytes(res, u->status, ctype, body, want);
        free(body);
}

static void relay(struct http_request *req, struct http_response *res, struct upstream *u, bool upgrade)
{
        struct reply_ctx c = { .u = u, .res = res, .upgrade = upgrade && u->status == 101 };
        upstream_headers(u, relay_header, &c);
        const char *ctype = c.ctype[0] ? c.ctype : "application/octet-stream";
        bool no_body = !strcmp(req->method, "HEAD") || u->status < 200 || u->status == 204 || u->status == 304;
        if (c.upgrade)
                relay_conn(u, res, ctype, true);
        else if (u->status < 200)
                bridge_error(res, 502, "tunnel_error", "The server in the sandbox answered an unexpected 1xx");
        else if (no_body || (u->length >= 0 && u->length <= PROXY_INLINE_MAX))
                relay_inline(u, res, ctype, no_body);
        else
                relay_conn(u, res, ctype, false);
}

void bridge_proxy(struct http_request *req, struct http_response *res, int fd, unsigned port, const char *path)
{
        const char *up = http_header(req, "Upgrade");
        bool upgrade = up && *up && http_header_has_token(req, "Connection", "upgrade");
        struct upstream *u = calloc(1, sizeof(*u));
        struct buf head;
        buf_init(&head, PROXY_MAX_HEAD * 2);
        int r = u ? build_head(req, port, path, upgrade, &head) : -ENOMEM;
        struct timeval tv = { PROXY_HEAD_TIMEOUT_S, 0 };
        if (r == 0 && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
                r = -errno;
        if (r == 0)
                r = send_all(fd, head.data, head.len);
        if (r == 0 && req->body_len)
                r = send_all(fd, req->body, req->body_len);
        buf_free(&head);
        if (r == 0) {
                u->fd = fd;
                fd = -1;
                r = read_head(u);
        }
        if (r == 0)
                r = parse_head(u);
        /* The body may be slow: no timeout once the answer has begun. */
        struct timeval none = { 0, 0 };
        if (r == 0)
                setsockopt(u->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
        if (r == 0)
                relay(req, res, u, upgrade);
        else
                bridge_errorf(res, 502, "tunnel_error", "The server in the sandbox on port %u gave no HTTP answer (%s)",
                              port, r == -EPROTO ? "malformed or empty" : strerror(-r));
        if (fd >= 0)
                close(fd);
        if (u && u->fd > 0)
                close(u->fd);
        free(u);
}
