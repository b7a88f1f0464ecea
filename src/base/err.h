/* One domain error for every layer below api/ (house style R3/R4).
 *
 * Functions return 0 or a negative errno; the ones whose failures reach a
 * client also fill a struct err: a reason (what kind of failure, in the
 * domain's words, never an HTTP status), the errno behind it when there is
 * one, the operation, a message for people, and a few key/value details
 * (e.g. path, contextId). Each facade in api/<name>/ maps the reason to its
 * own status code, error code and envelope. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

enum err_reason {
        ERR_OK = 0,
        ERR_INVALID,        /* the caller's input is wrong */
        ERR_NOT_FOUND,      /* a sandbox, context, file… does not exist */
        ERR_EXISTS,         /* it exists already */
        ERR_PERMISSION,     /* not allowed (a symlink refused, a read-only path) */
        ERR_TOO_LARGE,      /* one object over its size limit */
        ERR_NO_SPACE,       /* a quota (bytes, entries) is exhausted */
        ERR_LIMIT,          /* a count limit (contexts per sandbox, …) */
        ERR_IS_DIR,         /* a directory where a file was meant */
        ERR_NOT_DIR,        /* a file where a directory was meant */
        ERR_FILESYSTEM,     /* any other file system failure */
        ERR_UNAVAILABLE,    /* an interpreter or process could not start or be restored */
        ERR_BUSY,           /* overloaded: try again later */
        ERR_INTERNAL,       /* a bug or a failure of the host (store, out of memory) */
        ERR_QUOTA,          /* a service-wide cap on what tenants hold (sandboxes at once) */
        ERR_STORAGE,        /* the disk all tenants may use together is taken */
        _ERR_REASON_MAX
};

#define ERR_MSG_MAX 512
#define ERR_DETAILS_MAX 8

struct err_detail {
        const char *key;    /* static string */
        char *value;        /* owned (malloc), valid UTF-8 or raw bytes as given */
        size_t len;
        bool number;        /* value is a decimal integer (err_detail_u64) */
};

struct err {
        enum err_reason reason;
        int errnum;                 /* positive errno behind the failure, or 0 */
        const char *op;             /* static operation name ("file.read"), or NULL */
        char msg[ERR_MSG_MAX];      /* never split inside a UTF-8 sequence */
        struct err_detail details[ERR_DETAILS_MAX];
        size_t ndetails;
};

/* Frees the details and resets e to ERR_OK. NULL-safe; e may be reused. */
void err_done(struct err *e);

/* Sets reason and message (printf style; replaces any earlier message and
 * details). Returns -errnum when errnum > 0, else -EINVAL for ERR_INVALID and
 * -EIO otherwise, so callers can `return err_set(…)`. */
int err_set(struct err *e, enum err_reason reason, int errnum, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
int err_setv(struct err *e, enum err_reason reason, int errnum, const char *fmt, va_list ap)
        __attribute__((format(printf, 4, 0)));
/* The negative errno a function failing with e returns: -errnum when set,
 * else -EINVAL for ERR_INVALID and -EIO otherwise. */
int err_ret(const struct err *e);
/* Adds (or replaces) one detail; value of len bytes (len = (size_t)-1: strlen).
 * Silently drops details past ERR_DETAILS_MAX or on allocation failure. */
void err_detail(struct err *e, const char *key, const char *value, size_t len);
/* Adds a numeric detail (facades show it as a number). */
void err_detail_u64(struct err *e, const char *key, uint64_t value);
/* The detail's value, or NULL. */
const char *err_detail_get(const struct err *e, const char *key);
/* Moves src into dst (dst is done first; src is left empty). */
void err_move(struct err *dst, struct err *src);

/* Stable lower-case name of a reason ("not_found"), for logs. */
const char *err_reason_name(enum err_reason r);
/* The reason a plain errno usually means (ENOENT → ERR_NOT_FOUND, …). */
enum err_reason err_reason_from_errno(int errnum);
