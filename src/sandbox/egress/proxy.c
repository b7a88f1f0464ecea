/* The egress data path (see egress.h): per sandbox link, one thread polls
 * the listeners the daemon made in the sandbox's namespace; each accepted
 * connection gets a thread of its own, counted against max_conns. A
 * connection thread holds a reference on its link; egress_detach shuts
 * every live connection down so they end promptly. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/io.h"
#include "base/log.h"
#include "base/util.h"
#include "engine/engine.h"
#include "sandbox/egress/egress.h"
#include "sandbox/egress/net.h"
#include "sandbox/egress/wire.h"

#define DNS_PORT 53
#define HEAD_MAX 16384
#define CLIENT_READ_TIMEOUT_S 30

struct egress {
        struct egress_options opt;
        struct egress_ops ops;
        void *userdata;
        struct egress_hosts hosts;
        pthread_mutex_t lock;
        pthread_cond_t idle;
        unsigned threads;            /* connection threads alive: egress_free waits for them */
};

struct egress_link {
        struct egress *eg;
        char org_id[160], sandbox_id[160];
        int http_fd, udp_fd, tcp_fd, wake_fd;
        pthread_t thread;
        pthread_mutex_t lock;        /* what follows */
        int refs;
        bool stopping;
        int *conns;                  /* client fds of live connections (max_conns) */
        size_t nconns;
};

enum conn_kind {
        CONN_HTTP,
        CONN_DNS_TCP,
        CONN_DNS_UDP,        /* one datagram: fd is -1, the query in dgram */
};

struct conn {
        struct egress_link *l;
        int fd;
        enum conn_kind kind;
        struct sockaddr_storage from;
        socklen_t from_len;
        size_t len;
        uint8_t dgram[512];
};

const char *egress_proto_name(enum egress_proto p)
{
        static const char *const names[_EGRESS_PROTO_MAX] = { "dns", "http", "connect" };
        return p < _EGRESS_PROTO_MAX ? names[p] : "?";
}

int egress_new(const struct egress_options *opt, const struct egress_ops *ops, void *userdata, struct egress **ret)
{
        struct egress *eg = calloc(1, sizeof(*eg));
        if (!eg)
                return -ENOMEM;
        eg->opt = *opt;
        eg->opt.hosts = NULL;
        eg->ops = *ops;
        eg->userdata = userdata;
        pthread_mutex_init(&eg->lock, NULL);
        pthread_cond_init(&eg->idle, NULL);
        int r = egress_hosts_parse(opt->hosts, &eg->hosts);
        if (r < 0) {
                free(eg);
                return r;
        }
        *ret = eg;
        return 0;
}

void egress_free(struct egress *eg)
{
        if (!eg)
                return;
        /* Detached links shut their connections down: their threads end
         * soon (an upstream connect at most connect_timeout_ms later). */
        pthread_mutex_lock(&eg->lock);
        while (eg->threads)
                pthread_cond_wait(&eg->idle, &eg->lock);
        pthread_mutex_unlock(&eg->lock);
        pthread_cond_destroy(&eg->idle);
        pthread_mutex_destroy(&eg->lock);
        egress_hosts_done(&eg->hosts);
        free(eg);
}

static void threads_add(struct egress *eg, int d)
{
        pthread_mutex_lock(&eg->lock);
        eg->threads += (unsigned)d;
        if (eg->threads == 0)
                pthread_cond_broadcast(&eg->idle);
        pthread_mutex_unlock(&eg->lock);
}

unsigned egress_proxy_port(const struct egress *eg)
{
        return eg->opt.proxy_port;
}

static void link_close_fds(struct egress_link *l);

/* The last reference closes the listeners too: a thread answering a UDP
 * query sends on udp_fd, which must not be a recycled fd by then. */
static void link_unref(struct egress_link *l)
{
        pthread_mutex_lock(&l->lock);
        bool last = --l->refs == 0;
        pthread_mutex_unlock(&l->lock);
        if (!last)
                return;
        link_close_fds(l);
        pthread_mutex_destroy(&l->lock);
        free(l->conns);
        free(l);
}

/* ---- decisions ------------------------------------------------------- */

static void decide(struct egress_link *l, const struct egress_request *rq, struct egress_verdict *v)
{
        l->eg->ops.authorize(l->eg->userdata, rq, v);
}

static void record(struct egress_link *l, const struct egress_request *rq, const struct egress_verdict *v,
                   uint64_t out, uint64_t in)
{
        if (v->log && l->eg->ops.record)
                l->eg->ops.record(l->eg->userdata, rq, v, out, in);
}

/* Denied whatever the mode: the address check. */
static void forbid(struct egress_verdict *v, const char *why)
{
        v->allow = false;
        v->violation = true;
        v->log = true;
        snprintf(v->reason, sizeof(v->reason), "%s", why);
}

/* The addresses of host that may be reached, into addrs (port set). 0,
 * -ENOENT (no address), -EACCES (only forbidden ones). */
static int upstream_addrs(struct egress_link *l, const char *host, unsigned port, struct sockaddr_storage *addrs,
                          size_t *n)
{
        size_t got = 0, kept = 0;
        int r = egress_resolve(&l->eg->hosts, host, port, addrs, *n, &got);
        if (r < 0)
                return r;
        for (size_t i = 0; i < got; i++)
                if (!egress_addr_forbidden((struct sockaddr *)&addrs[i]))
                        addrs[kept++] = addrs[i];
        *n = kept;
        return kept ? 0 : got ? -EACCES : -ENOENT;
}

/* ---- DNS ------------------------------------------------------------- */

static size_t dns_answer(struct egress_link *l, const uint8_t *msg, size_t len, uint8_t *out, size_t cap)
{
        struct dns_query q;
        if (dns_parse_query(msg, len, &q) < 0)
                return 0;
        if (q.qclass != 1 || !q.name[0])
                return dns_build_reply(msg, &q, DNS_RCODE_REFUSED, NULL, 0, out, cap);
        struct egress_request rq = { l->org_id, l->sandbox_id, q.name, 0, EGRESS_DNS };
        struct egress_verdict v;
        decide(l, &rq, &v);
        struct sockaddr_storage addrs[16];
        size_t n = ARRAY_SIZE(addrs);
        int rcode = DNS_RCODE_NXDOMAIN;
        if (v.allow) {
                int r = upstream_addrs(l, q.name, DNS_PORT, addrs, &n);
                if (r == -EACCES)
                        forbid(&v, "resolves only to forbidden addresses");
                rcode = r == 0 ? DNS_RCODE_NOERROR : DNS_RCODE_NXDOMAIN;
        }
        rq.port = DNS_PORT;
        record(l, &rq, &v, 0, 0);
        return dns_build_reply(msg, &q, rcode, addrs, rcode == DNS_RCODE_NOERROR ? n : 0, out, cap);
}

static void serve_dns_udp(struct conn *c)
{
        uint8_t out[512];
        size_t m = dns_answer(c->l, c->dgram, c->len, out, sizeof(out));
        if (m)
                (void)sendto(c->l->udp_fd, out, m, MSG_DONTWAIT, (struct sockaddr *)&c->from, c->from_len);
}

/* DNS over TCP: two-byte length prefixes, one query after another. */
static void serve_dns_tcp(struct egress_link *l, int fd)
{
        uint8_t in[2 + 4096], out[2 + 4096];
        for (;;) {
                if (egress_read_full(fd, in, 2) != 2)
                        return;
                size_t len = (size_t)in[0] << 8 | in[1];
                if (len > sizeof(in) - 2 || egress_read_full(fd, in + 2, len) != (ssize_t)len)
                        return;
                size_t m = dns_answer(l, in + 2, len, out + 2, sizeof(out) - 2);
                if (!m)
                        return;
                out[0] = (uint8_t)(m >> 8);
                out[1] = (uint8_t)m;
                if (write_all(fd, out, m + 2) < 0)
                        return;
        }
}

/* ---- HTTP proxy ------------------------------------------------------ */

static void reply_status(int fd, int status, const char *text, const char *code, const char *message)
{
        char body[512], head[256];
        int bl = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code, message);
        int hl = snprintf(head, sizeof(head),
                          "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                          "Connection: close\r\n\r\n",
                          status, text, bl);
        if (write_all(fd, head, (size_t)hl) == 0)
                (void)write_all(fd, body, (size_t)bl);
}

static void reply_denied(int fd, const struct egress_verdict *v)
{
        char msg[256];
        snprintf(msg, sizeof(msg), "Request blocked by egress policy: %s", v->reason);
        reply_status(fd, 403, "Forbidden", "EGRESS_DENIED", msg);
}

/* Reads more of the client's bytes into buf; false at EOF, error or full. */
static bool read_more(int fd, char *buf, size_t *n, size_t cap)
{
        if (*n >= cap)
                return false;
        ssize_t got = read(fd, buf + *n, cap - *n);
        if (got <= 0)
                return false;
        *n += (size_t)got;
        return true;
}

/* The request head rebuilt for the origin server: origin-form target,
 * the proxy's own headers dropped, one request per connection (a second
 * request on the same upstream connection would escape the Host check). */
static int origin_head(const struct http_head *h, char *out, size_t cap)
{
        size_t o = 0;
        int w = snprintf(out, cap, "%s %.*s %.8s\r\n", h->method, (int)h->path_len, h->path, h->version);
        if (w < 0 || (size_t)w >= cap)
                return -E2BIG;
        o = (size_t)w;
        const char *p = h->headers, *end = h->headers + h->headers_len;
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                size_t ll = eol ? (size_t)(eol - p) + 1 : (size_t)(end - p);
                static const char *const drop[] = { "proxy-connection:", "proxy-authorization:", "connection:",
                                                     "keep-alive:" };
                bool keep = true;
                for (size_t i = 0; i < ARRAY_SIZE(drop); i++)
                        keep &= !(ll >= strlen(drop[i]) && strncasecmp(p, drop[i], strlen(drop[i])) == 0);
                if (keep) {
                        if (o + ll >= cap)
                                return -E2BIG;
                        memcpy(out + o, p, ll);
                        o += ll;
                }
                p += ll;
        }
        w = snprintf(out + o, cap - o, "Connection: close\r\n\r\n");
        if (w < 0 || (size_t)w >= cap - o)
                return -E2BIG;
        return (int)(o + (size_t)w);
}

/* Reads the ClientHello after a CONNECT and checks its SNI against the
 * CONNECT host: a tunnel must lead to the TLS server it named. */
static void check_sni(int fd, const char *host, char *buf, size_t *n, size_t cap, struct egress_verdict *v)
{
        char sni[EGRESS_HOST_MAX];
        int r;
        while ((r = tls_client_hello_sni((uint8_t *)buf, *n, sni, sizeof(sni))) == -EAGAIN)
                if (!read_more(fd, buf, n, cap))
                        break;
        if (r == 0 && strcmp(sni, host) == 0)
                return;
        v->violation = true;
        v->log = true;
        v->allow = !v->enforce;
        if (r == 0)
                snprintf(v->reason, sizeof(v->reason), "TLS SNI '%.64s' does not match the CONNECT host", sni);
        else
                snprintf(v->reason, sizeof(v->reason), "no TLS ClientHello with a server name");
}

static void serve_http(struct egress_link *l, int fd)
{
        _cleanup_free_ char *buf = malloc(HEAD_MAX);
        _cleanup_free_ char *out = malloc(HEAD_MAX + 64);
        if (!buf || !out)
                return;
        size_t n = 0, end;
        while (!(end = http_head_end(buf, n)))
                if (!read_more(fd, buf, &n, HEAD_MAX)) {
                        if (n == HEAD_MAX)
                                reply_status(fd, 431, "Request Header Fields Too Large", "BAD_REQUEST", "head too large");
                        return;
                }
        struct http_head h;
        if (http_head_parse(buf, end, &h) < 0)
                return reply_status(fd, 400, "Bad Request", "BAD_REQUEST",
                                    "Expected CONNECT host:port or an absolute http:// URL");
        if (!h.host_header_ok)
                return reply_status(fd, 400, "Bad Request", "BAD_REQUEST", "The Host header does not name the target");
        bool tunnel = strcmp(h.method, "CONNECT") == 0;
        struct egress_request rq = { l->org_id, l->sandbox_id, h.host, h.port, tunnel ? EGRESS_CONNECT : EGRESS_HTTP };
        struct egress_verdict v;
        decide(l, &rq, &v);
        struct sockaddr_storage addrs[16];
        size_t na = ARRAY_SIZE(addrs);
        int r = v.allow ? upstream_addrs(l, h.host, h.port, addrs, &na) : 0;
        if (r == -EACCES)
                forbid(&v, "address not allowed (loopback, link-local, metadata or the host's own)");
        if (!v.allow) {
                reply_denied(fd, &v);
                return record(l, &rq, &v, 0, 0);
        }
        if (r < 0)
                return reply_status(fd, 502, "Bad Gateway", "BAD_GATEWAY", "Cannot resolve the host");
        int head_len;
        if (tunnel) {
                static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                if (write_all(fd, ok, sizeof(ok) - 1) < 0)
                        return;
                /* What followed the head, then the ClientHello. */
                memmove(buf, buf + end, n - end);
                n -= end;
                check_sni(fd, h.host, buf, &n, HEAD_MAX, &v);
                if (!v.allow)
                        return record(l, &rq, &v, 0, 0);
                head_len = 0;
        } else if ((head_len = origin_head(&h, out, HEAD_MAX + 64)) < 0) {
                return reply_status(fd, 431, "Request Header Fields Too Large", "BAD_REQUEST", "head too large");
        }
        _cleanup_close_ int up = egress_connect_any(addrs, na, l->eg->opt.connect_timeout_ms);
        if (up < 0) {
                if (!tunnel)
                        reply_status(fd, 502, "Bad Gateway", "BAD_GATEWAY", "Cannot connect to the host");
                return record(l, &rq, &v, 0, 0);
        }
        const char *rest = tunnel ? buf : buf + end;
        size_t rest_len = tunnel ? n : n - end;
        uint64_t bout = (uint64_t)head_len + rest_len, bin = 0;
        if ((head_len && write_all(up, out, (size_t)head_len) < 0) || (rest_len && write_all(up, rest, rest_len) < 0))
                return record(l, &rq, &v, 0, 0);
        egress_relay(fd, up, l->eg->opt.idle_timeout_ms, &bout, &bin);
        record(l, &rq, &v, bout, bin);
}

/* ---- threads --------------------------------------------------------- */

static bool conn_register(struct egress_link *l, int fd)
{
        pthread_mutex_lock(&l->lock);
        bool ok = !l->stopping && l->nconns < l->eg->opt.max_conns;
        if (ok) {
                l->conns[l->nconns++] = fd;
                l->refs++;
        }
        pthread_mutex_unlock(&l->lock);
        return ok;
}

static void conn_unregister(struct egress_link *l, int fd)
{
        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < l->nconns; i++)
                if (l->conns[i] == fd) {
                        l->conns[i] = l->conns[--l->nconns];
                        break;
                }
        pthread_mutex_unlock(&l->lock);
}

static void *conn_thread(void *arg)
{
        struct conn *c = arg;
        struct timeval tv = { .tv_sec = CLIENT_READ_TIMEOUT_S };
        if (c->fd >= 0)
                (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (c->kind == CONN_DNS_UDP)
                serve_dns_udp(c);
        else if (c->kind == CONN_DNS_TCP)
                serve_dns_tcp(c->l, c->fd);
        else
                serve_http(c->l, c->fd);
        conn_unregister(c->l, c->fd);
        if (c->fd >= 0)
                close(c->fd);
        struct egress *eg = c->l->eg;
        link_unref(c->l);
        free(c);
        threads_add(eg, -1);
        return NULL;
}

/* Runs c (registered, holding a link reference) on a thread of its own;
 * undone when none can be made. */
static void conn_start(struct conn *c)
{
        struct egress_link *l = c->l;
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        threads_add(l->eg, 1);
        if (pthread_create(&t, &attr, conn_thread, c) != 0) {
                threads_add(l->eg, -1);
                conn_unregister(l, c->fd);
                if (c->fd >= 0)
                        close(c->fd);
                free(c);
                link_unref(l);
        }
        pthread_attr_destroy(&attr);
}

static void accept_one(struct egress_link *l, int lfd, enum conn_kind kind)
{
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return;
        struct conn *c = malloc(sizeof(*c));
        if (!c || !conn_register(l, fd)) {
                /* Over max_conns: refused, the client sees a reset. */
                free(c);
                close(fd);
                return;
        }
        *c = (struct conn){ .l = l, .fd = fd, .kind = kind };
        conn_start(c);
}

/* One DNS datagram, answered on a thread of its own: resolving an allowed
 * name may take the host's resolver seconds, which must not hold up the
 * link's other listeners. Over max_conns it is dropped (the client retries). */
static void receive_one(struct egress_link *l)
{
        struct conn *c = malloc(sizeof(*c));
        if (!c)
                return;
        *c = (struct conn){ .l = l, .fd = -1, .kind = CONN_DNS_UDP, .from_len = sizeof(c->from) };
        ssize_t n = recvfrom(l->udp_fd, c->dgram, sizeof(c->dgram), MSG_DONTWAIT, (struct sockaddr *)&c->from,
                             &c->from_len);
        if (n <= 0 || !conn_register(l, -1)) {
                free(c);
                return;
        }
        c->len = (size_t)n;
        conn_start(c);
}

static void *link_thread(void *arg)
{
        struct egress_link *l = arg;
        struct pollfd p[] = { { l->wake_fd, POLLIN, 0 }, { l->http_fd, POLLIN, 0 }, { l->udp_fd, POLLIN, 0 },
                              { l->tcp_fd, POLLIN, 0 } };
        for (;;) {
                if (poll(p, ARRAY_SIZE(p), -1) < 0 && errno != EINTR)
                        break;
                if (p[0].revents)
                        break;
                if (p[1].revents & POLLIN)
                        accept_one(l, l->http_fd, CONN_HTTP);
                if (p[2].revents & POLLIN)
                        receive_one(l);
                if (p[3].revents & POLLIN)
                        accept_one(l, l->tcp_fd, CONN_DNS_TCP);
        }
        return NULL;
}

/* A socket of the sandbox's namespace bound to 127.0.0.1:port there. */
static int listener(int netns_fd, int type, unsigned port)
{
        int fd = engine_netns_socket(netns_fd, AF_INET, type | SOCK_NONBLOCK);
        if (fd < 0)
                return fd;
        int one = 1;
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || (type == SOCK_STREAM && listen(fd, 64) < 0)) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

static void link_close_fds(struct egress_link *l)
{
        int *fds[] = { &l->http_fd, &l->udp_fd, &l->tcp_fd, &l->wake_fd };
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (*fds[i] >= 0) {
                        close(*fds[i]);
                        *fds[i] = -1;
                }
}

int egress_attach(struct egress *eg, int netns_fd, const char *org_id, const char *sandbox_id,
                  struct egress_link **ret)
{
        struct egress_link *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *l = (struct egress_link){ .eg = eg, .http_fd = -1, .udp_fd = -1, .tcp_fd = -1, .wake_fd = -1, .refs = 1 };
        pthread_mutex_init(&l->lock, NULL);
        snprintf(l->org_id, sizeof(l->org_id), "%s", org_id);
        snprintf(l->sandbox_id, sizeof(l->sandbox_id), "%s", sandbox_id);
        int r = 0;
        l->conns = calloc(eg->opt.max_conns ? eg->opt.max_conns : 1, sizeof(int));
        if (!l->conns)
                r = -ENOMEM;
        if (r == 0 && (r = l->http_fd = listener(netns_fd, SOCK_STREAM, eg->opt.proxy_port)) >= 0 &&
            (r = l->udp_fd = listener(netns_fd, SOCK_DGRAM, DNS_PORT)) >= 0 &&
            (r = l->tcp_fd = listener(netns_fd, SOCK_STREAM, DNS_PORT)) >= 0) {
                l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                r = l->wake_fd < 0 ? -errno : -pthread_create(&l->thread, NULL, link_thread, l);
        }
        if (r < 0) {
                link_unref(l);
                return r;
        }
        *ret = l;
        return 0;
}

void egress_detach(struct egress_link *l)
{
        if (!l)
                return;
        uint64_t one = 1;
        (void)!write(l->wake_fd, &one, sizeof(one));
        pthread_join(l->thread, NULL);
        pthread_mutex_lock(&l->lock);
        l->stopping = true;
        /* Their threads see EOF and end (closing is theirs). */
        for (size_t i = 0; i < l->nconns; i++)
                if (l->conns[i] >= 0)   /* -1: a UDP query, which ends by itself */
                        shutdown(l->conns[i], SHUT_RDWR);
        pthread_mutex_unlock(&l->lock);
        link_unref(l);
}
