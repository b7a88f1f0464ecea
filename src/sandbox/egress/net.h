/* Upstream side of the egress proxy (internal to src/sandbox/egress/):
 * name resolution with the hosts override, connects with a timeout, and
 * the byte relay. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct egress_host {
        char *name;
        struct sockaddr_storage addr;
};
struct egress_hosts {
        struct egress_host *v;
        size_t n;
};
/* "name=addr,name=addr" (NULL or "": none). 0, -EINVAL or -ENOMEM. */
int egress_hosts_parse(const char *text, struct egress_hosts *ret);
void egress_hosts_done(struct egress_hosts *h);
/* host's addresses with port set, at most max: the override's entries
 * for host if it has any, else host as an IP literal, else getaddrinfo.
 * 0 or -ENOENT. */
int egress_resolve(const struct egress_hosts *h, const char *host, unsigned port, struct sockaddr_storage *out,
                   size_t max, size_t *ret_n);
/* A TCP connection to the first of addrs that answers within
 * timeout_ms each: the fd, or -errno. */
int egress_connect_any(const struct sockaddr_storage *addrs, size_t n, unsigned timeout_ms);
/* Copies bytes both ways until both sides are done or nothing moves for
 * idle_ms; adds the bytes a→b to *out and b→a to *in. */
void egress_relay(int a, int b, unsigned idle_ms, uint64_t *out, uint64_t *in);
/* Reads exactly len bytes: len, or less at EOF/error. */
ssize_t egress_read_full(int fd, void *buf, size_t len);
