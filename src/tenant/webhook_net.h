/* Where a webhook's URL points, checked against server-side request
 * forgery: the parts of the URL, and the one address the dispatcher will
 * connect to (resolved and checked at delivery time, then pinned with
 * CURLOPT_RESOLVE so a second, different DNS answer cannot be used).
 * Shared by the files of src/tenant/ only. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>

#include "base/err.h"

struct webhook_target {
        char host[256];                  /* without IPv6 brackets */
        unsigned port;
        char addrs[4 * (INET6_ADDRSTRLEN + 3)];  /* once resolved: up to 4, "a,[b]" */
        bool literal;                    /* host is an address itself */
};
/* http(s), a host, no user info, at most WEBHOOK_URL_MAX bytes.
 * ERR_INVALID or 0. */
int webhook_target_parse(const char *url, struct webhook_target *ret, struct err *err);
/* Resolves host into tg->addrs (the first four). Unless allow_private, every address the
 * name has must be public (ERR_PERMISSION, -EACCES, otherwise).
 * -EHOSTUNREACH (ERR_UNAVAILABLE) when it does not resolve. */
int webhook_target_resolve(struct webhook_target *tg, bool allow_private, struct err *err);
/* "host:port:addr,addr" for CURLOPT_RESOLVE: curl connects to those and
 * to nothing else. false when there is nothing to pin (a literal address
 * needs no DNS). */
bool webhook_target_pin(const struct webhook_target *tg, char *out, size_t len);
