/* WebSocket replies: the RFC 6455 handshake on MHD's upgrade support, then
 * frames with wslay (masking, fragments, ping → pong, close handshake).
 *
 * Each upgraded connection runs on its own thread (holding one of the
 * server's max_streams slots): poll on the socket and an eventfd that
 * http_ws_send/close use to say "something is queued". wslay's context is
 * not thread-safe: a recursive lock guards it, recursive because
 * on_message runs inside wslay_event_recv and may send. */
#include <fcntl.h>
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
        uint64_t close_deadline;    /* ms; set when our close frame is queued */
};

int http_websocket(struct http_response *res, const struct http_ws_ops *ops, void *ctx)
{
        struct http_ws *ws = reply_alloc_kind(res, HTTP_REPLY_WEBSOCKET, 101, sizeof(*ws), ops->free, ctx);
        if (!ws)
                return -ENOMEM;
        ws->ops = ops;
        ws->ctx = ctx;
        ws->wake_fd = -1;
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&ws->lock, &a);
        pthread_mutexattr_destroy(&a);
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
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        else
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE); /* EOF or reset */
        return -1;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
        (void)flags;
        struct http_ws *ws = user;
        ssize_t n = send(ws->sock, data, len, MSG_NOSIGNAL);
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

/* ---- public calls ---- */

int http_ws_send(struct http_ws *ws, bool binary, const void *data, size_t len)
{
        struct wslay_event_msg msg = { binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME, data, len };
        pthread_mutex_lock(&ws->lock);
        int r = wslay_event_get_queued_msg_length(ws->wslay) > WS_MAX_QUEUED ? -EAGAIN : 0;
        if (r == 0 && wslay_event_queue_msg(ws->wslay, &msg) != 0)
                r = wslay_event_get_close_sent(ws->wslay) ? -EPIPE : -ENOMEM;
        pthread_mutex_unlock(&ws->lock);
        if (r == 0)
                wake(ws);
        return r;
}

int http_ws_close(struct http_ws *ws, unsigned code, const char *reason)
{
        pthread_mutex_lock(&ws->lock);
        int r = wslay_event_queue_close(ws->wslay, (uint16_t)code, (const uint8_t *)reason,
                                        reason ? strlen(reason) : 0);
        pthread_mutex_unlock(&ws->lock);
        wake(ws);
        return r == 0 ? 0 : -EPIPE;
}

/* ---- the connection's thread ---- */

/* One poll round; false when the connection is over. */
static bool ws_step(struct http_ws *ws)
{
        pthread_mutex_lock(&ws->lock);
        if (__atomic_load_n(&ws->stop, __ATOMIC_ACQUIRE) && !wslay_event_get_close_sent(ws->wslay))
                wslay_event_queue_close(ws->wslay, WSLAY_CODE_GOING_AWAY, NULL, 0);
        bool rd = wslay_event_want_read(ws->wslay), wr = wslay_event_want_write(ws->wslay);
        bool closing = wslay_event_get_close_sent(ws->wslay);
        pthread_mutex_unlock(&ws->lock);
        if (!rd && !wr)
                return false;
        /* A peer that keeps sending after our close frame must not hold
         * the thread (and a server stop) for ever. */
        if (closing && !ws->close_deadline)
                ws->close_deadline = now_ms() + WS_CLOSE_WAIT_MS;
        if (closing && now_ms() > ws->close_deadline)
                return false;
        struct pollfd p[2] = { { ws->sock, (short)((rd ? POLLIN : 0) | (wr ? POLLOUT : 0)), 0 },
                               { ws->wake_fd, POLLIN, 0 } };
        int n = poll(p, 2, closing ? WS_CLOSE_WAIT_MS : -1);
        if (n == 0)
                return false; /* the peer never answered our close */
        if (n < 0)
                return errno == EINTR;
        uint64_t v;
        if ((p[1].revents & POLLIN) && read(ws->wake_fd, &v, sizeof(v)) < 0)
                log_debug("msg=\"websocket wake read failed\"");
        int r = 0;
        pthread_mutex_lock(&ws->lock);
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
                r = wslay_event_recv(ws->wslay);
        if (r == 0 && wslay_event_want_write(ws->wslay))
                r = wslay_event_send(ws->wslay);
        pthread_mutex_unlock(&ws->lock);
        return r == 0;
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
                alive = wslay_event_recv(ws->wslay) == 0;
                pthread_mutex_unlock(&ws->lock);
        }
        while (alive && ws_step(ws))
                ;
        unsigned code = wslay_event_get_close_received(ws->wslay) ? wslay_event_get_status_code_received(ws->wslay)
                                                                   : WSLAY_CODE_ABNORMAL_CLOSURE;
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
        if (wslay_event_context_server_init(&ws->wslay, &cb, ws) != 0)
                return -ENOMEM;
        wslay_event_config_set_max_recv_msg_length(ws->wslay, HTTP_WS_MAX_MESSAGE);
        return 0;
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
