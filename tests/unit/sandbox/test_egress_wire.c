/* The egress proxy's parsers and decisions without sockets: DNS queries
 * and replies, HTTP request heads (CONNECT and absolute form, the Host
 * check), a TLS ClientHello's SNI (whole, cut short, absent, not TLS),
 * domain patterns, the policy verdict and the forbidden addresses. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "sandbox/egress/egress.h"
#include "sandbox/egress/wire.h"
#include "tap.h"

static size_t dns_query(uint8_t *out, const char *name, uint16_t qtype)
{
        static const uint8_t head[12] = { 0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
        memcpy(out, head, 12);
        size_t o = 12;
        const char *p = name;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);
                out[o++] = (uint8_t)l;
                memcpy(out + o, p, l);
                o += l;
                p += l + (dot ? 1 : 0);
        }
        out[o++] = 0;
        out[o++] = (uint8_t)(qtype >> 8);
        out[o++] = (uint8_t)qtype;
        out[o++] = 0;
        out[o++] = 1;
        return o;
}

TEST(dns_query_and_reply)
{
        uint8_t q[512], r[512];
        size_t n = dns_query(q, "Allowed.TEST", DNS_TYPE_A);
        struct dns_query dq;
        ASSERT_OK(dns_parse_query(q, n, &dq));
        ASSERT_STREQ(dq.name, "allowed.test");
        ASSERT_EQ(dq.qtype, DNS_TYPE_A);
        struct sockaddr_storage a[2] = { 0 };
        struct sockaddr_in *v4 = (struct sockaddr_in *)&a[0];
        v4->sin_family = AF_INET;
        inet_pton(AF_INET, "10.1.2.3", &v4->sin_addr);
        a[1].ss_family = AF_INET6;   /* not of the query's type: left out */
        size_t m = dns_build_reply(q, &dq, DNS_RCODE_NOERROR, a, 2, r, sizeof(r));
        ASSERT_EQ(m, n + 16);
        ASSERT_EQ(r[0], 0xab);
        ASSERT_EQ(r[2] & 0x80, 0x80);     /* a response */
        ASSERT_EQ(r[3] & 0xf, 0);
        ASSERT_EQ(r[7], 1);               /* one answer */
        ASSERT_EQ(memcmp(r + m - 4, &v4->sin_addr, 4), 0);
        m = dns_build_reply(q, &dq, DNS_RCODE_NXDOMAIN, a, 2, r, sizeof(r));
        ASSERT_EQ(m, n);
        ASSERT_EQ(r[3] & 0xf, DNS_RCODE_NXDOMAIN);
        ASSERT_EQ(r[7], 0);
        /* Truncated, a response, a compression pointer, two questions. */
        ASSERT_ERR(dns_parse_query(q, n - 3, &dq), EINVAL);
        q[2] |= 0x80;
        ASSERT_ERR(dns_parse_query(q, n, &dq), EINVAL);
        q[2] &= 0x7f;
        q[12] = 0xc0;
        ASSERT_ERR(dns_parse_query(q, n, &dq), EINVAL);
        n = dns_query(q, "a.b", DNS_TYPE_A);
        q[5] = 2;
        ASSERT_ERR(dns_parse_query(q, n, &dq), EINVAL);
}

static int head(const char *text, struct http_head *h)
{
        size_t end = http_head_end(text, strlen(text));
        return end ? http_head_parse(text, end, h) : -EAGAIN;
}

TEST(http_heads)
{
        struct http_head h;
        ASSERT_OK(head("CONNECT Allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", &h));
        ASSERT_STREQ(h.method, "CONNECT");
        ASSERT_STREQ(h.host, "allowed.test");
        ASSERT_EQ(h.port, 443);
        ASSERT_TRUE(h.host_header_ok);
        ASSERT_OK(head("GET http://a.test/x?y HTTP/1.1\r\nHost: a.test\r\nProxy-Connection: keep-alive\r\n\r\n", &h));
        ASSERT_STREQ(h.host, "a.test");
        ASSERT_EQ(h.port, 80);
        ASSERT_EQ(h.path_len, 4);
        ASSERT_EQ(strncmp(h.path, "/x?y", 4), 0);
        ASSERT_TRUE(h.host_header_ok);
        ASSERT_OK(head("GET http://[::1]:8080 HTTP/1.0\r\nHost: other.test\r\n\r\n", &h));
        ASSERT_STREQ(h.host, "::1");
        ASSERT_EQ(h.port, 8080);
        ASSERT_FALSE(h.host_header_ok);   /* Host must name the target */
        ASSERT_ERR(head("GET /origin-form HTTP/1.1\r\n\r\n", &h), EINVAL);
        ASSERT_ERR(head("CONNECT a.test HTTP/1.1\r\n\r\n", &h), EINVAL);   /* no port */
        ASSERT_ERR(head("CONNECT a.test:0 HTTP/1.1\r\n\r\n", &h), EINVAL);
        ASSERT_ERR(head("CONNECT a.test:99999 HTTP/1.1\r\n\r\n", &h), EINVAL);
        ASSERT_ERR(head("GET http://user@a.test/ HTTP/1.1\r\n\r\n", &h), EINVAL);
        ASSERT_ERR(head("GET https://a.test/ HTTP/1.1\r\n\r\n", &h), EINVAL);
        ASSERT_ERR(head("GET http://a.test/", &h), EAGAIN);
}

/* A minimal ClientHello record with (or without) a server_name. */
static size_t client_hello(uint8_t *out, const char *sni)
{
        uint8_t body[512];
        size_t o = 0;
        body[o++] = 3;
        body[o++] = 3;
        memset(body + o, 7, 32);
        o += 32;
        body[o++] = 0;                    /* session id */
        body[o++] = 0;
        body[o++] = 2;
        body[o++] = 0x13;
        body[o++] = 0x01;                 /* one cipher suite */
        body[o++] = 1;
        body[o++] = 0;                    /* null compression */
        size_t ext_at = o;
        o += 2;
        if (sni) {
                size_t n = strlen(sni);
                uint8_t e[] = { 0, 0, 0, (uint8_t)(n + 5), 0, (uint8_t)(n + 3), 0, 0, (uint8_t)n };
                memcpy(body + o, e, sizeof(e));
                o += sizeof(e);
                memcpy(body + o, sni, n);
                o += n;
        }
        body[ext_at] = (uint8_t)((o - ext_at - 2) >> 8);
        body[ext_at + 1] = (uint8_t)(o - ext_at - 2);
        uint8_t rec[] = { 22, 3, 1, (uint8_t)((o + 4) >> 8), (uint8_t)(o + 4), 1, 0, (uint8_t)(o >> 8), (uint8_t)o };
        memcpy(out, rec, sizeof(rec));
        memcpy(out + sizeof(rec), body, o);
        return sizeof(rec) + o;
}

TEST(tls_sni)
{
        uint8_t b[600];
        char name[EGRESS_HOST_MAX];
        size_t n = client_hello(b, "Allowed.Test");
        ASSERT_OK(tls_client_hello_sni(b, n, name, sizeof(name)));
        ASSERT_STREQ(name, "allowed.test");
        ASSERT_ERR(tls_client_hello_sni(b, n - 1, name, sizeof(name)), EAGAIN);
        ASSERT_ERR(tls_client_hello_sni(b, 3, name, sizeof(name)), EAGAIN);
        n = client_hello(b, NULL);
        ASSERT_ERR(tls_client_hello_sni(b, n, name, sizeof(name)), ENOENT);
        static const uint8_t http[] = "GET / HTTP/1.1\r\n\r\n";
        ASSERT_ERR(tls_client_hello_sni(http, sizeof(http) - 1, name, sizeof(name)), EINVAL);
        /* A name length past its extension. */
        n = client_hello(b, "a.test");
        b[n - 7] = 200;
        ASSERT_ERR(tls_client_hello_sni(b, n, name, sizeof(name)), EINVAL);
}

TEST(domains)
{
        ASSERT_TRUE(egress_domain_match("api.github.com", "api.github.com"));
        ASSERT_FALSE(egress_domain_match("api.github.com", "x.api.github.com"));
        ASSERT_TRUE(egress_domain_match("*.npmjs.org", "registry.npmjs.org"));
        ASSERT_TRUE(egress_domain_match("*.npmjs.org", "a.b.npmjs.org"));
        ASSERT_FALSE(egress_domain_match("*.npmjs.org", "npmjs.org"));
        ASSERT_FALSE(egress_domain_match("*.npmjs.org", "evilnpmjs.org"));
        ASSERT_TRUE(egress_domain_valid("*.a-b.example"));
        ASSERT_TRUE(egress_domain_valid("10.0.0.1"));
        ASSERT_FALSE(egress_domain_valid("*."));
        ASSERT_FALSE(egress_domain_valid("a..b"));
        ASSERT_FALSE(egress_domain_valid("a b"));
        ASSERT_FALSE(egress_domain_valid("A.b"));
        ASSERT_FALSE(egress_domain_valid("*.*.b"));
}

TEST(policy_verdicts)
{
        json_t *p1 = json_pack("{s:s, s:[s], s:[s], s:[i], s:b}", "policyName", "p1", "allowedDomains", "*.ok.test",
                               "deniedDomains", "bad.ok.test", "allowedPorts", 443, "logAllRequests", 0);
        json_t *p2 = json_pack("{s:s, s:b, s:b}", "policyName", "p2", "allowAll", 0, "logAllRequests", 1);
        json_t *docs[] = { p1, p2 };
        struct egress_verdict v;
        egress_policy_decide(docs, 1, "a.ok.test", 443, true, &v);
        ASSERT_TRUE(v.allow && !v.violation && !v.log);
        egress_policy_decide(docs, 1, "a.ok.test", 80, true, &v);
        ASSERT_TRUE(!v.allow && v.violation && v.log);
        ASSERT_STREQ(v.reason, "port 80 not allowed");
        egress_policy_decide(docs, 1, "a.ok.test", 0, true, &v);   /* DNS: no port */
        ASSERT_TRUE(v.allow);
        egress_policy_decide(docs, 1, "bad.ok.test", 443, true, &v);
        ASSERT_FALSE(v.allow);
        ASSERT_STREQ(v.reason, "host denied by policy 'p1'");
        egress_policy_decide(docs, 1, "bad.ok.test", 443, false, &v);   /* monitor */
        ASSERT_TRUE(v.allow && v.violation && v.log && !v.enforce);
        egress_policy_decide(docs, 2, "a.ok.test", 443, true, &v);   /* p2 logs all */
        ASSERT_TRUE(v.allow && v.log);
        egress_policy_decide(NULL, 0, "a.ok.test", 443, true, &v);
        ASSERT_FALSE(v.allow);
        ASSERT_STREQ(v.reason, "no egress policy");
        json_object_set_new(p2, "allowAll", json_true());
        egress_policy_decide(docs, 2, "bad.ok.test", 443, true, &v);   /* denied wins over allowAll */
        ASSERT_FALSE(v.allow);
        json_decref(p1);
        json_decref(p2);
}

static bool forbidden(int family, const char *text)
{
        struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
        void *a = family == AF_INET ? (void *)&((struct sockaddr_in *)&ss)->sin_addr
                                    : (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
        ASSERT_EQ(inet_pton(family, text, a), 1);
        return egress_addr_forbidden((struct sockaddr *)&ss);
}

TEST(forbidden_addresses)
{
        static const char *const v4_bad[] = { "169.254.169.254", "127.0.0.1", "0.0.0.0", "224.0.0.1",
                                               "255.255.255.255", "127.8.8.8" };
        for (size_t i = 0; i < sizeof(v4_bad) / sizeof(v4_bad[0]); i++)
                ASSERT_TRUE(forbidden(AF_INET, v4_bad[i]));
        static const char *const v6_bad[] = { "::1", "::", "fe80::1", "ff02::1", "::ffff:169.254.169.254",
                                               "::ffff:127.0.0.1" };
        for (size_t i = 0; i < sizeof(v6_bad) / sizeof(v6_bad[0]); i++)
                ASSERT_TRUE(forbidden(AF_INET6, v6_bad[i]));
        ASSERT_FALSE(forbidden(AF_INET, "192.0.2.10"));
        ASSERT_FALSE(forbidden(AF_INET6, "2001:db8::1"));
        ASSERT_FALSE(forbidden(AF_INET6, "::ffff:192.0.2.10"));
}
