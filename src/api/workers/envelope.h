/* The sandbox-workers ErrorResponse envelope:
 * {code, message, context, httpStatus, timestamp}. Every error this facade
 * answers, its own and the HTTP layer's, goes out in this shape. */
#pragma once

#include <jansson.h>

#include "http/server.h"

/* Fills res with an ErrorResponse. context may be NULL (→ {}); it is stolen.
 * message need not be valid UTF-8 (it is sanitised). */
void workers_error(struct http_response *res, int status, const char *code, const char *message,
                   json_t *context);
void workers_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
