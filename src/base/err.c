#include "base/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void err_done(struct err *e)
{
        if (!e)
                return;
        for (size_t i = 0; i < e->ndetails; i++)
                free(e->details[i].value);
        memset(e, 0, sizeof(*e));
}

/* Truncation must not split a UTF-8 sequence: messages end up in JSON. */
static void set_message(char *dst, size_t cap, const char *fmt, va_list ap)
{
        _cleanup_free_ char *tmp = NULL;
        int n = vasprintf(&tmp, fmt, ap);
        if (n < 0) {
                snprintf(dst, cap, "Out of memory");
                return;
        }
        size_t len = (size_t)n;
        if (len >= cap) {
                len = cap - 1;
                while (len > 0 && ((unsigned char)tmp[len] & 0xC0) == 0x80)
                        len--;
        }
        memcpy(dst, tmp, len);
        dst[len] = '\0';
}

int err_setv(struct err *e, enum err_reason reason, int errnum, const char *fmt, va_list ap)
{
        err_done(e);
        e->reason = reason;
        e->errnum = errnum > 0 ? errnum : 0;
        set_message(e->msg, sizeof(e->msg), fmt, ap);
        return err_ret(e);
}

int err_ret(const struct err *e)
{
        if (e->errnum > 0)
                return -e->errnum;
        return e->reason == ERR_INVALID ? -EINVAL : -EIO;
}

int err_set(struct err *e, enum err_reason reason, int errnum, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = err_setv(e, reason, errnum, fmt, ap);
        va_end(ap);
        return r;
}

static struct err_detail *detail_put(struct err *e, const char *key, const char *value, size_t len);

void err_detail(struct err *e, const char *key, const char *value, size_t len)
{
        if (value)
                detail_put(e, key, value, len == (size_t)-1 ? strlen(value) : len);
}

void err_detail_u64(struct err *e, const char *key, uint64_t value)
{
        char text[24];
        int n = snprintf(text, sizeof(text), "%llu", (unsigned long long)value);
        struct err_detail *d = detail_put(e, key, text, (size_t)n);
        if (d)
                d->number = true;
}

static struct err_detail *detail_put(struct err *e, const char *key, const char *value, size_t len)
{
        char *copy = malloc(len + 1);
        if (!copy)
                return NULL;
        memcpy(copy, value, len);
        copy[len] = '\0';
        for (size_t i = 0; i < e->ndetails; i++) {
                if (strcmp(e->details[i].key, key) == 0) {
                        free(e->details[i].value);
                        e->details[i] = (struct err_detail){ key, copy, len, false };
                        return &e->details[i];
                }
        }
        if (e->ndetails >= ERR_DETAILS_MAX) {
                free(copy);
                return NULL;
        }
        e->details[e->ndetails] = (struct err_detail){ key, copy, len, false };
        return &e->details[e->ndetails++];
}

const char *err_detail_get(const struct err *e, const char *key)
{
        for (size_t i = 0; i < e->ndetails; i++)
                if (strcmp(e->details[i].key, key) == 0)
                        return e->details[i].value;
        return NULL;
}

void err_move(struct err *dst, struct err *src)
{
        if (dst == src)
                return;
        err_done(dst);
        *dst = *src;
        memset(src, 0, sizeof(*src));
}

static const char *const reason_names[_ERR_REASON_MAX] = {
        [ERR_OK] = "ok",
        [ERR_INVALID] = "invalid",
        [ERR_NOT_FOUND] = "not_found",
        [ERR_EXISTS] = "exists",
        [ERR_PERMISSION] = "permission",
        [ERR_TOO_LARGE] = "too_large",
        [ERR_NO_SPACE] = "no_space",
        [ERR_LIMIT] = "limit",
        [ERR_IS_DIR] = "is_dir",
        [ERR_NOT_DIR] = "not_dir",
        [ERR_FILESYSTEM] = "filesystem",
        [ERR_UNAVAILABLE] = "unavailable",
        [ERR_BUSY] = "busy",
        [ERR_INTERNAL] = "internal",
        [ERR_QUOTA] = "quota",
        [ERR_STORAGE] = "storage",
};

const char *err_reason_name(enum err_reason r)
{
        if ((unsigned)r >= _ERR_REASON_MAX || !reason_names[r])
                return "internal";
        return reason_names[r];
}

enum err_reason err_reason_from_errno(int errnum)
{
        switch (errnum) {
        case 0: return ERR_OK;
        case EINVAL: return ERR_INVALID;
        case ENOENT: return ERR_NOT_FOUND;
        case EEXIST: return ERR_EXISTS;
        case EACCES:
        case EPERM:
        case ELOOP: return ERR_PERMISSION;
        case EFBIG:
        case E2BIG:
        case ENAMETOOLONG: return ERR_TOO_LARGE;
        case ENOSPC:
        case EDQUOT: return ERR_NO_SPACE;
        case EISDIR: return ERR_IS_DIR;
        case ENOTDIR: return ERR_NOT_DIR;
        case EAGAIN:
        case EBUSY: return ERR_BUSY;
        case ENOMEM: return ERR_INTERNAL;
        default: return ERR_INTERNAL;
        }
}
