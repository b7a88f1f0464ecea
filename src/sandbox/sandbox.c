#include "sandbox/sandbox.h"

#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "sandbox/files.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox/workspace.h"

#define HASH_BUCKETS 4096

struct sandbox;

struct context {
        struct context_row row;
        const struct runtime *rt;
        struct sandbox *sbx;
        struct kproc *kp;            /* resident interpreter, or NULL */
        bool need_reseed;            /* first run after a restore */
        bool deleted;
        int refs;                    /* executions holding it (sandbox lock) */
        pthread_mutex_t run_lock;    /* serialises executions */
        struct context *next;        /* sandbox's list, by created_at */
        struct context *lru_prev, *lru_next; /* resident LRU (manager lock) */
};

struct sandbox {
        struct sandbox_row row;
        json_t *env;                 /* {string: string} */
        struct workspace ws;
        struct context *contexts;
        pthread_mutex_t lock;
        int refs;                    /* manager lock */
        bool deleted;
        struct sandbox *hnext;
};

struct sandbox_mgr {
        const struct config *cfg;
        struct engine *engine;
        struct store *store;
        pthread_mutex_t lock;        /* hash, refs, LRU */
        struct sandbox *buckets[HASH_BUCKETS];
        struct context *lru_head, *lru_tail;
        size_t resident;
        pthread_t reaper;
        pthread_cond_t reaper_cond;
        bool stopping, reaper_started;
};

static const char *const reserved_ids[] = { "www", "api", "admin", "root", "system", "cloudflare", "workers" };

void sbx_error_done(struct sbx_error *e)
{
        json_decref(e->context);
        e->context = NULL;
}

static json_t *fail(struct sbx_error *err, int status, const char *code, json_t *context, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

static json_t *fail(struct sbx_error *err, int status, const char *code, json_t *context, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        err->status = status;
        err->code = code;
        err->context = context;
        return NULL;
}

bool sbx_id_valid(const char *id)
{
        size_t n = strlen(id);
        if (n == 0 || n > 63 || id[0] == '-' || id[n - 1] == '-' || strspn(id, ".") == n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
                        return false;
        for (size_t i = 0; i < ARRAY_SIZE(reserved_ids); i++)
                if (strcasecmp(id, reserved_ids[i]) == 0)
                        return false;
        return true;
}

static void iso(uint64_t ms, char buf[static 32])
{
        iso8601_ms(ms, buf);
}

static unsigned hash_id(const char *s)
{
        uint32_t h = 2166136261u;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h % HASH_BUCKETS;
}

/* ---- LRU of resident interpreters (manager lock held) ---- */

static void lru_unlink(struct sandbox_mgr *m, struct context *c)
{
        if (!c->lru_prev && m->lru_head != c)
                return;
        if (c->lru_prev)
                c->lru_prev->lru_next = c->lru_next;
        else
                m->lru_head = c->lru_next;
        if (c->lru_next)
                c->lru_next->lru_prev = c->lru_prev;
        else
                m->lru_tail = c->lru_prev;
        c->lru_prev = c->lru_next = NULL;
        m->resident--;
}

static void lru_push_front(struct sandbox_mgr *m, struct context *c)
{
        c->lru_next = m->lru_head;
        c->lru_prev = NULL;
        if (m->lru_head)
                m->lru_head->lru_prev = c;
        m->lru_head = c;
        if (!m->lru_tail)
                m->lru_tail = c;
        m->resident++;
}

static void lru_touch(struct sandbox_mgr *m, struct context *c)
{
        pthread_mutex_lock(&m->lock);
        lru_unlink(m, c);
        lru_push_front(m, c);
        pthread_mutex_unlock(&m->lock);
}

/* Evicts least recently used idle interpreters beyond the cap. The context
 * itself keeps its journal, so the next use restores it transparently. */
static void lru_evict(struct sandbox_mgr *m, struct context *keep)
{
        pthread_mutex_lock(&m->lock);
        struct context *c = m->lru_tail;
        while (m->resident > m->cfg->max_resident_contexts && c) {
                struct context *prev = c->lru_prev;
                if (c != keep && pthread_mutex_trylock(&c->run_lock) == 0) {
                        lru_unlink(m, c);
                        kproc_free(c->kp);
                        c->kp = NULL;
                        log_debug("msg=\"evicted context\" context=%s", c->row.id);
                        pthread_mutex_unlock(&c->run_lock);
                }
                c = prev;
        }
        pthread_mutex_unlock(&m->lock);
}

static void context_drop_interpreter(struct sandbox_mgr *m, struct context *c)
{
        pthread_mutex_lock(&m->lock);
        lru_unlink(m, c);
        pthread_mutex_unlock(&m->lock);
        kproc_free(c->kp);
        c->kp = NULL;
}

static void context_free(struct sandbox_mgr *m, struct context *c)
{
        if (!c)
                return;
        context_drop_interpreter(m, c);
        pthread_mutex_destroy(&c->run_lock);
        context_row_done(&c->row);
        free(c);
}

/* ---- sandbox loading ---- */

static void sandbox_free(struct sandbox_mgr *m, struct sandbox *s)
{
        while (s->contexts) {
                struct context *c = s->contexts;
                s->contexts = c->next;
                context_free(m, c);
        }
        workspace_close(&s->ws);
        json_decref(s->env);
        sandbox_row_done(&s->row);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

struct load_ctx {
        struct sandbox_mgr *m;
        struct sandbox *sbx;
        struct context **tail;
        int r;
};

static void load_context_row(const struct context_row *row, void *userdata)
{
        struct load_ctx *lc = userdata;
        struct context *c = calloc(1, sizeof(*c));
        if (!c) {
                lc->r = -ENOMEM;
                return;
        }
        c->row = *row;
        c->row.env_json = strdup(row->env_json ? row->env_json : "{}");
        c->rt = runtime_find(row->language);
        c->sbx = lc->sbx;
        /* The journal rows are the truth; the context row may lag by one
         * cell if the daemon died between the two writes. */
        uint64_t cells, bytes;
        if (store_cell_stats(lc->m->store, row->id, &cells, &bytes) == 0) {
                c->row.snap_cells = cells;
                c->row.snap_bytes = bytes;
        }
        pthread_mutex_init(&c->run_lock, NULL);
        *lc->tail = c;
        lc->tail = &c->next;
}

static json_t *parse_env(const char *text)
{
        json_t *env = text ? json_loads(text, 0, NULL) : NULL;
        if (!json_is_object(env)) {
                json_decref(env);
                env = json_object();
        }
        return env;
}

static uint64_t expiry_for(const struct config *cfg, uint64_t now)
{
        return cfg->idle_ttl_ms ? now + cfg->idle_ttl_ms : 0;
}

static int sandbox_load(struct sandbox_mgr *m, const char *id, struct sandbox **ret)
{
        struct sandbox *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        workspace_init(&s->ws, m->cfg->data_dir, id);
        int r = store_sandbox_get(m->store, id, &s->row);
        if (r == -ENOENT) {
                uint64_t now = wall_ms();
                snprintf(s->row.id, sizeof(s->row.id), "%s", id);
                snprintf(s->row.org_id, sizeof(s->row.org_id), "%s", SBX_DEFAULT_ORG);
                s->row.created_at = s->row.last_used = now;
                s->row.expires_at = expiry_for(m->cfg, now);
                s->row.env_json = strdup("{}");
                /* A sandbox id reused after destroy/expiry starts empty. */
                workspace_destroy(&s->ws);
                r = store_sandbox_put(m->store, &s->row);
        }
        if (r < 0) {
                sandbox_free(m, s);
                return r;
        }
        s->env = parse_env(s->row.env_json);
        struct load_ctx lc = { m, s, &s->contexts, 0 };
        r = store_context_each(m->store, id, load_context_row, &lc);
        if (r < 0 || lc.r < 0) {
                sandbox_free(m, s);
                return r < 0 ? r : lc.r;
        }
        *ret = s;
        return 0;
}

/* Looks up (loading or creating) a sandbox and takes a reference. */
static struct sandbox *sandbox_get(struct sandbox_mgr *m, const char *id, struct sbx_error *err)
{
        if (!sbx_id_valid(id)) {
                fail(err, 400, "VALIDATION_FAILED", json_pack("{s:s}", "id", id), "Invalid sandbox id: %s", id);
                return NULL;
        }
        unsigned h = hash_id(id);
        pthread_mutex_lock(&m->lock);
        struct sandbox *s = m->buckets[h];
        while (s && strcmp(s->row.id, id) != 0)
                s = s->hnext;
        if (!s) {
                /* Loading under the manager lock keeps two first requests for
                 * one id from creating it twice; it is a few SQLite reads. */
                int r = sandbox_load(m, id, &s);
                if (r < 0) {
                        pthread_mutex_unlock(&m->lock);
                        fail(err, 500, "INTERNAL_ERROR", NULL, "Cannot load sandbox: %s", strerror(-r));
                        return NULL;
                }
                s->hnext = m->buckets[h];
                m->buckets[h] = s;
        }
        s->refs++;
        pthread_mutex_unlock(&m->lock);
        return s;
}

static void sandbox_put(struct sandbox_mgr *m, struct sandbox *s)
{
        pthread_mutex_lock(&m->lock);
        bool last = --s->refs == 0 && s->deleted;
        pthread_mutex_unlock(&m->lock);
        if (last)
                sandbox_free(m, s);
}

/* Every request is activity. The deadline is re-armed (and persisted) only
 * when it would move by more than a tenth of the TTL, so two quick calls
 * report the same expiresAt and idle deletion happens 0.9×TTL…TTL after the
 * last use. Caller holds s->lock. */
static void sandbox_touch(struct sandbox_mgr *m, struct sandbox *s)
{
        uint64_t now = wall_ms();
        s->row.last_used = now;
        uint64_t want = expiry_for(m->cfg, now);
        if (want == 0 || s->row.expires_at == 0 || want - s->row.expires_at > m->cfg->idle_ttl_ms / 10) {
                s->row.expires_at = want;
                store_sandbox_touch(m->store, s->row.id, now, want);
        }
}

/* Unlinks from the hash; the struct lives until its last reference goes. */
static void sandbox_unhash(struct sandbox_mgr *m, struct sandbox *s)
{
        unsigned h = hash_id(s->row.id);
        for (struct sandbox **pp = &m->buckets[h]; *pp; pp = &(*pp)->hnext)
                if (*pp == s) {
                        *pp = s->hnext;
                        break;
                }
        s->deleted = true;
}

/* Destroys a sandbox: every interpreter killed, workspace and rows gone.
 * Executions still running in it fail as their interpreter dies. */
static int sandbox_wipe(struct sandbox_mgr *m, struct sandbox *s)
{
        pthread_mutex_lock(&m->lock);
        sandbox_unhash(m, s);
        pthread_mutex_unlock(&m->lock);
        pthread_mutex_lock(&s->lock);
        for (struct context *c = s->contexts; c; c = c->next) {
                c->deleted = true;
                if (c->kp)
                        kproc_kill(c->kp);
        }
        int r = store_sandbox_delete(m->store, s->row.id);
        int k = workspace_destroy(&s->ws);
        pthread_mutex_unlock(&s->lock);
        return r < 0 ? r : k;
}

/* ---- JSON views ---- */

static json_t *snapshot_json(const struct context *c)
{
        if (c->row.snap_cells == 0)
                return json_null();
        return json_pack("{s:I, s:b, s:s, s:I, s:I, s:I}", "takenAt", (json_int_t)c->row.snap_taken_at, "stale",
                         c->row.snap_stale, "kind", "journal", "cells", (json_int_t)c->row.snap_cells, "bytes",
                         (json_int_t)c->row.snap_bytes, "storedBytes", (json_int_t)c->row.snap_bytes);
}

static json_t *context_brief_json(const struct context *c)
{
        char created[32], used[32];
        iso(c->row.created_at, created);
        iso(c->row.last_used, used);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", c->row.id, "binding", c->row.binding, "language",
                         c->row.language, "cwd", c->row.cwd, "createdAt", created, "lastUsed", used);
}

static json_t *context_info_json(const struct context *c)
{
        json_t *o = context_brief_json(c);
        json_object_set_new(o, "engine", json_string(c->rt ? c->rt->engine : ""));
        json_object_set_new(o, "executions", json_integer((json_int_t)c->row.executions));
        json_object_set_new(o, "resident", json_boolean(kproc_alive(c->kp)));
        json_object_set_new(o, "snapshot", snapshot_json(c));
        return o;
}

static json_t *expires_json(const struct sandbox *s)
{
        return s->row.expires_at ? json_integer((json_int_t)s->row.expires_at) : json_null();
}

/* ---- public operations ---- */

/* Runs fn with a referenced, locked sandbox: the common frame of every
 * operation (lookup/creation, activity, lock, release). */
#define WITH_SANDBOX(m, id, err, s)                                   \
        struct sandbox *s = sandbox_get(m, id, err);                  \
        if (!s)                                                       \
                return NULL;                                          \
        pthread_mutex_lock(&s->lock);                                 \
        sandbox_touch(m, s)

#define END_SANDBOX(m, s)                \
        pthread_mutex_unlock(&s->lock);  \
        sandbox_put(m, s)

json_t *sbx_info(struct sandbox_mgr *m, const char *id, struct sbx_error *err)
{
        WITH_SANDBOX(m, id, err, s);
        char created[32], used[32];
        iso(s->row.created_at, created);
        iso(s->row.last_used, used);
        json_t *ctxs = json_array();
        for (struct context *c = s->contexts; c; c = c->next)
                json_array_append_new(ctxs, context_info_json(c));
        uint64_t files = 0, bytes = 0;
        /* Only a workspace that exists is measured: GET must not create one. */
        bool exists = s->ws.mounted || access(s->ws.plain ? s->ws.mount : s->ws.image, F_OK) == 0;
        if (exists && !s->ws.mounted)
                workspace_open(&s->ws, m->cfg->workspace_bytes, m->cfg->workspace_inodes);
        int fd = s->ws.mounted ? open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd >= 0) {
                files_usage(fd, &files, &bytes);
                close(fd);
        }
        json_t *info = json_pack("{s:s, s:s, s:s, s:s, s:O, s:o, s:{s:I, s:I}, s:b, s:o}", "id", s->row.id,
                                 "orgId", s->row.org_id, "createdAt", created, "lastUsed", used, "envVars",
                                 s->env, "contexts", ctxs, "workspace", "files", (json_int_t)files, "bytes",
                                 (json_int_t)bytes, "fileApi", 1, "expiresAt", expires_json(s));
        END_SANDBOX(m, s);
        return info;
}

json_t *sbx_destroy(struct sandbox_mgr *m, const char *id, struct sbx_error *err)
{
        struct sandbox *s = sandbox_get(m, id, err);
        if (!s)
                return NULL;
        int r = sandbox_wipe(m, s);
        sandbox_put(m, s);
        if (r < 0)
                return fail(err, 500, "INTERNAL_ERROR", NULL, "Cannot destroy sandbox: %s", strerror(-r));
        return json_pack("{s:b}", "success", 1);
}

/* Applies {k: string|null} onto base (null unsets). */
static void env_merge(json_t *base, json_t *delta)
{
        const char *k;
        json_t *v;
        json_object_foreach(delta, k, v) {
                if (json_is_null(v))
                        json_object_del(base, k);
                else
                        json_object_set(base, k, v);
        }
}

json_t *sbx_set_env(struct sandbox_mgr *m, const char *id, json_t *env, struct sbx_error *err)
{
        WITH_SANDBOX(m, id, err, s);
        json_t *next = json_deep_copy(s->env);
        env_merge(next, env);
        char *text = json_dumps(next, JSON_COMPACT | JSON_SORT_KEYS);
        int r = text ? store_sandbox_set_env(m->store, s->row.id, text) : -ENOMEM;
        free(text);
        if (r == 0) {
                json_decref(s->env);
                s->env = next;
        } else {
                json_decref(next);
        }
        END_SANDBOX(m, s);
        if (r < 0)
                return fail(err, 500, "INTERNAL_ERROR", NULL, "Cannot store env: %s", strerror(-r));
        return json_pack("{s:b}", "success", 1);
}

static size_t context_count(const struct sandbox *s)
{
        size_t n = 0;
        for (const struct context *c = s->contexts; c; c = c->next)
                n++;
        return n;
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

/* Creates a context row (caller holds s->lock). */
static struct context *context_new(struct sandbox_mgr *m, struct sandbox *s, const struct runtime *rt,
                                   const char *binding, const char *cwd, json_t *env, struct sbx_error *err)
{
        if (context_count(s) >= m->cfg->max_contexts) {
                fail(err, 400, "VALIDATION_FAILED", NULL, "Cannot create more than %llu code contexts",
                     (unsigned long long)m->cfg->max_contexts);
                return NULL;
        }
        struct context *c = calloc(1, sizeof(*c));
        if (!c) {
                fail(err, 500, "INTERNAL_ERROR", NULL, "Out of memory");
                return NULL;
        }
        new_uuid(c->row.id);
        snprintf(c->row.sandbox_id, sizeof(c->row.sandbox_id), "%s", s->row.id);
        snprintf(c->row.binding, sizeof(c->row.binding), "%s", binding);
        snprintf(c->row.language, sizeof(c->row.language), "%s", rt->id);
        snprintf(c->row.cwd, sizeof(c->row.cwd), "%s", cwd);
        c->row.env_json = env ? json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
        /* Strictly increasing creation times keep "oldest context" exact. */
        uint64_t now = wall_ms();
        for (struct context *o = s->contexts; o; o = o->next)
                if (o->row.created_at >= now)
                        now = o->row.created_at + 1;
        c->row.created_at = c->row.last_used = now;
        c->rt = rt;
        c->sbx = s;
        pthread_mutex_init(&c->run_lock, NULL);
        int r = store_context_insert(m->store, &c->row);
        if (r < 0) {
                context_free(m, c);
                fail(err, 500, "INTERNAL_ERROR", NULL, "Cannot store context: %s", strerror(-r));
                return NULL;
        }
        struct context **pp = &s->contexts;
        while (*pp)
                pp = &(*pp)->next;
        *pp = c;
        return c;
}

json_t *sbx_context_create(struct sandbox_mgr *m, const char *id, const struct runtime *rt,
                           const char *binding, const char *cwd, json_t *env, struct sbx_error *err)
{
        char norm[4096];
        if (!normalize_cwd(cwd, norm, sizeof(norm)))
                return fail(err, 400, "VALIDATION_FAILED", json_pack("{s:s}", "cwd", cwd ? cwd : ""),
                            "cwd must be inside /workspace");
        WITH_SANDBOX(m, id, err, s);
        struct context *c = context_new(m, s, rt, binding, norm, env, err);
        json_t *res = c ? context_brief_json(c) : NULL;
        END_SANDBOX(m, s);
        return res;
}

json_t *sbx_context_list(struct sandbox_mgr *m, const char *id, struct sbx_error *err)
{
        WITH_SANDBOX(m, id, err, s);
        json_t *arr = json_array();
        for (struct context *c = s->contexts; c; c = c->next)
                json_array_append_new(arr, context_brief_json(c));
        END_SANDBOX(m, s);
        return json_pack("{s:o}", "contexts", arr);
}

static struct context *find_context(struct sandbox *s, const char *cid)
{
        for (struct context *c = s->contexts; c; c = c->next)
                if (strcmp(c->row.id, cid) == 0)
                        return c;
        return NULL;
}

static void context_unlink(struct sandbox *s, struct context *c)
{
        for (struct context **pp = &s->contexts; *pp; pp = &(*pp)->next)
                if (*pp == c) {
                        *pp = c->next;
                        break;
                }
}

json_t *sbx_context_delete(struct sandbox_mgr *m, const char *id, const char *cid, struct sbx_error *err)
{
        WITH_SANDBOX(m, id, err, s);
        struct context *c = find_context(s, cid);
        json_t *res = NULL;
        if (!c) {
                fail(err, 404, "CONTEXT_NOT_FOUND", json_pack("{s:s}", "contextId", cid), "Context not found: %s", cid);
        } else {
                context_unlink(s, c);
                c->deleted = true;
                store_context_delete(m->store, c->row.id);
                if (c->refs == 0)
                        context_free(m, c);
                else if (c->kp)
                        kproc_kill(c->kp); /* the running execution frees it */
                res = json_pack("{s:b}", "success", 1);
        }
        END_SANDBOX(m, s);
        return res;
}

/* ---- execution in a context ---- */

struct replay {
        struct context *c;
        struct exec_limits lim;
        size_t cells, bad;
};

/* Re-runs one journaled cell; store_cell_each calls this without holding
 * the store lock, so a long replay blocks nobody else. */
static void replay_cell(const struct cell_row *cell, void *userdata)
{
        struct replay *rp = userdata;
        rp->cells++;
        if (!kproc_alive(rp->c->kp)) {
                rp->bad++;
                return;
        }
        json_t *env = parse_env(cell->env_json);
        json_t *req = exec_build_request(cell->code, env, cell->cwd, cell->typescript, rp->lim.result_bytes, true);
        struct exec_outcome o;
        if (kproc_run(rp->c->kp, req, &rp->lim, &o) < 0 || o.died || o.limit != EXEC_LIMIT_NONE)
                rp->bad++;
        exec_outcome_done(&o);
        json_decref(req);
        json_decref(env);
}

/* Replays the journal into a fresh interpreter whose /workspace is a
 * throw-away overlay, so re-running old cells cannot change real files.
 * Returns the number of cells that did not replay cleanly. */
static size_t replay_journal(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim)
{
        struct replay rp = { .c = c, .lim = *lim };
        rp.lim.output_bytes *= 4; /* output is discarded; never fail on it */
        rp.lim.output_entries *= 4;
        if (store_cell_each(m->store, c->row.id, replay_cell, &rp) < 0)
                rp.bad++; /* an unreadable journal cannot have rebuilt the state */
        if (rp.cells > 0 && kproc_alive(c->kp) && kproc_end_replay(c->kp) < 0)
                rp.bad++;
        return rp.bad;
}

/* Makes the context's interpreter resident, restoring state if it has a
 * journal. Caller holds c->run_lock. */
static int ensure_resident(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim,
                           struct sbx_error *err)
{
        if (kproc_alive(c->kp)) {
                lru_touch(m, c);
                return 0;
        }
        context_drop_interpreter(m, c);
        const char *why = NULL;
        bool restore = c->row.snap_cells > 0;
        int r = kproc_spawn(m->engine, c->rt, "repl", c->sbx->ws.mount, restore, lim, &c->kp, &why);
        if (r < 0) {
                fail(err, 502, "INTERNAL_ERROR", NULL, "Cannot start the %s interpreter (%s: %s)", c->rt->id, why,
                     strerror(-r));
                return r;
        }
        pthread_mutex_lock(&m->lock);
        lru_push_front(m, c);
        pthread_mutex_unlock(&m->lock);
        if (restore) {
                uint64_t t0 = now_ns();
                size_t bad = replay_journal(m, c, lim);
                if (bad) {
                        /* Never restore silently wrong state: say so. */
                        c->row.snap_stale = true;
                        log_warn("msg=\"context restored with replay failures\" context=%s cells=%zu",
                                 c->row.id, bad);
                }
                log_debug("msg=\"context restored\" context=%s cells=%llu ms=%.1f", c->row.id,
                          (unsigned long long)c->row.snap_cells, (double)(now_ns() - t0) / 1e6);
                c->need_reseed = true;
                if (!kproc_alive(c->kp)) {
                        fail(err, 502, "INTERNAL_ERROR", NULL, "Context state could not be restored");
                        return -EIO;
                }
        }
        lru_evict(m, c);
        return 0;
}

/* Picks the context for an execute (caller holds s->lock). */
static struct context *resolve_context(struct sandbox_mgr *m, struct sandbox *s, const struct runtime *rt,
                                       const char *binding, const char *cid, struct sbx_error *err)
{
        if (cid) {
                struct context *c = find_context(s, cid);
                if (!c)
                        fail(err, 404, "CONTEXT_NOT_FOUND", json_pack("{s:s}", "contextId", cid),
                             "Context not found: %s", cid);
                return c;
        }
        for (struct context *c = s->contexts; c; c = c->next)
                if (strcmp(c->row.binding, binding) == 0)
                        return c; /* list is ordered by createdAt: the oldest */
        return context_new(m, s, rt, binding, FILES_ROOT, NULL, err);
}

/* Effective env: sandbox < context < call (null unsets). */
static json_t *effective_env(struct sandbox *s, struct context *c, json_t *call_env)
{
        json_t *env = json_deep_copy(s->env);
        json_t *ctx_env = parse_env(c->row.env_json);
        env_merge(env, ctx_env);
        json_decref(ctx_env);
        if (call_env)
                env_merge(env, call_env);
        return env;
}

static void journal_cell(struct sandbox_mgr *m, struct context *c, const char *code, json_t *env,
                         const char *cwd_before, bool ts, double *ret_ms)
{
        uint64_t t0 = now_ns();
        char *env_text = json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS);
        struct cell_row cell = { c->row.snap_cells + 1, code, env_text ? env_text : "{}", cwd_before, ts };
        int r = store_cell_append(m->store, c->row.id, &cell);
        if (r == -EINVAL && store_cell_stats(m->store, c->row.id, &c->row.snap_cells, &c->row.snap_bytes) == 0) {
                /* Our count lagged the journal: resynchronise and retry. */
                cell.seq = c->row.snap_cells + 1;
                r = store_cell_append(m->store, c->row.id, &cell);
        }
        if (r == 0) {
                c->row.snap_cells++;
                c->row.snap_bytes += strlen(code);
                c->row.snap_taken_at = wall_ms();
        } else {
                c->row.snap_stale = true;
        }
        free(env_text);
        *ret_ms = (double)(now_ns() - t0) / 1e6;
}

static void update_cwd(struct context *c, json_t *response)
{
        const char *cwd = response ? json_string_value(json_object_get(response, "cwd")) : NULL;
        char norm[4096];
        if (cwd && normalize_cwd(cwd, norm, sizeof(norm)))
                snprintf(c->row.cwd, sizeof(c->row.cwd), "%s", norm);
}

/* Runs one cell in a resident context. Caller holds c->run_lock. */
static json_t *run_cell(struct sandbox_mgr *m, struct context *c, const char *code, json_t *env,
                        struct sbx_error *err)
{
        struct exec_limits lim;
        exec_limits_from_config(m->cfg, &lim);
        if (ensure_resident(m, c, &lim, err) < 0)
                return NULL;
        bool ts = strcmp(c->rt->id, "javascript") == 0;
        char cwd_before[4096];
        snprintf(cwd_before, sizeof(cwd_before), "%s", c->row.cwd);
        json_t *req = exec_build_request(code, env, c->row.cwd, ts, lim.result_bytes, false);
        if (c->need_reseed)
                json_object_set_new(req, "reseed", json_true());
        struct exec_outcome o;
        int r = kproc_run(c->kp, req, &lim, &o);
        json_decref(req);
        if (r < 0) {
                exec_outcome_done(&o);
                context_drop_interpreter(m, c);
                return fail(err, 502, "INTERNAL_ERROR", NULL, "Engine execution failed: %s", strerror(-r));
        }
        c->need_reseed = false;
        double snapshot_ms = -1;
        if (o.died || o.limit != EXEC_LIMIT_NONE) {
                /* The interpreter is gone (or was killed for a limit): the
                 * next call restores the state as of the last journaled cell,
                 * i.e. as before this failed run. */
                context_drop_interpreter(m, c);
        } else {
                update_cwd(c, o.response);
                journal_cell(m, c, code, env, cwd_before, ts, &snapshot_ms);
        }
        c->row.executions++;
        c->row.last_used = wall_ms();
        store_context_update(m->store, &c->row);
        json_t *res = exec_result_json(c->rt, code, &o, &lim);
        exec_outcome_done(&o);
        if (!res)
                return fail(err, 500, "INTERNAL_ERROR", NULL, "Cannot encode the result");
        json_t *ctx = json_pack("{s:s, s:s, s:I}", "id", c->row.id, "cwd", c->row.cwd, "executions",
                                (json_int_t)c->row.executions);
        if (snapshot_ms >= 0)
                json_object_set_new(ctx, "snapshotMs", json_real(snapshot_ms));
        if (c->sbx->row.expires_at)
                json_object_set_new(ctx, "expiresAt", json_integer((json_int_t)c->sbx->row.expires_at));
        json_object_set_new(res, "executionCount", json_integer((json_int_t)c->row.executions));
        json_object_set_new(res, "context", ctx);
        return res;
}

json_t *sbx_execute(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                    const char *code, const char *context_id, json_t *call_env, struct sbx_error *err)
{
        struct sandbox *s = sandbox_get(m, id, err);
        if (!s)
                return NULL;
        pthread_mutex_lock(&s->lock);
        sandbox_touch(m, s);
        struct context *c = resolve_context(m, s, rt, binding, context_id, err);
        json_t *env = NULL;
        int r = c ? workspace_open(&s->ws, m->cfg->workspace_bytes, m->cfg->workspace_inodes) : 0;
        if (c && r == 0) {
                c->refs++;
                env = effective_env(s, c, call_env);
        }
        pthread_mutex_unlock(&s->lock);
        json_t *res = NULL;
        if (r < 0) {
                fail(err, 500, "INTERNAL_ERROR", NULL, "Cannot open the workspace: %s", strerror(-r));
        } else if (c) {
                if (!c->rt) {
                        fail(err, 400, "VALIDATION_FAILED", NULL, "Context language '%s' is not available",
                             c->row.language);
                } else {
                        pthread_mutex_lock(&c->run_lock);
                        res = c->deleted ? fail(err, 404, "CONTEXT_NOT_FOUND",
                                                json_pack("{s:s}", "contextId", c->row.id), "Context was deleted")
                                         : run_cell(m, c, code, env, err);
                        pthread_mutex_unlock(&c->run_lock);
                }
                pthread_mutex_lock(&s->lock);
                bool free_it = --c->refs == 0 && c->deleted && !find_context(s, c->row.id);
                pthread_mutex_unlock(&s->lock);
                if (free_it)
                        context_free(m, c);
        }
        json_decref(env);
        sandbox_put(m, s);
        return res;
}

json_t *sbx_files(struct sandbox_mgr *m UNUSED, const char *id UNUSED, json_t *request UNUSED,
                  struct sbx_error *err)
{
        /* Unused: /files is served by api/workers/files.c on the typed
         * operations of sandbox/files.h (to be deleted with sbx_error). */
        return fail(err, 500, "INTERNAL_ERROR", NULL, "Not implemented here");
}

int sbx_workspace_acquire(struct sandbox_mgr *m, const char *id, struct sbx_workspace *ret, struct err *err)
{
        struct sbx_error legacy = { 0 };
        memset(ret, 0, sizeof(*ret));
        ret->root_fd = -1;
        struct sandbox *s = sandbox_get(m, id, &legacy);
        if (!s) {
                int r = err_set(err, legacy.status == 400 ? ERR_INVALID : ERR_INTERNAL, 0, "%s", legacy.message);
                if (legacy.status == 400)
                        err_detail(err, "id", id, (size_t)-1);
                sbx_error_done(&legacy);
                return r;
        }
        pthread_mutex_lock(&s->lock);
        sandbox_touch(m, s);
        int r = workspace_open(&s->ws, m->cfg->workspace_bytes, m->cfg->workspace_inodes);
        int fd = r == 0 ? open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd < 0) {
                int e = r < 0 ? -r : errno;
                pthread_mutex_unlock(&s->lock);
                sandbox_put(m, s);
                return err_set(err, ERR_INTERNAL, e, "Cannot open the workspace: %s", strerror(e));
        }
        *ret = (struct sbx_workspace){
                .root_fd = fd,
                .limits = { m->cfg->file_bytes, m->cfg->workspace_bytes, m->cfg->workspace_inodes },
                .created_at = s->row.created_at,
                .uid = JAIL_UID,
                .gid = JAIL_GID,
                .sbx = s,
        };
        return 0;
}

void sbx_workspace_release(struct sandbox_mgr *m, struct sbx_workspace *ws)
{
        struct sandbox *s = ws->sbx;
        if (!s)
                return;
        if (ws->root_fd >= 0)
                close(ws->root_fd);
        ws->root_fd = -1;
        ws->sbx = NULL;
        pthread_mutex_unlock(&s->lock);
        sandbox_put(m, s);
}

size_t sbx_resident_count(struct sandbox_mgr *m)
{
        pthread_mutex_lock(&m->lock);
        size_t n = m->resident;
        pthread_mutex_unlock(&m->lock);
        return n;
}

/* ---- idle expiry ---- */

struct expired_ids {
        char (*ids)[STORE_ID_MAX];
        size_t n, cap;
};

static void collect_expired(const char *id, void *userdata)
{
        struct expired_ids *e = userdata;
        if (e->n == e->cap) {
                size_t cap = e->cap ? e->cap * 2 : 16;
                void *n = realloc(e->ids, cap * sizeof(*e->ids));
                if (!n)
                        return;
                e->ids = n;
                e->cap = cap;
        }
        snprintf(e->ids[e->n++], STORE_ID_MAX, "%s", id);
}

void sbx_reap_expired(struct sandbox_mgr *m)
{
        struct expired_ids e = { 0 };
        store_sandbox_each_expired(m->store, wall_ms(), collect_expired, &e);
        for (size_t i = 0; i < e.n; i++) {
                struct sbx_error err = { 0 };
                /* Look up without touching: re-check the deadline under the
                 * lock, since a request may have just renewed it. */
                struct sandbox *s = sandbox_get(m, e.ids[i], &err);
                sbx_error_done(&err);
                if (!s)
                        continue;
                pthread_mutex_lock(&s->lock);
                bool expired = s->row.expires_at && s->row.expires_at <= wall_ms();
                pthread_mutex_unlock(&s->lock);
                if (expired) {
                        log_info("msg=\"sandbox expired\" sandbox=%s", e.ids[i]);
                        sandbox_wipe(m, s);
                }
                sandbox_put(m, s);
        }
        free(e.ids);
}

static void *reaper_main(void *arg)
{
        struct sandbox_mgr *m = arg;
        uint64_t period = m->cfg->idle_ttl_ms / 10;
        if (period < 100)
                period = 100;
        if (period > 60000)
                period = 60000;
        pthread_mutex_lock(&m->lock);
        while (!m->stopping) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t ns = (uint64_t)ts.tv_nsec + period * 1000000ULL;
                ts.tv_sec += (time_t)(ns / 1000000000ULL);
                ts.tv_nsec = (long)(ns % 1000000000ULL);
                pthread_cond_timedwait(&m->reaper_cond, &m->lock, &ts);
                if (m->stopping)
                        break;
                pthread_mutex_unlock(&m->lock);
                sbx_reap_expired(m);
                pthread_mutex_lock(&m->lock);
        }
        pthread_mutex_unlock(&m->lock);
        return NULL;
}

int sbx_mgr_new(const struct config *cfg, struct engine *engine, struct store *store, struct sandbox_mgr **ret)
{
        struct sandbox_mgr *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->cfg = cfg;
        m->engine = engine;
        m->store = store;
        pthread_mutex_init(&m->lock, NULL);
        pthread_cond_init(&m->reaper_cond, NULL);
        int r = store_org_ensure(store, SBX_DEFAULT_ORG, "Default organisation");
        if (r < 0) {
                sbx_mgr_free(m);
                return r;
        }
        workspace_cleanup_stale(cfg->data_dir);
        if (cfg->idle_ttl_ms && pthread_create(&m->reaper, NULL, reaper_main, m) == 0)
                m->reaper_started = true;
        *ret = m;
        return 0;
}

void sbx_mgr_free(struct sandbox_mgr *m)
{
        if (!m)
                return;
        pthread_mutex_lock(&m->lock);
        m->stopping = true;
        pthread_cond_broadcast(&m->reaper_cond);
        pthread_mutex_unlock(&m->lock);
        if (m->reaper_started)
                pthread_join(m->reaper, NULL);
        for (size_t i = 0; i < HASH_BUCKETS; i++) {
                while (m->buckets[i]) {
                        struct sandbox *s = m->buckets[i];
                        m->buckets[i] = s->hnext;
                        sandbox_free(m, s);
                }
        }
        pthread_cond_destroy(&m->reaper_cond);
        pthread_mutex_destroy(&m->lock);
        free(m);
}
