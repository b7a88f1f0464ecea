/* Registration of the sandbox-workers facade on the HTTP server. */
#pragma once

#include <stddef.h>

#include "http/server.h"

struct app;

/* Adds the facade's group (default group: runtime + gateway routes, API-key
 * auth, ErrorResponse envelope). app must outlive the server. */
int api_workers_register(struct http_server *srv, struct app *app);
/* Body cap of POST …/files (files.request_bytes): larger than the default
 * so that the per-file check (413 FILE_TOO_LARGE) is reachable. */
size_t workers_files_body_cap(const void *app);
/* GET /openapi.json and /openapi.html (openapi.c). */
const struct route *api_workers_openapi_routes(size_t *ret_n);
