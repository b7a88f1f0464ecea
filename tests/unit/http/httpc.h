/* A minimal HTTP/1.1 client over real TCP for the http/ unit tests, and a
 * helper that starts the real server on 127.0.0.1, port 0. Header-only:
 * each test binary is one file. */
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/util.h"
#include "http/server.h"
#include "tap.h"

static inline struct http_options test_options(void)
{
        return (struct http_options){
                .listen = "127.0.0.1:0",
                .threads = 2,
                .max_connections = 64,
                .timeout_s = 10,
                .header_bytes = 32 * 1024,
                .default_max_body = 1024,
                .workers = 1,
                .queue = 4,
        };
}

static inline int tcp_connect(unsigned port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(fd >= 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        struct timeval tv = { .tv_sec = 10 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        return fd;
}

static inline void send_str(int fd, const char *s)
{
        ASSERT_EQ(write_all(fd, s, strlen(s)), 0);
}

static inline void send_fmt(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void send_fmt(int fd, const char *fmt, ...)
{
        char buf[4096];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        ASSERT_TRUE(n > 0 && (size_t)n < sizeof(buf));
        send_str(fd, buf);
}

struct resp {
        int status;
        char head[8192];            /* status line + headers, NUL-terminated */
        struct buf body;            /* de-chunked */
};

/* Reads up to and including the blank line after the headers, one byte at a
 * time (so nothing of the body is consumed). */
static inline void read_head(int fd, struct resp *r)
{
        size_t n = 0;
        while (n + 1 < sizeof(r->head)) {
                ssize_t k = read(fd, r->head + n, 1);
                ASSERT_TRUE(k == 1);
                n++;
                if (n >= 4 && memcmp(r->head + n - 4, "\r\n\r\n", 4) == 0)
                        break;
        }
        r->head[n] = '\0';
        ASSERT_TRUE(sscanf(r->head, "HTTP/1.1 %d", &r->status) == 1);
}

/* The value of a header in r->head (first one from *from on), or NULL. */
static inline const char *resp_header_from(const struct resp *r, const char *name, const char **from, char *out,
                                    size_t outlen)
{
        size_t n = strlen(name);
        for (const char *p = strstr(*from ? *from : r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
                const char *line = p + 2;
                if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
                        const char *v = line + n + 1;
                        v += strspn(v, " ");
                        size_t len = strcspn(v, "\r\n");
                        snprintf(out, outlen, "%.*s", (int)len, v);
                        *from = line;
                        return out;
                }
        }
        return NULL;
}

static inline const char *resp_header(const struct resp *r, const char *name, char *out, size_t outlen)
{
        const char *from = NULL;
        return resp_header_from(r, name, &from, out, outlen);
}

static inline void read_until_eof(int fd, struct buf *b)
{
        char tmp[65536];
        ssize_t k;
        while ((k = read(fd, tmp, sizeof(tmp))) > 0)
                ASSERT_OK(buf_append(b, tmp, (size_t)k));
}

/* Decodes a chunked body in place. */
static inline void dechunk(struct buf *b)
{
        size_t in = 0, out = 0;
        for (;;) {
                ASSERT_TRUE(in < b->len);
                unsigned long n = strtoul(b->data + in, NULL, 16);
                char *crlf = memmem(b->data + in, b->len - in, "\r\n", 2);
                ASSERT_TRUE(crlf != NULL);
                in = (size_t)(crlf - b->data) + 2;
                if (n == 0)
                        break;
                ASSERT_TRUE(in + n + 2 <= b->len);
                memmove(b->data + out, b->data + in, n);
                out += n;
                in += n + 2;
        }
        b->len = out;
        b->data[out] = '\0';
}

/* Sends a raw request (it should say Connection: close) and reads the whole
 * response. */
static inline void request_raw(unsigned port, const char *raw, struct resp *r)
{
        memset(r, 0, sizeof(*r));
        buf_init(&r->body, SIZE_MAX);
        int fd = tcp_connect(port);
        send_str(fd, raw);
        read_head(fd, r);
        read_until_eof(fd, &r->body);
        close(fd);
        ASSERT_OK(buf_append(&r->body, "", 0));
        char te[64];
        if (resp_header(r, "Transfer-Encoding", te, sizeof(te)) && strcasecmp(te, "chunked") == 0)
                dechunk(&r->body);
}

static inline void request(unsigned port, const char *method, const char *path, const char *extra_headers, struct resp *r)
{
        char raw[4096];
        snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s\r\n", method, path,
                 extra_headers ? extra_headers : "");
        request_raw(port, raw, r);
}

static inline json_t *resp_json(const struct resp *r)
{
        json_t *j = json_loads(r->body.data ? r->body.data : "", 0, NULL);
        ASSERT_TRUE(j != NULL);
        return j;
}

static inline const char *jstr(json_t *j, const char *key)
{
        return json_string_value(json_object_get(j, key));
}

static inline void resp_free(struct resp *r)
{
        buf_free(&r->body);
}

/* A raw upgrade's run() that echoes: the bytes sent with the head first,
 * then everything until EOF. */
static inline void echo_until_eof(int fd, const void *extra, size_t extra_len)
{
        if (extra_len)
                ASSERT_EQ(write_all(fd, extra, extra_len), 0);
        char b[4096];
        ssize_t n;
        while ((n = read(fd, b, sizeof(b))) > 0)
                if (write_all(fd, b, (size_t)n) < 0)
                        break;
}

/* Waits up to ms for *flag (written by another thread) to become nonzero. */
static inline bool wait_flag(const int *flag, unsigned ms)
{
        for (unsigned i = 0; i < ms / 5; i++) {
                if (__atomic_load_n(flag, __ATOMIC_ACQUIRE))
                        return true;
                usleep(5000);
        }
        return __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0;
}

/* request() + the status and Content-Type every reply test checks. */
static inline void get_expect(unsigned port, const char *path, const char *hdrs, int status,
                              const char *content_type, struct resp *r)
{
        request(port, "GET", path, hdrs, r);
        if (r->status != status)
                TAP_FAIL("GET %s: status %d, want %d", path, r->status, status);
        char v[128];
        if (content_type)
                ASSERT_STREQ(resp_header(r, "Content-Type", v, sizeof(v)), content_type);
}

/* Opens a GET whose reply stays open (stream, WebSocket): returns the
 * socket after the response head, which must have status. */
static inline int open_get(unsigned port, const char *path, const char *hdrs, int status, struct resp *r)
{
        int fd = tcp_connect(port);
        send_fmt(fd, "GET %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n", path, hdrs ? hdrs : "");
        memset(r, 0, sizeof(*r));
        read_head(fd, r);
        if (r->status != status)
                TAP_FAIL("GET %s: status %d, want %d", path, r->status, status);
        return fd;
}
