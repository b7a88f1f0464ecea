/* The byte ring of ring.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/ring.h"

int ring_init(struct ring *r, size_t cap)
{
        *r = (struct ring){ .cap = cap };
        if (cap == 0 || !(r->data = malloc(cap)))
                return -ENOMEM;
        return 0;
}

void ring_free(struct ring *r)
{
        free(r->data);
        *r = (struct ring){ 0 };
}

/* Writes len (<= cap) bytes at index pos, wrapping once. */
static void put(struct ring *r, size_t pos, const unsigned char *p, size_t len)
{
        size_t first = r->cap - pos < len ? r->cap - pos : len;
        memcpy(r->data + pos, p, first);
        memcpy(r->data, p + first, len - first);
}

void ring_append(struct ring *r, const void *data, size_t len)
{
        const unsigned char *p = data;
        if (len >= r->cap) {
                /* Only the tail survives: it fills the ring exactly. */
                memcpy(r->data, p + len - r->cap, r->cap);
                r->start = 0;
                r->len = r->cap;
                return;
        }
        size_t end = (r->start + r->len) % r->cap;
        put(r, end, p, len);
        if (r->len + len <= r->cap) {
                r->len += len;
                return;
        }
        /* Full: the oldest byte is the one after the newest. */
        r->len = r->cap;
        r->start = (end + len) % r->cap;
}

void ring_copy(const struct ring *r, void *out)
{
        size_t first = r->cap - r->start < r->len ? r->cap - r->start : r->len;
        memcpy(out, r->data + r->start, first);
        memcpy((unsigned char *)out + first, r->data, r->len - first);
}
