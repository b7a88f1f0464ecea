/* Ready workspace images: the pool and its filler thread (ws_pool.h). */
#include "sandbox/ws_pool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/thread.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/workspace.h"

/* Re-asks room() this often while idle: sandboxes deleted elsewhere free
 * room without telling the pool. */
#define WS_POOL_RECHECK_MS 1000
/* The filler formats at a lower priority than requests (mkfs inherits it). */
#define WS_POOL_NICE 10
/* A take is the start of a request that goes on to spawn the sandbox's
 * first interpreter: refilling at once would run mkfs beside it on the same
 * CPUs. Bursts of creates take from the pool meanwhile. */
#define WS_POOL_REFILL_DELAY_MS 250

struct ws_pool {
        struct ws_pool_options opt;
        struct bg_thread filler;       /* its internal lock guards what follows */
        unsigned ready[WS_POOL_SHAPES];
        uint64_t serial;               /* names images: never the same name twice */
        uint64_t quiet_until_ns;       /* no format before (WS_POOL_REFILL_DELAY_MS after a take) */
        uint64_t *names[WS_POOL_SHAPES]; /* serials of the ready images, a stack per shape */
};

int ws_pool_next_shape(const struct ws_shape *shapes, const unsigned *ready, size_t n, unsigned depth,
                       uint64_t room)
{
        uint64_t held = 0;
        for (size_t i = 0; i < n; i++)
                held += shapes[i].bytes * ready[i];
        for (size_t i = 0; i < n; i++)
                if (ready[i] < depth && held <= room && shapes[i].bytes <= room - held)
                        return (int)i;
        return -1;
}

int ws_pool_trim_shape(const struct ws_shape *shapes, const unsigned *ready, size_t n, uint64_t room)
{
        uint64_t held = 0, most = 0;
        int which = -1;
        for (size_t i = 0; i < n; i++) {
                uint64_t b = shapes[i].bytes * ready[i];
                held += b;
                if (b > most) {
                        most = b;
                        which = (int)i;
                }
        }
        return held > room ? which : -1;
}

static void image_name(const struct ws_pool *p, size_t shape, uint64_t serial, char *buf, size_t len)
{
        snprintf(buf, len, "%s/%zu-%llu.img", p->opt.dir, shape, (unsigned long long)serial);
}

static uint64_t room_now(struct ws_pool *p)
{
        return p->opt.room ? p->opt.room(p->opt.userdata) : UINT64_MAX;
}

/* One step of the filler, with the lock held: trims one image past the
 * room, or formats one (unlocked meanwhile). false: nothing to do. */
static bool fill_step(struct ws_pool *p)
{
        bg_thread_unlock(&p->filler);
        uint64_t room = room_now(p);
        bg_thread_lock(&p->filler);
        char path[4300];
        int t = ws_pool_trim_shape(p->opt.shapes, p->ready, p->opt.nshapes, room);
        if (t >= 0) {
                image_name(p, (size_t)t, p->names[t][--p->ready[t]], path, sizeof(path));
                unlink(path);
                return true;
        }
        int s = ws_pool_next_shape(p->opt.shapes, p->ready, p->opt.nshapes, p->opt.depth, room);
        if (s < 0)
                return false;
        if (now_ns() < p->quiet_until_ns) {
                bg_thread_wait(&p->filler, p->quiet_until_ns);
                return true;
        }
        uint64_t serial = ++p->serial;
        struct ws_shape shape = p->opt.shapes[s];
        bg_thread_unlock(&p->filler);
        image_name(p, (size_t)s, serial, path, sizeof(path));
        int r = workspace_image_create(path, shape.bytes, shape.inodes);
        bg_thread_lock(&p->filler);
        if (r < 0) {
                log_warn("msg=\"cannot format a pool workspace image\" error=\"%s\"", strerror(-r));
                return false; /* retried after the idle wait, not in a tight loop */
        }
        p->names[s][p->ready[s]++] = serial;
        return true;
}

static void filler_loop(void *arg)
{
        struct ws_pool *p = arg;
        setpriority(PRIO_PROCESS, (id_t)gettid(), WS_POOL_NICE);
        bg_thread_lock(&p->filler);
        while (bg_thread_running(&p->filler))
                if (!fill_step(p))
                        bg_thread_wait(&p->filler, now_ns() + WS_POOL_RECHECK_MS * 1000000ULL);
        bg_thread_unlock(&p->filler);
}

int ws_pool_new(const struct ws_pool_options *o, struct ws_pool **ret)
{
        *ret = NULL;
        if (o->depth == 0 || o->nshapes == 0)
                return 0;
        if (o->nshapes > WS_POOL_SHAPES)
                return -EINVAL;
        /* Whatever a previous run left (ready images, a half-made .tmp) is
         * deleted, never handed out: remaking is off the request path. */
        int r = rm_rf(o->dir);
        if (r < 0 && r != -ENOENT)
                return r;
        if ((r = mkdir_p(o->dir, 0700)) < 0)
                return r;
        struct ws_pool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->opt = *o;
        for (size_t i = 0; i < o->nshapes && r == 0; i++)
                if (!(p->names[i] = calloc(o->depth, sizeof(uint64_t))))
                        r = -ENOMEM;
        if (r == 0)
                r = bg_thread_init(&p->filler, NULL);
        if (r == 0)
                r = bg_thread_start(&p->filler, "sbx-wspool", 1, filler_loop, p);
        if (r < 0) {
                ws_pool_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void ws_pool_free(struct ws_pool *p)
{
        if (!p)
                return;
        bg_thread_done(&p->filler);
        rm_rf(p->opt.dir);
        for (size_t i = 0; i < WS_POOL_SHAPES; i++)
                free(p->names[i]);
        free(p);
}

int ws_pool_take(struct ws_pool *p, uint64_t bytes, uint64_t inodes, const char *dest)
{
        if (!p)
                return -ENOENT;
        char path[4300];
        int r = -ENOENT;
        bg_thread_lock(&p->filler);
        for (size_t i = 0; i < p->opt.nshapes; i++) {
                if (p->opt.shapes[i].bytes != bytes || p->opt.shapes[i].inodes != inodes || !p->ready[i])
                        continue;
                image_name(p, i, p->names[i][--p->ready[i]], path, sizeof(path));
                /* Out of the pool before anything else can see it: a failed
                 * rename deletes it rather than keep an image in doubt. */
                r = rename(path, dest) < 0 ? -errno : 0;
                if (r < 0)
                        unlink(path);
                p->quiet_until_ns = now_ns() + WS_POOL_REFILL_DELAY_MS * 1000000ULL;
                bg_thread_wake(&p->filler);
                break;
        }
        bg_thread_unlock(&p->filler);
        return r;
}

size_t ws_pool_ready(struct ws_pool *p)
{
        size_t n = 0;
        if (!p)
                return 0;
        bg_thread_lock(&p->filler);
        for (size_t i = 0; i < p->opt.nshapes; i++)
                n += p->ready[i];
        bg_thread_unlock(&p->filler);
        return n;
}
