/* Shared by every facade: registering its route group from a list of
 * route tables (one per file of the facade). */
#pragma once

#include <stddef.h>

#include "http/server.h"

typedef const struct route *(*api_route_table)(size_t *ret_n);

/* Adds a group under prefix with ops/cls and every table's routes.
 * 0 or -ENOMEM. */
int api_group_register(struct http_server *srv, const char *prefix, const struct http_group_ops *ops, void *cls,
                       const api_route_table *tables, size_t ntables);
