/* libmicrohttpd glue: request life cycle (route → auth → Content-Type →
 * body cap → handler), the pool of workers for ROUTE_BLOCKING handlers
 * (their connections are suspended while a worker runs them, so the polling
 * threads keep serving everything else), the stream/WebSocket slots, and
 * start/drain/stop. Routing is in router.c, replies in reply.c. */
#include "http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/thread.h"
#include "http/internal.h"

/* ---- worker pool ---- */

/* The route's handler, unless the group's intercept answers for it. */
static void run_handler(struct conn_state *st)
{
        const struct http_group *g = st->group;
        if (!(st->route->flags & ROUTE_PUBLIC) && g && g->ops && g->ops->intercept &&
            g->ops->intercept(g->cls, &st->req, &st->res))
                return;
        st->route->fn(&st->req, &st->res);
}

static void *worker_main(void *arg)
{
        struct http_server *srv = arg;
        pthread_mutex_lock(&srv->lock);
        for (;;) {
                /* An inline run holds a slot too (running): the bound on
                 * executions at once is the same with or without them. */
                while ((!srv->head || srv->running >= srv->nworkers) && !srv->stopping)
                        pthread_cond_wait(&srv->work_cond, &srv->lock);
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
                run_handler(st);
                st->phase = PHASE_DONE;
                MHD_resume_connection(st->req.conn);

                /* Nobody waits for running to drop (a drain polls
                 * http_server_busy): no wake-up of the other workers. */
                pthread_mutex_lock(&srv->lock);
                srv->running--;
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
                pthread_cond_signal(&srv->work_cond);
        }
        pthread_mutex_unlock(&srv->lock);
        if (full)
                free(j);
        return !full;
}

/* Connections owned by the calling polling thread (suspended ones too):
 * MHD accepts, serves and closes a connection on one thread of its pool,
 * and tells us on that thread (MHD_OPTION_NOTIFY_CONNECTION). */
static __thread long conns_here;

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
        (void)cls;
        (void)c;
        (void)socket_ctx;
        conns_here += code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
}

/* Whether this blocking request may run here, on its polling thread: no
 * other connection waits on this thread, at least one other polling thread
 * is free to accept and serve, no job waits for a worker (no overtaking)
 * and a worker would be free. Takes the slot (running, inlined). */
static bool inline_begin(struct http_server *srv)
{
        if (!srv->opt.inline_blocking || conns_here != 1)
                return false;
        pthread_mutex_lock(&srv->lock);
        bool ok = !srv->draining && !srv->stopping && !srv->head && srv->running < srv->nworkers &&
                  srv->inlined + 1 < srv->opt.threads;
        if (ok) {
                srv->running++;
                srv->inlined++;
        }
        pthread_mutex_unlock(&srv->lock);
        return ok;
}

/* After an inline run: frees the slot, and restarts the connection's idle
 * timer (MHD restarts it when a timeout is set from 0), else a run longer
 * than http.timeout_s would see its connection closed before the reply. */
static void inline_end(struct http_server *srv, struct conn_state *st)
{
        pthread_mutex_lock(&srv->lock);
        srv->running--;
        srv->inlined--;
        if (srv->head) /* a job queued behind the slot this run held */
                pthread_cond_signal(&srv->work_cond);
        pthread_mutex_unlock(&srv->lock);
        MHD_set_connection_option(st->req.conn, MHD_CONNECTION_OPTION_TIMEOUT, 0);
        MHD_set_connection_option(st->req.conn, MHD_CONNECTION_OPTION_TIMEOUT, srv->opt.timeout_s);
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
        size_t cap = r && r->max_body ? r->max_body(srv->app) : 0;
        return cap ? cap : srv->opt.default_max_body;
}

static bool authorized(struct conn_state *st)
{
        struct http_group *g = st->group;
        if ((st->route->flags & ROUTE_PUBLIC) || !g->ops || !g->ops->auth)
                return true;
        if (g->ops->auth(g->cls, &st->req, &st->res))
                return true;
        if (!st->res.json) /* a hook that forgot to say why */
                http_fail(st, 401, "Unauthorized");
        return false;
}

/* First call for a request: route, auth, Content-Type and Content-Length are
 * checked before any body is read, in the order the contract specifies. */
static bool precheck(struct http_server *srv, struct conn_state *st)
{
        bool path_matched;
        char allow[64], msg[64];
        st->route = router_find(srv, st, &path_matched, allow, sizeof(allow));
        if (!st->route) {
                if (path_matched) {
                        snprintf(msg, sizeof(msg), "Method %.32s not allowed", st->req.method);
                        http_fail(st, 405, msg);
                        snprintf(st->res.allow, sizeof(st->res.allow), "%s", allow);
                } else {
                        http_fail(st, 404, "Not found");
                }
                return false;
        }
        if (!authorized(st))
                return false;
        if ((st->route->flags & ROUTE_JSON) && !content_type_is_json(http_header(&st->req, "Content-Type"))) {
                http_fail(st, 415, "Content-Type must be application/json");
                return false;
        }
        const char *cl = http_header(&st->req, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > route_max_body(srv, st->route)) {
                http_fail(st, 413, "Request too large");
                return false;
        }
        buf_init(&st->body, route_max_body(srv, st->route));
        return true;
}

static struct conn_state *conn_state_new(struct http_server *srv, struct MHD_Connection *c, const char *url,
                                         const char *method)
{
        size_t caps = strlen(url) + HTTP_MAX_CAPTURES + 1;
        if (caps > CAPBUF_MAX)
                caps = CAPBUF_MAX;
        struct conn_state *st = calloc(1, sizeof(*st) + caps);
        if (!st)
                return NULL;
        st->capbuf_len = caps;
        st->srv = srv;
        st->start_ns = now_ns();
        st->path = strdup(url);
        reply_init(&st->res);
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

/* A small body (JSON, bytes) goes out in the send right after the handler:
 * loopback and TCP send buffers hold far more. The wake-ups an inline run
 * deferred (bg_thread_wake_soon: the engine's reaper and refiller) are then
 * sent at its completion (on_completed), after the answer. Anything larger,
 * or longer lived, sends them now: a slow reader must not hold up a used
 * jail's kill. */
#define DEFER_WAKES_MAX_BODY (64 * 1024)

static bool reply_goes_out_at_once(const struct http_response *res)
{
        return (res->kind == HTTP_REPLY_JSON || res->kind == HTTP_REPLY_BYTES) && res->body_len <= DEFER_WAKES_MAX_BODY;
}

static enum MHD_Result dispatch(struct http_server *srv, struct conn_state *st)
{
        if (st->too_large) {
                http_fail(st, 413, "Request too large");
                return reply_send(st);
        }
        if (!st->body.data)
                buf_append(&st->body, "", 0);
        st->req.body = st->body.data ? st->body.data : "";
        st->req.body_len = st->body.len;
        if (!(st->route->flags & ROUTE_BLOCKING)) {
                run_handler(st);
                return reply_send(st);
        }
        if (inline_begin(srv)) {
                bg_thread_defer_begin();
                run_handler(st);
                inline_end(srv, st);
                enum MHD_Result r = reply_send(st);
                if (!reply_goes_out_at_once(&st->res))
                        bg_thread_defer_flush();
                return r;
        }
        /* Suspend before queueing: the worker may finish and resume at once. */
        st->phase = PHASE_QUEUED;
        MHD_suspend_connection(st->req.conn);
        if (!submit_job(srv, st)) {
                http_fail(st, 503,
                          srv->draining ? "Server is shutting down" : "Too many executions in progress; retry later");
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
        /* Owed by an earlier inline run on this thread whose completion
         * has not come yet (its client reads slowly). */
        bg_thread_defer_flush();
        if (!st) {
                st = conn_state_new(srv, c, url, method);
                if (!st)
                        return MHD_NO;
                *con_cls = st;
                if (!precheck(srv, st))
                        return reply_send(st); /* early answer; MHD skips the body */
                return MHD_YES;
        }
        if (st->phase == PHASE_DONE)
                return reply_send(st);
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

/* MHD_OPTION_NOTIFY_COMPLETED: the request is over, answered or not. A
 * stream learns here that its client went away (toe != COMPLETED_OK). */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
        (void)cls;
        (void)c;
        bg_thread_defer_flush(); /* the answer is out: see reply_goes_out_at_once */
        struct conn_state *st = *con_cls;
        if (!st)
                return;
        if (st->res.stream) {
                stream_completed(st->res.stream, toe);
                stream_unref(st->res.stream);
                st->res.stream = NULL;
        }
        reply_reset(&st->res);
        if (st->req.auth_free)
                st->req.auth_free(st->req.auth);
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

/* ---- stream and WebSocket slots ---- */

bool slot_reserve(struct http_server *srv)
{
        pthread_mutex_lock(&srv->lock);
        bool ok = !srv->stopping && !srv->draining && srv->nstreams < srv->opt.max_streams;
        if (ok)
                srv->nstreams++;
        pthread_mutex_unlock(&srv->lock);
        return ok;
}

void slot_release(struct http_server *srv)
{
        pthread_mutex_lock(&srv->lock);
        srv->nstreams--;
        pthread_cond_broadcast(&srv->cond);
        pthread_mutex_unlock(&srv->lock);
}

int spawn_detached(void *(*fn)(void *), void *arg)
{
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&t, &attr, fn, arg);
        pthread_attr_destroy(&attr);
        return -r;
}

size_t http_server_streams(struct http_server *s)
{
        pthread_mutex_lock(&s->lock);
        size_t n = s->nstreams;
        pthread_mutex_unlock(&s->lock);
        return n;
}

/* ---- lifecycle ---- */

int http_server_new(const struct http_options *opt, void *app, struct http_server **ret)
{
        struct http_server *srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->opt = *opt;
        if (!opt->listen || strlen(opt->listen) >= sizeof(srv->listen)) {
                free(srv);
                return -EINVAL;
        }
        snprintf(srv->listen, sizeof(srv->listen), "%s", opt->listen);
        srv->opt.listen = srv->listen;
        if (!srv->opt.max_streams)
                srv->opt.max_streams = 64;
        if (!srv->opt.stream_buffer)
                srv->opt.stream_buffer = 64 * 1024;
        srv->app = app;
        pthread_mutex_init(&srv->lock, NULL);
        pthread_cond_init(&srv->cond, NULL);
        pthread_cond_init(&srv->work_cond, NULL);
        pthread_mutex_init(&srv->resume_lock, NULL);
        *ret = srv;
        return 0;
}

int http_server_start(struct http_server *srv)
{
        char host[256];
        unsigned port;
        struct sockaddr_storage ss;
        if (!srv->groups || http_parse_listen(srv->listen, host, sizeof(host), &port) < 0 ||
            make_sockaddr(host, port, &ss) < 0)
                return -EINVAL;
        srv->nworkers = srv->opt.workers;
        srv->workers = calloc(srv->nworkers ? srv->nworkers : 1, sizeof(pthread_t));
        if (!srv->workers)
                return -ENOMEM;
        for (unsigned i = 0; i < srv->nworkers; i++)
                if (pthread_create(&srv->workers[i], NULL, worker_main, srv) != 0) {
                        srv->nworkers = i;
                        return -EAGAIN;
                }
        const struct http_options *opt = &srv->opt;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                         MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG | MHD_USE_ITC |
                         (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        srv->mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, srv,
                                    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
                                    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                    MHD_OPTION_THREAD_POOL_SIZE, opt->threads,
                                    MHD_OPTION_CONNECTION_LIMIT, opt->max_connections,
                                    MHD_OPTION_CONNECTION_TIMEOUT, opt->timeout_s,
                                    MHD_OPTION_CONNECTION_MEMORY_LIMIT, opt->header_bytes,
                                    MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                                    MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                                    MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
                                    MHD_OPTION_END);
        if (!srv->mhd)
                return -EADDRNOTAVAIL;
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

/* Order matters: WebSockets and raw upgrades first (MHD cannot stop under an upgraded
 * connection), then no producer may resume a connection any more, then the
 * workers (they resume theirs), then MHD (its completion callbacks tell the
 * remaining streams their client is gone), then the producers' exits. */
void http_server_stop(struct http_server *s)
{
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_broadcast(&s->cond);
        pthread_cond_broadcast(&s->work_cond);
        pthread_mutex_unlock(&s->lock);
        upgraded_stop_all(s);
        stream_abort_all(s); /* also closes resumes (resume_closed) */
        for (unsigned i = 0; s->workers && i < s->nworkers; i++)
                pthread_join(s->workers[i], NULL);
        if (s->mhd)
                MHD_stop_daemon(s->mhd);
        pthread_mutex_lock(&s->lock);
        while (s->nstreams > 0)
                pthread_cond_wait(&s->cond, &s->lock);
        pthread_mutex_unlock(&s->lock);
        router_free_groups(s);
        free(s->workers);
        pthread_cond_destroy(&s->cond);
        pthread_cond_destroy(&s->work_cond);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->resume_lock);
        free(s);
}
