/* Warm pools: booted kernels waiting for their single request, pre-spawned
 * command jails of the process runtimes (shell) waiting for their single
 * command, and the background thread that keeps them filled. */
#include "engine/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

/* Requests pause for this long before a pool that still has members is
 * restocked: a refill started amid a burst competes with the burst's
 * requests for the CPUs, and the members left serve the burst. An empty
 * pool forked from a template refills at once (cheap); an empty cold pool
 * once the request that drained it is answered, at most this long after
 * (back-to-back requests never leave the daemon idle). */
#define REFILL_GRACE_MS 25

static struct pool *pool_of(struct engine *e, const struct runtime *rt)
{
        for (size_t i = 0; i < e->npools; i++)
                if (e->pools[i].rt == rt)
                        return &e->pools[i];
        return NULL;
}

/* A request that leaves its pool empty, or finds it so, is demand the pool
 * did not cover: keep one more member ready next time, so that the pool grows
 * to the size of the bursts it sees (within POOL_MAX and pool.memory_budget,
 * pool_to_fill). pool.<lang> = 0 stays off; pool.grow_idle_s = 0 turns growth
 * off. Engine lock held. */
static void pool_note_demand(const struct engine *e, struct pool *p)
{
        p->last_take_ns = now_ns();
        if (e->opt.pool_grow_idle_s && p->target && p->n == 0 && p->want < POOL_MAX)
                p->want++;
}

/* Takes the pool's newest member out (engine lock held; the caller owns it). */
static struct kproc *pool_pop(struct engine *e, struct pool *p)
{
        struct kproc *k = p->ready[--p->n];
        e->pool_bytes -= k->pool_bytes;
        return k;
}

struct kproc *pool_take(struct engine *e, const struct runtime *rt)
{
        struct kproc *k = NULL;
        pthread_mutex_lock(&e->lock);
        struct pool *p = pool_of(e, rt);
        while (p && p->n > 0 && !k) {
                k = pool_pop(e, p);
                if (pidfd_exited(k->p.jp.pidfd)) {
                        /* Died while waiting (e.g. killed at shutdown). */
                        engine_bury_locked(e, &k->p);
                        k = NULL;
                }
        }
        if (p) {
                if (k)
                        p->hits++;
                else
                        p->misses++;
                pool_note_demand(e, p);
                e->refill_at_ns = now_ns() + REFILL_GRACE_MS * 1000000ULL;
                bg_thread_wake_soon(&e->filler);
        }
        pthread_mutex_unlock(&e->lock);
        return k;
}

/* Buries one member of a pool grown beyond its pool.<lang> (not `keep`), so
 * that a pool below its own pool.<lang> fits pool.memory_budget again: the
 * configured sizes come before growth. Engine lock held. */
static bool pool_evict_surplus(struct engine *e, const struct pool *keep)
{
        for (size_t i = 0; i < e->npools; i++) {
                struct pool *q = &e->pools[i];
                if (q == keep || q->n <= q->target)
                        continue;
                engine_bury_locked(e, &pool_pop(e, q)->p);
                q->want = q->n > q->target ? q->n : q->target;
                return true;
        }
        return false;
}

static bool pool_over_budget(const struct engine *e, const struct pool *p)
{
        uint64_t budget = e->opt.pool_memory_budget;
        return budget && e->pool_bytes + p->member_bytes > budget;
}

/* The pool to fill next (engine lock held), or NULL: pools below pool.<lang>
 * first, then pools grown by demand; the emptiest first. */
static struct pool *pool_to_fill(struct engine *e)
{
        struct pool *best = NULL;
        bool best_base = false;
        for (size_t i = 0; i < e->npools; i++) {
                struct pool *p = &e->pools[i];
                bool base = p->n < p->target;
                if (p->n >= p->want || p->n >= POOL_MAX)
                        continue;
                while (base && pool_over_budget(e, p) && pool_evict_surplus(e, p))
                        ;
                if (pool_over_budget(e, p))
                        continue;
                if (!best || (base && !best_base) || (base == best_base && p->n < best->n)) {
                        best = p;
                        best_base = base;
                }
        }
        return best;
}

/* Pools grown by demand and idle for pool.grow_idle_s go back to pool.<lang>,
 * their surplus members buried (engine lock held). Returns when the next one
 * is due, 0 for never. */
static uint64_t pool_shrink_idle(struct engine *e, uint64_t now)
{
        uint64_t next = 0;
        for (size_t i = 0; i < e->npools; i++) {
                struct pool *p = &e->pools[i];
                if (p->want <= p->target)
                        continue;
                uint64_t at = p->last_take_ns + e->opt.pool_grow_idle_s * 1000000000ULL;
                if (now < at) {
                        if (!next || at < next)
                                next = at;
                        continue;
                }
                p->want = p->target;
                while (p->n > p->want)
                        engine_bury_locked(e, &pool_pop(e, p)->p);
        }
        return next;
}

/* A pool member forked from the language's template, or NULL when there
 * is none. Its first request is a warm-up (docs/kernel-protocol.md): the
 * copy-on-write faults of the request path land here, off that path. */
static struct kproc *pool_fork(struct engine *e, const struct runtime *rt, const struct exec_limits *lim)
{
        if (!zygote_for(e, rt))
                return NULL;
        struct kproc *k = zygote_fork(e, rt, lim);
        if (!k)
                return NULL;
        /* A request like any other (same fields, same answer), so the
         * warm-up walks the real request path. */
        json_t *req = exec_build_request("1+1", NULL, JAIL_WORKSPACE, false, lim->result_bytes, false);
        json_object_set_new(req, "warmup", json_true());
        char *line = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        int r = line ? write_all(k->ctl_fd, line, strlen(line)) : -ENOMEM;
        free(line);
        if (r < 0 || write_all(k->ctl_fd, "\n", 1) < 0 || kproc_wait_line(k, 10000, NULL) < 0) {
                engine_bury(e, &k->p);
                return NULL;
        }
        return k;
}

/* A process runtime's member: a jail built, attached to its cgroup and
 * confined, its workload waiting for the command (proc_start) of the one
 * request that takes it. The shape is run_process's (stateless.c): no
 * sandbox, private tmpfs workspace, pipes, stdin /dev/null, the engine's
 * limits; a kproc only to sit in the pool (no control socket). */
static int pool_prespawn(struct engine *e, const struct runtime *rt, struct kproc **ret, struct err *err)
{
        struct kproc *k = kproc_new(rt, -1, -1, true, &e->opt.limits);
        if (!k)
                return err_set(err, ERR_INTERNAL, ENOMEM, "process start failed: out of memory");
        struct proc_spec spec = { .io = PROC_IO_PIPES, .deferred = true };
        int r = proc_spawn_into(e, &spec, &k->p, err);
        if (r < 0) {
                kproc_free(k);
                return r;
        }
        proc_watch_workload(&k->p);
        *ret = k;
        return 0;
}

/* Starts one member (forked, cold and booted, or pre-spawned; counters
 * reset), or NULL. */
static struct kproc *pool_start_member(struct engine *e, const struct runtime *rt, unsigned *failures)
{
        struct err err = { 0 };
        int r = 0;
        struct kproc *k = NULL;
        if (rt->kind == RUNTIME_PROCESS)
                r = pool_prespawn(e, rt, &k, &err);
        else if (!(k = pool_fork(e, rt, &e->opt.limits))) {
                r = kproc_spawn(e, rt, "once", NULL, false, &e->opt.limits, &k, &err);
                if (r == 0 && (r = kproc_wait_ready(k, 10000)) < 0)
                        kproc_step_err(&err, "boot", r);
        }
        if (r < 0) {
                log_warn("msg=\"pool spawn failed\" lang=%s err=\"%s\"", rt->id, err.msg);
                err_done(&err);
                engine_bury(e, k ? &k->p : NULL);
                /* Back off so a broken runtime cannot spin a core. */
                usleep(100000U << (*failures < 5 ? (*failures)++ : 5));
                return NULL;
        }
        *failures = 0;
        struct cgroup_usage u = { 0 };
        if (k->p.jp.cg && cgroup_read_usage_of(k->p.jp.cg, CGROUP_USAGE_PEAK, &u) == 0)
                k->pool_bytes = u.memory_peak; /* what it costs to keep it */
        if (k->p.jp.cg && cgroup_reset(k->p.jp.cg) == 0)
                k->counters_fresh = true; /* boot is not the request's usage */
        return k;
}

/* What the filler does next (engine lock held): a pool to fill now, or
 * NULL after having waited. */
static struct pool *filler_next(struct engine *e)
{
        uint64_t now = now_ns();
        uint64_t shrink_at = pool_shrink_idle(e, now);
        struct pool *p = pool_to_fill(e);
        if (p && now < e->next_spawn_ns) { /* pool.refill_per_s */
                bg_thread_wait(&e->filler, e->next_spawn_ns);
                return NULL;
        }
        bool defer = p && (p->n > 0 || (e->inflight && !zygote_for(e, p->rt)));
        if (defer && now < e->refill_at_ns) {
                bg_thread_wait(&e->filler, e->refill_at_ns);
                return NULL;
        }
        if (!p) {
                bg_thread_wait(&e->filler, shrink_at);
                return NULL;
        }
        if (e->opt.pool_refill_per_s)
                e->next_spawn_ns = now + 1000000000ULL / e->opt.pool_refill_per_s;
        return p;
}

/* Keeps every language's pool at its pool.<lang> target, within
 * pool.refill_per_s and pool.memory_budget: forks from the language's
 * template where there is one, else spawns one kernel at a time, waits until
 * it has booted (imports done), then publishes it. */
void filler_main(void *arg)
{
        struct engine *e = arg;
        unsigned failures = 0;
        zygotes_start(e);
        bg_thread_lock(&e->filler);
        while (bg_thread_running(&e->filler)) {
                struct pool *p = filler_next(e);
                if (!p)
                        continue;
                bg_thread_unlock(&e->filler);
                struct kproc *k = pool_start_member(e, p->rt, &failures);
                bg_thread_lock(&e->filler);
                if (!k)
                        continue;
                p->member_bytes = k->pool_bytes;
                /* A pool shrunk (idle) or evicted from meanwhile no longer wants it. */
                if (bg_thread_running(&e->filler) && p->n < p->want && p->n < POOL_MAX) {
                        p->ready[p->n++] = k;
                        e->pool_bytes += k->pool_bytes;
                } else {
                        engine_bury_locked(e, &k->p);
                }
        }
        bg_thread_unlock(&e->filler);
}
