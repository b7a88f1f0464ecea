/* Parsers of the egress proxy (see wire.h): bounds-checked readers of
 * untrusted bytes, and the DNS reply writer. */
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sandbox/egress/wire.h"

static uint16_t be16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

static void lower(char *s)
{
        for (; *s; s++)
                *s = (char)tolower((unsigned char)*s);
}

/* ---- DNS ---- */

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret)
{
        if (len < 12)
                return -EINVAL;
        *ret = (struct dns_query){ .id = be16(msg), .flags = be16(msg + 2) };
        /* A query (QR 0), opcode QUERY, exactly one question. */
        if ((ret->flags & 0xf800) != 0 || be16(msg + 4) != 1)
                return -EINVAL;
        size_t off = 12, n = 0;
        while (off < len && msg[off] != 0) {
                size_t l = msg[off];
                /* Compression pointers have no place in a question. */
                if (l > 63 || off + 1 + l >= len || n + l + 1 >= sizeof(ret->name))
                        return -EINVAL;
                if (n)
                        ret->name[n++] = '.';
                memcpy(ret->name + n, msg + off + 1, l);
                n += l;
                off += 1 + l;
        }
        if (off + 5 > len)
                return -EINVAL;
        ret->name[n] = '\0';
        if (memchr(ret->name, '\0', n))
                return -EINVAL;
        lower(ret->name);
        ret->qtype = be16(msg + off + 1);
        ret->qclass = be16(msg + off + 3);
        ret->question_end = off + 5;
        return 0;
}

size_t dns_build_reply(const uint8_t *msg, const struct dns_query *q, int rcode,
                       const struct sockaddr_storage *addrs, size_t naddrs, uint8_t *out, size_t cap)
{
        if (cap < q->question_end)
                return 0;
        memcpy(out, msg, q->question_end);
        /* QR, the query's RD, RA; no authority, no additional. */
        put16(out + 2, (uint16_t)(0x8000 | (q->flags & 0x0100) | 0x0080 | (rcode & 0xf)));
        put16(out + 8, 0);
        put16(out + 10, 0);
        size_t off = q->question_end, an = 0;
        for (size_t i = 0; rcode == DNS_RCODE_NOERROR && i < naddrs; i++) {
                const void *data;
                uint16_t type, dlen;
                if (addrs[i].ss_family == AF_INET) {
                        data = &((const struct sockaddr_in *)&addrs[i])->sin_addr;
                        type = DNS_TYPE_A;
                        dlen = 4;
                } else {
                        data = &((const struct sockaddr_in6 *)&addrs[i])->sin6_addr;
                        type = DNS_TYPE_AAAA;
                        dlen = 16;
                }
                if (type != q->qtype || off + 12 + dlen > cap)
                        continue;
                /* The name as a pointer to the question's (offset 12); a
                 * short TTL: the policy may change. */
                put16(out + off, 0xc00c);
                put16(out + off + 2, type);
                put16(out + off + 4, 1);
                put16(out + off + 6, 0);
                put16(out + off + 8, 5);
                put16(out + off + 10, dlen);
                memcpy(out + off + 12, data, dlen);
                off += 12 + dlen;
                an++;
        }
        put16(out + 6, (uint16_t)an);
        return off;
}

/* ---- HTTP ---- */

size_t http_head_end(const char *buf, size_t len)
{
        for (size_t i = 3; i < len; i++)
                if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
                        return i + 1;
        return 0;
}

int http_authority_parse(const char *a, size_t len, unsigned dflt, char *host, size_t cap, unsigned *ret_port)
{
        const char *hend, *colon = NULL;
        const char *h = a;
        if (len && a[0] == '[') {
                const char *rb = memchr(a, ']', len);
                if (!rb)
                        return -EINVAL;
                h = a + 1;
                hend = rb;
                if (rb + 1 < a + len) {
                        if (rb[1] != ':')
                                return -EINVAL;
                        colon = rb + 1;
                }
        } else {
                colon = memchr(a, ':', len);
                hend = colon ? colon : a + len;
        }
        size_t hl = (size_t)(hend - h);
        if (hl == 0 || hl >= cap)
                return -EINVAL;
        unsigned port = dflt;
        if (colon) {
                size_t pl = (size_t)(a + len - colon - 1);
                char num[8];
                if (pl == 0 || pl >= sizeof(num))
                        return -EINVAL;
                memcpy(num, colon + 1, pl);
                num[pl] = '\0';
                char *end;
                unsigned long p = strtoul(num, &end, 10);
                if (*end || !isdigit((unsigned char)num[0]) || p == 0 || p > 65535)
                        return -EINVAL;
                port = (unsigned)p;
        }
        if (port == 0)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = '\0';
        if (strpbrk(host, " \t/\\@?#") || memchr(h, '\0', hl))
                return -EINVAL;
        lower(host);
        if (hl > 1 && host[hl - 1] == '.')
                host[hl - 1] = '\0';
        *ret_port = port;
        return 0;
}

/* The value of header name in the header block, or NULL. */
static const char *header_value(const char *hdrs, size_t len, const char *name, size_t *ret_len)
{
        size_t nl = strlen(name);
        const char *p = hdrs, *end = hdrs + len;
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                const char *le = eol ? eol : end;
                if ((size_t)(le - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
                        const char *v = p + nl + 1, *ve = le;
                        while (v < ve && (*v == ' ' || *v == '\t'))
                                v++;
                        while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                                ve--;
                        *ret_len = (size_t)(ve - v);
                        return v;
                }
                p = le + 1;
        }
        return NULL;
}

int http_head_parse(const char *head, size_t len, struct http_head *ret)
{
        *ret = (struct http_head){ 0 };
        const char *eol = memchr(head, '\n', len);
        if (!eol || eol == head || eol[-1] != '\r')
                return -EINVAL;
        const char *line_end = eol - 1;
        const char *sp1 = memchr(head, ' ', (size_t)(line_end - head));
        if (!sp1 || (size_t)(sp1 - head) >= sizeof(ret->method) || sp1 == head)
                return -EINVAL;
        const char *target = sp1 + 1;
        const char *sp2 = memchr(target, ' ', (size_t)(line_end - target));
        if (!sp2 || line_end - sp2 != 9 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
                return -EINVAL;
        memcpy(ret->method, head, (size_t)(sp1 - head));
        ret->version = sp2 + 1;
        ret->headers = eol + 1;
        ret->headers_len = len >= (size_t)(eol + 1 - head) + 2 ? len - (size_t)(eol + 1 - head) - 2 : 0;
        size_t tl = (size_t)(sp2 - target);
        int r;
        if (strcmp(ret->method, "CONNECT") == 0) {
                /* CONNECT needs the port: no default. */
                r = http_authority_parse(target, tl, 0, ret->host, sizeof(ret->host), &ret->port);
        } else {
                static const char scheme[] = "http://";
                if (tl < sizeof(scheme) || strncasecmp(target, scheme, sizeof(scheme) - 1) != 0)
                        return -EINVAL;
                const char *auth = target + sizeof(scheme) - 1;
                const char *slash = memchr(auth, '/', (size_t)(sp2 - auth));
                const char *aend = slash ? slash : sp2;
                r = http_authority_parse(auth, (size_t)(aend - auth), 80, ret->host, sizeof(ret->host), &ret->port);
                ret->path = slash ? slash : "/";
                ret->path_len = slash ? (size_t)(sp2 - slash) : 1;
        }
        if (r < 0)
                return r;
        size_t hl;
        const char *hv = header_value(ret->headers, ret->headers_len, "Host", &hl);
        ret->host_header_ok = true;
        if (hv) {
                char hh[EGRESS_HOST_MAX];
                unsigned hp;
                ret->host_header_ok = http_authority_parse(hv, hl, strcmp(ret->method, "CONNECT") == 0 ? ret->port : 80,
                                                           hh, sizeof(hh), &hp) == 0 &&
                                      strcmp(hh, ret->host) == 0 && hp == ret->port;
        }
        return 0;
}

/* ---- TLS ---- */

/* Reads the server_name extension's first host_name. */
static int sni_from_extensions(const uint8_t *p, size_t len, char *out, size_t cap)
{
        while (len >= 4) {
                uint16_t type = be16(p), elen = be16(p + 2);
                if ((size_t)elen + 4 > len)
                        return -EINVAL;
                if (type == 0) {
                        const uint8_t *e = p + 4;
                        if (elen < 5 || (size_t)be16(e) + 2 > elen || e[2] != 0)
                                return -EINVAL;
                        size_t nl = be16(e + 3);
                        if (nl + 5 > elen || nl == 0 || nl >= cap || memchr(e + 5, '\0', nl))
                                return -EINVAL;
                        memcpy(out, e + 5, nl);
                        out[nl] = '\0';
                        lower(out);
                        return 0;
                }
                p += 4 + elen;
                len -= 4 + (size_t)elen;
        }
        return -ENOENT;
}

int tls_client_hello_sni(const uint8_t *buf, size_t len, char *out, size_t cap)
{
        if (len < 5)
                return -EAGAIN;
        /* A handshake record of TLS 1.x. */
        if (buf[0] != 22 || buf[1] != 3)
                return -EINVAL;
        size_t rec = be16(buf + 3);
        if (rec < 4)
                return -EINVAL;
        if (len < 5 + rec)
                return -EAGAIN;
        const uint8_t *h = buf + 5;
        /* A ClientHello that fits its record (no fragmented hello). */
        size_t hl = (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        if (h[0] != 1 || hl + 4 > rec)
                return -EINVAL;
        const uint8_t *p = h + 4, *end = h + 4 + hl;
        /* version 2, random 32, session id, cipher suites, compression. */
        if (end - p < 35)
                return -EINVAL;
        p += 34;
        if ((size_t)(end - p) < 1 + (size_t)p[0])
                return -EINVAL;
        p += 1 + p[0];
        if (end - p < 2 || (size_t)(end - p) < 2 + (size_t)be16(p))
                return -EINVAL;
        p += 2 + be16(p);
        if (end - p < 1 || (size_t)(end - p) < 1 + (size_t)p[0])
                return -EINVAL;
        p += 1 + p[0];
        if (end - p < 2)
                return -ENOENT;
        size_t el = be16(p);
        if ((size_t)(end - p) < 2 + el)
                return -EINVAL;
        return sni_from_extensions(p + 2, el, out, cap);
}
