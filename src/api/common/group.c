#include "api/common/group.h"

#include <errno.h>

int api_group_register(struct http_server *srv, const char *prefix, const struct http_group_ops *ops, void *cls,
                       const api_route_table *tables, size_t ntables)
{
        struct http_group *g = http_server_group(srv, prefix, ops, cls);
        if (!g)
                return -ENOMEM;
        for (size_t i = 0; i < ntables; i++) {
                size_t n;
                const struct route *r = tables[i](&n);
                if (http_group_routes(g, r, n) < 0)
                        return -ENOMEM;
        }
        return 0;
}
