/* The gateway's /files endpoint: one JSON request object
 * ({op, path, newPath, content, encoding, recursive, force, includeHidden})
 * runs one typed operation of sandbox/files.h and answers the reference's
 * response shapes, or an ErrorResponse (api/workers/errors.h). */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "http/server.h"
#include "sandbox/files.h"

struct sandbox_mgr;

/* Runs request on sandbox_id's workspace (created on first use, locked for
 * the call) and fills res. request is borrowed. */
void workers_files(struct sandbox_mgr *m, const char *sandbox_id, json_t *request, struct http_response *res);
/* The same on an open workspace; created_at_ms is the sandbox's createdAt
 * (directories report it as modifiedAt). */
void workers_files_on(const struct files_root *root, uint64_t created_at_ms, json_t *request,
                      struct http_response *res);
