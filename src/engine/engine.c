/* Engine lifecycle, live-process tracking and the reaper thread. */
#include "engine/internal.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "jail/ids.h"

/* A stateless jail's teardown waits for this much quiet after the last
 * execution (back-to-back requests come ~1 ms apart), shorter than the
 * pool's refill grace: the refill then finds the cgroups given back. */
#define REAP_GRACE_MS 15
/* ... and for no more jails than this (a steady load is never quiet), nor
 * more memory (what they may still hold: their tmpfs until the mount
 * namespace goes, counted at each jail's peak). */
#define REAP_IDLE_MAX 64
#define REAP_IDLE_BYTES (128 * MiB)
/* A used jail dies at idle CPU priority for at most this long, and while
 * fewer than this many used processes wait behind it (destroy_in_background). */
#define REAP_BACKGROUND_MS 20
#define REAP_BACKGROUND_QUEUE 4
/* A used process is killed this long after it was handed over, unless
 * REAP_BACKGROUND_QUEUE wait: its answer is then on its way to the client,
 * and its death (the reaper's kill, the kernel freeing its memory: ~0.2 ms
 * of the reaper's CPU and 1-2 ms of the dying process's) does not compete
 * with the client for the CPU it was just woken on. A once-mode kernel
 * waits for it blocked in a read; what else the guest left running gets
 * this much longer in its jail, within its limits. */
#define REAP_KILL_DELAY_US 2000

static void reaper_main(void *arg);
static void destroy_all(struct proc *list);

static void add_runtimes(struct engine *e, bool templates)
{
        for (size_t i = 0; i < runtime_count() && e->npools < ARRAY_SIZE(e->pools); i++) {
                const struct runtime *rt = runtime_at(i);
                /* Process runtimes (shell) keep pre-spawned jails (pool.c). */
                if (!rt->version[0])
                        continue;
                /* A template serves its language better than a pool; it
                 * needs a second mapped uid, i.e. a privileged daemon. */
                if (rt->zygote && templates) {
                        struct zygote *z = &e->zygotes[e->nzygotes++];
                        z->rt = rt;
                        pthread_mutex_init(&z->lock, NULL);
                }
                struct pool *p = &e->pools[e->npools++];
                p->rt = rt;
                p->target = i < ENGINE_MAX_RUNTIMES ? e->opt.pool_size[i] : 0;
                p->want = p->target;
        }
}

static bool wants_filler(const struct engine *e)
{
        for (size_t i = 0; i < e->npools; i++)
                if (e->pools[i].target > 0)
                        return true;
        return e->nzygotes > 0;
}

int engine_new(const struct engine_options *opt, struct engine **ret, struct err *err)
{
        struct engine *e = calloc(1, sizeof(*e));
        if (!e)
                return err_set(err, ERR_INTERNAL, ENOMEM, "engine start failed: out of memory");
        e->opt = *opt;
        pthread_mutex_init(&e->lock, NULL);
        int r = jail_ctx_init(&e->jail, opt->run_dir, opt->kernels_dir, opt->cgroup_force, err);
        if (r == 0 && opt->id_count)
                r = jail_ctx_set_ids(&e->jail, opt->id_base, opt->id_count, err);
        if (opt->no_landlock)
                e->jail.landlock = false;
        if (r < 0) {
                jail_ctx_done(&e->jail);
                pthread_mutex_destroy(&e->lock);
                free(e);
                return r;
        }
        if ((r = jail_ctx_set_init_dir(&e->jail, opt->forkserver_dir)) < 0)
                log_warn("msg=\"%s/%s not usable: each jail's pid 1 stays a copy of the daemon\" err=\"%s\"",
                         opt->forkserver_dir, JAIL_INIT_BIN, strerror(-r));
        if ((r = netns_pool_start(&e->netns, !e->jail.userns)) < 0)
                log_warn("msg=\"no network namespace pool: jails share one\" err=\"%s\"", strerror(-r));
        if (opt->cpu_quota_percent && (r = cgroup_root_set_cpu_quota(e->jail.cgroot, opt->cpu_quota_percent)) < 0)
                log_warn("msg=\"no CPU quota: the cgroup backend has no CPU bandwidth controller\" err=\"%s\"",
                         strerror(-r));
        bool templates = opt->templates && !e->jail.userns;
        if (templates && (r = jail_ctx_set_forkserver_dir(&e->jail, opt->forkserver_dir)) < 0) {
                log_warn("msg=\"no fork-server templates: %s/%s not usable\" err=\"%s\"", opt->forkserver_dir,
                         JAIL_FORKSERVER_LIB, strerror(-r));
                templates = false;
        }
        /* Before the daemon grows and its threads start: each jail is then
         * cloned from this small copy, not from the daemon (jail/spawner.c). */
        if (!opt->no_spawner && (r = jail_ctx_start_spawner(&e->jail)) < 0)
                log_warn("msg=\"no jail spawner: jails are cloned from the daemon\" err=\"%s\"", strerror(-r));
        if ((e->jail.seccomp && (r = notifier_start(e->jail.seccomp, &e->notifier)) < 0) ||
            (r = bg_thread_init(&e->reaper, &e->lock)) < 0 || (r = bg_thread_init(&e->filler, &e->lock)) < 0 ||
            (r = bg_thread_start(&e->reaper, "reaper", 1, reaper_main, e)) < 0) {
                err_set(err, ERR_INTERNAL, -r, "engine start failed at threads: %s", strerror(-r));
                engine_free(e);
                return r;
        }
        add_runtimes(e, templates);
        /* Without a filler, members are spawned on demand (a warning, not fatal). */
        if (wants_filler(e) && (r = bg_thread_start(&e->filler, "pool-filler", 1, filler_main, e)) < 0)
                log_warn("msg=\"no pool filler thread\" err=\"%s\"", strerror(-r));
        *ret = e;
        return 0;
}

void engine_free(struct engine *e)
{
        if (!e)
                return;
        bg_thread_stop(&e->filler);
        for (size_t i = 0; i < e->nzygotes; i++) {
                engine_bury(e, e->zygotes[i].kp ? &e->zygotes[i].kp->p : NULL);
                e->zygotes[i].kp = NULL;
        }
        for (size_t i = 0; i < e->npools; i++)
                while (e->pools[i].n > 0)
                        engine_bury(e, &e->pools[i].ready[--e->pools[i].n]->p);
        /* The reaper frees what was buried before it stops. */
        bg_thread_stop(&e->reaper);
        /* Whatever was buried after the reaper left. */
        destroy_all(e->dead);
        destroy_all(e->dead_idle);
        e->dead = e->dead_idle = NULL;
        engine_kill_all(e);
        netns_pool_stop(&e->netns);
        bg_thread_done(&e->filler);
        bg_thread_done(&e->reaper);
        notifier_free(e->notifier);
        jail_ctx_done(&e->jail);
        pthread_mutex_destroy(&e->lock);
        free(e);
}

enum cgroup_backend engine_cgroup_backend(const struct engine *e)
{
        return cgroup_root_backend(e->jail.cgroot);
}

const struct exec_limits *engine_limits(const struct engine *e)
{
        return &e->opt.limits;
}

size_t engine_pool_stats(struct engine *e, struct engine_pool_stats *out, size_t max)
{
        size_t n = 0;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->npools && n < max; i++, n++) {
                struct pool *p = &e->pools[i];
                out[n] = (struct engine_pool_stats){
                        .lang = p->rt->id, .ready = p->n, .target = p->target, .grown = p->want, .hits = p->hits,
                        .misses = p->misses, .member_bytes = p->member_bytes,
                };
        }
        pthread_mutex_unlock(&e->lock);
        for (size_t i = 0; i < n; i++) {
                struct zygote *z = zygote_for(e, runtime_find(out[i].lang));
                if (!z)
                        continue;
                pthread_mutex_lock(&z->lock);
                out[i].has_template = true;
                out[i].template_alive = kproc_alive(z->kp);
                out[i].template_forks = z->forks;
                out[i].template_failures = z->failures;
                pthread_mutex_unlock(&z->lock);
        }
        return n;
}

void engine_kill_all(struct engine *e)
{
        pthread_mutex_lock(&e->lock);
        for (struct proc *p = e->live; p; p = p->next)
                jail_kill(&p->jp);
        pthread_mutex_unlock(&e->lock);
}

size_t engine_live_count(struct engine *e)
{
        pthread_mutex_lock(&e->lock);
        size_t n = e->nlive;
        pthread_mutex_unlock(&e->lock);
        return n;
}

void engine_track(struct engine *e, struct proc *p)
{
        pthread_mutex_lock(&e->lock);
        p->next = e->live;
        if (e->live)
                e->live->prev = p;
        e->live = p;
        e->nlive++;
        pthread_mutex_unlock(&e->lock);
}

void engine_untrack(struct engine *e, struct proc *p)
{
        pthread_mutex_lock(&e->lock);
        if (p->prev)
                p->prev->next = p->next;
        else if (e->live == p)
                e->live = p->next;
        if (p->next)
                p->next->prev = p->prev;
        p->prev = p->next = NULL;
        e->nlive--;
        pthread_mutex_unlock(&e->lock);
}

void engine_next_cgroup_name(struct engine *e, char *buf, size_t len)
{
        pthread_mutex_lock(&e->lock);
        snprintf(buf, len, "x%llu", (unsigned long long)++e->seq);
        pthread_mutex_unlock(&e->lock);
}

struct jail_limits engine_jail_limits(const struct engine *e, const struct exec_limits *lim)
{
        const struct engine_options *o = &e->opt;
        return (struct jail_limits){
                /* Without a cgroup (rootless, no delegation) the per-process
                 * data limit is the only memory bound left. */
                .data_bytes = cgroup_root_backend(e->jail.cgroot) == CGROUP_NONE ? lim->memory_bytes : 0,
                .memory_bytes = lim->memory_bytes,
                .pids = lim->pids,
                /* Backstop only: the daemon samples cgroup CPU and kills first. */
                .cpu_seconds = lim->cpu_ms ? lim->cpu_ms / 1000 + 2 : 0, /* 0: a command without a CPU cap */
                .file_bytes = lim->file_bytes ? lim->file_bytes : o->file_bytes,
                .nofile = o->nofile,
                .tmp_bytes = o->tmp_bytes,
                .tmp_inodes = o->tmp_inodes,
                .workspace_bytes = o->workspace_bytes,
                .workspace_inodes = o->workspace_inodes,
        };
}

/* Counts the stateless executions in progress. A refill waits until none
 * is, or REFILL_GRACE_MS (see filler_main): started next to a request (a
 * cold node start is ~100 ms of CPU) it competes with it for the cores and
 * delays its answer; after the answer it competes with nothing. The idle
 * teardowns (engine_bury_idle) wait likewise. */
void engine_inflight(struct engine *e, int delta)
{
        pthread_mutex_lock(&e->lock);
        e->inflight += (size_t)delta;
        if (e->inflight == 0) {
                e->quiet_at_ns = now_ns();
                bg_thread_wake_soon(&e->filler);
                if (e->dead_idle)
                        bg_thread_wake_soon(&e->reaper);
        }
        pthread_mutex_unlock(&e->lock);
}

void exec_outcome_done(struct exec_outcome *o)
{
        json_decref(o->response);
        buf_free(&o->out);
        buf_free(&o->err);
        *o = (struct exec_outcome){ 0 };
}

int set_nonblock(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

void close_pair(int p[2])
{
        for (int i = 0; i < 2; i++)
                if (p[i] >= 0)
                        close(p[i]);
}

bool pidfd_exited(int pidfd)
{
        struct pollfd p = { pidfd, POLLIN, 0 };
        return poll(&p, 1, 0) == 1;
}

/* ---- off-request-path teardown ---- */

void engine_bury_locked(struct engine *e, struct proc *p)
{
        if (!e->dead)
                e->dead_at_ns = now_ns();
        p->dead_next = e->dead;
        e->dead = p;
        e->ndead++;
        bg_thread_wake_soon(&e->reaper);
}

/* Hands a used process to the reaper thread, which kills it, reaps it,
 * recycles its cgroup and closes its fds — all off the request path (a
 * once-mode kernel is already exiting by itself). */
void engine_bury(struct engine *e, struct proc *p)
{
        if (!p)
                return;
        pthread_mutex_lock(&e->lock);
        engine_bury_locked(e, p);
        pthread_mutex_unlock(&e->lock);
}

void engine_bury_idle(struct engine *e, struct proc *p, uint64_t held_bytes)
{
        if (!p)
                return;
        /* Nothing the guest started may outlive its answer: only the
         * teardown (reap, cgroup give-back, fds) waits. */
        if (p->alive && !p->exit_early && !pidfd_exited(p->jp.pidfd))
                jail_kill(&p->jp);
        pthread_mutex_lock(&e->lock);
        p->dead_next = e->dead_idle;
        e->dead_idle = p;
        e->dead_idle_bytes += held_bytes;
        if (++e->ndead_idle >= REAP_IDLE_MAX || e->dead_idle_bytes >= REAP_IDLE_BYTES)
                bg_thread_wake(&e->reaper);
        pthread_mutex_unlock(&e->lock);
}

/* When the idle list may be torn down (engine lock held): at shutdown, when
 * it is full, or once no stateless execution ran for REAP_GRACE_MS. A
 * teardown next to a back-to-back request took a core from it (~0.75 ms of
 * CPU each: v1 cgroups, pidfds, the kernel's RCU work after it). Returns 0
 * for now, else when to look again (UINT64_MAX: when woken). */
static uint64_t reap_idle_at(const struct engine *e, bool running)
{
        if (!e->dead_idle)
                return UINT64_MAX;
        if (!running || e->ndead_idle >= REAP_IDLE_MAX || e->dead_idle_bytes >= REAP_IDLE_BYTES)
                return 0;
        if (e->inflight)
                return UINT64_MAX; /* engine_inflight wakes us */
        uint64_t at = e->quiet_at_ns + REAP_GRACE_MS * 1000000ULL;
        return now_ns() >= at ? 0 : at;
}

static void destroy_all(struct proc *list)
{
        while (list) {
                struct proc *p = list;
                list = p->dead_next;
                p->destroy(p);
        }
}

static bool reaper_backlogged(struct engine *e, size_t behind)
{
        pthread_mutex_lock(&e->lock);
        bool full = behind + e->ndead >= REAP_BACKGROUND_QUEUE;
        pthread_mutex_unlock(&e->lock);
        return full;
}

/* A used jail's death frees its memory: 1-2 ms of CPU for a node kernel.
 * Killed at normal priority right after the answer, that work took the CPU
 * the client had just been woken on, or the next request's, and delayed it
 * by 1.5-2 ms in a third of idle-paced requests (ftrace: the client runnable
 * while the dying kernel ran its exit on the same CPU). So the jail dies at
 * idle priority (its cgroup's cpu.idle), and gets its normal share back
 * after REAP_BACKGROUND_MS or once REAP_BACKGROUND_QUEUE processes wait
 * behind it: on a busy machine idle priority could starve the reaper, and
 * every process waiting for it holds its memory. behind: how many of the
 * reaper's current list follow p. */
static void destroy_in_background(struct engine *e, struct proc *p, size_t behind)
{
        if (p->alive && p->jp.pidfd >= 0 && !pidfd_exited(p->jp.pidfd) && !reaper_backlogged(e, behind) &&
            jail_set_background(&p->jp, true) == 0) {
                /* Not jail_kill: it would read an adopted fork's group
                 * members now, and the destroy below reads them again only
                 * if the group is not empty by then. */
                jail_kill_init(&p->jp);
                struct pollfd pf = { p->jp.pidfd, POLLIN, 0 };
                for (int ms = 0; ms < REAP_BACKGROUND_MS && poll(&pf, 1, 1) == 0; ms++)
                        if (reaper_backlogged(e, behind))
                                break;
                if (!pidfd_exited(p->jp.pidfd))
                        (void)jail_set_background(&p->jp, false);
        }
        p->destroy(p);
}

static size_t list_length(const struct proc *p)
{
        size_t n = 0;
        for (; p; p = p->dead_next)
                n++;
        return n;
}

static void destroy_all_in_background(struct engine *e, struct proc *list)
{
        size_t behind = list_length(list);
        while (list) {
                struct proc *p = list;
                list = p->dead_next;
                destroy_in_background(e, p, --behind);
        }
}

/* When the used processes may be killed (engine lock held): 0 for now,
 * else when (UINT64_MAX: none waiting). At shutdown at once. */
static uint64_t reap_dead_at(const struct engine *e, bool running)
{
        if (!e->dead)
                return UINT64_MAX;
        if (!running || e->ndead >= REAP_BACKGROUND_QUEUE)
                return 0;
        uint64_t at = e->dead_at_ns + REAP_KILL_DELAY_US * 1000ULL;
        return now_ns() >= at ? 0 : at;
}

static void reaper_main(void *arg)
{
        struct engine *e = arg;
        bg_thread_lock(&e->reaper);
        for (;;) {
                bool running = bg_thread_running(&e->reaper);
                struct proc *list = NULL, *idle = NULL;
                uint64_t dead_at = reap_dead_at(e, running);
                if (dead_at == 0) {
                        list = e->dead;
                        e->dead = NULL;
                        e->ndead = 0;
                        dead_at = UINT64_MAX;
                }
                uint64_t idle_at = reap_idle_at(e, running);
                if (idle_at == 0) {
                        idle = e->dead_idle;
                        e->dead_idle = NULL;
                        e->ndead_idle = 0;
                        e->dead_idle_bytes = 0;
                        idle_at = UINT64_MAX;
                }
                if (!list && !idle && !running)
                        break;
                if (!list && !idle) {
                        uint64_t at = dead_at < idle_at ? dead_at : idle_at;
                        bg_thread_wait(&e->reaper, at == UINT64_MAX ? 0 : at);
                        continue;
                }
                bg_thread_unlock(&e->reaper);
                if (running)
                        destroy_all_in_background(e, list);
                else
                        destroy_all(list);
                destroy_all(idle);
                bg_thread_lock(&e->reaper);
        }
        bg_thread_unlock(&e->reaper);
}

void engine_sandbox_ids(const struct engine *e, uid_t *first, uint32_t *n)
{
        jail_ids_sandbox_range(&e->jail, first, n);
}
