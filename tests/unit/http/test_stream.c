/* Streamed replies over real TCP: SSE framing, backpressure against a slow
 * reader (the producer is held back, memory stays bounded), the disconnect
 * callback when the client leaves mid-stream, the stream slot limit, and
 * streams not holding the execution workers. */
#include <pthread.h>
#include <stdlib.h>

#include "base/log.h"
#include "httpc.h"

/* Shared with the producers (other threads). */
static struct {
        size_t written;             /* bytes the producer got accepted */
        int run_done, disconnected, freed, write_err;
        int release;                /* lets the parked producers finish */
} g;

#define BIG (32u << 20)
#define CHUNK (64u << 10)

static void run_sse(struct http_stream *s, void *ctx)
{
        (void)ctx;
        ASSERT_OK(http_sse_comment(s, "hello"));
        ASSERT_OK(http_sse_event(s, "out", "1", "line one\nline two"));
        ASSERT_OK(http_sse_event(s, NULL, NULL, "a\r\nb\rc"));
        ASSERT_EQ(http_sse_event(s, "bad\nevent", NULL, "x"), -EINVAL);
        ASSERT_OK(http_sse_event(s, "exit", "2", "{\"code\":0}"));
}

static void run_big(struct http_stream *s, void *ctx)
{
        (void)ctx;
        static char chunk[CHUNK];
        for (size_t i = 0; i < BIG / CHUNK; i++) {
                memset(chunk, 'a' + (int)(i % 26), sizeof(chunk));
                if (http_stream_write(s, chunk, sizeof(chunk)) < 0)
                        return;
                __atomic_add_fetch(&g.written, sizeof(chunk), __ATOMIC_RELEASE);
        }
        __atomic_store_n(&g.run_done, 1, __ATOMIC_RELEASE);
}

/* Heartbeats until the client is gone (as a shell stream would). */
static void run_forever(struct http_stream *s, void *ctx)
{
        (void)ctx;
        int r;
        while ((r = http_sse_comment(s, "beat")) == 0)
                usleep(5000);
        __atomic_store_n(&g.write_err, r, __ATOMIC_RELEASE);
        __atomic_store_n(&g.run_done, 1, __ATOMIC_RELEASE);
}

/* Sends one event, then waits (silent) until the test releases it. */
static void run_parked(struct http_stream *s, void *ctx)
{
        (void)ctx;
        http_sse_event(s, "ready", NULL, "1");
        while (!__atomic_load_n(&g.release, __ATOMIC_ACQUIRE) && !http_stream_closed(s))
                usleep(5000);
}

static void on_disconnect(void *ctx)
{
        (void)ctx;
        __atomic_store_n(&g.disconnected, 1, __ATOMIC_RELEASE);
}

static void on_free(void *ctx)
{
        (void)ctx;
        __atomic_add_fetch(&g.freed, 1, __ATOMIC_RELEASE);
}

static const struct http_stream_ops sse_ops = { run_sse, on_disconnect, on_free };
static const struct http_stream_ops big_ops = { run_big, on_disconnect, on_free };
static const struct http_stream_ops forever_ops = { run_forever, on_disconnect, on_free };
static const struct http_stream_ops parked_ops = { run_parked, on_disconnect, on_free };

static void h_sse(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_response_header(res, "X-Stream", "yes"));
        ASSERT_OK(http_stream(res, 200, NULL, &sse_ops, NULL));
}

static void h_big(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_stream(res, 200, "application/octet-stream", &big_ops, NULL));
}

static void h_forever(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_stream(res, 200, NULL, &forever_ops, NULL));
}

static void h_parked(struct http_request *req, struct http_response *res)
{
        (void)req;
        ASSERT_OK(http_stream(res, 200, NULL, &parked_ops, NULL));
}

static void h_block(struct http_request *req, struct http_response *res)
{
        (void)req;
        usleep(50000);
        http_json(res, 200, json_pack("{s:b}", "blocked", true));
}

static const struct route routes[] = {
        { "GET", "/sse", h_sse, 0, NULL },
        { "GET", "/big", h_big, 0, NULL },
        { "GET", "/forever", h_forever, 0, NULL },
        { "GET", "/parked", h_parked, 0, NULL },
        { "POST", "/block", h_block, ROUTE_BLOCKING, NULL },
};

static struct http_server *start(unsigned max_streams)
{
        log_set_level(LOG_WARN);
        struct http_options opt = test_options();
        opt.max_streams = max_streams;
        opt.stream_buffer = 64 * 1024;
        struct http_server *s;
        ASSERT_OK(http_server_new(&opt, NULL, &s));
        struct http_group *grp = http_server_group(s, NULL, NULL, NULL);
        ASSERT_OK(http_group_routes(grp, routes, ARRAY_SIZE(routes)));
        ASSERT_OK(http_server_start(s));
        return s;
}

TEST(sse_events_are_framed)
{
        struct http_server *s = start(4);
        struct resp r;
        get_expect(http_server_port(s), "/sse", NULL, 200, "text/event-stream", &r);
        char v[128];
        ASSERT_STREQ(resp_header(&r, "Transfer-Encoding", v, sizeof(v)), "chunked");
        ASSERT_STREQ(resp_header(&r, "X-Stream", v, sizeof(v)), "yes");
        ASSERT_STREQ(r.body.data, ": hello\n\n"
                                  "event: out\nid: 1\ndata: line one\ndata: line two\n\n"
                                  "data: a\ndata: b\ndata: c\n\n"
                                  "event: exit\nid: 2\ndata: {\"code\":0}\n\n");
        http_server_stop(s);
        /* A stream that ran to its end is no disconnect; its ctx is freed. */
        ASSERT_EQ(g.disconnected, 0);
        ASSERT_EQ(g.freed, 1);
        resp_free(&r);
}

TEST(slow_reader_holds_the_producer_back)
{
        struct http_server *s = start(4);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int small = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(s)) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        send_str(fd, "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        struct resp r = { 0 };
        read_head(fd, &r);
        ASSERT_EQ(r.status, 200);

        /* The client reads nothing for a while: the producer must stop
         * well short of the 32 MiB it wants to write. What it got accepted
         * is bounded by the ring (64 KiB), MHD's buffer and the kernel's
         * socket buffers (tcp_wmem max 4 MiB here), never the whole body. */
        usleep(800 * 1000);
        size_t w1 = __atomic_load_n(&g.written, __ATOMIC_ACQUIRE);
        usleep(300 * 1000);
        size_t w2 = __atomic_load_n(&g.written, __ATOMIC_ACQUIRE);
        ASSERT_TRUE(!__atomic_load_n(&g.run_done, __ATOMIC_ACQUIRE));
        if (w2 > 8u << 20)
                TAP_FAIL("producer not held back: %zu bytes accepted with no reader", w2);
        ASSERT_EQ(w1, w2); /* parked, not creeping */

        /* Reading resumes: every byte arrives, in order, and the producer
         * finishes. */
        struct buf body;
        buf_init(&body, SIZE_MAX);
        read_until_eof(fd, &body);
        close(fd);
        ASSERT_OK(buf_append(&body, "", 0));
        dechunk(&body);
        ASSERT_EQ(body.len, BIG);
        for (size_t i = 0; i < BIG / CHUNK; i++)
                if (body.data[i * CHUNK] != 'a' + (int)(i % 26) || body.data[i * CHUNK + CHUNK - 1] != body.data[i * CHUNK])
                        TAP_FAIL("chunk %zu corrupt", i);
        ASSERT_TRUE(wait_flag(&g.run_done, 2000));
        buf_free(&body);
        http_server_stop(s);
        ASSERT_EQ(g.disconnected, 0);
        ASSERT_EQ(g.freed, 1);
}

TEST(client_leaving_mid_stream_fires_disconnect)
{
        struct http_server *s = start(4);
        struct resp r;
        int fd = open_get(http_server_port(s), "/forever", NULL, 200, &r);
        char some[64];
        ASSERT_TRUE(read(fd, some, sizeof(some)) > 0);
        ASSERT_EQ(g.disconnected, 0);
        ASSERT_EQ(http_server_streams(s), 1);
        close(fd);
        /* The callback fires, the producer's next write fails with EPIPE,
         * the ctx is freed and the slot comes back — all without a stop. */
        ASSERT_TRUE(wait_flag(&g.disconnected, 3000));
        ASSERT_TRUE(wait_flag(&g.run_done, 3000));
        ASSERT_EQ(g.write_err, -EPIPE);
        ASSERT_TRUE(wait_flag(&g.freed, 3000));
        for (int i = 0; i < 200 && http_server_streams(s) > 0; i++)
                usleep(5000);
        ASSERT_EQ(http_server_streams(s), 0);
        http_server_stop(s);
}

TEST(stream_slots_are_bounded_and_do_not_hold_workers)
{
        /* workers = 1 (test_options); 3 stream slots, all taken. */
        struct http_server *s = start(3);
        unsigned port = http_server_port(s);
        int fds[3];
        struct resp r;
        for (int i = 0; i < 3; i++)
                fds[i] = open_get(port, "/parked", NULL, 200, &r);
        ASSERT_EQ(http_server_streams(s), 3);
        request(port, "GET", "/parked", NULL, &r);
        ASSERT_EQ(r.status, 503);
        char v[32];
        ASSERT_STREQ(resp_header(&r, "Retry-After", v, sizeof(v)), "1");
        resp_free(&r);
        /* The only execution worker is free: blocking routes still answer,
         * one after another. */
        for (int i = 0; i < 3; i++) {
                uint64_t t0 = now_ms();
                request(port, "POST", "/block", "Content-Length: 0\r\n", &r);
                ASSERT_EQ(r.status, 200);
                ASSERT_TRUE(now_ms() - t0 < 2000);
                resp_free(&r);
        }
        __atomic_store_n(&g.release, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < 3; i++)
                close(fds[i]);
        http_server_stop(s);
        ASSERT_EQ(g.freed, 4); /* the refused one too */
}

TEST(stop_with_open_streams_disconnects_them)
{
        struct http_server *s = start(4);
        struct resp r;
        int fd = open_get(http_server_port(s), "/forever", NULL, 200, &r);
        http_server_stop(s);
        ASSERT_EQ(g.disconnected, 1);
        ASSERT_EQ(g.run_done, 1);
        ASSERT_EQ(g.freed, 1);
        close(fd);
}

TEST(client_reading_nothing_is_dropped_by_the_idle_timeout)
{
        log_set_level(LOG_WARN);
        struct http_options opt = test_options();
        opt.timeout_s = 1;
        struct http_server *s;
        ASSERT_OK(http_server_new(&opt, NULL, &s));
        ASSERT_OK(http_group_routes(http_server_group(s, NULL, NULL, NULL), routes, ARRAY_SIZE(routes)));
        ASSERT_OK(http_server_start(s));
        struct resp r;
        int fd = open_get(http_server_port(s), "/big", NULL, 200, &r);
        /* Never read: the producer parks, the socket stays full, MHD sees
         * no progress and closes the connection: a disconnect. */
        ASSERT_TRUE(wait_flag(&g.disconnected, 5000));
        ASSERT_TRUE(!g.run_done);
        close(fd);
        http_server_stop(s);
        ASSERT_EQ(g.freed, 1);
}
