#include "api/workers/errors.h"

#include <stdlib.h>
#include <string.h>

#include "api/workers/envelope.h"
#include "base/util.h"

/* Which object a not-found error is about: contexts answer
 * CONTEXT_NOT_FOUND, everything else in this API is a file. */
static bool is_context_op(const char *op)
{
        return op && strncmp(op, "context.", 8) == 0;
}

void workers_error_status(const struct err *e, int *ret_status, const char **ret_code)
{
        int status = 500;
        const char *code = "INTERNAL_ERROR";
        switch (e->reason) {
        case ERR_INVALID:
        case ERR_LIMIT: status = 400, code = "VALIDATION_FAILED"; break;
        case ERR_NOT_FOUND:
                status = 404, code = is_context_op(e->op) ? "CONTEXT_NOT_FOUND" : "FILE_NOT_FOUND";
                break;
        case ERR_EXISTS: status = 409, code = "FILE_EXISTS"; break;
        case ERR_PERMISSION: status = 403, code = "PERMISSION_DENIED"; break;
        case ERR_TOO_LARGE: status = 413, code = "FILE_TOO_LARGE"; break;
        case ERR_NO_SPACE: status = 500, code = "NO_SPACE"; break;
        case ERR_IS_DIR: status = 400, code = "IS_DIRECTORY"; break;
        case ERR_NOT_DIR: status = 400, code = "NOT_DIRECTORY"; break;
        case ERR_FILESYSTEM: status = 500, code = "FILESYSTEM_ERROR"; break;
        /* An interpreter that cannot start or be restored is an upstream
         * failure of this gateway, as a dead Worker is for the original. */
        case ERR_UNAVAILABLE: status = 502, code = "INTERNAL_ERROR"; break;
        case ERR_BUSY: status = 503, code = "OVERLOADED"; break;
        /* Service-wide caps (sandbox.max_sandboxes, sandbox.max_disk_bytes):
         * the tenant may retry once others have released theirs. */
        case ERR_QUOTA: status = 429, code = "SANDBOX_LIMIT_EXCEEDED"; break;
        case ERR_STORAGE: status = 507, code = "INSUFFICIENT_STORAGE"; break;
        case ERR_OK:
        case ERR_INTERNAL:
        case _ERR_REASON_MAX:
        default: break;
        }
        *ret_status = status;
        *ret_code = code;
}

/* Details may quote raw client bytes (a path that was not valid UTF-8). */
static json_t *detail_string(const struct err_detail *d)
{
        if (utf8_valid(d->value, d->len))
                return json_stringn(d->value, d->len);
        _cleanup_free_ char *clean = malloc(3 * d->len + 1);
        if (!clean)
                return NULL;
        size_t n = utf8_sanitize(d->value, d->len, clean);
        return json_stringn(clean, n);
}

static json_t *context_of(const struct err *e)
{
        json_t *ctx = json_object();
        for (size_t i = 0; ctx && i < e->ndetails; i++) {
                const struct err_detail *d = &e->details[i];
                json_t *v = d->number ? json_integer((json_int_t)strtoll(d->value, NULL, 10))
                                      : detail_string(d);
                json_object_set_new(ctx, d->key, v);
        }
        return ctx;
}

void workers_error_from(struct http_response *res, const struct err *e)
{
        int status;
        const char *code;
        workers_error_status(e, &status, &code);
        workers_error(res, status, code, e->msg[0] ? e->msg : "Internal error", context_of(e));
        if (e->op && json_is_object(res->json))
                json_object_set_new(res->json, "operation", json_string(e->op));
        if (e->reason == ERR_BUSY) /* overloaded, or the sandbox is another node's now */
                res->retry_after = 1;
}
