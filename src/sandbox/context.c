/* Code contexts: creation, listing, deletion, and one execution in a
 * context (make the interpreter resident, restoring it from its journal if
 * needed; run the cell; journal it). */
#include "sandbox/internal.h"
#include "sandbox/replica.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

#define OP_CREATE "context.create"
#define OP_DELETE "context.delete"
#define OP_EXECUTE "context.execute"

struct context *context_from_row(struct sandbox_mgr *m, struct sandbox *s, const struct context_row *row)
{
        struct context *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->row = *row;
        c->row.env_json = strdup(row->env_json ? row->env_json : "{}");
        if (!c->row.env_json) {
                free(c);
                return NULL;
        }
        c->rt = runtime_find(row->language);
        c->sbx = s;
        /* The journal rows are the truth; the context row may lag by one
         * cell if the daemon died between the two writes. */
        journal_sync(m, c);
        pthread_mutex_init(&c->run_lock, NULL);
        c->ws_fd = -1;
        return c;
}

void context_free(struct sandbox_mgr *m, struct context *c)
{
        if (!c)
                return;
        context_drop_interpreter(m, c);
        pthread_mutex_destroy(&c->run_lock);
        context_row_done(&c->row);
        free(c);
}

void context_info_fill(const struct context *c, struct sbx_context_info *ret)
{
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->id, sizeof(ret->id), "%s", c->row.id);
        snprintf(ret->binding, sizeof(ret->binding), "%s", c->row.binding);
        snprintf(ret->language, sizeof(ret->language), "%s", c->row.language);
        snprintf(ret->cwd, sizeof(ret->cwd), "%s", c->row.cwd);
        snprintf(ret->engine, sizeof(ret->engine), "%s", c->rt ? c->rt->engine : "");
        ret->created_at = c->row.created_at;
        ret->last_used = c->row.last_used;
        ret->executions = c->row.executions;
        ret->resident = kproc_alive(c->kp);
        ret->busy = c->refs > 0;
        ret->available = c->rt != NULL;
        ret->snap = (struct sbx_snapshot){
                .taken_at = c->row.snap_taken_at,
                .cells = c->row.snap_cells,
                .bytes = c->row.snap_bytes,
                .stale = c->row.snap_stale,
                .stale_reason = c->row.snap_stale ? c->stale_reason : NULL,
        };
        ret->last_restore = c->last_restore;
        snprintf(ret->snap.build, sizeof(ret->snap.build), "%s", c->row.build);
}

static void new_uuid(char out[37])
{
        unsigned char b[16];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                for (size_t i = 0; i < sizeof(b); i++)
                        b[i] = (unsigned char)(now_ns() >> (i % 8));
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* Normalises a context cwd inside /workspace (relative → /workspace/…). */
static bool normalize_cwd(const char *cwd, char *out, size_t len)
{
        return files_normalize(cwd && *cwd ? cwd : FILES_ROOT, out, len) == 0;
}

static size_t context_count(const struct sandbox *s)
{
        size_t n = 0;
        for (const struct context *c = s->contexts; c; c = c->next)
                n++;
        return n;
}

static void context_append(struct sandbox *s, struct context *c)
{
        struct context **pp = &s->contexts;
        while (*pp)
                pp = &(*pp)->next;
        *pp = c;
}

static void context_unlink(struct sandbox *s, struct context *c)
{
        for (struct context **pp = &s->contexts; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
}

static struct context *find_context(struct sandbox *s, const char *cid)
{
        for (struct context *c = s->contexts; c; c = c->next)
                if (strcmp(c->row.id, cid) == 0)
                        return c;
        return NULL;
}

static void fill_new_row(struct context *c, const struct sandbox *s, const struct runtime *rt,
                         const char *binding, const char *cwd, const char *cid)
{
        if (cid)
                snprintf(c->row.id, sizeof(c->row.id), "%s", cid);
        else
                new_uuid(c->row.id);
        snprintf(c->row.sandbox_id, sizeof(c->row.sandbox_id), "%s", s->row.id);
        snprintf(c->row.binding, sizeof(c->row.binding), "%s", binding);
        snprintf(c->row.language, sizeof(c->row.language), "%s", rt->id);
        snprintf(c->row.cwd, sizeof(c->row.cwd), "%s", cwd);
        /* Strictly increasing creation times keep "oldest context" exact. */
        uint64_t now = wall_ms();
        for (struct context *o = s->contexts; o; o = o->next)
                if (o->row.created_at >= now)
                        now = o->row.created_at + 1;
        c->row.created_at = c->row.last_used = now;
}

struct context *context_new(struct sandbox_mgr *m, struct sandbox *s, const struct runtime *rt, const char *binding,
                            const char *cwd, json_t *env, const char *cid, struct err *err)
{
        if (context_count(s) >= m->opt.max_contexts) {
                err_set(err, ERR_LIMIT, 0, "Cannot create more than %llu code contexts",
                        (unsigned long long)m->opt.max_contexts);
                err->op = OP_CREATE;
                return NULL;
        }
        struct context *c = calloc(1, sizeof(*c));
        if (!c) {
                err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
                return NULL;
        }
        fill_new_row(c, s, rt, binding, cwd, cid);
        c->row.env_json = env ? json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
        c->rt = rt;
        c->sbx = s;
        pthread_mutex_init(&c->run_lock, NULL);
        c->ws_fd = -1;
        int r = c->row.env_json ? store_context_insert(m->store, &c->row) : -ENOMEM;
        if (r < 0) {
                context_free(m, c);
                err_set(err, ERR_INTERNAL, -r, "Cannot store context: %s", strerror(-r));
                return NULL;
        }
        context_append(s, c);
        return c;
}

int sbx_context_create(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                       const char *cwd, json_t *env, struct sbx_context_info *ret, struct err *err)
{
        return sbx_context_create_org(m, NULL, id, rt, binding, cwd, env, ret, err);
}

int sbx_context_create_org(struct sandbox_mgr *m, const char *org_id, const char *id, const struct runtime *rt,
                           const char *binding, const char *cwd, json_t *env, struct sbx_context_info *ret,
                           struct err *err)
{
        char norm[4096];
        if (!normalize_cwd(cwd, norm, sizeof(norm))) {
                int r = err_set(err, ERR_INVALID, 0, "cwd must be inside /workspace");
                err_detail(err, "cwd", cwd ? cwd : "", (size_t)-1);
                return r;
        }
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        struct context *c = context_new(m, s, rt, binding, norm, env, NULL, err);
        if (c)
                context_info_fill(c, ret);
        sandbox_leave(m, s);
        return c ? 0 : err_ret(err);
}

static int context_not_found(struct err *err, const char *cid, const char *op, const char *msg)
{
        int r = err_set(err, ERR_NOT_FOUND, ENOENT, "%s", msg);
        err->op = op;
        err_detail(err, "contextId", cid, (size_t)-1);
        return r;
}

int sbx_context_delete(struct sandbox_mgr *m, const char *id, const char *cid, struct err *err)
{
        return sbx_context_delete_org(m, NULL, id, cid, err);
}

int sbx_context_delete_org(struct sandbox_mgr *m, const char *org_id, const char *id, const char *cid,
                           struct err *err)
{
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        struct context *c = find_context(s, cid);
        int r = 0;
        if (!c) {
                char msg[256];
                snprintf(msg, sizeof(msg), "Context not found: %s", cid);
                r = context_not_found(err, cid, OP_DELETE, msg);
        } else {
                context_remove(m, s, c);
        }
        sandbox_leave(m, s);
        return r;
}

void context_remove(struct sandbox_mgr *m, struct sandbox *s, struct context *c)
{
        context_unlink(s, c);
        c->deleted = true;
        store_context_delete(m->store, c->row.id);
        if (c->refs == 0)
                context_free(m, c);
        else if (c->kp)
                kproc_kill(c->kp); /* the running execution frees it */
}

/* ---- one execution ---- */

static const char *const lost_names[] = {
        [CONTEXT_LOST_RESTART] = "restart",
        [CONTEXT_LOST_EVICTED] = "evicted",
        [CONTEXT_LOST_EVICTED_OWN] = "evicted_own",
        [CONTEXT_LOST_LIMIT] = "limit",
        [CONTEXT_LOST_INTERRUPT] = "interrupted",
};

/* Starts c's interpreter (overlay: a throw-away /workspace for replay) and
 * makes it resident. */
static int spawn_interpreter(struct sandbox_mgr *m, struct context *c, bool overlay, const struct exec_limits *lim,
                             struct err *err)
{
        if (!overlay && warm_runtime_adopt(m, c, lim)) {
                lru_add(m, c); /* its jail was registered when it started */
                return 0;
        }
        struct err why = { 0 };
        struct kproc_workspace ws = { .dir = c->sbx->ws.mount, .fd = c->ws_fd };
        struct kproc_where where = { .ws = &ws, .netns_fd = c->sbx->netns_fd, .host_id = c->sbx->row.host_id,
                                     .group = c->sbx->cgroup, .binds = c->mounts ? c->mounts->binds : NULL,
                                     .nbinds = c->mounts ? c->mounts->n : 0 };
        int r = kproc_spawn_in(m->engine, c->rt, "repl", &where, overlay, lim, &c->kp, &why);
        if (r < 0) {
                /* Always "unavailable" (an upstream failure to the client),
                 * whatever the step's own reason. */
                err_set(err, ERR_UNAVAILABLE, -r, "Cannot start the %s interpreter (%s)", c->rt->id, why.msg);
                err_done(&why);
                err->op = OP_EXECUTE;
                return r;
        }
        /* run_lock, then the sandbox's lock (never the other way). */
        pthread_mutex_lock(&c->sbx->lock);
        sandbox_jail_started(c->sbx, kproc_pidfd(c->kp));
        pthread_mutex_unlock(&c->sbx->lock);
        lru_add(m, c);
        return 0;
}

/* Replay went past its bounds: a fresh interpreter with an empty journal,
 * the context marked stale; the caller's answer says so. */
static int start_fresh(struct sandbox_mgr *m, struct context *c, const char *why, const struct exec_limits *lim,
                       struct err *err)
{
        context_drop_interpreter(m, c);
        journal_reset(m, c, why);
        c->last_restore.fresh = true;
        c->last_restore.stale_reason = why;
        log_warn("msg=\"context restore abandoned, starting fresh\" context=%s why=%s", c->row.id, why);
        return spawn_interpreter(m, c, false, lim, err);
}

static int restore_state(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim,
                         struct err *err)
{
        uint64_t t0 = now_ns();
        enum replay_verdict v = journal_replay(m, c, lim);
        c->last_restore.replay_ms = (now_ns() - t0) / 1000000;
        c->need_reseed = true;
        if (v == REPLAY_TOO_LONG || v == REPLAY_TOO_BIG)
                return start_fresh(m, c, v == REPLAY_TOO_LONG ? "replay_time" : "journal_size", lim, err);
        if (v == REPLAY_FAILED) {
                /* Never restore silently wrong state: say so. */
                c->row.snap_stale = true;
                c->stale_reason = c->last_restore.stale_reason = "replay_failed";
                log_warn("msg=\"context restored with replay failures\" context=%s", c->row.id);
        }
        log_debug("msg=\"context restored\" context=%s cells=%llu ms=%llu", c->row.id,
                  (unsigned long long)c->row.snap_cells, (unsigned long long)c->last_restore.replay_ms);
        if (!kproc_alive(c->kp)) {
                int r = err_set(err, ERR_UNAVAILABLE, 0, "Context state could not be restored");
                err->op = OP_EXECUTE;
                return r;
        }
        return 0;
}

/* Makes the context's interpreter resident, restoring state if it has a
 * journal. Caller holds c->run_lock. *restored: this call rebuilt it. */
static int ensure_resident(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim,
                           bool *restored, struct err *err)
{
        if (kproc_alive(c->kp)) {
                lru_touch(m, c);
                return 0;
        }
        context_drop_interpreter(m, c);
        bool restore = c->row.snap_cells > 0 || c->row.snap_bytes > 0;
        int r = spawn_interpreter(m, c, restore, lim, err);
        if (r < 0)
                return r;
        if (restore) {
                c->last_restore = (struct sbx_restore){ .restored = true, .reason = lost_names[c->lost],
                                                        .at = wall_ms() };
                *restored = true;
                if ((r = restore_state(m, c, lim, err)) < 0)
                        return r;
        }
        c->lost = CONTEXT_LOST_LIMIT; /* until something else takes it */
        lru_evict(m, c, false);
        return 0;
}

/* Picks the context for an execute (caller holds s->lock). */
static struct context *resolve_context(struct sandbox_mgr *m, struct sandbox *s, const struct runtime *rt,
                                       const char *binding, const char *cid, struct err *err)
{
        if (cid) {
                struct context *c = find_context(s, cid);
                if (!c) {
                        char msg[256];
                        snprintf(msg, sizeof(msg), "Context not found: %s", cid);
                        context_not_found(err, cid, OP_EXECUTE, msg);
                }
                return c;
        }
        for (struct context *c = s->contexts; c; c = c->next)
                if (strcmp(c->row.binding, binding) == 0)
                        return c; /* list is ordered by createdAt: the oldest */
        /* Made by the execute that runs its first cell: written as its
         * cells are (sandbox.journal_sync), a power loss keeps both or
         * neither (a WAL keeps a prefix of its commits). */
        store_journal_scope(true);
        struct context *c = context_new(m, s, rt, binding, FILES_ROOT, NULL, NULL, err);
        store_journal_scope(false);
        return c;
}

/* Effective env: sandbox < context < call (null unsets). */
static json_t *effective_env(struct sandbox *s, struct context *c, json_t *call_env)
{
        json_t *env = json_deep_copy(s->env);
        json_t *ctx_env = env_parse(c->row.env_json);
        env_merge(env, ctx_env);
        json_decref(ctx_env);
        if (call_env)
                env_merge(env, call_env);
        return env;
}

static void update_cwd(struct context *c, json_t *response)
{
        const char *cwd = response ? json_string_value(json_object_get(response, "cwd")) : NULL;
        char norm[4096];
        if (cwd && normalize_cwd(cwd, norm, sizeof(norm)))
                snprintf(c->row.cwd, sizeof(c->row.cwd), "%s", norm);
}

static json_t *cell_request(struct context *c, const struct sbx_cell *cell, json_t *env, bool ts,
                            const struct exec_limits *lim)
{
        json_t *req = exec_build_request(cell->code, env, c->row.cwd, ts, lim->result_bytes, false);
        if (req && c->need_reseed)
                json_object_set_new(req, "reseed", json_true());
        if (req && cell->display)
                json_object_set_new(req, "display", json_true());
        return req;
}

/* ---- interrupts (every flag under m->lock) ---- */

/* The cell goes into the kernel now, unless an interrupt already came for
 * it: false then (it is skipped). */
static bool cell_begin(struct sandbox_mgr *m, struct context *c)
{
        pthread_mutex_lock(&m->lock);
        bool go = !c->interrupt_pending;
        c->cell_seq++;
        c->running = go;
        if (!go)
                c->interrupted = SBX_INTERRUPT_SKIPPED;
        pthread_mutex_unlock(&m->lock);
        return go;
}

/* The execution is over (whether its cell ran or not): what interrupted
 * it, and no interrupt is left for the next one. */
static enum sbx_interrupt cell_end(struct sandbox_mgr *m, struct context *c)
{
        pthread_mutex_lock(&m->lock);
        enum sbx_interrupt what = c->interrupted;
        c->running = c->interrupt_pending = false;
        c->interrupted = SBX_INTERRUPT_NONE;
        pthread_mutex_unlock(&m->lock);
        return what;
}

/* A skipped cell's answer: the error a kernel gives an interrupted cell. */
static int skipped_outcome(struct context *c, struct exec_outcome *o)
{
        *o = (struct exec_outcome){ 0 };
        o->response = json_pack("{s:[], s:{s:s, s:s, s:[]}, s:s}", "results", "error", "name", "KeyboardInterrupt",
                                "message", "interrupted before it started", "traceback", "cwd", c->row.cwd);
        return o->response ? 0 : -ENOMEM;
}

/* Sends the interrupt to what runs in c (caller holds m->lock); kill: do
 * not ask, kill the kernel. */
static enum sbx_interrupt interrupt_locked(struct context *c, bool kill)
{
        if (!c->running || !kproc_alive(c->kp)) {
                c->interrupt_pending = true; /* the cell about to run never will */
                return SBX_INTERRUPT_SKIPPED;
        }
        if (!kill && kproc_signal(c->kp, SIGINT) == 0)
                return c->interrupted = SBX_INTERRUPT_SIGNALED;
        kproc_kill(c->kp);
        return c->interrupted = SBX_INTERRUPT_KILLED;
}

/* Runs one cell in a resident context. Caller holds c->run_lock. */
static int run_cell(struct sandbox_mgr *m, struct context *c, const struct sbx_cell *cell, json_t *env,
                    struct sbx_exec_result *ret, struct err *err)
{
        ret->limits = m->opt.limits;
        ret->limits.file_bytes = sandbox_file_bytes(m, c->sbx);
        bool restored = false;
        int r = ensure_resident(m, c, &ret->limits, &restored, err);
        if (r < 0)
                return r;
        if (restored)
                ret->restore = c->last_restore;
        bool ts = strcmp(c->rt->id, "javascript") == 0;
        char cwd_before[4096];
        snprintf(cwd_before, sizeof(cwd_before), "%s", c->row.cwd);
        /* The cell runs with its org's env under its own; only its own is
         * journaled (the org's is given again on replay). */
        json_t *run_env = NULL;
        if ((r = sandbox_env_over_org(m, c->sbx, env, &run_env, err)) < 0)
                return r;
        json_t *req = cell_request(c, cell, run_env, ts, &ret->limits);
        json_decref(run_env);
        if (!req)
                r = -ENOMEM;
        else if (cell_begin(m, c))
                r = kproc_run_sink(c->kp, req, &ret->limits, cell->sink, &ret->outcome);
        else
                r = skipped_outcome(c, &ret->outcome);
        json_decref(req);
        ret->interrupted = cell_end(m, c);
        sbx_replica_dirty(m, c->sbx->row.id); /* a cell may write files, even one that failed */
        if (r < 0) {
                context_drop_interpreter(m, c);
                err_set(err, ERR_UNAVAILABLE, -r, "Engine execution failed: %s", strerror(-r));
                err->op = OP_EXECUTE;
                return r;
        }
        c->need_reseed = false;
        ret->snapshot_ms = -1;
        bool journaled = false;
        const struct exec_outcome *o = &ret->outcome;
        sandbox_emit_outcome(m, c->sbx, c->row.id, o);
        if (o->died || o->limit != EXEC_LIMIT_NONE) {
                /* The interpreter is gone (or was killed for a limit): the
                 * next call restores the state as of the last journaled cell,
                 * i.e. as before this failed run. */
                context_drop_interpreter(m, c);
                if (ret->interrupted == SBX_INTERRUPT_KILLED)
                        c->lost = CONTEXT_LOST_INTERRUPT;
        } else if (ret->interrupted != SBX_INTERRUPT_NONE) {
                /* Never journaled: a replay would run it again (and an
                 * endless loop would eat the replay's whole budget). What
                 * it did before it stopped is live but not in the journal. */
                if (ret->interrupted == SBX_INTERRUPT_SIGNALED) {
                        c->row.snap_stale = true;
                        c->stale_reason = "interrupted";
                }
        } else {
                update_cwd(c, o->response);
                journaled = true;
        }
        c->row.executions++;
        c->row.last_used = wall_ms();
        if (journaled) {
                /* The cell and the row above: one commit. */
                journal_append(m, c, cell->code, env, cwd_before, ts, &ret->snapshot_ms);
                /* A sandbox over its share gives back its own interpreter,
                 * this one included, once its cell is answered. */
                lru_evict(m, c, true);
        } else {
                store_context_update(m->store, &c->row);
        }
        ret->rt = c->rt;
        snprintf(ret->context_id, sizeof(ret->context_id), "%s", c->row.id);
        snprintf(ret->cwd, sizeof(ret->cwd), "%s", c->row.cwd);
        ret->executions = c->row.executions;
        ret->expires_at = c->sbx->row.expires_at;
        return 0;
}

void sbx_exec_result_done(struct sbx_exec_result *r)
{
        exec_outcome_done(&r->outcome);
}

/* Runs under the context's own lock, not the sandbox's: other contexts of
 * the sandbox (and its files) stay usable during a long cell. */
static int execute_locked(struct sandbox_mgr *m, struct context *c, int ws_fd, const struct mount_view *mounts,
                          const struct sbx_cell *cell, json_t *env, struct sbx_exec_result *ret, struct err *err)
{
        if (!c->rt)
                return err_set(err, ERR_INVALID, 0, "Context language '%s' is not available", c->row.language);
        pthread_mutex_lock(&c->run_lock);
        c->ws_fd = ws_fd;
        c->mounts = mounts;
        int r = c->deleted ? context_not_found(err, c->row.id, OP_EXECUTE, "Context was deleted")
                           : run_cell(m, c, cell, env, ret, err);
        cell_end(m, c); /* an interrupt for a cell that never started is void */
        c->ws_fd = -1;
        c->mounts = NULL;
        pthread_mutex_unlock(&c->run_lock);
        return r;
}

static int execute_cell(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                        const struct sbx_cell *cell, json_t *call_env, struct sbx_exec_result *ret, struct err *err)
{
        memset(ret, 0, sizeof(*ret));
        ret->snapshot_ms = -1;
        struct sandbox *s = sandbox_enter_org(m, cell->org_id, id, err);
        if (!s)
                return err_ret(err);
        struct context *c = resolve_context(m, s, rt, binding, cell->context_id, err);
        json_t *env = NULL;
        int r = c ? sandbox_open_workspace(m, s, err) : err_ret(err);
        if (r == 0) {
                c->refs++;
                env = effective_env(s, c, call_env);
                sandbox_netns(m, s);
                (void)sandbox_cgroup(m, s);
        }
        /* Opened under the lock: a kernel started for this call mounts what
         * this fd is on, even if a DELETE unmounts the path meanwhile. */
        _cleanup_close_ int ws_fd = r == 0 ? open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        _cleanup_(mount_view_done) struct mount_view mounts = { .n = 0 };
        if (r == 0)
                mount_view_take(s, &mounts);
        pthread_mutex_unlock(&s->lock);
        if (r == 0) {
                r = execute_locked(m, c, ws_fd, &mounts, cell, env, ret, err);
                pthread_mutex_lock(&s->lock);
                bool free_it = --c->refs == 0 && c->deleted && !find_context(s, c->row.id);
                pthread_mutex_unlock(&s->lock);
                if (free_it)
                        context_free(m, c);
        }
        json_decref(env);
        sandbox_put(m, s);
        return r;
}

int sbx_execute(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                const char *code, const char *context_id, json_t *call_env, struct sbx_exec_result *ret,
                struct err *err)
{
        const struct sbx_cell cell = { .context_id = context_id, .code = code };
        return execute_cell(m, id, rt, binding, &cell, call_env, ret, err);
}

int sbx_execute_cell(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                     const struct sbx_cell *cell, json_t *call_env, struct sbx_exec_result *ret, struct err *err)
{
        return execute_cell(m, id, rt, binding, cell, call_env, ret, err);
}

int sbx_context_run(struct sandbox_mgr *m, const char *id, const struct sbx_cell *cell, struct sbx_exec_result *ret,
                    struct err *err)
{
        if (!cell->context_id) {
                memset(ret, 0, sizeof(*ret));
                return err_set(err, ERR_INVALID, 0, "A context id is required");
        }
        return execute_cell(m, id, NULL, NULL, cell, NULL, ret, err);
}

/* Whether cell seq still runs in context cid of s; past the grace period
 * (kill) its kernel is killed. */
static bool still_running(struct sandbox_mgr *m, struct sandbox *s, const char *cid, uint64_t seq, bool kill,
                          enum sbx_interrupt *ret)
{
        pthread_mutex_lock(&s->lock);
        struct context *c = find_context(s, cid);
        pthread_mutex_lock(&m->lock);
        bool running = c && c->running && c->cell_seq == seq;
        if (running && kill)
                *ret = interrupt_locked(c, true);
        pthread_mutex_unlock(&m->lock);
        pthread_mutex_unlock(&s->lock);
        return running && !kill;
}

int sbx_context_interrupt(struct sandbox_mgr *m, const char *org_id, const char *id, const char *cid,
                          uint64_t grace_ms, enum sbx_interrupt *ret, struct err *err)
{
        *ret = SBX_INTERRUPT_NONE;
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        struct context *c = find_context(s, cid);
        if (!c) {
                char msg[256];
                snprintf(msg, sizeof(msg), "Context not found: %s", cid);
                int r = context_not_found(err, cid, "context.interrupt", msg);
                sandbox_leave(m, s);
                return r;
        }
        uint64_t seq = 0;
        pthread_mutex_lock(&m->lock);
        if (c->refs > 0) {
                seq = c->cell_seq;
                *ret = interrupt_locked(c, !c->rt || !c->rt->interruptible);
        }
        pthread_mutex_unlock(&m->lock);
        pthread_mutex_unlock(&s->lock);
        /* A cell that ignores SIGINT (a long call in C, a handler of its
         * own) is not left running: the interrupt really stops it. */
        if (*ret == SBX_INTERRUPT_SIGNALED) {
                uint64_t until = now_ns() + grace_ms * 1000000ULL;
                while (still_running(m, s, cid, seq, now_ns() >= until, ret))
                        usleep(10000);
        }
        sandbox_put(m, s);
        return 0;
}
