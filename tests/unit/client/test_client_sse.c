/* The client library without a server (src/client/client.c, its statics
 * included): the SSE parser fed in awkward chunks, and the error messages
 * of the three APIs' shapes. (Server/key resolution and path escaping:
 * test_client_config.c.) */
#include "../../../src/client/client.c"

#include "tap.h"

struct events {
        char log[1024];
        int stop_after; /* stop (return 7) at this event number; 0 = never */
        int n;
};

static int on_event(void *cls, const char *event, const char *data, size_t len)
{
        struct events *e = cls;
        size_t o = strlen(e->log);
        snprintf(e->log + o, sizeof(e->log) - o, "[%s:%.*s]", event, (int)len, data);
        return ++e->n == e->stop_after ? 7 : 0;
}

static int feed(struct events *e, const char *text, size_t chunk)
{
        struct transfer t = { .sse = on_event, .sse_cls = e };
        transfer_init(&t);
        int r = 0;
        for (size_t i = 0; r == 0 && i < strlen(text); i += chunk) {
                size_t n = strlen(text) - i < chunk ? strlen(text) - i : chunk;
                r = sse_feed(&t, text + i, n);
        }
        buf_free(&t.line);
        buf_free(&t.data);
        buf_free(&t.body);
        return r;
}

static const char stream[] = ": a comment\n"
                             "event: stdout\ndata: aGkK\n\n"
                             "event: stderr\r\ndata: one\r\ndata:two\r\n\r\n"
                             "data: unnamed\n\n"
                             "\n\n"
                             "event: exit\ndata: {\"exit_code\":3}\n\n";

TEST(sse_events_whatever_the_chunking)
{
        for (size_t chunk = 1; chunk <= sizeof(stream); chunk++) {
                struct events e = { 0 };
                ASSERT_EQ(feed(&e, stream, chunk), 0);
                ASSERT_STREQ(e.log, "[stdout:aGkK][stderr:one\ntwo][message:unnamed][exit:{\"exit_code\":3}]");
        }
}

TEST(sse_callback_stops_the_stream)
{
        struct events e = { .stop_after = 2 };
        ASSERT_EQ(feed(&e, stream, 5), 7);
        ASSERT_STREQ(e.log, "[stdout:aGkK][stderr:one\ntwo]");
}

static void message_of(const char *body, long status, char *out, size_t len)
{
        struct client_reply r = { .status = status, .body = (char *)body, .json = json_loads(body, 0, NULL) };
        client_reply_message(&r, out, len);
        json_decref(r.json);
}

TEST(reply_message_of_each_api)
{
        char m[256];
        message_of("{\"code\":\"FILE_NOT_FOUND\",\"message\":\"No such file\"}", 404, m, sizeof(m));
        ASSERT_STREQ(m, "No such file (FILE_NOT_FOUND, HTTP 404)");
        message_of("{\"error\":\"Invalid sandbox ID format\",\"code\":\"invalid_request\"}", 400, m, sizeof(m));
        ASSERT_STREQ(m, "Invalid sandbox ID format (invalid_request, HTTP 400)");
        message_of("{\"error\":{\"code\":\"AUTH_REQUIRED\",\"message\":\"Authentication required\"}}", 401, m,
                   sizeof(m));
        ASSERT_STREQ(m, "Authentication required (AUTH_REQUIRED, HTTP 401)");
        message_of("<html>bad gateway</html>", 502, m, sizeof(m));
        ASSERT_STREQ(m, "HTTP 502: <html>bad gateway</html>");
}
