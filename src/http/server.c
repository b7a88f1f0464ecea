#include "http/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/util.h"

/* One queued blocking job. */
struct job {
        struct conn_state *st;
        struct job *next;
};

struct http_server {
        struct MHD_Daemon *mhd;
        const struct route *routes;
        size_t nroutes;
        struct http_options opt;
        char api_key[256];
        void *app;
        unsigned port;
        uint64_t next_id;

        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct job *head, *tail;
        size_t queued, running;
        bool stopping, draining;
        pthread_t *workers;
        unsigned nworkers;
};

enum conn_phase { PHASE_BODY, PHASE_QUEUED, PHASE_DONE };

/* Per-request state, MHD's con_cls. */
struct conn_state {
        struct http_server *srv;
        struct http_request req;
        struct http_response res;
        const struct route *route;
        enum conn_phase phase;
        char *path;
        char capbuf[1024];
        struct buf body;
        bool too_large;
        uint64_t start_ns;
};

/* ---- responses ---- */

void http_json(struct http_response *res, int status, json_t *body)
{
        json_decref(res->json);
        res->status = status;
        res->json = body;
}

void http_error(struct http_response *res, int status, const char *code, const char *message,
                json_t *context)
{
        char ts[32];
        iso8601_ms(wall_ms(), ts);
        /* Messages quote client input (URL captures are decoded bytes, not
         * necessarily UTF-8); json_pack would refuse invalid UTF-8 and the
         * client would get a 500 "no response" instead of this error. */
        _cleanup_free_ char *clean = NULL;
        size_t len = strlen(message);
        if (!utf8_valid(message, len) && (clean = malloc(3 * len + 1))) {
                utf8_sanitize(message, len, clean);
                message = clean;
        }
        json_t *body = json_pack("{s:s, s:s, s:o, s:i, s:s}", "code", code, "message", message, "context",
                                 context ? context : json_object(), "httpStatus", status, "timestamp", ts);
        http_json(res, status, body);
}

void http_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* Truncation must not split a UTF-8 sequence: drop a partial one. */
        if (n >= (int)sizeof(msg)) {
                size_t len = sizeof(msg) - 1;
                for (int k = 0; k < 3 && len > 0 && !utf8_valid(msg, len); k++)
                        msg[--len] = '\0';
        }
        http_error(res, status, code, msg, NULL);
}

const char *http_header(struct http_request *req, const char *name)
{
        return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

static enum MHD_Result send_response(struct conn_state *st)
{
        struct http_response *res = &st->res;
        if (!res->json)
                http_error(res, 500, "INTERNAL_ERROR", "Handler produced no response", NULL);
        char *text = json_dumps(res->json, HTTP_JSON_DUMP_FLAGS);
        if (!text)
                text = strdup("{}");
        size_t len = text ? strlen(text) : 0;
        struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
        MHD_add_response_header(r, "Cache-Control", "no-store");
        if (res->allow[0])
                MHD_add_response_header(r, "Allow", res->allow);
        if (res->retry_after) {
                char ra[16];
                snprintf(ra, sizeof(ra), "%u", res->retry_after);
                MHD_add_response_header(r, "Retry-After", ra);
        }
        enum MHD_Result ret = MHD_queue_response(st->req.conn, (unsigned)res->status, r);
        MHD_destroy_response(r);
        log_info("req=%llu method=%s path=\"%s\" status=%d ms=%.1f", (unsigned long long)st->req.id,
                 st->req.method, st->path, res->status, (double)(now_ns() - st->start_ns) / 1e6);
        return ret;
}

/* ---- routing ---- */

bool http_match(const char *pattern, const char *path, const char **captures, char *buf, size_t buflen)
{
        size_t used = 0, ncap = 0;
        const char *p = pattern, *s = path;
        while (*p) {
                if (*p != *s && *p != ':' && *p != '*')
                        return false;
                if (*p == '*') {
                        /* The rest of the path, possibly empty. */
                        size_t n = strlen(s);
                        if (used + n + 1 > buflen || ncap >= HTTP_MAX_CAPTURES)
                                return false;
                        memcpy(buf + used, s, n + 1);
                        captures[ncap++] = buf + used;
                        return true;
                }
                if (*p == ':') {
                        size_t n = strcspn(s, "/");
                        if (n == 0 || used + n + 1 > buflen || ncap >= HTTP_MAX_CAPTURES)
                                return false;
                        memcpy(buf + used, s, n);
                        buf[used + n] = '\0';
                        captures[ncap++] = buf + used;
                        used += n + 1;
                        s += n;
                        p += strcspn(p, "/");
                        continue;
                }
                p++;
                s++;
        }
        if (*s == '\0')
                return true;
        return false;
}

static bool pattern_matches(const char *pattern, const char *path, const char **caps, char *buf, size_t len)
{
        if (http_match(pattern, path, caps, buf, len))
                return true;
        /* A pattern ending in a star segment also matches without it. */
        size_t pl = strlen(pattern);
        if (pl >= 2 && strcmp(pattern + pl - 2, "/*") == 0) {
                char trimmed[256];
                if (pl - 2 >= sizeof(trimmed))
                        return false;
                memcpy(trimmed, pattern, pl - 2);
                trimmed[pl - 2] = '\0';
                if (http_match(trimmed, path, caps, buf, len)) {
                        size_t n = 0;
                        while (n < HTTP_MAX_CAPTURES && caps[n])
                                n++;
                        if (n < HTTP_MAX_CAPTURES)
                                caps[n] = "";
                        return true;
                }
        }
        return false;
}

/* Finds the route for method+path. On a path match with the wrong method,
 * fills allow and returns NULL with *path_matched set. */
static const struct route *find_route(struct http_server *srv, struct conn_state *st, bool *path_matched,
                                      char *allow, size_t allowlen)
{
        *path_matched = false;
        allow[0] = '\0';
        for (size_t i = 0; i < srv->nroutes; i++) {
                const struct route *r = &srv->routes[i];
                const char *caps[HTTP_MAX_CAPTURES] = { 0 };
                if (!pattern_matches(r->pattern, st->path, caps, st->capbuf, sizeof(st->capbuf)))
                        continue;
                if (strcmp(r->method, st->req.method) == 0) {
                        memcpy(st->req.captures, caps, sizeof(caps));
                        return r;
                }
                if (!strstr(allow, r->method)) {
                        size_t used = strlen(allow);
                        snprintf(allow + used, allowlen - used, "%s%s", used ? ", " : "", r->method);
                }
                *path_matched = true;
        }
        return NULL;
}

/* ---- auth ---- */

static bool const_time_eq(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        unsigned char diff = (unsigned char)(la != lb);
        for (size_t i = 0; i < lb; i++)
                diff |= (unsigned char)(a[i % (la ? la : 1)] ^ b[i]);
        return diff == 0 && la == lb;
}

static bool authorized(struct http_server *srv, struct conn_state *st)
{
        if (!srv->api_key[0] || (st->route && (st->route->flags & ROUTE_PUBLIC)))
                return true;
        const char *auth = http_header(&st->req, "Authorization");
        if (auth && strncasecmp(auth, "Bearer ", 7) == 0 && const_time_eq(auth + 7, srv->api_key))
                return true;
        const char *key = http_header(&st->req, "X-API-Key");
        return key && const_time_eq(key, srv->api_key);
}

/* ---- worker pool ---- */

static void *worker_main(void *arg)
{
        struct http_server *srv = arg;
        pthread_mutex_lock(&srv->lock);
        for (;;) {
                while (!srv->head && !srv->stopping)
                        pthread_cond_wait(&srv->cond, &srv->lock);
                if (!srv->head && srv->stopping)
                        break;
                struct job *j = srv->head;
                srv->head = j->next;
                if (!srv->head)
                        srv->tail = NULL;
                srv->queued--;
                srv->running++;
                pthread_mutex_unlock(&srv->lock);

                struct conn_state *st = j->st;
                free(j);
                st->route->fn(&st->req, &st->res);
                st->phase = PHASE_DONE;
                MHD_resume_connection(st->req.conn);

                pthread_mutex_lock(&srv->lock);
                srv->running--;
                pthread_cond_broadcast(&srv->cond);
        }
        pthread_mutex_unlock(&srv->lock);
        return NULL;
}

/* Queues a blocking job; false when the queue is full or we are draining. */
static bool submit_job(struct http_server *srv, struct conn_state *st)
{
        struct job *j = calloc(1, sizeof(*j));
        if (!j)
                return false;
        j->st = st;
        pthread_mutex_lock(&srv->lock);
        bool full = srv->draining || srv->queued >= srv->opt.queue + (srv->nworkers - srv->running);
        if (!full) {
                if (srv->tail)
                        srv->tail->next = j;
                else
                        srv->head = j;
                srv->tail = j;
                srv->queued++;
                pthread_cond_signal(&srv->cond);
        }
        pthread_mutex_unlock(&srv->lock);
        if (full)
                free(j);
        return !full;
}

size_t http_server_busy(struct http_server *s)
{
        pthread_mutex_lock(&s->lock);
        size_t n = s->queued + s->running;
        pthread_mutex_unlock(&s->lock);
        return n;
}

/* ---- MHD callbacks ---- */

static bool content_type_is_json(const char *ct)
{
        if (!ct)
                return false;
        while (*ct == ' ')
                ct++;
        size_t n = strcspn(ct, "; ");
        return n == strlen("application/json") && strncasecmp(ct, "application/json", n) == 0;
}

static size_t route_max_body(struct http_server *srv, const struct route *r)
{
        return r && r->max_body ? r->max_body : srv->opt.default_max_body;
}

/* First call for a request: route, auth, Content-Type and Content-Length are
 * checked before any body is read, in the order the contract specifies. */
static bool precheck(struct http_server *srv, struct conn_state *st)
{
        bool path_matched;
        char allow[64];
        st->route = find_route(srv, st, &path_matched, allow, sizeof(allow));
        if (!st->route) {
                if (path_matched) {
                        http_errorf(&st->res, 405, "VALIDATION_FAILED", "Method %s not allowed", st->req.method);
                        snprintf(st->res.allow, sizeof(st->res.allow), "%s", allow);
                } else {
                        http_error(&st->res, 404, "VALIDATION_FAILED", "Not found", NULL);
                }
                return false;
        }
        if (!authorized(srv, st)) {
                http_error(&st->res, 401, "UNAUTHORIZED", "Missing or invalid API key", NULL);
                return false;
        }
        if ((st->route->flags & ROUTE_JSON) && !content_type_is_json(http_header(&st->req, "Content-Type"))) {
                http_error(&st->res, 415, "VALIDATION_FAILED", "Content-Type must be application/json", NULL);
                return false;
        }
        const char *cl = http_header(&st->req, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > route_max_body(srv, st->route)) {
                http_error(&st->res, 413, "VALIDATION_FAILED", "Request too large", NULL);
                return false;
        }
        buf_init(&st->body, route_max_body(srv, st->route));
        return true;
}

static struct conn_state *conn_state_new(struct http_server *srv, struct MHD_Connection *c, const char *url,
                                         const char *method)
{
        struct conn_state *st = calloc(1, sizeof(*st));
        if (!st)
                return NULL;
        st->srv = srv;
        st->start_ns = now_ns();
        st->path = strdup(url);
        st->req.conn = c;
        st->req.method = method;
        st->req.path = st->path;
        st->req.app = srv->app;
        pthread_mutex_lock(&srv->lock);
        st->req.id = ++srv->next_id;
        pthread_mutex_unlock(&srv->lock);
        if (!st->path) {
                free(st);
                return NULL;
        }
        return st;
}

static enum MHD_Result dispatch(struct http_server *srv, struct conn_state *st)
{
        if (st->too_large) {
                http_error(&st->res, 413, "VALIDATION_FAILED", "Request too large", NULL);
                return send_response(st);
        }
        if (!st->body.data)
                buf_append(&st->body, "", 0);
        st->req.body = st->body.data ? st->body.data : "";
        st->req.body_len = st->body.len;
        if (!(st->route->flags & ROUTE_BLOCKING)) {
                st->route->fn(&st->req, &st->res);
                return send_response(st);
        }
        /* Suspend before queueing: the worker may finish and resume at once. */
        st->phase = PHASE_QUEUED;
        MHD_suspend_connection(st->req.conn);
        if (!submit_job(srv, st)) {
                http_error(&st->res, 503, "OVERLOADED",
                           srv->draining ? "Server is shutting down" : "Too many executions in progress; retry later",
                           NULL);
                st->res.retry_after = 1;
                st->phase = PHASE_DONE;
                MHD_resume_connection(st->req.conn);
        }
        return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size,
                                  void **con_cls)
{
        (void)version;
        struct http_server *srv = cls;
        struct conn_state *st = *con_cls;
        if (!st) {
                st = conn_state_new(srv, c, url, method);
                if (!st)
                        return MHD_NO;
                *con_cls = st;
                if (!precheck(srv, st))
                        return send_response(st); /* early answer; MHD skips the body */
                return MHD_YES;
        }
        if (st->phase == PHASE_DONE)
                return send_response(st);
        if (st->phase == PHASE_QUEUED)
                return MHD_YES;
        if (*upload_size) {
                if (!st->too_large && buf_append(&st->body, upload_data, *upload_size) < 0)
                        st->too_large = true;
                *upload_size = 0;
                return MHD_YES;
        }
        return dispatch(srv, st);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
        (void)cls;
        (void)c;
        (void)toe;
        struct conn_state *st = *con_cls;
        if (!st)
                return;
        json_decref(st->res.json);
        buf_free(&st->body);
        free(st->path);
        free(st);
        *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        (void)cls;
        char msg[512];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        msg[strcspn(msg, "\n")] = '\0';
        log_debug("msg=\"mhd: %s\"", msg);
}

/* ---- listen address ---- */

int http_parse_listen(const char *listen, char *host, size_t hostlen, unsigned *port)
{
        const char *colon;
        if (listen[0] == '[') {
                const char *end = strchr(listen, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                if ((size_t)(end - listen - 1) >= hostlen)
                        return -EINVAL;
                snprintf(host, hostlen, "%.*s", (int)(end - listen - 1), listen + 1);
                colon = end + 1;
        } else {
                colon = strrchr(listen, ':');
                if (!colon || (size_t)(colon - listen) >= hostlen)
                        return -EINVAL;
                snprintf(host, hostlen, "%.*s", (int)(colon - listen), listen);
        }
        char *end;
        unsigned long p = strtoul(colon + 1, &end, 10);
        if (*end || colon[1] == '\0' || p > 65535)
                return -EINVAL;
        *port = (unsigned)p;
        return 0;
}

bool http_host_is_loopback(const char *host)
{
        struct in_addr a4;
        struct in6_addr a6;
        if (strcmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6);
        return false;
}

static int make_sockaddr(const char *host, unsigned port, struct sockaddr_storage *ss)
{
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        const char *h = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
        if (inet_pton(AF_INET, h, &s4->sin_addr) == 1) {
                s4->sin_family = AF_INET;
                s4->sin_port = htons((uint16_t)port);
                return 0;
        }
        if (inet_pton(AF_INET6, h, &s6->sin6_addr) == 1) {
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t)port);
                return 0;
        }
        return -EINVAL;
}

/* ---- lifecycle ---- */

int http_server_start(const struct http_options *opt, const struct route *routes, size_t nroutes,
                      void *app, struct http_server **ret)
{
        char host[256];
        unsigned port;
        struct sockaddr_storage ss;
        if (http_parse_listen(opt->listen, host, sizeof(host), &port) < 0 || make_sockaddr(host, port, &ss) < 0)
                return -EINVAL;

        struct http_server *srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->opt = *opt;
        snprintf(srv->api_key, sizeof(srv->api_key), "%s", opt->api_key ? opt->api_key : "");
        srv->opt.api_key = srv->api_key;
        srv->routes = routes;
        srv->nroutes = nroutes;
        srv->app = app;
        pthread_mutex_init(&srv->lock, NULL);
        pthread_cond_init(&srv->cond, NULL);

        srv->nworkers = opt->workers;
        srv->workers = calloc(opt->workers, sizeof(pthread_t));
        for (unsigned i = 0; srv->workers && i < opt->workers; i++)
                pthread_create(&srv->workers[i], NULL, worker_main, srv);

        /* Published before MHD's threads exist (their creation orders this
         * write before any handler runs): a request that arrives as soon as
         * the socket listens may read *ret through the app, e.g. /ready. */
        *ret = srv;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                         MHD_USE_ERROR_LOG | MHD_USE_ITC | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        srv->mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, srv,
                                    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
                                    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                    MHD_OPTION_THREAD_POOL_SIZE, opt->threads,
                                    MHD_OPTION_CONNECTION_LIMIT, opt->max_connections,
                                    MHD_OPTION_CONNECTION_TIMEOUT, opt->timeout_s,
                                    MHD_OPTION_CONNECTION_MEMORY_LIMIT, opt->header_bytes,
                                    MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                    MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
                                    MHD_OPTION_END);
        if (!srv->mhd) {
                *ret = NULL;
                http_server_stop(srv);
                return -EADDRNOTAVAIL;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
        srv->port = info ? info->port : port;
        return 0;
}

unsigned http_server_port(const struct http_server *s)
{
        return s->port;
}

void http_server_drain(struct http_server *s)
{
        pthread_mutex_lock(&s->lock);
        s->draining = true;
        pthread_mutex_unlock(&s->lock);
        /* Stop accepting; connections already open finish their requests. */
        MHD_socket fd = MHD_quiesce_daemon(s->mhd);
        if (fd != MHD_INVALID_SOCKET)
                close(fd);
}

bool http_server_draining(const struct http_server *s)
{
        return s->draining;
}

void http_server_stop(struct http_server *s)
{
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        for (unsigned i = 0; s->workers && i < s->nworkers; i++)
                pthread_join(s->workers[i], NULL);
        if (s->mhd)
                MHD_stop_daemon(s->mhd);
        free(s->workers);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
}
