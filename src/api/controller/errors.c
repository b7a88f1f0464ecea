/* The controller's error body {"error": {"code", "message"}} (seed 003,
 * "Errors"), the mapping of domain errors onto it, and request bodies. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/common/message.h"
#include "api/controller/controller.h"
#include "base/util.h"

void ctl_error(struct http_response *res, int status, const char *code, const char *message)
{
        _cleanup_free_ char *clean = NULL;
        message = api_message_utf8(message, &clean);
        http_json(res, status, json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message));
}

void ctl_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        api_vformat(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        ctl_error(res, status, code, msg);
}

static void busy(struct http_response *res, const struct err *e, const char *msg)
{
        const char *ra = err_detail_get(e, "retry_after");
        if (!ra) {
                ctl_error(res, 503, "SERVICE_UNAVAILABLE", msg);
                res->retry_after = 1;
                return;
        }
        ctl_error(res, 429, "RATE_LIMITED", msg);
        unsigned long v = strtoul(ra, NULL, 10);
        res->retry_after = v ? (unsigned)v : 1;
}

void ctl_error_from(struct http_response *res, const struct err *e)
{
        const char *msg = e->msg[0] ? e->msg : "Internal error";
        switch (e->reason) {
        case ERR_INVALID:
        case ERR_LIMIT:
        case ERR_IS_DIR:
        case ERR_NOT_DIR: ctl_error(res, 400, "VALIDATION_ERROR", msg); return;
        case ERR_NOT_FOUND: ctl_error(res, 404, "NOT_FOUND", msg); return;
        case ERR_EXISTS: ctl_error(res, 409, "CONFLICT", msg); return;
        case ERR_PERMISSION: ctl_error(res, 403, "FORBIDDEN", msg); return;
        case ERR_TOO_LARGE: ctl_error(res, 413, "PAYLOAD_TOO_LARGE", msg); return;
        case ERR_BUSY: busy(res, e, msg); return;
        case ERR_QUOTA: ctl_error(res, 429, "QUOTA_EXCEEDED", msg); return;
        case ERR_UNAVAILABLE: ctl_error(res, 503, "SERVICE_UNAVAILABLE", msg); return;
        default: ctl_error(res, 500, "INTERNAL_ERROR", msg); return;
        }
}

void ctl_error_done(struct http_response *res, struct err *e, enum err_reason reason, int status, const char *code)
{
        if (reason != ERR_OK && e->reason == reason)
                ctl_error(res, status, code, e->msg);
        else
                ctl_error_from(res, e);
        err_done(e);
}

static const char *code_for(int status)
{
        switch (status) {
        case 400: return "VALIDATION_ERROR";
        case 401: return "AUTH_REQUIRED";
        case 403: return "FORBIDDEN";
        case 404: return "NOT_FOUND";
        case 405: return "METHOD_NOT_ALLOWED";
        case 413: return "PAYLOAD_TOO_LARGE";
        case 415: return "UNSUPPORTED_MEDIA_TYPE";
        case 503: return "SERVICE_UNAVAILABLE";
        default: return "INTERNAL_ERROR";
        }
}

void ctl_envelope(void *cls, struct http_response *res, int status, const char *message)
{
        (void)cls;
        ctl_error(res, status, code_for(status), message);
}

bool ctl_body_object(struct http_request *req, struct http_response *res, json_t **ret)
{
        json_error_t jerr;
        json_t *j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(j)) {
                json_decref(j);
                ctl_error(res, 400, "VALIDATION_ERROR", "Request body must be a JSON object");
                return false;
        }
        *ret = j;
        return true;
}

bool ctl_opt_string(json_t *obj, const char *name, const char **ret, struct http_response *res)
{
        json_t *v = json_object_get(obj, name);
        *ret = NULL;
        if (!v || json_is_null(v))
                return true;
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be a string", name);
                return false;
        }
        *ret = json_string_value(v);
        return true;
}

bool ctl_body_strings(struct http_request *req, struct http_response *res, json_t **ret_body,
                      const struct ctl_string_field *fields, size_t n)
{
        json_t *b;
        *ret_body = NULL;
        if (!ctl_body_object(req, res, &b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!ctl_opt_string(b, fields[i].name, fields[i].value, res)) {
                        json_decref(b);
                        return false;
                }
        *ret_body = b;
        return true;
}
