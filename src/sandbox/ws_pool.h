/* Ready workspace images (pool.workspace_images): ext4 images formatted
 * ahead of time by one background thread, so that creating a sandbox costs
 * a rename and a mount instead of mkfs runs on the request path.
 *
 * An image is made exactly as workspace_open would make it (same sizing,
 * same mkfs options, same owner), under <dir>, and leaves the pool only by
 * rename to a sandbox's own path: it is never handed out twice and never
 * comes back. At start the pool directory is emptied (a killed daemon's
 * images, finished or half made, are deleted and made again off the request
 * path). Ready images count against the disk cap: the pool only formats
 * while its images fit in what the caller's room() leaves, and deletes
 * ready ones when tenants need that room. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define WS_POOL_SHAPES 4

/* A workspace quota the pool keeps images of. */
struct ws_shape {
        uint64_t bytes, inodes;
};

struct ws_pool_options {
        char dir[4200];        /* the pool's own directory (emptied at start) */
        unsigned depth;        /* ready images kept per shape; 0: no pool */
        struct ws_shape shapes[WS_POOL_SHAPES];
        size_t nshapes;
        /* Bytes the ready images may reserve in total (the disk cap minus
         * every sandbox's quota); asked without any pool lock held. NULL:
         * no cap. */
        uint64_t (*room)(void *userdata);
        void *userdata;
};

struct ws_pool;

/* Empties o->dir and starts the filler. NULL *ret (and 0) when depth or
 * nshapes is 0. */
int ws_pool_new(const struct ws_pool_options *o, struct ws_pool **ret);
/* Stops the filler and deletes the ready images. NULL-safe. */
void ws_pool_free(struct ws_pool *p);
/* Moves a ready image of exactly that quota to dest (its directory must
 * exist) and wakes the filler. 0, or -ENOENT when none is ready (the
 * caller formats its own), or -errno. */
int ws_pool_take(struct ws_pool *p, uint64_t bytes, uint64_t inodes, const char *dest);
/* Ready images now, all shapes. */
size_t ws_pool_ready(struct ws_pool *p);

/* The filler's decision, pure (unit-tested): which shape to format next
 * (the first below depth whose quota still fits in room with the ready
 * images counted), or -1 for none. Shapes are tried in order, so the
 * default quota (shape 0) refills first. */
int ws_pool_next_shape(const struct ws_shape *shapes, const unsigned *ready, size_t n, unsigned depth,
                       uint64_t room);
/* Which shape gives up an image when the ready ones reserve more than
 * room: the one holding the most bytes, or -1 when they fit. */
int ws_pool_trim_shape(const struct ws_shape *shapes, const unsigned *ready, size_t n, uint64_t room);
