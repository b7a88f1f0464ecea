/* The runtime API's warm sandboxes (sandbox.warm_runtime).
 *
 * The runtime API creates a sandbox implicitly, under the id its client
 * chose, by the first call that names it; that call used to pay for the
 * whole sandbox (rows, workspace, namespace, cgroups) and then for its
 * first context's cold jail and interpreter start. These are warm
 * sandboxes of class SBX_RUNTIME_CLASS (the runtime API's own limits: the
 * service's defaults) in which the refill loop (pool.c) has also started a
 * python kernel, exactly as the sandbox's first context would start it
 * (its workspace, host id, namespace and parent cgroup; the same limits).
 *
 * A first call for an id that does not exist takes one: the sandbox is
 * moved to the client's id (workspace paths, one store write in place of
 * the warm row) and relabelled as the default org's, and its first python
 * context adopts the kernel. What differs per context or call (env, cwd)
 * travels in each request of the kernel protocol, so nothing of the kernel
 * is specific to who takes it. A warm sandbox is only ever taken once; its
 * kernel dies with it (destroyed, shed, or at shutdown: sandbox_free), and
 * a restart starts kernels again for the warm sandboxes it finds. */
#include "sandbox/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "runtimes/runtime.h"

#define WARM_KERNEL_LANG "python"
/* After a take the refill loop does nothing this long (pool.c). */
#define WARM_TAKE_QUIET_MS 300

/* The limits a context of s runs with (context.c run_cell). */
static struct exec_limits context_limits(const struct sandbox_mgr *m, const struct sandbox *s)
{
        struct exec_limits lim = m->opt.limits;
        lim.file_bytes = sandbox_file_bytes(m, s);
        return lim;
}

/* Caller holds s->lock. */
static void kernel_free(struct sandbox_mgr *m, struct sandbox *s)
{
        if (!s->warm_kp)
                return;
        kproc_free(s->warm_kp);
        s->warm_kp = NULL;
        pthread_mutex_lock(&m->lock);
        if (s->warm) /* a taken sandbox's left "ready" when it was taken */
                m->warm_rt.ready -= m->warm_rt.ready ? 1 : 0;
        pthread_mutex_unlock(&m->lock);
}

void warm_runtime_drop(struct sandbox_mgr *m, struct sandbox *s)
{
        kernel_free(m, s);
}

/* Starts the kernel of the prepared warm sandbox s (s->lock held). */
static int kernel_start(struct sandbox_mgr *m, struct sandbox *s, struct err *err)
{
        const struct runtime *rt = runtime_find(WARM_KERNEL_LANG);
        if (!rt)
                return 0; /* a build without python: warm sandboxes only */
        kernel_free(m, s);
        _cleanup_close_ int fd = open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return err_set(err, ERR_INTERNAL, errno, "Cannot open the workspace: %s", strerror(errno));
        struct kproc_workspace ws = { .dir = s->ws.mount, .fd = fd };
        struct kproc_where where = { .ws = &ws, .netns_fd = s->netns_fd, .host_id = s->row.host_id,
                                     .group = s->cgroup };
        s->warm_lim = context_limits(m, s);
        int r = kproc_spawn_in(m->engine, rt, "repl", &where, false, &s->warm_lim, &s->warm_kp, err);
        if (r < 0)
                return r;
        sandbox_jail_started(s, kproc_pidfd(s->warm_kp)); /* killed with the sandbox */
        pthread_mutex_lock(&m->lock);
        m->warm_rt.ready++;
        pthread_mutex_unlock(&m->lock);
        return 0;
}

/* pool_step_fn: everything a first call would do, its kernel included. */
static int prepare_locked(struct sandbox_mgr *m, struct sandbox *s, struct err *err)
{
        int r = pool_prepare_locked(m, s, err);
        if (r == 0 && !kproc_alive(s->warm_kp))
                r = kernel_start(m, s, err);
        return r;
}

static bool ready_locked(const struct sandbox *s)
{
        return s->warm && !s->deleted && s->ws.mounted && kproc_alive(s->warm_kp);
}

/* ---- the take ---- */

/* Makes warm s the default org's sandbox id (s->lock held). -EAGAIN: s is
 * not (or no longer) ready; -EEXIST: id exists; else 0 or -errno. */
static int take_locked(struct sandbox_mgr *m, struct sandbox *s, const char *id)
{
        if (!ready_locked(s))
                return -EAGAIN;
        char old_id[STORE_ID_MAX];
        snprintf(old_id, sizeof(old_id), "%s", s->row.id);
        struct err err = { 0 };
        pthread_mutex_lock(&m->lock);
        /* Within the tenants' caps, as any new sandbox. */
        int r = sandbox_check_caps(m, sandbox_workspace_bytes(m, s), &err);
        if (r == 0)
                r = sandbox_rekey_hash(m, s, id);
        if (r == 0) {
                pool_forget(m, s);
                s->warm = false;
                uint64_t now = wall_ms();
                snprintf(s->row.org_id, sizeof(s->row.org_id), "%s", SBX_DEFAULT_ORG);
                s->row.warm_class[0] = '\0';
                s->row.created_at = s->row.last_used = s->saved_last_used = now;
                s->row.expires_at = sandbox_expiry_for(&m->opt, now);
                /* The row moves while nobody can load the old one: a lookup
                 * of the warm id in between would load a second sandbox
                 * with the same host id. */
                r = store_sandbox_rekey(m->store, old_id, &s->row);
                if (r == 0) {
                        m->warm_rt.taken++;
                        m->warm_rt.ready -= m->warm_rt.ready ? 1 : 0; /* its kernel is the taker's */
                }
        }
        pthread_mutex_unlock(&m->lock);
        err_done(&err);
        if (r < 0)
                return r == -EEXIST || r == -EAGAIN ? r : -EIO;
        /* A crash right here leaves the files under the warm id with no
         * row: the sandbox starts with a new workspace. */
        r = workspace_move(&s->ws, m->opt.data_dir, id);
        if (r < 0) {
                log_warn("msg=\"cannot take a warm sandbox\" sandbox=%s err=\"%s\"", old_id, strerror(-r));
                return r;
        }
        store_journal_scope(true); /* as its row */
        sandbox_emit(m, s, "sandbox.created", json_pack("{s:b}", "warm", true));
        store_journal_scope(false);
        return 0;
}

/* The class's sandboxes this node holds, oldest first. */
static int class_list(struct sandbox_mgr *m, struct id_list *ret)
{
        int r = store_sandbox_each_in_class(m->store, SBX_POOL_ORG, SBX_RUNTIME_CLASS, id_list_add, ret);
        ids_keep_owned(m, ret);
        return r;
}

void warm_runtime_take(struct sandbox_mgr *m, const char *id)
{
        pthread_mutex_lock(&m->lock);
        bool none = m->warm_rt.ready == 0;
        pthread_mutex_unlock(&m->lock);
        if (none)
                return;
        _cleanup_(id_list_done) struct id_list ids = { 0 };
        if (class_list(m, &ids) < 0)
                return;
        int r = -EAGAIN;
        for (size_t i = 0; r == -EAGAIN && i < ids.n; i++) {
                struct err lost = { 0 };
                struct sandbox *s = sandbox_lookup(m, ids.ids[i], SANDBOX_GET_WARM | SANDBOX_GET_EXISTING, NULL,
                                                   NULL, &lost);
                err_done(&lost);
                if (!s)
                        continue;
                pthread_mutex_lock(&s->lock);
                r = take_locked(m, s, id);
                pthread_mutex_unlock(&s->lock);
                if (r < 0 && r != -EAGAIN && r != -EEXIST && !s->warm)
                        sandbox_wipe(m, s); /* half moved: of no use; the call goes cold */
                sandbox_put(m, s);
        }
        if (r == 0) {
                /* The taker's first cell runs now: the refill comes after
                 * it, not under its feet (pool_loop). */
                bg_thread_lock(&m->pool.bg);
                m->pool.quiet_until = m->pool.defer_until = now_ns() + WARM_TAKE_QUIET_MS * 1000000ULL;
                m->pool.kick = true;
                bg_thread_wake(&m->pool.bg);
                bg_thread_unlock(&m->pool.bg);
        }
}

bool warm_runtime_adopt(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim)
{
        struct sandbox *s = c->sbx;
        bool bare = !c->mounts || c->mounts->n == 0;
        pthread_mutex_lock(&s->lock);
        /* What a cold start would make: python, the same limits, no
         * bucket mounts to bind, no egress (a tenant org's: its kernels
         * get the proxy's DNS). */
        bool fits = s->warm_kp && c->rt && strcmp(c->rt->id, WARM_KERNEL_LANG) == 0 && bare && !s->warm &&
                    !s->egress && memcmp(&s->warm_lim, lim, sizeof(*lim)) == 0;
        if (fits && !kproc_alive(s->warm_kp))
                fits = false, kernel_free(m, s);
        if (fits) {
                c->kp = TAKE_PTR(s->warm_kp);
                pthread_mutex_lock(&m->lock);
                m->warm_rt.adopted++;
                pthread_mutex_unlock(&m->lock);
        }
        pthread_mutex_unlock(&s->lock);
        if (fits)
                log_debug("msg=\"warm kernel adopted\" sandbox=%s context=%s", s->row.id, c->row.id);
        return fits;
}

/* ---- the refill loop's steps ---- */

static bool new_id(char id[STORE_ID_MAX])
{
        unsigned char b[16];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return false;
        char *p = id + snprintf(id, STORE_ID_MAX, "wrt-");
        for (size_t i = 0; i < sizeof(b); i++)
                p += snprintf(p, 3, "%02x", b[i]);
        return true;
}

/* Runs prepare_locked on warm id (made with the runtime API's options when
 * missing); a failure destroys it. */
static int prepare(struct sandbox_mgr *m, const char *id, unsigned flags)
{
        static const struct sbx_create_options opts = { .warm_class = SBX_RUNTIME_CLASS };
        struct err err = { 0 };
        struct sandbox *s;
        int r = pool_on_warm(m, id, flags, &opts, prepare_locked, &s, &err);
        if (s && r < 0) {
                log_warn("msg=\"cannot prepare a warm runtime sandbox\" sandbox=%s err=\"%s\"", id, err.msg);
                sandbox_wipe(m, s);
        }
        if (s)
                sandbox_put(m, s);
        err_done(&err);
        return r;
}

/* Tenants' sandboxes and every warm class's against the limit the pools
 * fill up to: < 0 past it (one must go: tenants need the room), 0 at it,
 * > 0 room for one more. 0 when the store cannot count. */
static int room(struct sandbox_mgr *m)
{
        uint64_t n = 0, reserved = 0;
        pthread_mutex_lock(&m->lock);
        int r = sandbox_tenant_usage(m, &n, &reserved);
        uint64_t have = n + m->class_rows, limit = r == 0 ? pool_limit(m, n, reserved) : have;
        pthread_mutex_unlock(&m->lock);
        return have > limit ? -1 : have < limit;
}

/* The first of ids that is not ready (left by a previous run, or its
 * kernel died), or NULL. */
static const char *first_unready(struct sandbox_mgr *m, const struct id_list *ids)
{
        for (size_t i = 0; i < ids->n; i++) {
                struct sandbox *s = sandbox_ref_loaded(m, ids->ids[i]);
                bool ready = false;
                if (s) {
                        pthread_mutex_lock(&s->lock);
                        ready = ready_locked(s);
                        pthread_mutex_unlock(&s->lock);
                        sandbox_put(m, s);
                }
                if (!ready)
                        return ids->ids[i];
        }
        return NULL;
}

bool warm_runtime_step(struct sandbox_mgr *m, bool quiet)
{
        _cleanup_(id_list_done) struct id_list ids = { 0 };
        if (class_list(m, &ids) < 0)
                return false;
        uint64_t target = m->opt.warm_runtime;
        int fits = room(m);
        if (ids.n > target || (ids.n && fits < 0)) {
                pool_destroy(m, ids.ids[ids.n - 1]); /* the newest: its kernel with it */
                return true;
        }
        const char *unready = first_unready(m, &ids);
        if (unready)
                return prepare(m, unready, SANDBOX_GET_EXISTING) == 0;
        pthread_mutex_lock(&m->lock);
        quiet = quiet && m->warm_rt.ready > 0;
        pthread_mutex_unlock(&m->lock);
        char id[STORE_ID_MAX];
        if (ids.n < target && !quiet && fits > 0 && new_id(id))
                return prepare(m, id, 0) == 0;
        return false;
}

void sbx_warm_runtime_stats(struct sandbox_mgr *m, struct sbx_warm_runtime_stats *ret)
{
        pthread_mutex_lock(&m->lock);
        *ret = m->warm_rt;
        pthread_mutex_unlock(&m->lock);
}
