/* The sandbox manager: its life cycle (start, the caps derived from the
 * options, stop) and the reaper thread that deletes sandboxes past their
 * deadline (idle expiry, or a controller sandbox's fixed lifetime). The
 * registry of loaded sandboxes itself is registry.c. */
#include "sandbox/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/thread.h"
#include "base/util.h"
#include "sandbox/ws_pool.h"

/* ---- idle expiry ---- */

void id_list_add(const char *id, void *list)
{
        struct id_list *l = list;
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                void *n = realloc(l->ids, cap * sizeof(*l->ids));
                if (!n)
                        return;
                l->ids = n;
                l->cap = cap;
        }
        snprintf(l->ids[l->n++], STORE_ID_MAX, "%s", id);
}

void id_list_done(struct id_list *l)
{
        free(l->ids);
        *l = (struct id_list){ 0 };
}

static void reap_one(struct sandbox_mgr *m, const char *id)
{
        struct err err = { 0 };
        /* Look up without touching: re-check the deadline under the lock,
         * since a request may have just renewed it. */
        struct sandbox *s = sandbox_get_existing(m, NULL, id, &err);
        err_done(&err);
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        bool expired = s->row.expires_at && s->row.expires_at <= wall_ms();
        pthread_mutex_unlock(&s->lock);
        if (expired) {
                log_info("msg=\"sandbox expired\" sandbox=%s", id);
                sandbox_wipe(m, s);
        }
        sandbox_put(m, s);
}

void sbx_reap_expired(struct sandbox_mgr *m)
{
        struct id_list e = { 0 };
        store_sandbox_each_expired(m->store, wall_ms(), id_list_add, &e);
        ids_keep_owned(m, &e);
        for (size_t i = 0; i < e.n; i++)
                reap_one(m, e.ids[i]);
        id_list_done(&e);
}

static void reaper_loop(void *arg)
{
        struct sandbox_mgr *m = arg;
        /* At most a second: a fixed deadline (sbx_create_options
         * lifetime_ms) is kept to about a second whatever the idle TTL. */
        uint64_t period_ms = m->opt.idle_ttl_ms / 10;
        if (period_ms < 100)
                period_ms = 100;
        if (period_ms > 1000)
                period_ms = 1000;
        bg_thread_lock(&m->reaper);
        while (bg_thread_wait(&m->reaper, now_ns() + period_ms * 1000000ULL)) {
                bg_thread_unlock(&m->reaper);
                sbx_reap_expired(m);
                sbx_unload_idle(m);
                bg_thread_lock(&m->reaper);
        }
        bg_thread_unlock(&m->reaper);
}

/* ---- ready workspace images ---- */

/* What the disk cap leaves once every sandbox's quota is reserved: ready
 * images hold their quota too, and give it back (deleted) when a new
 * sandbox needs it rather than refuse that sandbox. */
static uint64_t ws_pool_room(void *userdata)
{
        struct sandbox_mgr *m = userdata;
        uint64_t reserved = 0;
        if (store_sandbox_disk_reserved(m->store, m->opt.workspace_bytes, &reserved) < 0)
                return 0;
        return reserved < m->opt.max_disk_bytes ? m->opt.max_disk_bytes - reserved : 0;
}

/* Images for the two quotas a new sandbox gets unless it asks for its
 * own: the runtime API's default and the bridge's. Root only: rootless
 * workspaces are plain directories. */
static int ws_pool_start(struct sandbox_mgr *m)
{
        if (m->opt.workspace_images == 0 || geteuid() != 0)
                return 0;
        struct ws_pool_options o = { .depth = (unsigned)m->opt.workspace_images, .room = ws_pool_room,
                                     .userdata = m };
        snprintf(o.dir, sizeof(o.dir), "%s/wspool", m->opt.data_dir);
        o.shapes[o.nshapes++] = (struct ws_shape){ m->opt.workspace_bytes, m->opt.workspace_inodes };
        const struct sbx_create_options *b = &m->opt.pool.create;
        if (b->workspace_bytes && (b->workspace_bytes != m->opt.workspace_bytes ||
                                   b->workspace_inodes != m->opt.workspace_inodes))
                o.shapes[o.nshapes++] = (struct ws_shape){ b->workspace_bytes, b->workspace_inodes };
        /* Without it every create formats its own image, as before: slower,
         * never wrong, so not a reason to refuse to start. */
        int r = ws_pool_new(&o, &m->ws_pool);
        if (r < 0)
                log_warn("msg=\"no ready workspace images\" dir=\"%s\" error=\"%s\"", o.dir, strerror(-r));
        return 0;
}

/* ---- the manager ---- */

/* A cap left at 0 by a caller that predates it means "none" (the
 * configuration never gives 0: its bounds start at 1). */
static void options_fill_caps(struct sandbox_options *o)
{
        /* Large, yet no overflow when scaled (replay_ms to ns, disk sums). */
        const uint64_t none = 1ULL << 42;
        uint64_t *caps[] = { &o->max_sandboxes, &o->max_disk_bytes, &o->replay_ms, &o->journal_bytes };
        for (size_t i = 0; i < ARRAY_SIZE(caps); i++)
                if (*caps[i] == 0)
                        *caps[i] = i == 1 ? UINT64_MAX / 2 : none;
        if (o->max_resident_per_sandbox == 0)
                o->max_resident_per_sandbox = o->max_resident_contexts;
}

int sbx_mgr_new(const struct sandbox_options *opt, struct engine *engine, struct store *store,
                struct sandbox_mgr **ret)
{
        struct sandbox_mgr *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->opt = *opt;
        options_fill_caps(&m->opt);
        m->engine = engine;
        m->store = store;
        pthread_mutex_init(&m->lock, NULL);
        pthread_mutex_init(&m->tunnel_lock, NULL);
        /* Bucket mounts are runtime state: a killed daemon's are gone. */
        mounts_sweep(opt->data_dir);
        int r = bg_thread_init(&m->reaper, NULL);
        if (r == 0)
                r = terminals_new(&m->terminals);
        if (r == 0)
                r = store_org_ensure(store, SBX_DEFAULT_ORG, "Default organisation");
        if (r == 0)
                r = bg_thread_start(&m->reaper, "sbx-reaper", 1, reaper_loop, m);
        if (r == 0)
                r = journal_flusher_start(m);
        if (r == 0)
                r = ws_pool_start(m);
        if (r == 0)
                r = spares_start(m);
        if (r == 0)
                r = pool_start(m);
        if (r < 0) {
                sbx_mgr_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

void sbx_mgr_free(struct sandbox_mgr *m)
{
        if (!m)
                return;
        bg_thread_done(&m->reaper);
        /* Before anything is unmounted or killed: the last writes are
         * persisted while the workspaces are still there. */
        replica_sched_stop(m);
        pool_stop(m);
        spares_stop(m);
        journal_flusher_stop(m);
        terminals_free(m->terminals);
        for (size_t i = 0; i < SBX_HASH_BUCKETS; i++) {
                while (m->buckets[i]) {
                        struct sandbox *s = m->buckets[i];
                        m->buckets[i] = s->hnext;
                        sandbox_free(m, s);
                }
        }
        ws_pool_free(m->ws_pool); /* after the sandboxes that point at it */
        workspace_unmount_all(m->opt.data_dir);
        tunnels_drop(m, NULL);
        pthread_mutex_destroy(&m->tunnel_lock);
        mounts_sweep(m->opt.data_dir);
        pthread_mutex_destroy(&m->lock);
        free(m);
}
