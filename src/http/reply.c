/* Reply kinds and response headers: what a handler fills, and how it becomes
 * an MHD response (JSON, bytes, file; streams and WebSockets in their own
 * files). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/metrics.h"
#include "http/internal.h"

struct http_header_node {
        struct http_header_node *next;
        char *name, *value;
};

void reply_init(struct http_response *res)
{
        memset(res, 0, sizeof(*res));
        res->fd = -1;
}

/* Drops the payload of the previous kind (not the headers). */
static void payload_reset(struct http_response *res)
{
        json_decref(res->json);
        res->json = NULL;
        free(res->bytes);
        res->bytes = NULL;
        res->len = 0;
        if (res->kind == HTTP_REPLY_FILE && res->fd >= 0)
                close(res->fd);
        res->fd = -1;
        if (res->stream)
                stream_abandon(res->stream);
        res->stream = NULL;
        if (res->ws)
                ws_abandon(res->ws);
        res->ws = NULL;
        if (res->upgrade)
                upgrade_abandon(res->upgrade);
        res->upgrade = NULL;
        res->content_type[0] = '\0';
        res->kind = HTTP_REPLY_JSON;
}

void reply_reset(struct http_response *res)
{
        payload_reset(res);
        while (res->headers) {
                struct http_header_node *h = res->headers;
                res->headers = h->next;
                free(h->name);
                free(h->value);
                free(h);
        }
}

void http_json(struct http_response *res, int status, json_t *body)
{
        /* Fuzzers and tests build a zeroed response: fd 0 is not ours then,
         * and the kind is JSON, so payload_reset never closes it. */
        payload_reset(res);
        res->status = status;
        res->json = body;
}

void *reply_alloc_kind(struct http_response *res, enum http_reply_kind kind, int status, size_t size,
                       void (*free_ctx)(void *), void *ctx)
{
        payload_reset(res);
        void *p = calloc(1, size);
        if (!p) {
                if (free_ctx)
                        free_ctx(ctx);
                res->status = 500;
                return NULL;
        }
        res->kind = kind;
        res->status = status;
        return p;
}

static void set_type(struct http_response *res, const char *content_type)
{
        snprintf(res->content_type, sizeof(res->content_type), "%s",
                 content_type ? content_type : "application/octet-stream");
}

int http_bytes(struct http_response *res, int status, const char *content_type, const void *data, size_t len)
{
        payload_reset(res);
        char *copy = malloc(len ? len : 1);
        if (!copy) {
                res->status = 500;
                return -ENOMEM;
        }
        if (len)
                memcpy(copy, data, len); /* data may be NULL when len is 0 */
        res->kind = HTTP_REPLY_BYTES;
        res->status = status;
        res->bytes = copy;
        res->len = len;
        set_type(res, content_type);
        return 0;
}

void http_file(struct http_response *res, int status, const char *content_type, int fd, uint64_t size)
{
        http_file_range(res, status, content_type, fd, 0, size);
}

void http_file_range(struct http_response *res, int status, const char *content_type, int fd, uint64_t offset,
                     uint64_t size)
{
        payload_reset(res);
        res->kind = HTTP_REPLY_FILE;
        res->status = status;
        res->fd = fd;
        res->size = size;
        res->offset = offset;
        set_type(res, content_type);
}

/* Header names are tokens and values may not break the header line: a
 * handler quoting client input must not be able to inject a header. */
static bool header_ok(const char *name, const char *value)
{
        if (!*name || name[strcspn(name, " \t\r\n:")] != '\0')
                return false;
        return value[strcspn(value, "\r\n")] == '\0';
}

int http_response_header(struct http_response *res, const char *name, const char *value)
{
        if (!header_ok(name, value))
                return -EINVAL;
        struct http_header_node *h = calloc(1, sizeof(*h));
        if (!h || !(h->name = strdup(name)) || !(h->value = strdup(value))) {
                if (h)
                        free(h->name);
                free(h);
                return -ENOMEM;
        }
        struct http_header_node **p = &res->headers;
        while (*p)
                p = &(*p)->next;
        *p = h;
        return 0;
}

/* A request the daemon runs itself (a queued one, run later) has no
 * connection: no headers, no query, no address. */
const char *http_header(struct http_request *req, const char *name)
{
        return req->conn ? MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name) : NULL;
}

const char *http_query(struct http_request *req, const char *name)
{
        return req->conn ? MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name) : NULL;
}

void http_response_init(struct http_response *res)
{
        reply_init(res);
}

void http_response_done(struct http_response *res)
{
        reply_reset(res);
}

void http_client_addr(struct http_request *req, char *buf, size_t len)
{
        const union MHD_ConnectionInfo *ci =
                req->conn ? MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
        buf[0] = '\0';
        if (req->client_addr[0]) {
                snprintf(buf, len, "%s", req->client_addr);
                return;
        }
        if (!ci || !ci->client_addr)
                return;
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
        else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len);
}

void reply_add_headers(const struct http_response *res, struct MHD_Response *r)
{
        if (res->content_type[0])
                MHD_add_response_header(r, "Content-Type", res->content_type);
        /* A proxied reply keeps the upstream's caching rules. */
        bool cache_set = false;
        for (const struct http_header_node *h = res->headers; h; h = h->next)
                cache_set |= strcasecmp(h->name, "Cache-Control") == 0;
        if (!cache_set)
                MHD_add_response_header(r, "Cache-Control", "no-store");
        if (res->allow[0])
                MHD_add_response_header(r, "Allow", res->allow);
        if (res->retry_after) {
                char ra[16];
                snprintf(ra, sizeof(ra), "%u", res->retry_after);
                MHD_add_response_header(r, "Retry-After", ra);
        }
        for (const struct http_header_node *h = res->headers; h; h = h->next)
                MHD_add_response_header(r, h->name, h->value);
}

static struct MHD_Response *json_response(struct conn_state *st)
{
        struct http_response *res = &st->res;
        if (!res->json)
                http_fail(st, 500, "Handler produced no response");
        char *text = res->json ? http_json_dump(res->json) : NULL;
        if (!text)
                text = strdup("{}");
        if (!text)
                return NULL;
        snprintf(res->content_type, sizeof(res->content_type), "application/json; charset=utf-8");
        res->body_len = strlen(text);
        struct MHD_Response *r = MHD_create_response_from_buffer(res->body_len, text, MHD_RESPMEM_MUST_FREE);
        if (!r)
                free(text);
        return r;
}

static struct MHD_Response *build_response(struct conn_state *st)
{
        struct http_response *res = &st->res;
        struct MHD_Response *r = NULL;
        switch (res->kind) {
        case HTTP_REPLY_BYTES:
                res->body_len = res->len;
                r = MHD_create_response_from_buffer(res->len, res->bytes, MHD_RESPMEM_MUST_FREE);
                if (r)
                        res->bytes = NULL;
                return r;
        case HTTP_REPLY_FILE:
                r = MHD_create_response_from_fd_at_offset64(res->size, res->fd, res->offset);
                if (r)
                        res->fd = -1; /* MHD closes it */
                return r;
        case HTTP_REPLY_STREAM:
                return stream_response(st);
        case HTTP_REPLY_WEBSOCKET:
                return ws_response(st);
        case HTTP_REPLY_UPGRADE:
                return upgrade_response(st);
        case HTTP_REPLY_JSON:
        default:
                return json_response(st);
        }
}

enum MHD_Result reply_send(struct conn_state *st)
{
        struct http_response *res = &st->res;
        struct MHD_Response *r = build_response(st);
        if (!r) {
                /* The kind could not start: a stream or WebSocket already
                 * left its error (no slot, bad handshake) in res; anything
                 * else is a 500 in the group's envelope. */
                if (res->kind != HTTP_REPLY_JSON || !res->json)
                        http_fail(st, 500, "Reply could not be started");
                r = json_response(st);
        }
        if (!r)
                return MHD_NO;
        struct http_group *g = st->group;
        if (g && g->ops && g->ops->finish)
                g->ops->finish(g->cls, &st->req, res);
        reply_add_headers(res, r);
        enum MHD_Result ret = MHD_queue_response(st->req.conn, (unsigned)res->status, r);
        MHD_destroy_response(r);
        if (res->kind == HTTP_REPLY_STREAM)
                stream_start(st);
        metrics_http_status(res->status);
        log_info("req=%llu method=%s path=\"%s\" status=%d ms=%.1f", (unsigned long long)st->req.id,
                 st->req.method, st->path, res->status, (double)(now_ns() - st->start_ns) / 1e6);
        return ret;
}

struct each_ctx {
        bool (*fn)(void *cls, const char *name, const char *value);
        void *cls;
};

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        (void)kind;
        struct each_ctx *e = cls;
        return e->fn(e->cls, key, value ? value : "") ? MHD_YES : MHD_NO;
}

void http_headers_each(struct http_request *req, bool (*fn)(void *cls, const char *name, const char *value),
                       void *cls)
{
        struct each_ctx e = { fn, cls };
        if (req->conn)
                MHD_get_connection_values(req->conn, MHD_HEADER_KIND, each_header, &e);
}

/* RFC 3986 unreserved characters stay, everything else is %XX. */
static int append_encoded(struct buf *b, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        int r = 0;
        for (const unsigned char *p = (const unsigned char *)s; r == 0 && *p; p++) {
                if (strchr("-._~", *p) || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z')) {
                        r = buf_append(b, p, 1);
                } else {
                        char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
                        r = buf_append(b, e, 3);
                }
        }
        return r;
}

static enum MHD_Result each_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        (void)kind;
        struct buf *b = cls;
        int r = b->len ? buf_append(b, "&", 1) : 0;
        if (r == 0)
                r = append_encoded(b, key);
        if (r == 0 && value)
                r = buf_append(b, "=", 1);
        if (r == 0 && value)
                r = append_encoded(b, value);
        if (r < 0)
                b->len = SIZE_MAX; /* marks the failure */
        return r < 0 ? MHD_NO : MHD_YES;
}

char *http_query_string(struct http_request *req)
{
        struct buf b;
        buf_init(&b, 64 * 1024); /* MHD's header memory bounds it anyway */
        if (req->conn)
                MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, each_arg, &b);
        if (b.len == SIZE_MAX || buf_append(&b, "", 0) < 0) {
                free(b.data);
                return NULL;
        }
        return b.data ? b.data : strdup("");
}
