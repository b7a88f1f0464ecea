/* Webhook targets: URL parts (libcurl's URL parser, the same one that will
 * send), name resolution and the address rules (see webhook_net.h). The
 * refused ranges are the ones a request from this host could use to reach
 * something that is not the public internet: loopback, RFC 1918 and
 * RFC 6598 space, link-local (the cloud metadata address 169.254.169.254),
 * multicast, reserved and unspecified; IPv6 loopback, unique-local,
 * link-local, multicast, and IPv4 embedded in IPv6 by its IPv4 rules. */
#include "tenant/webhook_net.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "tenant/webhooks.h"

static void curl_urlp(CURLU **u)
{
        curl_url_cleanup(*u);
}

static void curl_strp(char **s)
{
        curl_free(*s);
}

int webhook_target_parse(const char *url, struct webhook_target *ret, struct err *err)
{
        if (!url || strlen(url) > WEBHOOK_URL_MAX)
                return err_set(err, ERR_INVALID, EINVAL, "url must be an http(s) URL of at most %d bytes",
                               WEBHOOK_URL_MAX);
        _cleanup_(curl_urlp) CURLU *u = curl_url();
        _cleanup_(curl_strp) char *scheme = NULL;
        _cleanup_(curl_strp) char *host = NULL;
        _cleanup_(curl_strp) char *user = NULL;
        _cleanup_(curl_strp) char *port = NULL;
        if (!u)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
                return err_set(err, ERR_INVALID, EINVAL, "url is not a valid absolute URL");
        if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)
                return err_set(err, ERR_INVALID, EINVAL, "url must use http or https");
        if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK)
                return err_set(err, ERR_INVALID, EINVAL, "url must not carry user info");
        if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
                return err_set(err, ERR_INVALID, EINVAL, "url has no usable port");
        size_t n = strlen(host);
        const char *h = host;
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
                h++, n -= 2;
        if (n == 0 || n >= sizeof(ret->host))
                return err_set(err, ERR_INVALID, EINVAL, "url has no usable host");
        *ret = (struct webhook_target){ .port = (unsigned)strtoul(port, NULL, 10) };
        memcpy(ret->host, h, n);
        struct in6_addr a;
        ret->literal = inet_pton(AF_INET, ret->host, &a) == 1 || inet_pton(AF_INET6, ret->host, &a) == 1;
        return 0;
}

static bool v4_private(const uint8_t a[4])
{
        return a[0] == 0 || a[0] == 10 || a[0] == 127 || a[0] >= 224 || (a[0] == 169 && a[1] == 254) ||
               (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168) ||
               (a[0] == 100 && (a[1] & 0xc0) == 64) || (a[0] == 192 && a[1] == 0 && a[2] == 0) ||
               (a[0] == 198 && (a[1] & 0xfe) == 18);
}

static bool v6_private(const struct in6_addr *a)
{
        const uint8_t *b = a->s6_addr;
        static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
        if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a) || memcmp(b, nat64, sizeof(nat64)) == 0)
                return v4_private(b + 12);
        return IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LOOPBACK(a) || (b[0] & 0xfe) == 0xfc ||
               (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || b[0] == 0xff;
}

static bool addr_private(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET)
                return v4_private((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr);
        if (sa->sa_family == AF_INET6)
                return v6_private(&((const struct sockaddr_in6 *)sa)->sin6_addr);
        return true;
}

static void addr_text(const struct sockaddr *sa, char out[INET6_ADDRSTRLEN])
{
        const void *a = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                                                 : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (!inet_ntop(sa->sa_family, a, out, INET6_ADDRSTRLEN))
                out[0] = '\0';
}

static void freeaddrinfop(struct addrinfo **ai)
{
        if (*ai)
                freeaddrinfo(*ai);
}

int webhook_target_resolve(struct webhook_target *tg, bool allow_private, struct err *err)
{
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
        _cleanup_(freeaddrinfop) struct addrinfo *ai = NULL;
        if (getaddrinfo(tg->host, NULL, &hints, &ai) != 0 || !ai)
                return err_set(err, ERR_UNAVAILABLE, EHOSTUNREACH, "cannot resolve %s", tg->host);
        /* Every address must pass: a name with one public and one private
         * answer is refused, whichever the resolver puts first. */
        size_t n = 0, kept = 0;
        tg->addrs[0] = '\0';
        for (struct addrinfo *p = ai; p; p = p->ai_next) {
                char text[INET6_ADDRSTRLEN];
                addr_text(p->ai_addr, text);
                if (!allow_private && addr_private(p->ai_addr))
                        return err_set(err, ERR_INVALID, EACCES,
                                       "url refused: %s is a loopback, private or link-local address (%s)", tg->host,
                                       text);
                bool v6 = p->ai_family == AF_INET6;
                if (text[0] && kept++ < 4)
                        n += (size_t)snprintf(tg->addrs + n, sizeof(tg->addrs) - n, "%s%s%s%s", n ? "," : "",
                                              v6 ? "[" : "", text, v6 ? "]" : "");
        }
        return kept ? 0 : err_set(err, ERR_UNAVAILABLE, EHOSTUNREACH, "cannot resolve %s", tg->host);
}

bool webhook_target_pin(const struct webhook_target *tg, char *out, size_t len)
{
        if (tg->literal || !tg->addrs[0])
                return false;
        snprintf(out, len, "%s:%u:%s", tg->host, tg->port, tg->addrs);
        return true;
}
