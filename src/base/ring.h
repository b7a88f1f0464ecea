/* A byte ring that keeps the last `cap` bytes written to it (a terminal's
 * scrollback for replay): appends never fail and never block, the oldest
 * bytes are overwritten. Not thread-safe: the owner locks. */
#pragma once

#include <stddef.h>

struct ring {
        unsigned char *data;
        size_t cap;
        size_t start;       /* index of the oldest byte */
        size_t len;         /* bytes held, <= cap */
};

/* 0 or -ENOMEM (cap > 0). */
int ring_init(struct ring *r, size_t cap);
/* Frees the storage. Safe on a zeroed ring. */
void ring_free(struct ring *r);
/* Appends len bytes; only the last cap of everything ever appended stay. */
void ring_append(struct ring *r, const void *data, size_t len);
/* Copies the bytes held, oldest first, into out (r->len bytes). */
void ring_copy(const struct ring *r, void *out);
