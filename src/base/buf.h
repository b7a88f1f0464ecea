/* A growable byte buffer with a hard cap; appends beyond the cap fail with
 * -ENOBUFS so callers can turn that into a limit error. data is always
 * NUL-terminated once anything was appended. */
#pragma once

#include <stddef.h>

struct buf {
        char *data;
        size_t len;
        size_t cap;
        size_t max;
};
void buf_init(struct buf *b, size_t max);
void buf_free(struct buf *b);
int buf_append(struct buf *b, const void *data, size_t len);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
