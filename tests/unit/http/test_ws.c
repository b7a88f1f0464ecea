/* WebSocket replies over real TCP with a minimal hand-written client (not
 * wslay, so the server is checked against the RFC, not against itself):
 * handshake, masked text and binary frames echoed, fragments joined, ping
 * answered with pong, close handshake with the code, a close queued behind
 * the messages sent before it, 1002 for frames wslay's parser refuses, bad
 * handshakes, and open WebSockets + streams not stopping a blocking route
 * with one worker. */
#include <stdlib.h>

#include "base/log.h"
#include "httpc.h"

static struct {
        int opened, closed, freed;
        unsigned close_code;
        int release;
} g;

static void on_open(struct http_ws *ws, void *ctx)
{
        (void)ctx;
        __atomic_store_n(&g.opened, 1, __ATOMIC_RELEASE);
        ASSERT_OK(http_ws_send(ws, false, "welcome", 7));
}

static void on_message(struct http_ws *ws, void *ctx, bool binary, const void *data, size_t len)
{
        (void)ctx;
        if (!binary && len == 3 && memcmp(data, "bye", 3) == 0) {
                ASSERT_OK(http_ws_close(ws, 4000, "asked"));
                return;
        }
        if (!binary && len == 5 && memcmp(data, "burst", 5) == 0) {
                /* Messages then a close: the close must not overtake them. */
                static char chunk[1000];
                for (int i = 0; i < 50; i++) {
                        memset(chunk, 'a' + i % 26, sizeof(chunk));
                        ASSERT_OK(http_ws_send(ws, true, chunk, sizeof(chunk)));
                }
                ASSERT_OK(http_ws_close(ws, 4001, "done"));
                ASSERT_EQ(http_ws_send(ws, false, "late", 4), -EPIPE);
                return;
        }
        ASSERT_OK(http_ws_send(ws, binary, data, len)); /* echo */
}

static void on_close(struct http_ws *ws, void *ctx, unsigned code)
{
        (void)ws;
        (void)ctx;
        __atomic_store_n(&g.close_code, code, __ATOMIC_RELEASE);
        __atomic_store_n(&g.closed, 1, __ATOMIC_RELEASE);
}

static void on_free(void *ctx)
{
        (void)ctx;
        __atomic_add_fetch(&g.freed, 1, __ATOMIC_RELEASE);
}

static const struct http_ws_ops echo_ops = { on_open, on_message, on_close, on_free };

static void h_ws(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_websocket(res, &echo_ops, NULL));
}

static void h_block(struct http_request *req, struct http_response *res)
{
        (void)req;
        usleep(20000);
        http_json(res, 200, json_object());
}

static void run_parked(struct http_stream *s, void *ctx)
{
        (void)ctx;
        http_sse_comment(s, "open");
        while (!__atomic_load_n(&g.release, __ATOMIC_ACQUIRE) && !http_stream_closed(s))
                usleep(5000);
}

static const struct http_stream_ops parked_ops = { .run = run_parked };

static void h_parked(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_stream(res, 200, NULL, &parked_ops, NULL));
}

static void envelope(void *cls, struct http_response *res, int status, const char *message)
{
        (void)cls;
        http_json(res, status, json_pack("{s:s}", "ws_error", message));
}

static const struct route routes[] = {
        { "GET", "/ws", h_ws, 0, NULL },
        { "GET", "/parked", h_parked, 0, NULL },
        { "POST", "/block", h_block, ROUTE_BLOCKING, NULL },
};

static struct http_server *start(void)
{
        static const struct http_group_ops ops = { .envelope = envelope };
        log_set_level(LOG_WARN);
        struct http_options opt = test_options(); /* workers = 1 */
        opt.max_streams = 8;
        struct http_server *s;
        ASSERT_OK(http_server_new(&opt, NULL, &s));
        ASSERT_OK(http_group_routes(http_server_group(s, NULL, &ops, NULL), routes, ARRAY_SIZE(routes)));
        ASSERT_OK(http_server_start(s));
        return s;
}

/* ---- a minimal RFC 6455 client ---- */

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" /* RFC 6455 §1.3's example */

static int ws_connect(unsigned port)
{
        struct resp r;
        int fd = open_get(port, "/ws",
                          "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
                          "Sec-WebSocket-Key: " KEY "\r\nSec-WebSocket-Version: 13\r\n",
                          101, &r);
        char v[128];
        ASSERT_STREQ(resp_header(&r, "Sec-WebSocket-Accept", v, sizeof(v)), ACCEPT);
        ASSERT_TRUE(resp_header(&r, "Upgrade", v, sizeof(v)) && strcasecmp(v, "websocket") == 0);
        return fd;
}

/* One client frame: always masked, as RFC 6455 §5.3 requires. */
static void send_frame(int fd, bool fin, unsigned opcode, const void *data, size_t len)
{
        unsigned char h[14], mask[4] = { 0x12, 0x34, 0x56, 0x78 };
        size_t n = 0;
        h[n++] = (unsigned char)((fin ? 0x80 : 0) | opcode);
        if (len < 126) {
                h[n++] = (unsigned char)(0x80 | len);
        } else {
                ASSERT_TRUE(len < 65536);
                h[n++] = 0x80 | 126;
                h[n++] = (unsigned char)(len >> 8);
                h[n++] = (unsigned char)len;
        }
        memcpy(h + n, mask, 4);
        n += 4;
        unsigned char *buf = malloc(n + len);
        memcpy(buf, h, n);
        for (size_t i = 0; i < len; i++)
                buf[n + i] = ((const unsigned char *)data)[i] ^ mask[i % 4];
        ASSERT_EQ(write_all(fd, buf, n + len), 0);
        free(buf);
}

static void read_exact(int fd, void *buf, size_t len)
{
        size_t got = 0;
        while (got < len) {
                ssize_t k = read(fd, (char *)buf + got, len - got);
                if (k <= 0)
                        TAP_FAIL("connection ended after %zu of %zu bytes", got, len);
                got += (size_t)k;
        }
}

struct frame {
        unsigned opcode;
        bool fin;
        size_t len;
        unsigned char data[70000];
};

/* One server frame: never masked. */
static void read_frame(int fd, struct frame *f)
{
        unsigned char h[2];
        read_exact(fd, h, 2);
        f->fin = h[0] & 0x80;
        f->opcode = h[0] & 0x0f;
        ASSERT_TRUE(!(h[1] & 0x80));
        f->len = h[1] & 0x7f;
        if (f->len == 126) {
                unsigned char e[2];
                read_exact(fd, e, 2);
                f->len = (size_t)e[0] << 8 | e[1];
        }
        ASSERT_TRUE(f->len <= sizeof(f->data));
        read_exact(fd, f->data, f->len);
}

static void expect_frame(int fd, unsigned opcode, const void *data, size_t len)
{
        static struct frame f;
        read_frame(fd, &f);
        if (f.opcode != opcode || f.len != len || memcmp(f.data, data, len) != 0 || !f.fin)
                TAP_FAIL("frame opcode %u len %zu, want opcode %u len %zu", f.opcode, f.len, opcode, len);
}

/* The next server frame is a close with code (and reason, when given). */
static void expect_close(int fd, unsigned code, const char *reason)
{
        static struct frame f;
        size_t rlen = reason ? strlen(reason) : 0;
        read_frame(fd, &f);
        ASSERT_EQ(f.opcode, 0x8);
        if (f.len < 2 || (unsigned)(f.data[0] << 8 | f.data[1]) != code ||
            (reason && (f.len != 2 + rlen || memcmp(f.data + 2, reason, rlen) != 0)))
                TAP_FAIL("close frame of %zu bytes, want code %u", f.len, code);
}

TEST(websocket_echo_ping_and_close)
{
        struct http_server *s = start();
        int fd = ws_connect(http_server_port(s));
        expect_frame(fd, 0x1, "welcome", 7);
        ASSERT_EQ(g.opened, 1);

        send_frame(fd, true, 0x1, "héllo", strlen("héllo"));
        expect_frame(fd, 0x1, "héllo", strlen("héllo"));

        unsigned char bin[300];
        for (size_t i = 0; i < sizeof(bin); i++)
                bin[i] = (unsigned char)i;
        send_frame(fd, true, 0x2, bin, sizeof(bin)); /* 16-bit length */
        expect_frame(fd, 0x2, bin, sizeof(bin));

        /* A fragmented message is delivered whole, with a ping between its
         * fragments answered at once. */
        send_frame(fd, false, 0x1, "frag", 4);
        send_frame(fd, true, 0x9, "p1", 2);
        expect_frame(fd, 0xA, "p1", 2);
        send_frame(fd, true, 0x0, "ment", 4);
        expect_frame(fd, 0x1, "fragment", 8);

        /* Client-initiated close: the server answers with the same code. */
        unsigned char close_payload[] = { 0x03, 0xe8, 'o', 'k' }; /* 1000 "ok" */
        send_frame(fd, true, 0x8, close_payload, sizeof(close_payload));
        static struct frame f;
        read_frame(fd, &f);
        ASSERT_EQ(f.opcode, 0x8);
        ASSERT_TRUE(f.len >= 2 && (f.data[0] << 8 | f.data[1]) == 1000);
        char c;
        ASSERT_EQ(read(fd, &c, 1), 0); /* and closes the TCP connection */
        ASSERT_TRUE(wait_flag(&g.freed, 3000));
        ASSERT_EQ(g.closed, 1);
        ASSERT_EQ(g.close_code, 1000);
        close(fd);
        http_server_stop(s);
}

TEST(websocket_server_close_and_peer_vanishing)
{
        struct http_server *s = start();
        int fd = ws_connect(http_server_port(s));
        expect_frame(fd, 0x1, "welcome", 7);
        send_frame(fd, true, 0x1, "bye", 3);
        expect_close(fd, 4000, "asked");
        unsigned char ack[] = { 0x0f, 0xa0 }; /* 4000 */
        send_frame(fd, true, 0x8, ack, 2);
        ASSERT_TRUE(wait_flag(&g.freed, 3000));
        ASSERT_EQ(g.close_code, 4000);
        close(fd);

        /* A client that just drops the TCP connection: 1006. */
        memset(&g, 0, sizeof(g));
        fd = ws_connect(http_server_port(s));
        expect_frame(fd, 0x1, "welcome", 7);
        close(fd);
        ASSERT_TRUE(wait_flag(&g.freed, 3000));
        ASSERT_EQ(g.close_code, 1006);
        ASSERT_EQ(http_server_streams(s), 0);
        http_server_stop(s);
}

TEST(websocket_close_follows_the_messages_queued_before_it)
{
        struct http_server *s = start();
        int fd = ws_connect(http_server_port(s));
        expect_frame(fd, 0x1, "welcome", 7);
        send_frame(fd, true, 0x1, "burst", 5);
        static struct frame f;
        for (int i = 0; i < 50; i++) {
                read_frame(fd, &f);
                if (f.opcode != 0x2 || f.len != 1000 || f.data[0] != 'a' + i % 26)
                        TAP_FAIL("frame %d: opcode %u len %zu", i, f.opcode, f.len);
        }
        expect_close(fd, 4001, "done");
        close(fd);
        ASSERT_TRUE(wait_flag(&g.freed, 3000));
        http_server_stop(s);
}

TEST(websocket_frames_wslay_refuses_get_1002)
{
        /* A control frame over 125 bytes and a fragmented one: wslay's
         * frame parser refuses both without a status of its own. */
        struct http_server *s = start();
        for (int round = 0; round < 2; round++) {
                memset(&g, 0, sizeof(g));
                int fd = ws_connect(http_server_port(s));
                expect_frame(fd, 0x1, "welcome", 7);
                char ping[126];
                memset(ping, 'p', sizeof(ping));
                if (round == 0)
                        send_frame(fd, true, 0x9, ping, sizeof(ping));
                else
                        send_frame(fd, false, 0x9, ping, 4);
                expect_close(fd, 1002, "");
                char c;
                ASSERT_EQ(read(fd, &c, 1), 0); /* then a clean end, no reset */
                close(fd);
                ASSERT_TRUE(wait_flag(&g.freed, 3000));
        }
        http_server_stop(s);
}

TEST(websocket_bad_handshake_is_400_in_the_envelope)
{
        struct http_server *s = start();
        struct resp r;
        request(http_server_port(s), "GET", "/ws", "Upgrade: websocket\r\nSec-WebSocket-Version: 8\r\n", &r);
        ASSERT_EQ(r.status, 400);
        json_t *j = resp_json(&r);
        ASSERT_TRUE(jstr(j, "ws_error") != NULL);
        json_decref(j);
        resp_free(&r);
        ASSERT_EQ(g.opened, 0);
        ASSERT_EQ(g.freed, 1); /* the handler's ctx is still released */
        http_server_stop(s);
}

TEST(open_websockets_and_streams_leave_the_worker_free)
{
        struct http_server *s = start();
        unsigned port = http_server_port(s);
        int ws1 = ws_connect(port), ws2 = ws_connect(port);
        int st[3];
        struct resp h;
        for (int i = 0; i < 3; i++)
                st[i] = open_get(port, "/parked", NULL, 200, &h);
        ASSERT_EQ(http_server_streams(s), 5);
        for (int i = 0; i < 4; i++) {
                uint64_t t0 = now_ms();
                struct resp r;
                request(port, "POST", "/block", "Content-Length: 0\r\n", &r);
                ASSERT_EQ(r.status, 200);
                ASSERT_TRUE(now_ms() - t0 < 2000);
                resp_free(&r);
        }
        /* The WebSockets still work meanwhile. */
        expect_frame(ws1, 0x1, "welcome", 7);
        send_frame(ws1, true, 0x1, "still", 5);
        expect_frame(ws1, 0x1, "still", 5);
        /* Stop with everything open: WebSockets get 1001, streams end. */
        __atomic_store_n(&g.release, 1, __ATOMIC_RELEASE);
        http_server_stop(s);
        ASSERT_EQ(g.freed, 2);
        close(ws1);
        close(ws2);
        for (int i = 0; i < 3; i++)
                close(st[i]);
}
