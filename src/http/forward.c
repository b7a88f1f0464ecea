/* Forwarding a request to another node of a cluster (server.h, "forwarding
 * to another node"): an HTTP/1.1 client on a plain socket, so that the
 * reply can be relayed exactly as it comes — its status and headers first,
 * then a streamed body or, after a 101, raw bytes both ways (a libcurl
 * easy handle would buffer or hide both). One connection per request
 * (Connection: close): the other node ends the body by closing when it
 * does not frame it.
 *
 * The caller's credentials never cross: the node that forwards vouches for
 * the caller with its own signed headers (api/common/cluster_route.c). */
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "http/forward.h"
#include "http/internal.h"

#define FWD_HEAD_MAX (64 * 1024)
#define FWD_BYTES_MAX (8u << 20)     /* bodies up to this with a Content-Length are relayed as bytes */
#define FWD_CONNECT_TIMEOUT_S 5

static bool name_in(const char *name, const char *const *list)
{
        for (; list && *list; list++)
                if (strcasecmp(name, *list) == 0)
                        return true;
        return false;
}

/* RFC 9110 §7.6.1 hop-by-hop fields, and what the forwarder sets itself. */
static const char *const hop_by_hop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
                                          "Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding",
                                          "Upgrade", "Content-Length", NULL };

bool http_forward_request_header(const char *name)
{
        static const char *const own[] = { "Host", "Expect", "Authorization", "X-API-Key", "Cookie", NULL };
        return !name_in(name, hop_by_hop) && !name_in(name, own) && strncasecmp(name, "X-Sandboxd-", 11) != 0;
}

bool http_forward_reply_header(const char *name)
{
        /* Content-Type is the reply kind's; Date is MHD's. */
        static const char *const own[] = { "Content-Type", "Date", NULL };
        return !name_in(name, hop_by_hop) && !name_in(name, own);
}

static bool credential_arg(const char *arg, size_t n)
{
        static const char *const names[] = { "token", "apiKey" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                size_t k = strlen(names[i]);
                if (n >= k && strncmp(arg, names[i], k) == 0 && (n == k || arg[k] == '='))
                        return true;
        }
        return false;
}

char *http_forward_query(const char *query)
{
        struct buf b;
        buf_init(&b, SIZE_MAX);
        int r = buf_append(&b, "", 0);
        for (const char *p = query; r == 0 && *p;) {
                size_t n = strcspn(p, "&");
                if (n && !credential_arg(p, n)) {
                        if (b.len)
                                r = buf_append(&b, "&", 1);
                        if (r == 0)
                                r = buf_append(&b, p, n);
                        if (r == 0)
                                r = buf_append(&b, "", 0);
                }
                p += n + (p[n] == '&');
        }
        if (r < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

char *http_forward_path(const char *path)
{
        static const char hex[] = "0123456789ABCDEF";
        struct buf b;
        buf_init(&b, SIZE_MAX);
        int r = buf_append(&b, "", 0);
        for (const unsigned char *p = (const unsigned char *)path; r == 0 && *p; p++) {
                if (strchr("-._~/", *p) || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z')) {
                        r = buf_append(&b, p, 1);
                } else {
                        char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
                        r = buf_append(&b, e, 3);
                }
                if (r == 0)
                        r = buf_append(&b, "", 0);
        }
        if (r < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

char *http_forward_target(struct http_request *req)
{
        _cleanup_free_ char *path = http_forward_path(req->path);
        _cleanup_free_ char *raw = http_query_string(req);
        _cleanup_free_ char *query = raw ? http_forward_query(raw) : NULL;
        if (!path || !query)
                return NULL;
        char *t;
        if (asprintf(&t, "%s%s%s", path, query[0] ? "?" : "", query) < 0)
                return NULL;
        return t;
}

int http_forward_parse_url(const char *url, char *host, size_t hostlen, unsigned *port, char *prefix,
                           size_t prefixlen)
{
        if (strncasecmp(url, "http://", 7) != 0)
                return -EINVAL;
        const char *auth = url + 7;
        size_t n = strcspn(auth, "/?#");
        char hostport[300];
        if (n == 0 || n >= sizeof(hostport))
                return -EINVAL;
        memcpy(hostport, auth, n);
        hostport[n] = '\0';
        if (!strchr(hostport, ':') || (hostport[0] == '[' && hostport[n - 1] == ']')) {
                /* No port: HTTP's. */
                if (strlen(hostport) + 4 > sizeof(hostport))
                        return -EINVAL;
                strcat(hostport, ":80");
        }
        if (http_parse_listen(hostport, host, hostlen, port) < 0 || !host[0])
                return -EINVAL;
        const char *rest = auth + n;
        size_t plen = strcspn(rest, "?#");
        while (plen && rest[plen - 1] == '/')
                plen--;
        if (plen >= prefixlen)
                return -EINVAL;
        memcpy(prefix, rest, plen);
        prefix[plen] = '\0';
        return 0;
}

/* ---- the connection ---- */

static int connect_to(const char *host, unsigned port)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai = NULL;
        char ps[8];
        snprintf(ps, sizeof(ps), "%u", port);
        int r = getaddrinfo(host, ps, &hints, &ai);
        if (r != 0)
                return r == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
        int err = -ECONNREFUSED;
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
                int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        err = -errno;
                        continue;
                }
                /* Bounds connect (Linux honours SO_SNDTIMEO there); cleared after. */
                struct timeval tv = { .tv_sec = FWD_CONNECT_TIMEOUT_S };
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                        struct timeval none = { 0 };
                        int one = 1, idle = 30, intvl = 10, cnt = 3;
                        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
                        /* A node that dies mid-stream is noticed (no read timeout:
                         * an execution may take long before its reply). */
                        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
                        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
                        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
                        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
                        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                        freeaddrinfo(ai);
                        return fd;
                }
                err = -errno;
                close(fd);
        }
        freeaddrinfo(ai);
        return err;
}

ssize_t fwd_read(struct fwd_conn *c, void *dst, size_t max)
{
        if (c->pending_off < c->pending_len) {
                size_t k = c->pending_len - c->pending_off;
                if (k > max)
                        k = max;
                memcpy(dst, c->pending + c->pending_off, k);
                c->pending_off += k;
                return (ssize_t)k;
        }
        for (;;) {
                ssize_t n = recv(c->fd, dst, max, 0);
                if (n >= 0)
                        return n;
                if (errno != EINTR)
                        return -errno;
        }
}

void fwd_conn_close(struct fwd_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        free(c->pending);
        c->pending = NULL;
}

/* ---- the request ---- */

struct head_ctx {
        struct buf *b;
        int r;
};

static bool add_client_header(void *cls, const char *name, const char *value)
{
        struct head_ctx *h = cls;
        if (http_forward_request_header(name))
                h->r = buf_printf(h->b, "%s: %s\r\n", name, value);
        return h->r >= 0;
}

static bool is_upgrade(struct http_request *req)
{
        return http_header(req, "Upgrade") && http_header_has_token(req, "Connection", "upgrade");
}

static int build_head(struct http_request *req, const char *host, unsigned port, const char *prefix,
                      const struct http_forward_headers *extra, struct buf *b)
{
        _cleanup_free_ char *target = http_forward_target(req);
        if (!target)
                return -ENOMEM;
        bool v6 = strchr(host, ':') != NULL;
        int r = buf_printf(b, "%s %s%s HTTP/1.1\r\nHost: %s%s%s:%u\r\n", req->method, prefix, target, v6 ? "[" : "",
                           host, v6 ? "]" : "", port);
        struct head_ctx h = { b, r };
        if (r >= 0)
                http_headers_each(req, add_client_header, &h);
        r = h.r;
        if (r >= 0 && is_upgrade(req))
                r = buf_printf(b, "Connection: Upgrade\r\nUpgrade: %s\r\n", http_header(req, "Upgrade"));
        else if (r >= 0)
                r = buf_printf(b, "Connection: close\r\n");
        if (r >= 0 && (req->body_len || (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)))
                r = buf_printf(b, "Content-Length: %zu\r\n", req->body_len);
        for (size_t i = 0; r >= 0 && extra && i < extra->n; i++)
                r = buf_printf(b, "%s: %s\r\n", extra->v[i].name, extra->v[i].value);
        if (r >= 0)
                r = buf_append(b, "\r\n", 2);
        return r < 0 ? r : 0;
}

/* ---- the reply's head ---- */

struct reply_head {
        int status;
        char *text;                 /* the head, NUL-separated lines once parsed */
        size_t len;                 /* through the blank line */
};

/* Reads until the blank line; what follows is left in c->pending. */
static int read_head(struct fwd_conn *c, struct reply_head *h)
{
        char *b = malloc(FWD_HEAD_MAX + 1);
        size_t len = 0;
        if (!b)
                return -ENOMEM;
        for (;;) {
                char *end = len >= 4 ? memmem(b, len, "\r\n\r\n", 4) : NULL;
                if (end) {
                        h->len = (size_t)(end - b) + 4;
                        break;
                }
                ssize_t n = len < FWD_HEAD_MAX ? recv(c->fd, b + len, FWD_HEAD_MAX - len, 0) : -1;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        free(b);
                        return -EPROTO;
                }
                len += (size_t)n;
        }
        b[len] = '\0';
        h->text = b;
        c->pending = b; /* the body's first bytes follow the head */
        c->pending_off = h->len;
        c->pending_len = len;
        unsigned st;
        if (sscanf(b, "HTTP/1.%*[01] %3u", &st) != 1 || st < 100 || st > 599)
                return -EPROTO;
        h->status = (int)st;
        return 0;
}

/* Calls fn for each header line of h (names and values trimmed). */
static int each_reply_header(struct reply_head *h, int (*fn)(void *cls, const char *name, const char *value),
                             void *cls)
{
        char *line = strstr(h->text, "\r\n");
        char *end = h->text + h->len - 2;
        while (line && line + 2 < end) {
                line += 2;
                char *eol = strstr(line, "\r\n");
                if (!eol)
                        break;
                *eol = '\0';
                char *colon = strchr(line, ':');
                if (colon) {
                        *colon = '\0';
                        char *v = colon + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        size_t vl = strlen(v);
                        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                                v[--vl] = '\0';
                        int r = fn(cls, line, v);
                        *colon = ':';
                        if (r < 0) {
                                *eol = '\r';
                                return r;
                        }
                }
                *eol = '\r';
                line = eol;
        }
        return 0;
}

struct reply_meta {
        struct fwd_body body;
        char content_type[128];
        bool have_type;
        struct http_response *res;
        const char *const *drop;
};

static int note_header(void *cls, const char *name, const char *value)
{
        struct reply_meta *m = cls;
        if (strcasecmp(name, "Transfer-Encoding") == 0) {
                m->body.chunked = strcasestr(value, "chunked") != NULL;
        } else if (strcasecmp(name, "Content-Length") == 0) {
                char *e;
                m->body.length = strtoull(value, &e, 10);
                m->body.has_length = *value && !*e;
        } else if (strcasecmp(name, "Content-Type") == 0) {
                snprintf(m->content_type, sizeof(m->content_type), "%s", value);
                m->have_type = true;
        }
        return 0;
}

static int copy_header(void *cls, const char *name, const char *value)
{
        struct reply_meta *m = cls;
        if (!http_forward_reply_header(name) || name_in(name, m->drop))
                return 0;
        int r = http_response_header(m->res, name, value);
        return r == -EINVAL ? 0 : r; /* a header MHD could not send is dropped */
}

/* A 101's headers: Upgrade and the protocol's (Connection is MHD's). */
static int copy_upgrade_header(void *cls, const char *name, const char *value)
{
        struct reply_meta *m = cls;
        if (strcasecmp(name, "Connection") == 0 || strcasecmp(name, "Date") == 0)
                return 0;
        return http_response_header(m->res, name, value);
}

/* Sets res from the head and hands c (and h's buffer, its pending bytes)
 * to the reply kind that fits. */
static int relay(struct http_request *req, struct http_response *res, struct fwd_conn *c, struct reply_head *h,
                 const struct http_forward_headers *extra)
{
        struct reply_meta m = { .res = res, .drop = extra ? extra->drop_reply : NULL };
        (void)each_reply_header(h, note_header, &m);
        const char *type = m.have_type ? m.content_type : "application/octet-stream";
        if (h->status == 101) {
                /* Only to an upgrade request (a 101 otherwise is no HTTP). */
                int r = is_upgrade(req) ? each_reply_header(h, copy_upgrade_header, &m) : -EPROTO;
                if (r < 0) {
                        fwd_conn_close(c);
                        return r;
                }
                return fwd_relay_upgrade(res, c);
        }
        /* The headers first: the body may free the head's buffer. */
        int r = each_reply_header(h, copy_header, &m);
        if (r < 0) {
                fwd_conn_close(c);
                return r;
        }
        bool bodiless = strcmp(req->method, "HEAD") == 0 || h->status == 204 || h->status == 304 || h->status < 200;
        if (!bodiless && (m.body.chunked || !m.body.has_length || m.body.length > FWD_BYTES_MAX))
                return fwd_relay_stream(res, h->status, type, c, &m.body);
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        struct fwd_body none = { .has_length = true };
        r = fwd_read_body(c, bodiless ? &none : &m.body, &body, &len);
        fwd_conn_close(c);
        return r < 0 ? r : http_bytes(res, h->status, type, body, len);
}

int http_forward(struct http_request *req, struct http_response *res, const char *base_url,
                 const struct http_forward_headers *extra)
{
        char host[256], prefix[256];
        unsigned port;
        int r = http_forward_parse_url(base_url, host, sizeof(host), &port, prefix, sizeof(prefix));
        if (r < 0)
                return r;
        struct buf head;
        buf_init(&head, SIZE_MAX);
        r = build_head(req, host, port, prefix, extra, &head);
        struct fwd_conn c = { .fd = -1 };
        if (r == 0)
                r = c.fd = connect_to(host, port);
        if (r >= 0)
                r = send_all(c.fd, head.data, head.len);
        buf_free(&head);
        if (r >= 0 && req->body_len)
                r = send_all(c.fd, req->body, req->body_len);
        struct reply_head h = { 0 };
        if (r >= 0)
                r = read_head(&c, &h);
        if (r < 0) {
                log_warn("forward %s %s to %s: %s", req->method, req->path, base_url, strerror(-r));
                fwd_conn_close(&c);
                return r;
        }
        r = relay(req, res, &c, &h, extra);
        res->relayed = r == 0;
        if (r < 0) {
                log_warn("forward %s %s to %s: relaying: %s", req->method, req->path, base_url, strerror(-r));
                reply_reset(res); /* no half-relayed headers under the caller's error */
        }
        return r;
}
