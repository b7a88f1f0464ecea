/* Warm classes: warm sandboxes with limits of their own (sandbox.h "warm
 * classes"). The store is their only list: a class's sandboxes are the
 * rows of SBX_POOL_ORG with its warm_class, oldest first. So nothing is
 * adopted at start and nothing can drift; two takers racing for one
 * sandbox settle it under its lock (the loser moves on to the next). */
#include "sandbox/internal.h"

#include <stdio.h>
#include <string.h>

/* The sandboxes of class c: the default pool's workspace, c's CPU and
 * memory. */
static struct sbx_create_options class_options(const struct sandbox_mgr *m, const struct sbx_warm_class *c)
{
        struct sbx_create_options o = m->opt.pool.create;
        o.cpu_millis = c->cpu_millis;
        o.memory_bytes = c->memory_bytes;
        o.warm_class = c->name;
        o.org_id = NULL;
        o.env = NULL;
        o.lifetime_ms = 0;
        return o;
}

static int class_ids(struct sandbox_mgr *m, const char *name, struct id_list *ret, struct err *err)
{
        if (!name || !name[0])
                return err_set(err, ERR_INVALID, EINVAL, "A warm class needs a name");
        int r = store_sandbox_each_in_class(m->store, SBX_POOL_ORG, name, id_list_add, ret);
        ids_keep_owned(m, ret);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot list warm sandboxes: %s", strerror(-r)) : 0;
}

static int new_id(struct sandbox_mgr *m, char id[STORE_ID_MAX], struct err *err)
{
        if (!m->opt.pool.new_id)
                return err_set(err, ERR_UNAVAILABLE, ENOSYS, "No sandbox ids to give warm sandboxes");
        int r = m->opt.pool.new_id(id);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot make a sandbox id: %s", strerror(-r)) : 0;
}

/* Whether one more warm sandbox fits: tenants' and every class's within
 * the limit the default pool fills up to (which then gives way). */
static bool class_room(struct sandbox_mgr *m)
{
        uint64_t n = 0, reserved = 0;
        pthread_mutex_lock(&m->lock);
        int r = sandbox_tenant_usage(m, &n, &reserved);
        bool room = r == 0 && n + m->class_rows < pool_limit(m, n, reserved);
        pthread_mutex_unlock(&m->lock);
        return room;
}

int sbx_warm_count(struct sandbox_mgr *m, const char *name, uint64_t *ret, struct err *err)
{
        _cleanup_(id_list_done) struct id_list ids = { 0 };
        int r = class_ids(m, name, &ids, err);
        if (r == 0)
                *ret = ids.n;
        return r;
}

/* One new warm sandbox of class options o. */
static int fill_one(struct sandbox_mgr *m, const struct sbx_create_options *o, struct err *err)
{
        char id[STORE_ID_MAX];
        struct sandbox *s = NULL;
        int r = new_id(m, id, err);
        if (r == 0)
                r = pool_on_warm(m, id, 0, o, pool_prepare_locked, &s, err);
        if (s && r < 0)
                sandbox_wipe(m, s); /* half made: of no use */
        if (s)
                sandbox_put(m, s);
        return r;
}

int sbx_warm_fill(struct sandbox_mgr *m, const struct sbx_warm_class *c, uint64_t count, uint64_t *ret_made,
                  struct err *err)
{
        uint64_t have = 0;
        *ret_made = 0;
        int r = sbx_warm_count(m, c->name, &have, err);
        struct sbx_create_options o = class_options(m, c);
        while (r == 0 && have + *ret_made < count && class_room(m) && (r = fill_one(m, &o, err)) == 0)
                ++*ret_made;
        return r;
}

/* Prepares and assigns s if it is still warm (another taker, or a drop,
 * may have had it first: -EAGAIN). */
static int take_locked(struct sandbox_mgr *m, struct sandbox *s, struct err *err)
{
        if (!s->warm || s->deleted)
                return -EAGAIN;
        int r = pool_prepare_locked(m, s, err);
        return r < 0 ? r : pool_assign_locked(m, s, err);
}

/* Takes the oldest warm sandbox of c into ret_id: 0, -ENOENT when none is
 * left (err untouched), or -errno. */
static int take_warm(struct sandbox_mgr *m, const struct sbx_warm_class *c, char ret_id[STORE_ID_MAX],
                     struct err *err)
{
        _cleanup_(id_list_done) struct id_list ids = { 0 };
        int r = class_ids(m, c->name, &ids, err);
        for (size_t i = 0; r == 0 && i < ids.n; i++) {
                struct err lost = { 0 };
                struct sandbox *s;
                r = pool_on_warm(m, ids.ids[i], SANDBOX_GET_EXISTING, NULL, take_locked, &s, &lost);
                if (!s || r == -EAGAIN) {
                        /* Taken or gone meanwhile: the next one. */
                        if (s)
                                sandbox_put(m, s);
                        err_done(&lost);
                        r = 0;
                        continue;
                }
                /* Over the caps it stays warm, unharmed; else of no use. */
                bool caps = lost.reason == ERR_QUOTA || lost.reason == ERR_STORAGE;
                if (r < 0 && !(s->warm && caps))
                        sandbox_wipe(m, s);
                sandbox_put(m, s);
                if (r == 0)
                        snprintf(ret_id, STORE_ID_MAX, "%s", ids.ids[i]);
                err_move(err, &lost);
                return r;
        }
        return r < 0 ? r : -ENOENT;
}

/* A new sandbox of c in the default org, prepared now. */
static int take_cold(struct sandbox_mgr *m, const struct sbx_warm_class *c, char ret_id[STORE_ID_MAX],
                     struct err *err)
{
        struct sbx_create_options o = class_options(m, c);
        o.warm_class = NULL;
        char id[STORE_ID_MAX];
        int r = new_id(m, id, err);
        if (r == 0)
                r = sbx_create(m, id, &o, NULL, err);
        if (r < 0)
                return r;
        struct sandbox *s = sandbox_enter(m, id, err);
        if (!s)
                return err_ret(err);
        r = pool_prepare_locked(m, s, err);
        sandbox_leave(m, s);
        if (r < 0) {
                struct err ignored = { 0 };
                sbx_destroy(m, id, &ignored);
                err_done(&ignored);
                return r;
        }
        snprintf(ret_id, STORE_ID_MAX, "%s", id);
        return 0;
}

int sbx_warm_take(struct sandbox_mgr *m, const struct sbx_warm_class *c, char ret_id[STORE_ID_MAX], bool *ret_warm,
                  struct err *err)
{
        int r = take_warm(m, c, ret_id, err);
        *ret_warm = r == 0;
        return r == -ENOENT ? take_cold(m, c, ret_id, err) : r;
}

int sbx_warm_drop(struct sandbox_mgr *m, const char *name, uint64_t *ret_n, struct err *err)
{
        _cleanup_(id_list_done) struct id_list ids = { 0 };
        uint64_t n = 0;
        int r = class_ids(m, name, &ids, err);
        for (size_t i = 0; r == 0 && i < ids.n; i++)
                n += pool_destroy(m, ids.ids[i]) == 0;
        if (ret_n)
                *ret_n = n;
        return r;
}
