/* Egress: a sandbox's only way out (issue 15, item 3). A sandbox granted
 * network keeps its own network namespace (loopback only, no route); on
 * that loopback the daemon listens, from the host's namespace, as
 *   - a DNS stub (UDP and TCP 127.0.0.1:53) answering only the names the
 *     policy allows, resolved by the daemon;
 *   - an HTTP proxy (127.0.0.1:<proxy_port>): absolute-form requests
 *     checked by host, `CONNECT host:port` checked by host, port and the
 *     TLS ClientHello's SNI (which must name the CONNECT host); the bytes
 *     are then relayed untouched (no TLS interception).
 * Upstream connections are made from the host's namespace, only to the
 * addresses the daemon resolved and checked itself: link-local/metadata,
 * loopback, unspecified, multicast and the host's own addresses are
 * refused whatever the policy says.
 *
 * This layer knows no HTTP API and no store: who may go where is asked of
 * egress_ops.authorize, and what happened is told to egress_ops.record. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct egress;
struct egress_link;

enum egress_proto {
        EGRESS_DNS,
        EGRESS_HTTP,
        EGRESS_CONNECT,
        _EGRESS_PROTO_MAX,
};
const char *egress_proto_name(enum egress_proto p);

struct egress_request {
        const char *org_id, *sandbox_id;
        const char *host;            /* lower case, no trailing dot */
        unsigned port;               /* 0: a DNS query (no port to check) */
        enum egress_proto proto;
};

struct egress_verdict {
        bool allow;                  /* let it through */
        bool violation;              /* against the policy (let through only in monitor mode) */
        bool log;                    /* record it (logAllRequests, or a violation) */
        bool enforce;                /* the mode: enforce, else monitor */
        char reason[128];
};

struct egress_ops {
        /* Fills ret for rq. Must not block long: it runs on the proxy's
         * threads. */
        void (*authorize)(void *userdata, const struct egress_request *rq, struct egress_verdict *ret);
        /* One decision to keep (v->log), with the bytes relayed each way. */
        void (*record)(void *userdata, const struct egress_request *rq, const struct egress_verdict *v,
                       uint64_t bytes_out, uint64_t bytes_in);
};

struct egress_options {
        unsigned proxy_port;         /* the HTTP proxy's port on the sandbox's loopback */
        unsigned max_conns;          /* proxied connections at once, per sandbox */
        unsigned connect_timeout_ms; /* an upstream connect */
        unsigned idle_timeout_ms;    /* a relayed connection with no byte either way */
        /* "name=addr,name=addr": names resolved to these addresses instead
         * of by getaddrinfo (a test/override hook; the address checks still
         * apply). NULL or "": none. */
        const char *hosts;
};

/* A new proxy service (no listener yet); free with egress_free. 0,
 * -EINVAL (a bad hosts entry) or -ENOMEM. */
int egress_new(const struct egress_options *opt, const struct egress_ops *ops, void *userdata, struct egress **ret);
void egress_free(struct egress *eg);   /* NULL-safe; every link detached first */
unsigned egress_proxy_port(const struct egress *eg);

/* Starts the DNS stub and the proxy on the loopback of netns_fd (the fd
 * is not kept) for that sandbox of org_id. 0 or -errno. */
int egress_attach(struct egress *eg, int netns_fd, const char *org_id, const char *sandbox_id,
                  struct egress_link **ret);
/* Stops the listeners and ends the link's connections. NULL-safe. */
void egress_detach(struct egress_link *l);

/* ---- policy.c: the seed's policy documents ---- */
/* Whether host matches pattern: exact, or "*.suffix" = any name ending in
 * ".suffix" (not suffix itself). Both lower case. */
bool egress_domain_match(const char *pattern, const char *host);
/* A host name or IP literal, or "*." and a name: [a-z0-9-] labels of at
 * most 63, at most 253 in all. */
bool egress_domain_valid(const char *pattern);
/* The verdict of the org's policies docs (seed model: allowAll,
 * allowedDomains, deniedDomains, allowedPorts, logAllRequests) for host
 * and port (0: not checked): a denied domain or no policy allowing it is a
 * violation, blocked when enforce. */
void egress_policy_decide(json_t *const *docs, size_t n, const char *host, unsigned port, bool enforce,
                          struct egress_verdict *ret);

/* ---- addr.c ---- */
/* Never a destination: unspecified, loopback, link-local (metadata),
 * multicast, broadcast, and the host's own addresses. */
bool egress_addr_forbidden(const struct sockaddr *sa);
