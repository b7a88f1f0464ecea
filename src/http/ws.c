/* WebSocket replies: the RFC 6455 handshake on MHD's upgrade support, then
 * frames with wslay (masking, fragments, ping → pong, close handshake).
 *
 * Each upgraded connection runs on its own thread (holding one of the
 * server's max_streams slots): poll on the socket and an eventfd that
 * http_ws_send/close use to say "something is queued". wslay's context is
 * not thread-safe: a recursive lock guards it, recursive because
 * on_message runs inside wslay_event_recv and may send. */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "base/log.h"
#include "http/internal.h"

/* Queued but unsent bytes beyond which http_ws_send says -EAGAIN. */
#define WS_MAX_QUEUED (4u << 20)
/* How long a closing connection waits for the peer's close frame. */
#define WS_CLOSE_WAIT_MS 2000
/* How long http_ws_close lets the messages queued before it drain; a
 * peer that reads nothing gets the close frame ahead of them after that. */
#define WS_CLOSE_DRAIN_MS 10000
/* How long a closed connection still reads (and drops) what arrives. */
#define WS_LINGER_MS 1000

struct http_ws {
        struct upgraded link;       /* first: the list's entry is the ws */
        struct http_server *srv;
        const struct http_ws_ops *ops;
        void *ctx;
        pthread_mutex_t lock;       /* recursive; guards wslay */
        wslay_event_context_ptr wslay;
        MHD_socket sock;
        struct MHD_UpgradeResponseHandle *urh;
        char *extra;                /* bytes MHD read past the handshake */
        size_t extra_len, extra_off;
        int wake_fd;
        bool slot_held, stop;
        bool peer_gone;             /* recv saw EOF or a reset */
        uint64_t close_deadline;    /* ms; set when our close frame is sent */
        /* http_ws_close's frame, queued once the messages before it are
         * sent (wslay itself sends control frames first). Under lock. */
        bool close_pending, close_queued;
        uint16_t close_code;
        uint8_t close_reason[123];  /* a close payload is at most 125 bytes */
        size_t close_reason_len;
        uint64_t close_by;          /* ms: queue it now even if messages wait */
};

static void ws_init(struct http_ws *ws, const struct http_ws_ops *ops, void *ctx)
{
        ws->ops = ops;
        ws->ctx = ctx;
        ws->wake_fd = -1;
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&ws->lock, &a);
        pthread_mutexattr_destroy(&a);
}

int http_websocket(struct http_response *res, const struct http_ws_ops *ops, void *ctx)
{
        struct http_ws *ws = reply_alloc_kind(res, HTTP_REPLY_WEBSOCKET, 101, sizeof(*ws), ops->free, ctx);
        if (!ws)
                return -ENOMEM;
        ws_init(ws, ops, ctx);
        res->ws = ws;
        return 0;
}

static void ws_free(struct http_ws *ws)
{
        if (ws->wslay)
                wslay_event_context_free(ws->wslay);
        if (ws->wake_fd >= 0)
                close(ws->wake_fd);
        if (ws->ops->free)
                ws->ops->free(ws->ctx);
        struct http_server *srv = ws->slot_held ? ws->srv : NULL;
        pthread_mutex_destroy(&ws->lock);
        free(ws->extra);
        free(ws);
        if (srv)
                slot_release(srv);
}

/* Never upgraded (replaced, refused, or the client left before the 101). */
void ws_abandon(struct http_ws *ws)
{
        ws_free(ws);
}

static void wake(struct http_ws *ws)
{
        uint64_t one = 1;
        if (write(ws->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                log_debug("msg=\"websocket wake failed\"");
}

/* Server stop: a 1001 close (the thread waits at most WS_CLOSE_WAIT_MS
 * for the peer's answer). Called under srv->lock. */
static void ws_stop(struct upgraded *u)
{
        struct http_ws *ws = (struct http_ws *)u;
        __atomic_store_n(&ws->stop, true, __ATOMIC_RELEASE);
        wake(ws);
}

/* ---- wslay callbacks ---- */

static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
        (void)flags;
        struct http_ws *ws = user;
        if (ws->extra_off < ws->extra_len) {
                size_t n = ws->extra_len - ws->extra_off;
                n = n < len ? n : len;
                memcpy(buf, ws->extra + ws->extra_off, n);
                ws->extra_off += n;
                return (ssize_t)n;
        }
        ssize_t n = recv(ws->sock, buf, len, 0);
        if (n > 0)
                return n;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        } else {
                ws->peer_gone = true;
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE); /* EOF or reset */
        }
        return -1;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
        struct http_ws *ws = user;
        /* wslay writes a frame's header and its payload in two calls: the
         * header is corked (MSG_MORE) so they leave as one segment. */
        ssize_t n = send(ws->sock, data, len, MSG_NOSIGNAL | (flags & WSLAY_MSG_MORE ? MSG_MORE : 0));
        if (n >= 0)
                return n;
        wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? WSLAY_ERR_WOULDBLOCK
                                                                                          : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static void ws_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
        (void)ctx;
        struct http_ws *ws = user;
        /* Control frames (ping, pong, close) are wslay's business. */
        if ((arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME) && ws->ops->on_message)
                ws->ops->on_message(ws, ws->ctx, arg->opcode == WSLAY_BINARY_FRAME, arg->msg, arg->msg_length);
}

/* Caller holds ws->lock. Messages were queued before wslay's own close
 * (a frame it refused): send them and that close (no status code: 1005)
 * for a short while, rather than end the connection with neither. */
static void flush_before_close(struct http_ws *ws)
{
        uint64_t until = now_ms() + WS_LINGER_MS;
        while (!ws->peer_gone && wslay_event_want_write(ws->wslay) && now_ms() < until) {
                if (wslay_event_send(ws->wslay) != 0)
                        return;
                struct pollfd p = { ws->sock, POLLOUT, 0 };
                if (wslay_event_want_write(ws->wslay) && poll(&p, 1, (int)(until - now_ms())) <= 0)
                        return;
        }
}

/* Caller holds ws->lock. wslay's frame parser refuses some frames (a
 * control frame over 125 bytes or fragmented, a 64-bit length with its top
 * bit set) by queueing a close WITHOUT a status code and failing the
 * receive, so the connection would just end. RFC 6455 §7.4.1 says 1002:
 * when nothing but that close is queued (so no frame is half sent), we
 * write the 1002 close frame ourselves before the connection goes. */
static void close_protocol_error(struct http_ws *ws)
{
        static const unsigned char frame[] = { 0x88, 0x02, 0x03, 0xea }; /* FIN close, 2 bytes: 1002 */
        if (ws->peer_gone || wslay_event_get_close_sent(ws->wslay))
                return;
        if (wslay_event_get_queued_msg_count(ws->wslay) > 1) {
                flush_before_close(ws);
                return;
        }
        if (send(ws->sock, frame, sizeof(frame), MSG_NOSIGNAL) < 0)
                log_debug("msg=\"websocket close frame not sent\"");
        wslay_event_shutdown_write(ws->wslay); /* its own close must not follow ours */
}

/* Caller holds ws->lock. wslay_event_recv, and the close a protocol
 * error deserves. 0 or wslay's error (the connection is over). */
static int ws_recv(struct http_ws *ws)
{
        int r = wslay_event_recv(ws->wslay);
        if (r != 0)
                close_protocol_error(ws);
        return r;
}

/* ---- public calls ---- */

int http_ws_send(struct http_ws *ws, bool binary, const void *data, size_t len)
{
        struct wslay_event_msg msg = { binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME, data, len };
        pthread_mutex_lock(&ws->lock);
        int r = ws->close_pending ? -EPIPE : wslay_event_get_queued_msg_length(ws->wslay) > WS_MAX_QUEUED ? -EAGAIN : 0;
        if (r == 0 && wslay_event_queue_msg(ws->wslay, &msg) != 0)
                r = wslay_event_get_close_sent(ws->wslay) ? -EPIPE : -ENOMEM;
        pthread_mutex_unlock(&ws->lock);
        if (r == 0)
                wake(ws);
        return r;
}

/* Caller holds ws->lock. Queues the pending close once nothing sent
 * before it waits any more (or its drain time is over). */
static void close_when_drained(struct http_ws *ws)
{
        if (!ws->close_pending || ws->close_queued ||
            (wslay_event_get_queued_msg_count(ws->wslay) > 0 && now_ms() < ws->close_by))
                return;
        ws->close_queued = true;
        wslay_event_queue_close(ws->wslay, ws->close_code, ws->close_reason, ws->close_reason_len);
}

int http_ws_close(struct http_ws *ws, unsigned code, const char *reason)
{
        pthread_mutex_lock(&ws->lock);
        int r = 0;
        if (ws->close_pending || wslay_event_get_close_sent(ws->wslay)) {
                r = -EPIPE;
        } else {
                size_t n = reason ? strlen(reason) : 0;
                ws->close_pending = true;
                ws->close_code = (uint16_t)code;
                ws->close_reason_len = n < sizeof(ws->close_reason) ? n : sizeof(ws->close_reason);
                memcpy(ws->close_reason, reason ? reason : "", ws->close_reason_len);
                ws->close_by = now_ms() + WS_CLOSE_DRAIN_MS;
                close_when_drained(ws);
        }
        pthread_mutex_unlock(&ws->lock);
        wake(ws);
        return r;
}

/* ---- the connection's thread ---- */

/* The poll timeout (ms, -1: none) before the next deadline: the peer's
 * answer to our close, or the drain time of a pending close (then the
 * close wait on top, so a peer that reads nothing cannot hold the thread
 * either). 0: a deadline has passed, the connection is over. */
static int step_timeout(struct http_ws *ws, bool closing, bool pending, uint64_t close_by)
{
        uint64_t now = now_ms();
        if (closing && !ws->close_deadline)
                ws->close_deadline = now + WS_CLOSE_WAIT_MS;
        uint64_t until = closing ? ws->close_deadline : 0;
        if (pending && !closing) {
                uint64_t give_up = close_by + WS_CLOSE_WAIT_MS;
                until = now < close_by ? close_by : give_up; /* wake at close_by to force the frame out */
                if (now >= give_up)
                        return 0;
        }
        if (!until)
                return -1;
        return now >= until ? 0 : (int)(until - now);
}

/* One poll round; false when the connection is over. */
static bool ws_step(struct http_ws *ws)
{
        pthread_mutex_lock(&ws->lock);
        if (__atomic_load_n(&ws->stop, __ATOMIC_ACQUIRE) && !wslay_event_get_close_sent(ws->wslay))
                wslay_event_queue_close(ws->wslay, WSLAY_CODE_GOING_AWAY, NULL, 0);
        close_when_drained(ws);
        bool rd = wslay_event_want_read(ws->wslay), wr = wslay_event_want_write(ws->wslay);
        bool closing = wslay_event_get_close_sent(ws->wslay);
        bool pending = ws->close_pending;
        uint64_t close_by = ws->close_by;
        pthread_mutex_unlock(&ws->lock);
        if (!rd && !wr)
                return false;
        /* A peer that keeps sending after our close frame must not hold
         * the thread (and a server stop) for ever. */
        int timeout = step_timeout(ws, closing, pending, close_by);
        if (timeout == 0)
                return false;
        struct pollfd p[2] = { { ws->sock, (short)((rd ? POLLIN : 0) | (wr ? POLLOUT : 0)), 0 },
                               { ws->wake_fd, POLLIN, 0 } };
        int n = poll(p, 2, timeout);
        if (n == 0)
                return true; /* a deadline: the next round decides */
        if (n < 0)
                return errno == EINTR;
        uint64_t v;
        if ((p[1].revents & POLLIN) && read(ws->wake_fd, &v, sizeof(v)) < 0)
                log_debug("msg=\"websocket wake read failed\"");
        int r = 0;
        pthread_mutex_lock(&ws->lock);
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
                r = ws_recv(ws);
        if (r == 0 && wslay_event_want_write(ws->wslay))
                r = wslay_event_send(ws->wslay);
        close_when_drained(ws);
        pthread_mutex_unlock(&ws->lock);
        return r == 0;
}

/* Closing a socket with unread bytes makes the kernel send a reset, and a
 * reset can destroy what the peer has not read yet: our close frame. So
 * the connection is half-closed first and what still arrives is read and
 * dropped, for a short while (a "lingering close"). */
static void linger(struct http_ws *ws)
{
        if (ws->peer_gone || shutdown(ws->sock, SHUT_WR) < 0)
                return;
        uint64_t until = now_ms() + WS_LINGER_MS;
        char sink[16384];
        for (uint64_t now = now_ms(); now < until; now = now_ms()) {
                struct pollfd p = { ws->sock, POLLIN, 0 };
                if (poll(&p, 1, (int)(until - now)) <= 0)
                        return;
                ssize_t n = recv(ws->sock, sink, sizeof(sink), 0);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                        return;
        }
}

static void *ws_thread(void *arg)
{
        struct http_ws *ws = arg;
        if (ws->ops->on_open)
                ws->ops->on_open(ws, ws->ctx);
        /* Frames the client sent with the handshake are already read. */
        bool alive = true;
        if (ws->extra_len) {
                pthread_mutex_lock(&ws->lock);
                alive = ws_recv(ws) == 0;
                pthread_mutex_unlock(&ws->lock);
        }
        while (alive && ws_step(ws))
                ;
        unsigned code = wslay_event_get_close_received(ws->wslay) ? wslay_event_get_status_code_received(ws->wslay)
                                                                   : WSLAY_CODE_ABNORMAL_CLOSURE;
        linger(ws);
        if (ws->ops->on_close)
                ws->ops->on_close(ws, ws->ctx, code);
        MHD_upgrade_action(ws->urh, MHD_UPGRADE_ACTION_CLOSE);
        upgraded_unlist(ws->srv, &ws->link);
        ws_free(ws);
        return NULL;
}

static int ws_setup(struct http_ws *ws, const char *extra, size_t extra_len)
{
        static const struct wslay_event_callbacks cb = { .recv_callback = ws_recv_cb,
                                                         .send_callback = ws_send_cb,
                                                         .on_msg_recv_callback = ws_msg_cb };
        if (extra_len && !(ws->extra = malloc(extra_len)))
                return -ENOMEM;
        if (extra_len)
                memcpy(ws->extra, extra, extra_len);
        ws->extra_len = extra_len;
        int fl = fcntl(ws->sock, F_GETFL);
        if (fl < 0 || fcntl(ws->sock, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        if ((ws->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
                return -errno;
        /* Frames are small and interactive (a terminal's keystroke echo):
         * Nagle's algorithm would hold one behind the peer's delayed ACK
         * (~40 ms a round trip). Not a TCP socket (tests): no matter. */
        int one = 1;
        if (setsockopt(ws->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
                log_debug("msg=\"websocket without TCP_NODELAY\"");
        if (wslay_event_context_server_init(&ws->wslay, &cb, ws) != 0)
                return -ENOMEM;
        wslay_event_config_set_max_recv_msg_length(ws->wslay, HTTP_WS_MAX_MESSAGE);
        return 0;
}

int http_ws_feed(const struct http_ws_ops *ops, void *ctx, int sock, const void *data, size_t len)
{
        struct http_ws *ws = calloc(1, sizeof(*ws));
        if (!ws) {
                if (ops->free)
                        ops->free(ctx);
                return -ENOMEM;
        }
        ws_init(ws, ops, ctx);
        ws->sock = sock;
        int r = ws_setup(ws, data, len);
        if (r == 0) {
                if (ops->on_open)
                        ops->on_open(ws, ctx);
                pthread_mutex_lock(&ws->lock);
                /* As ws_step: each round reads all it can (then the socket
                 * says EAGAIN) and sends; a failure ends the connection.
                 * A few rounds use the bytes up. */
                bool alive = true;
                for (int i = 0; alive && i < 8 && ws->extra_off < ws->extra_len && wslay_event_want_read(ws->wslay);
                     i++) {
                        alive = ws_recv(ws) == 0;
                        close_when_drained(ws);
                        if (alive && wslay_event_want_write(ws->wslay))
                                alive = wslay_event_send(ws->wslay) == 0;
                }
                close_when_drained(ws);
                if (alive && wslay_event_want_write(ws->wslay))
                        wslay_event_send(ws->wslay);
                unsigned code = wslay_event_get_close_received(ws->wslay)
                                        ? wslay_event_get_status_code_received(ws->wslay)
                                        : WSLAY_CODE_ABNORMAL_CLOSURE;
                pthread_mutex_unlock(&ws->lock);
                if (ops->on_close)
                        ops->on_close(ws, ctx, code);
        }
        ws_free(ws);
        return r;
}

/* MHD's upgrade handler: the 101 went out; the socket is ours until
 * MHD_upgrade_action(CLOSE). */
static void ws_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra, size_t extra_len,
                        MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
        (void)c;
        (void)cls;
        struct conn_state *st = con_cls;
        struct http_ws *ws = st->res.ws;
        st->res.ws = NULL; /* the thread owns it now */
        ws->sock = sock;
        ws->urh = urh;
        if (ws_setup(ws, extra, extra_len) == 0 && upgraded_start(ws->srv, &ws->link, ws_thread, ws))
                return;
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        ws_free(ws);
}

bool http_header_has_token(struct http_request *req, const char *name, const char *token)
{
        const char *v = http_header(req, name);
        size_t n = strlen(token);
        for (const char *p = v; p && *p;) {
                p += strspn(p, " \t,");
                size_t len = strcspn(p, " \t,");
                if (len == n && strncasecmp(p, token, n) == 0)
                        return true;
                p += len;
        }
        return false;
}

/* base64(SHA-1(key + GUID)), RFC 6455 §4.2.2. */
static int accept_key(const char *key, char out[64])
{
        char in[128];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;
        int n = snprintf(in, sizeof(in), "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
        if (n < 0 || (size_t)n >= sizeof(in) || !EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha1(), NULL))
                return -EINVAL;
        EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
        return 0;
}

struct MHD_Response *ws_response(struct conn_state *st)
{
        struct http_ws *ws = st->res.ws;
        const char *key = http_header(&st->req, "Sec-WebSocket-Key");
        const char *version = http_header(&st->req, "Sec-WebSocket-Version");
        char accept[64];
        if (strcmp(st->req.method, "GET") != 0 || !http_header_has_token(&st->req, "Upgrade", "websocket") ||
            !http_header_has_token(&st->req, "Connection", "upgrade") || !version || strcmp(version, "13") != 0 || !key ||
            strlen(key) != 24 || accept_key(key, accept) < 0) {
                http_fail(st, 400, "Expected a WebSocket handshake (version 13)");
                return NULL;
        }
        if (!slot_reserve(st->srv)) {
                http_fail(st, 503, "Too many open streams; retry later");
                st->res.retry_after = 1;
                return NULL;
        }
        ws->srv = st->srv;
        ws->slot_held = true;
        ws->link.stop = ws_stop;
        struct MHD_Response *r = MHD_create_response_for_upgrade(ws_upgraded, NULL);
        if (!r)
                return NULL;
        MHD_add_response_header(r, MHD_HTTP_HEADER_UPGRADE, "websocket");
        MHD_add_response_header(r, "Sec-WebSocket-Accept", accept);
        st->res.status = MHD_HTTP_SWITCHING_PROTOCOLS;
        return r;
}
