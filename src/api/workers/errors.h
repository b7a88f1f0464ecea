/* Maps the domain error (base/err.h) to the sandbox-workers ErrorResponse:
 * the reason picks the HTTP status and error code, the details become the
 * context object, and the operation is kept. */
#pragma once

#include "base/err.h"
#include "http/server.h"

/* Fills res from e (e is left as it was). */
void workers_error_from(struct http_response *res, const struct err *e);
/* The status and code that workers_error_from would answer. */
void workers_error_status(const struct err *e, int *ret_status, const char **ret_code);
