/* Fuzzes the egress proxy's parsers of bytes a sandbox sends
 * (src/sandbox/egress/wire.c): the first byte picks the parser, the rest is
 * the input, copied to a heap buffer of exactly its size (ASan catches
 * over-reads).
 *
 * Invariants: a parsed DNS query's name is lower case, shorter than
 * EGRESS_HOST_MAX and its reply (NXDOMAIN, no records) fits and echoes the
 * id; a parsed HTTP head has a non-zero port, a lower-case host, a path
 * inside the input; an SNI is lower case and NUL-terminated within cap;
 * failures are only the documented errnos. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "sandbox/egress/wire.h"

static void check_lower(const char *s, size_t cap)
{
        size_t n = strnlen(s, cap);
        CHECK(n < cap);
        for (size_t i = 0; i < n; i++)
                CHECK(!isupper((unsigned char)s[i]));
}

static void fuzz_dns(const uint8_t *in, size_t n)
{
        struct dns_query q;
        if (dns_parse_query(in, n, &q) != 0)
                return;
        check_lower(q.name, sizeof(q.name));
        CHECK(q.question_end <= n);
        uint8_t out[600];
        size_t m = dns_build_reply(in, &q, DNS_RCODE_NXDOMAIN, NULL, 0, out, sizeof(out));
        CHECK(m == 0 || (m == q.question_end && out[0] == in[0] && out[1] == in[1]));
}

static void fuzz_http(const uint8_t *in, size_t n)
{
        const char *text = (const char *)in;
        size_t end = http_head_end(text, n);
        CHECK(end <= n);
        struct http_head h;
        int r = http_head_parse(text, end ? end : n, &h);
        CHECK(r == 0 || r == -EINVAL);
        if (r != 0)
                return;
        CHECK(h.port > 0 && h.port <= 65535);
        check_lower(h.host, sizeof(h.host));
        if (h.path != NULL && strcmp(h.method, "CONNECT") != 0 && h.path_len > 1)
                CHECK(h.path >= text && h.path + h.path_len <= text + n);
}

static void fuzz_sni(const uint8_t *in, size_t n)
{
        char name[EGRESS_HOST_MAX];
        int r = tls_client_hello_sni(in, n, name, sizeof(name));
        CHECK(r == 0 || r == -EAGAIN || r == -ENOENT || r == -EINVAL);
        if (r == 0)
                check_lower(name, sizeof(name));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t n = size - 1;
        uint8_t *in = malloc(n ? n : 1);
        memcpy(in, data + 1, n);
        switch (data[0] % 3) {
        case 0:
                fuzz_dns(in, n);
                break;
        case 1:
                fuzz_http(in, n);
                break;
        default:
                fuzz_sni(in, n);
                break;
        }
        free(in);
        return 0;
}
