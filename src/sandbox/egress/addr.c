/* Addresses no sandbox may reach whatever its policy: they lead to the
 * host itself or to its link (cloud metadata at 169.254.169.254). Checked
 * on every upstream address the daemon resolved, right before it
 * connects, so a name that resolves to them (DNS rebinding) gains nothing. */
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

#include "sandbox/egress/egress.h"

static bool v4_forbidden(uint32_t a)   /* host order */
{
        return (a >> 24) == 0 ||                  /* 0.0.0.0/8: this host */
               (a >> 24) == 127 ||                /* loopback */
               (a >> 16) == 0xa9fe ||             /* 169.254/16: link-local, metadata */
               (a >> 28) == 0xe ||                /* 224/4: multicast */
               a == 0xffffffffu;                  /* broadcast */
}

static bool v6_forbidden(const struct in6_addr *a)
{
        return IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_LINKLOCAL(a) ||
               IN6_IS_ADDR_MULTICAST(a) || IN6_IS_ADDR_SITELOCAL(a);
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
        if (!a || !b || a->sa_family != b->sa_family)
                return false;
        if (a->sa_family == AF_INET)
                return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
        if (a->sa_family == AF_INET6)
                return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                              sizeof(struct in6_addr)) == 0;
        return false;
}

/* One of the addresses of the host's interfaces (read each time: they
 * change). Unreadable: treated as the host's, the safe side. */
static bool host_own(const struct sockaddr *sa)
{
        struct ifaddrs *all;
        if (getifaddrs(&all) < 0)
                return true;
        bool own = false;
        for (struct ifaddrs *i = all; i && !own; i = i->ifa_next)
                own = same_addr(i->ifa_addr, sa);
        freeifaddrs(all);
        return own;
}

bool egress_addr_forbidden(const struct sockaddr *sa)
{
        struct sockaddr_in v4;
        if (sa->sa_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
                if (!IN6_IS_ADDR_V4MAPPED(a) && !IN6_IS_ADDR_V4COMPAT(a))
                        return v6_forbidden(a) || host_own(sa);
                /* ::ffff:a.b.c.d reaches a.b.c.d: judged as that. */
                v4 = (struct sockaddr_in){ .sin_family = AF_INET };
                memcpy(&v4.sin_addr, &a->s6_addr[12], 4);
                sa = (const struct sockaddr *)&v4;
        }
        if (sa->sa_family != AF_INET)
                return true;
        return v4_forbidden(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr)) || host_own(sa);
}
