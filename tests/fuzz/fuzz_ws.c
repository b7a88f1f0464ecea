/* Fuzzes WebSocket frame handling (src/http/ws.c: wslay with the server's
 * callbacks, message cap and close rules) through http_ws_feed: the input
 * is whatever a client sends after a valid handshake. The handler echoes
 * every message, and a message starting with 'C' also closes (4000 "bye"),
 * so the ordered close is exercised too.
 *
 * Invariants:
 *  - a message delivered is text or binary, at most HTTP_WS_MAX_MESSAGE
 *    bytes; a text message is valid UTF-8 (RFC 6455 §8.1);
 *  - on_open runs once before any message, on_close once after all, then
 *    free once;
 *  - what the server writes parses as unmasked frames with no RSV bits and
 *    a known opcode; control frames have FIN and at most 125 bytes; a
 *    close frame's code, if any, is one a server may send (1000-1003,
 *    1007-1011, 3000-4999) and nothing follows the close frame;
 *  - when the close frame is the handler's, every echo queued before it
 *    arrives before it (http_ws_close queues behind them).
 * Everything allocated is freed (LeakSanitizer checks that). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/utf8.h"
#include "fuzz.h"
#include "http/server.h"

struct state {
        int opened, closed, freed;
        size_t messages, echoes;     /* messages seen, echoes queued before the close */
        bool closing;                /* the handler called http_ws_close */
        unsigned peer_code;          /* on_close's: the client's close code, 1006 without one */
};

static void on_open(struct http_ws *ws, void *ctx)
{
        (void)ws;
        struct state *st = ctx;
        CHECK(st->opened == 0 && st->messages == 0);
        st->opened++;
}

static void on_message(struct http_ws *ws, void *ctx, bool binary, const void *data, size_t len)
{
        struct state *st = ctx;
        CHECK(st->opened == 1 && st->closed == 0);
        CHECK(len <= HTTP_WS_MAX_MESSAGE);
        CHECK(binary || utf8_valid(data, len));
        st->messages++;
        if (http_ws_send(ws, binary, data, len) == 0) {
                CHECK(!st->closing); /* nothing is queued after a close */
                st->echoes++;
        }
        if (len && ((const char *)data)[0] == 'C' && http_ws_close(ws, 4000, "bye") == 0)
                st->closing = true;
}

static void on_close(struct http_ws *ws, void *ctx, unsigned code)
{
        (void)ws;
        struct state *st = ctx;
        CHECK(st->opened == 1 && st->closed == 0);
        st->closed++;
        st->peer_code = code;
}

static void on_free(void *ctx)
{
        struct state *st = ctx;
        st->freed++;
}

static const struct http_ws_ops ops = { on_open, on_message, on_close, on_free };

static bool close_code_ok(unsigned c)
{
        return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1011) || (c >= 3000 && c <= 4999);
}

/* Checks the server's frames in out[0..len); returns how many data
 * frames came before the close frame (or in all, without one). */
static size_t check_server_frames(const unsigned char *out, size_t len, bool *ret_closed, unsigned *ret_code)
{
        size_t off = 0, data_frames = 0;
        *ret_closed = false;
        while (off + 2 <= len) {
                unsigned b0 = out[off], b1 = out[off + 1];
                size_t n = b1 & 0x7f, hdr = 2;
                CHECK(!(b1 & 0x80));         /* a server never masks */
                CHECK((b0 & 0x70) == 0);     /* no RSV bits */
                unsigned op = b0 & 0x0f;
                CHECK(op == 0x0 || op == 0x1 || op == 0x2 || op == 0x8 || op == 0x9 || op == 0xA);
                if (n == 126 || n == 127) {
                        hdr += n == 126 ? 2 : 8;
                        if (off + hdr > len)
                                break;
                        n = 0;
                        for (size_t i = 2; i < hdr; i++)
                                n = n << 8 | out[off + i];
                }
                if (off + hdr + n > len)
                        break;               /* the socket buffer filled: a partial last frame */
                if (op >= 0x8)
                        CHECK((b0 & 0x80) && n <= 125);
                CHECK(!*ret_closed);         /* nothing after a close frame */
                if (op == 0x8) {
                        *ret_closed = true;
                        CHECK(n != 1);
                        if (n >= 2) {
                                *ret_code = out[off + hdr] << 8 | out[off + hdr + 1];
                                CHECK(close_code_ok(*ret_code));
                        }
                } else if (op == 0x1 || op == 0x2) {
                        data_frames++;
                }
                off += hdr + n;
        }
        return data_frames;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return 0;
        int big = 4 << 20;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
        struct state st = { 0 };
        int r = http_ws_feed(&ops, &st, sv[0], data, size);
        CHECK(st.freed == 1);
        if (r == 0)
                CHECK(st.opened == 1 && st.closed == 1);
        /* Everything the server wrote, then its frames. */
        size_t cap = 1 << 16, len = 0;
        unsigned char *out = malloc(cap);
        CHECK(out != NULL);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);
        for (;;) {
                if (len == cap) {
                        cap *= 2;
                        out = realloc(out, cap);
                        CHECK(out != NULL);
                }
                ssize_t n = read(sv[1], out + len, cap - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        bool closed;
        unsigned code = 0;
        size_t data_frames = check_server_frames(out, len, &closed, &code);
        /* The handler's close came after its echoes: when its frame is the
         * close the server sent (4000, and the client sent no close to be
         * answered), every echo is before it. A protocol error found later
         * may close first (1002), as it should. */
        if (closed && code == 4000 && st.peer_code == 1006) {
                CHECK(st.closing);
                CHECK(data_frames == st.echoes);
        }
        free(out);
        close(sv[0]);
        close(sv[1]);
        return 0;
}
