/* The warm pool: sandboxes prepared ahead of the request that creates one.
 *
 * Preparing a sandbox is what its first command would otherwise pay for:
 * the row and host id, the workspace image (mkfs.ext4, most of the cost),
 * its loop mount and ownership, a network namespace and the parent cgroup.
 * A warm sandbox is an ordinary sandbox owned by SBX_POOL_ORG, so it is
 * durable like any other: a restart finds its rows (store) and images
 * (disk) and adopts them, or destroys them when the pool no longer wants
 * them; nothing is left behind either way.
 *
 * One background thread does every slow step (prepare, adopt, destroy
 * surplus), a batch at a time, re-checking the caps between batches; the
 * request path only pops an id and re-labels a row. The pool fills only
 * while warm + assigned stays within its limit (sandbox.max_sandboxes,
 * the disk cap and bridge.warm_pool_max_instances), and gives sandboxes
 * back when tenants need the room. */
#include "sandbox/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"

#define POOL_DEFAULT_REFRESH_MS 10000
/* After a take, the refill waits this long while the pool still holds a
 * warm sandbox: a new sandbox's first command usually follows at once, and
 * a refill (mkfs) would compete with it for the CPU. An empty pool is
 * refilled at once. */
#define POOL_TAKE_QUIET_MS 300

/* ---- lists (under the pool lock) ---- */

static bool list_pop(struct id_list *l, char out[STORE_ID_MAX])
{
        if (l->n == 0)
                return false;
        /* Oldest first: every warm sandbox gets used in turn. */
        snprintf(out, STORE_ID_MAX, "%s", l->ids[0]);
        memmove(&l->ids[0], &l->ids[1], --l->n * sizeof(*l->ids));
        return true;
}

/* ---- preparing and destroying one ---- */

int pool_prepare_locked(struct sandbox_mgr *m, struct sandbox *s, struct err *err)
{
        int r = sandbox_open_workspace(m, s, err);
        if (r < 0)
                return r;
        sandbox_netns(m, s);
        sandbox_cgroup(m, s);
        return 0;
}

int pool_on_warm(struct sandbox_mgr *m, const char *id, unsigned flags, const struct sbx_create_options *opts,
                 pool_step_fn *step, struct sandbox **ret_s, struct err *err)
{
        struct sandbox *s = *ret_s = sandbox_lookup(m, id, SANDBOX_GET_WARM | flags, opts, NULL, err);
        if (!s)
                return err_ret(err);
        pthread_mutex_lock(&s->lock);
        int r = step(m, s, err);
        pthread_mutex_unlock(&s->lock);
        return r;
}

int sbx_prepare(struct sandbox_mgr *m, const char *id, struct err *err)
{
        struct sandbox *s;
        int r = pool_on_warm(m, id, 0, &m->opt.pool.create, pool_prepare_locked, &s, err);
        if (!s)
                return r;
        if (r < 0) {
                sandbox_wipe(m, s); /* a half-made warm sandbox is of no use */
        } else {
                /* Its first command's jail too (the bridge's /exec shape),
                 * here on the refill thread: ready means with it, and a
                 * shed never waits for it being built. */
                pthread_mutex_lock(&s->lock);
                spare_make_now(m, s, true, false);
                pthread_mutex_unlock(&s->lock);
        }
        sandbox_put(m, s);
        return r;
}

int pool_destroy(struct sandbox_mgr *m, const char *id)
{
        struct err err = { 0 };
        /* Never made anew: a row gone meanwhile stays gone. */
        struct sandbox *s = sandbox_lookup(m, id, SANDBOX_GET_WARM | SANDBOX_GET_EXISTING, NULL, NULL, &err);
        int r = s ? sandbox_wipe(m, s) : -ENOENT;
        if (s && r < 0)
                log_warn("msg=\"cannot destroy a warm sandbox\" sandbox=%s err=\"%s\"", id, strerror(-r));
        if (s)
                sandbox_put(m, s);
        err_done(&err);
        return r;
}

/* ---- sizing ---- */

#define COUNT_UNKNOWN UINT64_MAX

/* The workspace quota of the sandboxes the pool makes. */
uint64_t pool_warm_quota(const struct sandbox_mgr *m)
{
        uint64_t q = m->opt.pool.create.workspace_bytes;
        return q ? q : m->opt.workspace_bytes ? m->opt.workspace_bytes : 1;
}

/* warm + assigned the pool may reach, given the tenants' usage: the
 * tenants' caps (sandboxes, and what is left of the disk cap in warm
 * quotas), and max_instances if lower. */
uint64_t pool_limit(const struct sandbox_mgr *m, uint64_t assigned, uint64_t reserved)
{
        const struct sandbox_options *o = &m->opt;
        uint64_t limit = o->max_sandboxes;
        uint64_t disk = reserved < o->max_disk_bytes ? (o->max_disk_bytes - reserved) / pool_warm_quota(m) : 0;
        if (assigned + disk < limit)
                limit = assigned + disk;
        if (o->pool.max_instances && o->pool.max_instances < limit)
                limit = o->pool.max_instances;
        return limit;
}

/* Tenants' sandboxes now (every API's) and the limit, or COUNT_UNKNOWN.
 * Counted under the manager lock, as rows are created
 * (sandbox_create_row): the counts and pool_rows agree. */
static uint64_t pool_assigned(struct sandbox_mgr *m, uint64_t *ret_limit)
{
        uint64_t n = 0, reserved = 0;
        pthread_mutex_lock(&m->lock);
        int r = sandbox_tenant_usage(m, &n, &reserved);
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                return COUNT_UNKNOWN;
        *ret_limit = pool_limit(m, n, reserved);
        return n;
}

/* How many warm sandboxes the pool may hold now, or COUNT_UNKNOWN (a
 * store error: then it neither fills nor gives back). The warm sandboxes
 * of classes (warm_class.c, asked for explicitly) take their place first. */
static uint64_t pool_room(struct sandbox_mgr *m)
{
        uint64_t limit = 0, assigned = pool_assigned(m, &limit);
        if (assigned == COUNT_UNKNOWN)
                return COUNT_UNKNOWN;
        pthread_mutex_lock(&m->lock);
        assigned += m->class_rows;
        pthread_mutex_unlock(&m->lock);
        uint64_t room = assigned < limit ? limit - assigned : 0;
        return room < m->opt.pool.target ? room : m->opt.pool.target;
}

void pool_forget(struct sandbox_mgr *m, struct sandbox *s)
{
        uint64_t q = sandbox_workspace_bytes(m, s);
        m->pool_rows -= m->pool_rows ? 1 : 0;
        if (s->row.warm_class[0])
                m->class_rows -= m->class_rows ? 1 : 0;
        m->pool_reserved -= m->pool_reserved >= q ? q : m->pool_reserved;
}

/* ---- the refill loop ---- */

/* One leftover of the previous run: adopted while the pool has room,
 * else destroyed. Pool lock held on entry and exit. */
static void step_adopt(struct sandbox_mgr *m, uint64_t room)
{
        struct sbx_pool *p = &m->pool;
        char id[STORE_ID_MAX];
        list_pop(&p->adopt, id);
        bool keep = p->active && p->ready.n < room;
        bg_thread_unlock(&p->bg);
        struct err err = { 0 };
        /* A failed prepare has destroyed it already. */
        int r = keep ? sbx_prepare(m, id, &err) : -ECANCELED;
        if (r == -ECANCELED)
                pool_destroy(m, id);
        else if (r < 0)
                log_warn("msg=\"cannot adopt a warm sandbox, destroyed\" sandbox=%s err=\"%s\"", id, err.msg);
        err_done(&err);
        bg_thread_lock(&p->bg);
        if (r == 0)
                id_list_add(id, &p->ready);
}

/* Gives back the newest warm sandbox (past the room). */
static void step_shed(struct sandbox_mgr *m)
{
        struct sbx_pool *p = &m->pool;
        char id[STORE_ID_MAX];
        snprintf(id, sizeof(id), "%s", p->ready.ids[--p->ready.n]);
        bg_thread_unlock(&p->bg);
        pool_destroy(m, id);
        bg_thread_lock(&p->bg);
}

/* Prepares one new warm sandbox. 0 or -errno (logged). */
static int fill_one(struct sandbox_mgr *m)
{
        struct sbx_pool *p = &m->pool;
        char id[STORE_ID_MAX];
        struct err err = { 0 };
        int r = m->opt.pool.new_id(id);
        bg_thread_unlock(&p->bg);
        if (r == 0 && (r = sbx_prepare(m, id, &err)) < 0)
                log_warn("msg=\"cannot prepare a warm sandbox\" err=\"%s\"", err.msg);
        err_done(&err);
        bg_thread_lock(&p->bg);
        if (r < 0)
                return r;
        if (p->active) {
                id_list_add(id, &p->ready);
        } else {
                /* Paused while it was being made (shutdown-prewarmed). */
                bg_thread_unlock(&p->bg);
                pool_destroy(m, id);
                bg_thread_lock(&p->bg);
        }
        return 0;
}

/* One batch toward room. Returns true when it made progress. */
static bool step_fill(struct sandbox_mgr *m, uint64_t room)
{
        struct sbx_pool *p = &m->pool;
        uint64_t batch = m->opt.pool.batch ? m->opt.pool.batch : 1;
        bool progress = false;
        for (uint64_t i = 0; i < batch && p->active && p->ready.n < room && bg_thread_running(&p->bg); i++) {
                if (fill_one(m) < 0)
                        break; /* retried after the refresh interval */
                progress = true;
        }
        return progress;
}

/* One unit of work, pool lock held. false: nothing to do now. */
static bool pool_step(struct sandbox_mgr *m, uint64_t room)
{
        struct sbx_pool *p = &m->pool;
        if (room == COUNT_UNKNOWN)
                return false; /* retried after the refresh interval */
        if (!p->active)
                room = 0;
        if (p->adopt.n) {
                step_adopt(m, room);
                return true;
        }
        if (p->ready.n > room) {
                step_shed(m);
                return true;
        }
        bool rt_quiet = now_ns() < p->quiet_until;
        bg_thread_unlock(&p->bg);
        bool rt = warm_runtime_step(m, rt_quiet);
        bg_thread_lock(&p->bg);
        if (rt)
                return true;
        bool quiet = p->ready.n > 0 && now_ns() < p->quiet_until;
        if (p->ready.n < room && m->opt.pool.new_id && !quiet)
                return step_fill(m, room);
        return false;
}

static void pool_loop(void *arg)
{
        struct sandbox_mgr *m = arg;
        struct sbx_pool *p = &m->pool;
        uint64_t period_ms = m->opt.pool.refresh_ms ? m->opt.pool.refresh_ms : POOL_DEFAULT_REFRESH_MS;
        bg_thread_lock(&p->bg);
        while (bg_thread_running(&p->bg)) {
                /* A warm runtime sandbox was just taken: its first cell runs
                 * now, and even counting the caps would take the manager
                 * lock it needs (and CPU) from it. */
                if (now_ns() < p->defer_until) {
                        bg_thread_wait(&p->bg, p->defer_until);
                        continue;
                }
                /* The caps are read without the pool lock (it is taken last). */
                bg_thread_unlock(&p->bg);
                uint64_t room = pool_room(m);
                bg_thread_lock(&p->bg);
                if (!pool_step(m, room) && !p->kick) {
                        uint64_t now = now_ns(), until = now + period_ms * 1000000ULL;
                        if (p->quiet_until > now && p->quiet_until < until)
                                until = p->quiet_until;
                        bg_thread_wait(&p->bg, until);
                }
                p->kick = false;
        }
        bg_thread_unlock(&p->bg);
}

/* ---- start and stop ---- */

int pool_start(struct sandbox_mgr *m)
{
        struct sbx_pool *p = &m->pool;
        /* Every warm sandbox counts; the default pool adopts its own class
         * only (a class's stay stored until taken or dropped). */
        _cleanup_(id_list_done) struct id_list all = { 0 };
        int r = bg_thread_init(&p->bg, NULL);
        if (r == 0)
                r = store_org_ensure(m->store, SBX_POOL_ORG, "Warm pool (unassigned sandboxes)");
        if (r == 0)
                r = store_sandbox_each_in_org(m->store, SBX_POOL_ORG, id_list_add, &all);
        if (r == 0)
                r = store_sandbox_each_in_class(m->store, SBX_POOL_ORG, "", id_list_add, &p->adopt);
        if (r < 0)
                return r;
        ids_keep_owned(m, &all);
        ids_keep_owned(m, &p->adopt);
        uint64_t reserved = 0;
        for (size_t i = 0; i < all.n; i++) {
                _cleanup_(sandbox_row_done) struct sandbox_row row = { 0 };
                if (store_sandbox_get(m->store, all.ids[i], &row) == 0)
                        reserved += row.workspace_bytes ? row.workspace_bytes : m->opt.workspace_bytes;
        }
        pthread_mutex_lock(&m->lock);
        m->pool_rows = all.n;
        m->class_rows = all.n - p->adopt.n;
        m->pool_reserved = reserved;
        pthread_mutex_unlock(&m->lock);
        p->active = m->opt.pool.target > 0 && m->opt.pool.new_id;
        /* The runtime API's warm sandboxes (warm_runtime.c) are a class,
         * filled, repaired and shed by this loop too. */
        if (!p->active && p->adopt.n == 0 && !m->opt.warm_runtime && m->class_rows == 0)
                return 0; /* disabled, and nothing left to clean up */
        log_info("msg=\"warm pool\" target=%llu adopting=%zu", (unsigned long long)m->opt.pool.target,
                 p->adopt.n);
        return bg_thread_start(&p->bg, "sbx-pool", 1, pool_loop, m);
}

/* The warm sandboxes stay (rows and images): the next run adopts them. */
void pool_stop(struct sandbox_mgr *m)
{
        bg_thread_done(&m->pool.bg);
        id_list_done(&m->pool.ready);
        id_list_done(&m->pool.adopt);
}

/* Pool lock held. */
static void kick(struct sbx_pool *p)
{
        p->kick = true;
        bg_thread_wake(&p->bg);
}

void pool_yield(struct sandbox_mgr *m)
{
        bg_thread_lock(&m->pool.bg);
        kick(&m->pool);
        bg_thread_unlock(&m->pool.bg);
}

/* ---- the facade's operations ---- */

int pool_assign_locked(struct sandbox_mgr *m, struct sandbox *s, struct err *err)
{
        pthread_mutex_lock(&m->lock);
        int r = sandbox_check_caps(m, sandbox_workspace_bytes(m, s), err);
        if (r == 0) {
                pool_forget(m, s);
                s->warm = false;
        }
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                return r;
        uint64_t now = wall_ms();
        snprintf(s->row.org_id, sizeof(s->row.org_id), "%s", SBX_DEFAULT_ORG);
        s->row.warm_class[0] = '\0';
        s->row.created_at = s->row.last_used = now;
        s->row.expires_at = sandbox_expiry_for(&m->opt, now);
        r = store_sandbox_put(m->store, &s->row);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot store sandbox: %s", strerror(-r));
        s->saved_last_used = now;
        sandbox_emit(m, s, "sandbox.created", json_pack("{s:b}", "warm", true));
        return 0;
}

int sbx_pool_take(struct sandbox_mgr *m, char ret_id[STORE_ID_MAX], struct err *err)
{
        struct sbx_pool *p = &m->pool;
        char id[STORE_ID_MAX];
        bg_thread_lock(&p->bg);
        bool got = list_pop(&p->ready, id);
        p->quiet_until = now_ns() + POOL_TAKE_QUIET_MS * 1000000ULL;
        kick(p); /* refill soon, off this request */
        bg_thread_unlock(&p->bg);
        if (!got)
                return -ENOENT;
        struct sandbox *s;
        int r = pool_on_warm(m, id, 0, &m->opt.pool.create, pool_assign_locked, &s, err);
        if (!s)
                return r;
        if (r < 0 && s->warm) {
                /* Over the tenants' caps: back to the pool, unharmed. */
                bg_thread_lock(&p->bg);
                id_list_add(id, &p->ready);
                bg_thread_unlock(&p->bg);
        } else if (r < 0) {
                sandbox_wipe(m, s);
        }
        sandbox_put(m, s);
        if (r == 0)
                snprintf(ret_id, STORE_ID_MAX, "%s", id);
        return r;
}

int sbx_pool_stats(struct sandbox_mgr *m, struct sbx_pool_stats *ret, struct err *err)
{
        uint64_t limit = 0, assigned = pool_assigned(m, &limit);
        if (assigned == COUNT_UNKNOWN)
                return err_set(err, ERR_INTERNAL, EIO, "Cannot count sandboxes");
        *ret = (struct sbx_pool_stats){ .assigned = assigned, .limit = limit, .config = m->opt.pool };
        bg_thread_lock(&m->pool.bg);
        ret->warm = m->pool.ready.n;
        bg_thread_unlock(&m->pool.bg);
        return 0;
}

int sbx_pool_shutdown_prewarmed(struct sandbox_mgr *m, struct err *err)
{
        (void)err;
        struct sbx_pool *p = &m->pool;
        bg_thread_lock(&p->bg);
        p->active = false;
        struct id_list gone = p->ready;
        p->ready = (struct id_list){ 0 };
        bg_thread_unlock(&p->bg);
        for (size_t i = 0; i < gone.n; i++)
                pool_destroy(m, gone.ids[i]);
        id_list_done(&gone);
        return 0;
}

void sbx_pool_prime(struct sandbox_mgr *m)
{
        struct sbx_pool *p = &m->pool;
        bg_thread_lock(&p->bg);
        /* Disabled (target 0): no thread runs and nothing changes. */
        p->active = m->opt.pool.target > 0 && m->opt.pool.new_id;
        kick(p);
        bg_thread_unlock(&p->bg);
}
