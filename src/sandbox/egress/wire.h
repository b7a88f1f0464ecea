/* The three wire formats the egress proxy reads (internal to
 * src/sandbox/egress/ and its unit tests): DNS queries, HTTP/1.x request
 * heads, and the server name of a TLS ClientHello. Parsers take untrusted
 * bytes and never read past len. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EGRESS_HOST_MAX 254

/* ---- DNS ---- */
#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_REFUSED 5
#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28

struct dns_query {
        uint16_t id, flags;
        char name[EGRESS_HOST_MAX];  /* lower case, no trailing dot */
        uint16_t qtype, qclass;
        size_t question_end;         /* offset just past the question */
};
/* One standard query with one question. 0 or -EINVAL. */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret);
/* The answer to q (its question echoed from msg) with rcode and, for
 * NOERROR, one record per address of q's type. Returns its length, or 0
 * when cap is too small. */
size_t dns_build_reply(const uint8_t *msg, const struct dns_query *q, int rcode,
                       const struct sockaddr_storage *addrs, size_t naddrs, uint8_t *out, size_t cap);

/* ---- HTTP request head ---- */
struct http_head {
        char method[16];
        char host[EGRESS_HOST_MAX];  /* of the target: lower case, IPv6 without brackets */
        unsigned port;
        const char *path;            /* origin-form path into the parsed buffer ("/…") */
        size_t path_len;
        const char *version;         /* "HTTP/1.x" into the buffer */
        const char *headers;         /* the header lines after the request line */
        size_t headers_len;          /* up to (not including) the blank line */
        bool host_header_ok;         /* no Host header, or one naming the target */
};
/* Where the head (request line and headers) of buf ends: the offset past
 * its blank line, or 0 when it is not complete yet. */
size_t http_head_end(const char *buf, size_t len);
/* Parses head[0, len) (as http_head_end measured): CONNECT host:port or
 * METHOD http://host[:port]/path. 0 or -EINVAL. */
int http_head_parse(const char *head, size_t len, struct http_head *ret);
/* "host[:port]" or "[v6]:port" into host (lower case) and port (dflt when
 * absent; 0 never accepted). 0 or -EINVAL. */
int http_authority_parse(const char *a, size_t len, unsigned dflt, char *host, size_t cap, unsigned *ret_port);

/* ---- TLS ---- */
/* The server_name of the ClientHello at the start of buf: 0 (name in
 * out, lower case), -EAGAIN (more bytes needed), -ENOENT (a ClientHello
 * without one), -EINVAL (not a TLS ClientHello). */
int tls_client_hello_sni(const uint8_t *buf, size_t len, char *out, size_t cap);
