#include "base/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b, size_t max)
{
        *b = (struct buf){ .max = max };
}

void buf_free(struct buf *b)
{
        free(b->data);
        *b = (struct buf){ 0 };
}

int buf_append(struct buf *b, const void *data, size_t len)
{
        if (b->len + len > b->max)
                return -ENOBUFS;
        if (b->len + len + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                while (cap < b->len + len + 1)
                        cap *= 2;
                char *n = realloc(b->data, cap);
                if (!n)
                        return -ENOMEM;
                b->data = n;
                b->cap = cap;
        }
        memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = '\0';
        return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
        char tmp[1024];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t)n < sizeof(tmp))
                return buf_append(b, tmp, (size_t)n);
        char *big = malloc((size_t)n + 1);
        if (!big)
                return -ENOMEM;
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        int r = buf_append(b, big, (size_t)n);
        free(big);
        return r;
}
