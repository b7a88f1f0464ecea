/* The egress proxy's upstream side (see net.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/io.h"
#include "base/util.h"
#include "sandbox/egress/net.h"

static bool addr_parse(const char *text, struct sockaddr_storage *ret)
{
        memset(ret, 0, sizeof(*ret));
        struct sockaddr_in *a4 = (struct sockaddr_in *)ret;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ret;
        if (inet_pton(AF_INET, text, &a4->sin_addr) == 1) {
                a4->sin_family = AF_INET;
                return true;
        }
        if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                return true;
        }
        return false;
}

void egress_hosts_done(struct egress_hosts *h)
{
        for (size_t i = 0; i < h->n; i++)
                free(h->v[i].name);
        free(h->v);
        *h = (struct egress_hosts){ 0 };
}

int egress_hosts_parse(const char *text, struct egress_hosts *ret)
{
        *ret = (struct egress_hosts){ 0 };
        if (!text || !*text)
                return 0;
        _cleanup_free_ char *copy = strdup(text);
        if (!copy)
                return -ENOMEM;
        char *save = NULL;
        for (char *item = strtok_r(copy, ", ", &save); item; item = strtok_r(NULL, ", ", &save)) {
                char *eq = strchr(item, '=');
                struct sockaddr_storage a;
                if (!eq || eq == item || !addr_parse(eq + 1, &a)) {
                        egress_hosts_done(ret);
                        return -EINVAL;
                }
                *eq = '\0';
                struct egress_host *v = realloc(ret->v, (ret->n + 1) * sizeof(*v));
                if (!v) {
                        egress_hosts_done(ret);
                        return -ENOMEM;
                }
                ret->v = v;
                v[ret->n] = (struct egress_host){ .name = strdup(item), .addr = a };
                if (!v[ret->n].name) {
                        egress_hosts_done(ret);
                        return -ENOMEM;
                }
                for (char *c = v[ret->n].name; *c; c++)
                        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
                ret->n++;
        }
        return 0;
}

static void set_port(struct sockaddr_storage *a, unsigned port)
{
        if (a->ss_family == AF_INET)
                ((struct sockaddr_in *)a)->sin_port = htons((uint16_t)port);
        else
                ((struct sockaddr_in6 *)a)->sin6_port = htons((uint16_t)port);
}

int egress_resolve(const struct egress_hosts *h, const char *host, unsigned port, struct sockaddr_storage *out,
                   size_t max, size_t *ret_n)
{
        size_t n = 0;
        for (size_t i = 0; i < h->n && n < max; i++)
                if (strcmp(h->v[i].name, host) == 0)
                        out[n++] = h->v[i].addr;
        if (n == 0 && max > 0 && addr_parse(host, &out[0]))
                n = 1;
        if (n == 0) {
                struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
                if (getaddrinfo(host, NULL, &hints, &res) != 0)
                        return -ENOENT;
                for (struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next)
                        if (ai->ai_addrlen <= sizeof(out[0]) &&
                            (ai->ai_family == AF_INET || ai->ai_family == AF_INET6)) {
                                memset(&out[n], 0, sizeof(out[n]));
                                memcpy(&out[n++], ai->ai_addr, ai->ai_addrlen);
                        }
                freeaddrinfo(res);
        }
        for (size_t i = 0; i < n; i++)
                set_port(&out[i], port);
        *ret_n = n;
        return n ? 0 : -ENOENT;
}

static int connect_one(const struct sockaddr_storage *a, unsigned timeout_ms)
{
        int fd = socket(a->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        socklen_t len = a->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        int r = connect(fd, (const struct sockaddr *)a, len) < 0 ? -errno : 0;
        if (r == -EINPROGRESS) {
                struct pollfd p = { fd, POLLOUT, 0 };
                int e = 0;
                socklen_t el = sizeof(e);
                r = poll(&p, 1, (int)timeout_ms);
                if (r == 0)
                        r = -ETIMEDOUT;
                else if (r < 0)
                        r = -errno;
                else
                        r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 ? -errno : -e;
        }
        if (r == 0)
                r = fcntl(fd, F_SETFL, 0) < 0 ? -errno : 0;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

int egress_connect_any(const struct sockaddr_storage *addrs, size_t n, unsigned timeout_ms)
{
        int r = -ENOENT;
        for (size_t i = 0; i < n; i++)
                if ((r = connect_one(&addrs[i], timeout_ms)) >= 0)
                        return r;
        return r;
}

ssize_t egress_read_full(int fd, void *buf, size_t len)
{
        size_t got = 0;
        while (got < len) {
                ssize_t r = read(fd, (char *)buf + got, len - got);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                got += (size_t)r;
        }
        return (ssize_t)got;
}

/* One read from `from` written to `to`: false at EOF or error. */
static bool pump(int from, int to, uint64_t *count)
{
        char buf[16384];
        ssize_t n = read(from, buf, sizeof(buf));
        if (n <= 0 || write_all(to, buf, (size_t)n) < 0)
                return false;
        *count += (uint64_t)n;
        return true;
}

void egress_relay(int a, int b, unsigned idle_ms, uint64_t *out, uint64_t *in)
{
        bool a_open = true, b_open = true;
        while (a_open || b_open) {
                struct pollfd p[2] = { { a_open ? a : -1, POLLIN, 0 }, { b_open ? b : -1, POLLIN, 0 } };
                int r = poll(p, 2, idle_ms ? (int)idle_ms : -1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return;
                if (a_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(a, b, out)) {
                        a_open = false;
                        (void)shutdown(b, SHUT_WR);
                }
                if (b_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(b, a, in)) {
                        b_open = false;
                        (void)shutdown(a, SHUT_WR);
                }
        }
}
