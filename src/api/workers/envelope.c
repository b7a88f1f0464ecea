#include "api/workers/envelope.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void workers_error(struct http_response *res, int status, const char *code, const char *message,
                   json_t *context)
{
        char ts[32];
        iso8601_ms(wall_ms(), ts);
        /* Messages quote client input (URL captures are decoded bytes, not
         * necessarily UTF-8); json_pack would refuse invalid UTF-8 and the
         * client would get a 500 "no response" instead of this error. */
        _cleanup_free_ char *clean = NULL;
        size_t len = strlen(message);
        if (!utf8_valid(message, len) && (clean = malloc(3 * len + 1))) {
                utf8_sanitize(message, len, clean);
                message = clean;
        }
        json_t *body = json_pack("{s:s, s:s, s:o, s:i, s:s}", "code", code, "message", message, "context",
                                 context ? context : json_object(), "httpStatus", status, "timestamp", ts);
        http_json(res, status, body);
}

void workers_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* Truncation must not split a UTF-8 sequence: drop a partial one. */
        if (n >= (int)sizeof(msg)) {
                size_t len = sizeof(msg) - 1;
                for (int k = 0; k < 3 && len > 0 && !utf8_valid(msg, len); k++)
                        msg[--len] = '\0';
        }
        workers_error(res, status, code, msg, NULL);
}
