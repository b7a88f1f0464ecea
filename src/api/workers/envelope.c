#include "api/workers/envelope.h"
#include "api/common/message.h"

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
        _cleanup_free_ char *clean = NULL;
        message = api_message_utf8(message, &clean);
        json_t *body = json_pack("{s:s, s:s, s:o, s:i, s:s}", "code", code, "message", message, "context",
                                 context ? context : json_object(), "httpStatus", status, "timestamp", ts);
        http_json(res, status, body);
}

void workers_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        api_vformat(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        workers_error(res, status, code, msg, NULL);
}
