/* The bridge's error body and the mapping of domain errors onto its codes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/bridge/bridge.h"
#include "api/common/message.h"
#include "base/util.h"

void bridge_error(struct http_response *res, int status, const char *code, const char *message)
{
        _cleanup_free_ char *clean = NULL;
        message = api_message_utf8(message, &clean);
        http_json(res, status, json_pack("{s:s, s:s}", "error", message, "code", code));
}

void bridge_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        api_vformat(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        bridge_error(res, status, code, msg);
}

void bridge_error_from(struct http_response *res, const struct err *e, const char *upstream_code)
{
        const char *msg = e->msg[0] ? e->msg : "Internal error";
        switch (e->reason) {
        case ERR_INVALID:
        case ERR_LIMIT:
        case ERR_IS_DIR:
        case ERR_NOT_DIR: bridge_error(res, 400, "invalid_request", msg); return;
        case ERR_PERMISSION: bridge_error(res, 403, "invalid_request", msg); return;
        case ERR_NOT_FOUND: bridge_error(res, 404, "workspace_read_not_found", msg); return;
        case ERR_TOO_LARGE: bridge_error(res, 413, "payload_too_large", msg); return;
        case ERR_QUOTA: bridge_error(res, 503, "capacity_exceeded", msg); return;
        case ERR_BUSY: /* overloaded, or the sandbox is another node's now */
                bridge_error(res, 503, "capacity_exceeded", msg);
                res->retry_after = 1;
                return;
        default: bridge_error(res, 502, upstream_code, msg); return;
        }
}
