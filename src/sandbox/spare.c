/* A sandbox's spare jail: its next command's jail built ahead (issue 13).
 * Building a jail (namespaces, the workspace and bucket mounts, the cgroup
 * attach that waits for an RCU grace period on cgroup v1, seccomp,
 * Landlock) is most of what a short command costs; a deferred jail
 * (proc_spec.deferred) is built completely and waits for its command.
 *
 * A sandbox holds at most one, made by one background thread after each of
 * its commands (spare_want) and when the warm pool prepares it, exactly as
 * spawn_locked would build that command's jail: same command_site (the
 * workspace mount, network namespace, host id, group, mounts, limits) and
 * the same stdin shape. The next command uses it only while its key still
 * matches what the command would get (spare_take), else it is dropped and
 * the command spawns cold; anything that changes the site explicitly drops
 * it too (mounts, deletion, unload, shutdown). One command per spare, so
 * every command still gets a jail no command ran in before. A sandbox with
 * bucket mounts gets none (spare_make says why).
 *
 * Idle sandboxes hold none: the spare of a sandbox without a command for
 * SPARE_IDLE_MS is dropped, so only the recently used (at most SPARE_MAX)
 * and the warm keep one. Its init and waiting launcher are two processes
 * (and their memory) in the sandbox's group: sandbox.pids counts them. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "engine/proc.h"
#include "sandbox/internal.h"

#define SPARE_IDLE_MS (60 * 1000)
/* At most this many at once (a burst over many sandboxes): each is two
 * processes, a few hundred KiB and a mount namespace. */
#define SPARE_MAX 256

static void key_of(const struct sandbox *s, const struct command_site *cs, bool stdin_pipe, bool side_channel,
                   struct spare_key *k)
{
        memset(k, 0, sizeof(*k)); /* memcmp'd: no stray padding */
        k->dev = cs->st.st_dev;
        k->ino = cs->st.st_ino;
        k->netns_fd = cs->where.netns_fd;
        k->local_dns = cs->where.local_dns;
        k->stdin_pipe = stdin_pipe;
        k->side_channel = side_channel;
        k->host_id = cs->where.host_id;
        k->group = cs->where.group;
        k->mounts = s->mounts;
        k->nbinds = cs->view.n;
        k->lim = cs->lim;
}

void spare_drop(struct sandbox_mgr *m, struct sandbox *s)
{
        if (!s->spare)
                return;
        proc_signal(s->spare, SIGKILL); /* gone now; reaped off this thread */
        proc_bury(s->spare);
        s->spare = NULL;
        __atomic_fetch_sub(&m->spares.held, 1, __ATOMIC_RELAXED);
}

struct proc *spare_take(struct sandbox_mgr *m, struct sandbox *s, const struct command_site *cs,
                        const struct proc_spec *spec)
{
        struct spare_key k;
        key_of(s, cs, spec->stdin_pipe, spec->side_channel, &k);
        struct proc *p = s->spare;
        if (!p || memcmp(&k, &s->spare_key, sizeof(k)) != 0) {
                __atomic_fetch_add(&m->spares.misses, 1, __ATOMIC_RELAXED);
                /* Stale, or of another stdin shape: the next one is built
                 * for this command's (spare_want). */
                spare_drop(m, s);
                return NULL;
        }
        s->spare = NULL;
        __atomic_fetch_sub(&m->spares.held, 1, __ATOMIC_RELAXED);
        struct err err = { 0 };
        if (proc_start(p, spec, &err) < 0) {
                /* Died waiting (or any failure): the cold spawn reports
                 * what is really wrong. */
                log_warn("msg=\"spare jail failed, spawning cold\" sandbox=%s err=\"%s\"", s->row.id, err.msg);
                err_done(&err);
                proc_signal(p, SIGKILL);
                proc_bury(p);
                __atomic_fetch_add(&m->spares.misses, 1, __ATOMIC_RELAXED);
                return NULL;
        }
        __atomic_fetch_add(&m->spares.hits, 1, __ATOMIC_RELAXED);
        return p;
}

/* Whether s still has what k was built from (s->lock held). */
static bool key_current(struct sandbox_mgr *m, struct sandbox *s, const struct spare_key *k)
{
        /* Never a site opened for a sandbox deleted meanwhile: that would
         * make its workspace again. */
        if (s->deleted || s->spare || !s->ws.mounted)
                return false;
        struct err err = { 0 };
        _cleanup_(command_site_done) struct command_site cs;
        struct spare_key now;
        int r = command_site_open(m, s, &cs, &err);
        err_done(&err);
        if (r < 0)
                return false;
        key_of(s, &cs, k->stdin_pipe, k->side_channel, &now);
        return memcmp(&now, k, sizeof(now)) == 0;
}

/* Builds s's spare. s->lock held, but released while the jail is built
 * (tens of ms on cgroup v1): the sandbox's other requests do not wait for
 * it. What it was built from is checked again after. */
static void spare_make(struct sandbox_mgr *m, struct sandbox *s)
{
        /* A bucket mount's point is resolved in the workspace when the jail
         * is built, and the guest may move directories on its way after
         * that: such a sandbox's commands are built cold, when they run. */
        if (s->deleted || s->spare || !s->ws.mounted || s->mounts ||
            __atomic_load_n(&m->spares.held, __ATOMIC_RELAXED) >= SPARE_MAX)
                return;
        struct err err = { 0 };
        struct spare_key k;
        struct proc *p = NULL;
        _cleanup_(command_site_done) struct command_site cs;
        int r = command_site_open(m, s, &cs, &err);
        if (r == 0) {
                key_of(s, &cs, s->spare_stdin_pipe, s->spare_side_channel, &k);
                struct proc_spec spec = { .io = PROC_IO_PIPES, .stdin_pipe = k.stdin_pipe,
                                          .side_channel = k.side_channel, .limits = &cs.lim, .where = &cs.where,
                                          .deferred = true };
                pthread_mutex_unlock(&s->lock);
                r = proc_spawn(m->engine, &spec, &p, &err);
                pthread_mutex_lock(&s->lock);
        }
        if (r < 0) {
                log_debug("msg=\"no spare jail\" sandbox=%s err=\"%s\"", s->row.id, err.msg);
                err_done(&err);
                return;
        }
        if (!key_current(m, s, &k)) { /* deleted, mounted, changed meanwhile */
                proc_signal(p, SIGKILL);
                proc_bury(p);
                return;
        }
        s->spare = p;
        memcpy(&s->spare_key, &k, sizeof(k)); /* padding too: memcmp'd */
        __atomic_fetch_add(&m->spares.held, 1, __ATOMIC_RELAXED);
}

void spare_make_now(struct sandbox_mgr *m, struct sandbox *s, bool stdin_pipe, bool side_channel)
{
        s->spare_stdin_pipe = stdin_pipe;
        s->spare_side_channel = side_channel;
        spare_make(m, s);
}

void spare_want(struct sandbox_mgr *m, struct sandbox *s, bool stdin_pipe, bool side_channel)
{
        s->spare_stdin_pipe = stdin_pipe;
        s->spare_side_channel = side_channel;
        struct sbx_spares *sp = &m->spares;
        bg_thread_lock(&sp->bg);
        bool queued = false;
        for (size_t i = 0; i < sp->want.n && !queued; i++)
                queued = strcmp(sp->want.ids[i], s->row.id) == 0;
        if (!queued)
                id_list_add(s->row.id, &sp->want);
        bg_thread_wake(&sp->bg);
        bg_thread_unlock(&sp->bg);
}

static void make_for(struct sandbox_mgr *m, const char *id)
{
        struct sandbox *s = sandbox_ref_loaded(m, id);
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        spare_make(m, s);
        pthread_mutex_unlock(&s->lock);
        sandbox_put(m, s);
}

/* Drops the spares of sandboxes quiet for SPARE_IDLE_MS. */
static void drop_idle(struct sandbox_mgr *m)
{
        if (__atomic_load_n(&m->spares.held, __ATOMIC_RELAXED) == 0)
                return;
        struct id_list l = { 0 };
        sandbox_loaded_ids(m, &l);
        uint64_t now = wall_ms();
        for (size_t i = 0; i < l.n; i++) {
                struct sandbox *s = sandbox_ref_loaded(m, l.ids[i]);
                if (!s)
                        continue;
                pthread_mutex_lock(&s->lock);
                if (s->spare && !s->warm && s->row.last_used + SPARE_IDLE_MS <= now)
                        spare_drop(m, s);
                pthread_mutex_unlock(&s->lock);
                sandbox_put(m, s);
        }
        id_list_done(&l);
}

static void spares_loop(void *arg)
{
        struct sandbox_mgr *m = arg;
        struct sbx_spares *sp = &m->spares;
        uint64_t next_sweep = now_ns() + SPARE_IDLE_MS * 1000000ULL / 4;
        bg_thread_lock(&sp->bg);
        while (bg_thread_running(&sp->bg)) {
                if (now_ns() >= next_sweep) {
                        bg_thread_unlock(&sp->bg);
                        drop_idle(m);
                        bg_thread_lock(&sp->bg);
                        next_sweep = now_ns() + SPARE_IDLE_MS * 1000000ULL / 4;
                }
                if (sp->want.n == 0) {
                        bg_thread_wait(&sp->bg, next_sweep);
                        continue;
                }
                char e[STORE_ID_MAX];
                memcpy(e, sp->want.ids[0], sizeof(e));
                memmove(sp->want.ids, sp->want.ids + 1, (sp->want.n - 1) * sizeof(sp->want.ids[0]));
                sp->want.n--;
                bg_thread_unlock(&sp->bg);
                make_for(m, e);
                bg_thread_lock(&sp->bg);
        }
        bg_thread_unlock(&sp->bg);
}

void sbx_spare_stats(struct sandbox_mgr *m, struct sbx_spare_stats *ret)
{
        ret->held = __atomic_load_n(&m->spares.held, __ATOMIC_RELAXED);
        ret->hits = __atomic_load_n(&m->spares.hits, __ATOMIC_RELAXED);
        ret->misses = __atomic_load_n(&m->spares.misses, __ATOMIC_RELAXED);
}

int spares_start(struct sandbox_mgr *m)
{
        int r = bg_thread_init(&m->spares.bg, NULL);
        return r < 0 ? r : bg_thread_start(&m->spares.bg, "sbx-spares", 1, spares_loop, m);
}

void spares_stop(struct sandbox_mgr *m)
{
        bg_thread_done(&m->spares.bg);
        id_list_done(&m->spares.want);
}
