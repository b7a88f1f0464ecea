/* The WebSocket client under client/ws.h: the Upgrade handshake by hand on
 * a TCP socket, then wslay's client context (it masks every frame). */
#include "client/ws.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/io.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* The answer's head; a body (an error's JSON) up to this much is kept. */
#define WS_HEAD_MAX (16 * 1024)
#define WS_ERROR_BODY_MAX (64 * 1024)
#define WS_CONNECT_TIMEOUT_MS 10000

struct client_ws {
        int sock;
        wslay_event_context_ptr wslay;
        client_ws_message_fn fn;
        void *cls;
        bool gone;
};

/* ---- the URL: http://host[:port][/prefix] ---- */

struct ws_target {
        char host[256];         /* without brackets */
        char port[8];
        char host_header[300];  /* as written in the URL */
        char prefix[512];       /* path before the request's, without a trailing '/' */
};

static int parse_url(const char *url, struct ws_target *t, struct err *err)
{
        if (!strncasecmp(url, "https://", 8))
                return err_set(err, ERR_INVALID, EPROTONOSUPPORT,
                               "the terminal needs an http:// server URL (wss:// over TLS is not supported): %s", url);
        if (strncasecmp(url, "http://", 7))
                return err_set(err, ERR_INVALID, EINVAL, "not an http:// URL: %s", url);
        const char *h = url + 7, *slash = strchr(h, '/');
        size_t hlen = slash ? (size_t)(slash - h) : strlen(h);
        if (hlen == 0 || hlen >= sizeof(t->host_header))
                return err_set(err, ERR_INVALID, EINVAL, "bad server URL: %s", url);
        snprintf(t->host_header, sizeof(t->host_header), "%.*s", (int)hlen, h);
        snprintf(t->prefix, sizeof(t->prefix), "%s", slash ? slash : "");
        const char *port = NULL, *end = h + hlen;
        if (*h == '[') {
                const char *close = memchr(h, ']', hlen);
                if (!close)
                        return err_set(err, ERR_INVALID, EINVAL, "bad server URL: %s", url);
                snprintf(t->host, sizeof(t->host), "%.*s", (int)(close - h - 1), h + 1);
                port = close[1] == ':' ? close + 2 : NULL;
        } else {
                const char *colon = memchr(h, ':', hlen);
                snprintf(t->host, sizeof(t->host), "%.*s", (int)((colon ? colon : end) - h), h);
                port = colon ? colon + 1 : NULL;
        }
        snprintf(t->port, sizeof(t->port), "%.*s", port ? (int)(end - port) : 2, port ? port : "80");
        return 0;
}

static int tcp_connect(const struct ws_target *t, struct err *err)
{
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
        int r = getaddrinfo(t->host, t->port, &hints, &ai);
        if (r != 0)
                return err_set(err, ERR_UNAVAILABLE, EHOSTUNREACH, "%s: %s", t->host, gai_strerror(r));
        int fd = -1, saved = ECONNREFUSED;
        for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
                fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
                if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
                        saved = errno;
                        close(fd);
                        fd = -1;
                }
        }
        freeaddrinfo(ai);
        if (fd < 0)
                return err_set(err, ERR_UNAVAILABLE, saved, "%s:%s: %s", t->host, t->port, strerror(saved));
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* keystrokes leave at once */
        return fd;
}

/* ---- the handshake ---- */

static int b64(const unsigned char *in, size_t len, char *out, size_t out_len)
{
        if (out_len < 4 * ((len + 2) / 3) + 1)
                return -ENOSPC;
        EVP_EncodeBlock((unsigned char *)out, in, (int)len);
        return 0;
}

static int accept_for(const char *key, char *out, size_t len)
{
        char text[128];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        snprintf(text, sizeof(text), "%s%s", key, WS_GUID);
        if (!EVP_Digest(text, strlen(text), md, &mdlen, EVP_sha1(), NULL))
                return -EIO;
        return b64(md, mdlen, out, len);
}

static int send_request(int fd, struct client *c, const struct ws_target *t, const char *path,
                        const char *const *headers, const char *key)
{
        struct buf b;
        buf_init(&b, WS_HEAD_MAX);
        int r = buf_printf(&b,
                           "GET %s%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nUser-Agent: sandboxd-cli\r\n",
                           t->prefix, path, t->host_header, key);
        if (r >= 0 && client_key(c)[0])
                r = buf_printf(&b, "Authorization: Bearer %s\r\n", client_key(c));
        for (const char *const *h = headers; r >= 0 && h && *h; h++)
                r = buf_printf(&b, "%s\r\n", *h);
        if (r >= 0)
                r = buf_printf(&b, "\r\n");
        if (r >= 0)
                r = write_all(fd, b.data, b.len);
        buf_free(&b);
        return r < 0 ? r : 0;
}

/* Reads the head up to its blank line, one byte at a time: not a byte
 * of the first frames is taken from the socket (the head is small). */
static int read_head(int fd, struct buf *head)
{
        while (head->len < 4 || memcmp(head->data + head->len - 4, "\r\n\r\n", 4)) {
                char c;
                ssize_t n = read(fd, &c, 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -ECONNRESET;
                if (buf_append(head, &c, 1) < 0)
                        return -E2BIG;
        }
        return 0;
}

/* The value of header name in a NUL-terminated head, into out. */
static bool head_value(const char *head, const char *name, char *out, size_t len)
{
        size_t nlen = strlen(name);
        for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
                const char *p = l + 2;
                if (strncasecmp(p, name, nlen) || p[nlen] != ':')
                        continue;
                p += nlen + 1;
                while (*p == ' ' || *p == '\t')
                        p++;
                const char *e = strstr(p, "\r\n");
                size_t vlen = e ? (size_t)(e - p) : strlen(p);
                snprintf(out, len, "%.*s", (int)vlen, p);
                return true;
        }
        return false;
}

/* A refusal: the status and the body (by Content-Length, else to EOF). */
static int refusal(int fd, const struct buf *head, long status, struct client_reply *out)
{
        char value[128];
        size_t want = WS_ERROR_BODY_MAX;
        if (head_value(head->data, "Content-Length", value, sizeof(value)))
                want = strtoul(value, NULL, 10) < want ? strtoul(value, NULL, 10) : want;
        if (head_value(head->data, "Content-Type", value, sizeof(value)))
                snprintf(out->content_type, sizeof(out->content_type), "%s", value);
        struct buf body;
        buf_init(&body, WS_ERROR_BODY_MAX + 1);
        int r = 0;
        while (r >= 0 && body.len < want) {
                char chunk[4096];
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n <= 0)
                        break;
                r = buf_append(&body, chunk, (size_t)n);
        }
        out->status = status;
        out->len = body.len < want ? body.len : want;
        out->body = strndup(body.data ? body.data : "", out->len);
        buf_free(&body);
        if (!out->body)
                return -ENOMEM;
        if (strstr(out->content_type, "json"))
                out->json = json_loadb(out->body, out->len, 0, NULL);
        return -EPROTO;
}

static int handshake(struct client_ws *ws, struct client *c, const struct ws_target *t, const char *path,
                     const char *const *headers, struct client_reply *out, struct err *err)
{
        unsigned char nonce[16];
        char key[32], expect[64], got[64];
        if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce) || b64(nonce, sizeof(nonce), key, sizeof(key)) < 0 ||
            accept_for(key, expect, sizeof(expect)) < 0)
                return err_set(err, ERR_INTERNAL, EIO, "cannot make a WebSocket key");
        int r = send_request(ws->sock, c, t, path, headers, key);
        if (r < 0)
                return err_set(err, ERR_UNAVAILABLE, -r, "%s: %s", client_url(c), strerror(-r));
        struct buf head;
        buf_init(&head, WS_HEAD_MAX);
        long status = 0;
        r = read_head(ws->sock, &head);
        if (r < 0) {
                buf_free(&head);
                return err_set(err, ERR_UNAVAILABLE, -r, "%s: no WebSocket answer (%s)", client_url(c), strerror(-r));
        }
        if (sscanf(head.data, "HTTP/%*s %ld", &status) != 1) {
                buf_free(&head);
                return err_set(err, ERR_UNAVAILABLE, EBADMSG, "%s: not an HTTP answer", client_url(c));
        }
        if (status != 101) {
                r = refusal(ws->sock, &head, status, out);
                buf_free(&head);
                return r;
        }
        if (!head_value(head.data, "Sec-WebSocket-Accept", got, sizeof(got)) || strcmp(got, expect)) {
                buf_free(&head);
                return err_set(err, ERR_UNAVAILABLE, EBADMSG, "%s: bad Sec-WebSocket-Accept", client_url(c));
        }
        buf_free(&head);
        return 0;
}

/* ---- wslay callbacks ---- */

/* What a socket call gave, for wslay: the byte count, or -1 with wslay's
 * error set (would block; or the peer is gone, which ends the connection). */
static ssize_t io_result(struct client_ws *ws, wslay_event_context_ptr ctx, ssize_t n, bool eof_is_gone)
{
        if (n > 0 || (n == 0 && !eof_is_gone))
                return n;
        bool again = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
        ws->gone = ws->gone || !again;
        wslay_event_set_error(ctx, again ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
        (void)flags;
        struct client_ws *ws = user;
        return io_result(ws, ctx, recv(ws->sock, buf, len, 0), true);
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
        struct client_ws *ws = user;
        /* A frame's header and payload leave as one segment (MSG_MORE). */
        int f = MSG_NOSIGNAL | (flags & WSLAY_MSG_MORE ? MSG_MORE : 0);
        return io_result(ws, ctx, send(ws->sock, data, len, f), false);
}

static int on_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
        (void)ctx, (void)user;
        return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
        (void)ctx;
        struct client_ws *ws = user;
        if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
                ws->fn(ws->cls, arg->opcode == WSLAY_BINARY_FRAME, arg->msg, arg->msg_length);
}

/* ---- public calls ---- */

int client_ws_connect(struct client *c, const char *path, const char *const *headers, client_ws_message_fn fn,
                      void *cls, struct client_ws **ret, struct client_reply *out, struct err *err)
{
        memset(out, 0, sizeof(*out));
        struct ws_target t;
        int r = parse_url(client_url(c), &t, err);
        if (r < 0)
                return r;
        struct client_ws *ws = calloc(1, sizeof(*ws));
        if (!ws)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        ws->fn = fn;
        ws->cls = cls;
        ws->sock = tcp_connect(&t, err);
        if (ws->sock < 0) {
                r = ws->sock;
                client_ws_free(ws);
                return r;
        }
        struct timeval tv = { .tv_sec = WS_CONNECT_TIMEOUT_MS / 1000 };
        setsockopt(ws->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* a server that never answers */
        r = handshake(ws, c, &t, path, headers, out, err);
        static const struct wslay_event_callbacks cbs = { .recv_callback = on_recv, .send_callback = on_send,
                                                           .genmask_callback = on_genmask,
                                                           .on_msg_recv_callback = on_msg };
        if (r == 0 && wslay_event_context_client_init(&ws->wslay, &cbs, ws) != 0)
                r = err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        if (r < 0) {
                client_ws_free(ws);
                return r;
        }
        wslay_event_config_set_max_recv_msg_length(ws->wslay, 16 * MiB);
        int fl = fcntl(ws->sock, F_GETFL);
        fcntl(ws->sock, F_SETFL, fl | O_NONBLOCK);
        *ret = ws;
        return 0;
}

void client_ws_free(struct client_ws *ws)
{
        if (!ws)
                return;
        if (ws->wslay)
                wslay_event_context_free(ws->wslay);
        if (ws->sock >= 0)
                close(ws->sock);
        free(ws);
}

int client_ws_fd(const struct client_ws *ws)
{
        return ws->sock;
}

bool client_ws_want_write(const struct client_ws *ws)
{
        return wslay_event_want_write(ws->wslay);
}

int client_ws_send(struct client_ws *ws, bool binary, const void *data, size_t len)
{
        struct wslay_event_msg msg = { binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME, data, len };
        if (ws->gone || wslay_event_get_close_sent(ws->wslay))
                return -EPIPE;
        return wslay_event_queue_msg(ws->wslay, &msg) == 0 ? 0 : -ENOMEM;
}

int client_ws_close(struct client_ws *ws, uint16_t code)
{
        if (ws->gone || wslay_event_get_close_sent(ws->wslay))
                return 0;
        return wslay_event_queue_close(ws->wslay, code, NULL, 0) == 0 ? 0 : -ENOMEM;
}

int client_ws_pump(struct client_ws *ws, short revents)
{
        bool readable = revents & (POLLIN | POLLHUP | POLLERR);
        if (!ws->gone && readable && wslay_event_want_read(ws->wslay) && wslay_event_recv(ws->wslay) != 0)
                ws->gone = true;
        if (!ws->gone && wslay_event_want_write(ws->wslay) && wslay_event_send(ws->wslay) != 0)
                ws->gone = true;
        if (ws->gone)
                return 0;
        /* Both closes exchanged (or the server's close answered): over. */
        return wslay_event_want_read(ws->wslay) || wslay_event_want_write(ws->wslay) ? 1 : 0;
}

uint16_t client_ws_close_code(const struct client_ws *ws)
{
        return wslay_event_get_close_received(ws->wslay) ? wslay_event_get_status_code_received(ws->wslay) : 0;
}
