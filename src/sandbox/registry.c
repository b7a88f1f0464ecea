/* The sandbox registry: ids, loading from the store, references, activity
 * and idle expiry, destruction (info.c has a loaded sandbox's info, env and
 * the workspace handed to the files operations). */
#include "sandbox/egress/egress.h"
#include "sandbox/internal.h"
#include "sandbox/replica.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/log.h"
#include "base/thread.h"
#include "base/util.h"
#include "engine/kproc.h"
#include "jail/jail.h"

static const char *const reserved_ids[] = { "www", "api", "admin", "root", "system", "cloudflare", "workers" };

bool sbx_id_valid(const char *id)
{
        size_t n = strlen(id);
        if (n == 0 || n > 128 || id[0] == '-' || id[n - 1] == '-' || strspn(id, ".") == n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
                        return false;
        for (size_t i = 0; i < ARRAY_SIZE(reserved_ids); i++)
                if (strcasecmp(id, reserved_ids[i]) == 0)
                        return false;
        return true;
}

static unsigned hash_id(const char *s)
{
        uint32_t h = 2166136261u;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h % SBX_HASH_BUCKETS;
}

json_t *env_parse(const char *text)
{
        json_t *env = text ? json_loads(text, 0, NULL) : NULL;
        if (!json_is_object(env)) {
                json_decref(env);
                env = json_object();
        }
        return env;
}

void env_merge(json_t *base, json_t *delta)
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

/* ---- loading ---- */

void sandbox_free(struct sandbox_mgr *m, struct sandbox *s)
{
        warm_runtime_drop(m, s);
        sessions_free(s);
        spare_drop(m, s);
        while (s->contexts) {
                struct context *c = s->contexts;
                s->contexts = c->next;
                context_free(m, c);
        }
        mounts_drop_all(s);
        sandbox_jails_forget(s);
        workspace_close(&s->ws);
        egress_detach(s->egress);
        if (s->netns_fd >= 0)
                close(s->netns_fd);
        kproc_group_unref(s->cgroup); /* its directory goes with the last interpreter */
        json_decref(s->env);
        sandbox_row_done(&s->row);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->mount_lock);
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
        struct context *c = context_from_row(lc->m, lc->sbx, row);
        if (!c) {
                lc->r = -ENOMEM;
                return;
        }
        *lc->tail = c;
        lc->tail = &c->next;
}

const char *sandbox_opts_org(const struct sbx_create_options *opts)
{
        return opts && opts->org_id ? opts->org_id : SBX_DEFAULT_ORG;
}

uint64_t sandbox_expiry_for(const struct sandbox_options *opt, uint64_t now)
{
        return opt->idle_ttl_ms ? now + opt->idle_ttl_ms : 0;
}

int sandbox_tenant_usage(struct sandbox_mgr *m, uint64_t *ret_n, uint64_t *ret_reserved)
{
        uint64_t n = 0, reserved = 0;
        int r;
        /* In cluster mode the caps are this node's: its own disk, its own
         * sandboxes (the warm ones subtracted below are its own too). */
        if (m->opt.node_id[0])
                r = store_sandbox_usage_on_node(m->store, m->opt.node_id, m->opt.workspace_bytes, &n, &reserved);
        else if ((r = store_sandbox_count(m->store, &n)) == 0)
                r = store_sandbox_disk_reserved(m->store, m->opt.workspace_bytes, &reserved);
        if (r < 0)
                return r;
        *ret_n = n > m->pool_rows ? n - m->pool_rows : 0;
        *ret_reserved = reserved > m->pool_reserved ? reserved - m->pool_reserved : 0;
        return 0;
}

/* The service-wide caps, checked before anything of a new sandbox exists.
 * Disk is counted as reserved: each sandbox may fill its whole image
 * (its own quota, or limits.workspace_bytes), so the images never need more
 * than the sum of the quotas. Only tenants' sandboxes count: the warm pool
 * yields its place instead (pool_yield). */
int sandbox_check_caps(struct sandbox_mgr *m, uint64_t quota, struct err *err)
{
        uint64_t n = 0, reserved = 0;
        int r = sandbox_tenant_usage(m, &n, &reserved);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot count sandboxes: %s", strerror(-r));
        if (n >= m->opt.max_sandboxes) {
                r = err_set(err, ERR_QUOTA, EUSERS, "Sandbox limit reached (%llu sandboxes)",
                            (unsigned long long)m->opt.max_sandboxes);
                err_detail_u64(err, "maxSandboxes", m->opt.max_sandboxes);
        } else if (reserved + quota > m->opt.max_disk_bytes) {
                r = err_set(err, ERR_STORAGE, ENOSPC, "Workspace storage exhausted (%llu bytes for all sandboxes)",
                            (unsigned long long)m->opt.max_disk_bytes);
                err_detail_u64(err, "maxDiskBytes", m->opt.max_disk_bytes);
        }
        if (r < 0)
                err->op = "sandbox.create";
        return r;
}

/* A new row: a tenant's (caps checked, idle expiry armed) or, with warm, the
 * pool's (no tenant cap: the pool keeps itself within them; never
 * expires). Caller holds m->lock. */
static int sandbox_create_row(struct sandbox_mgr *m, struct sandbox *s, const char *id,
                              const struct sbx_create_options *opts, bool warm, struct err *err)
{
        if (opts) {
                s->row.workspace_bytes = opts->workspace_bytes;
                s->row.workspace_inodes = opts->workspace_inodes;
                s->row.file_bytes = opts->file_bytes;
                s->row.cpu_millis = opts->cpu_millis;
                s->row.memory_bytes = opts->memory_bytes;
                if (warm && opts->warm_class)
                        snprintf(s->row.warm_class, sizeof(s->row.warm_class), "%s", opts->warm_class);
        }
        int r = warm ? 0 : sandbox_check_caps(m, sandbox_workspace_bytes(m, s), err);
        if (r < 0)
                return r;
        if (!warm && m->pool_rows)
                pool_yield(m);
        uint64_t now = wall_ms();
        snprintf(s->row.id, sizeof(s->row.id), "%s", id);
        snprintf(s->row.org_id, sizeof(s->row.org_id), "%s", warm ? SBX_POOL_ORG : sandbox_opts_org(opts));
        snprintf(s->row.node_id, sizeof(s->row.node_id), "%s", m->opt.node_id);
        s->row.created_at = s->row.last_used = now;
        s->row.expires_at = warm ? 0 : sandbox_expiry_for(&m->opt, now);
        if (!warm && opts && opts->lifetime_ms) {
                s->row.expires_at = now + opts->lifetime_ms;
                s->row.expiry_fixed = true;
        }
        s->row.env_json = opts && opts->env ? json_dumps(opts->env, JSON_COMPACT) : strdup("{}");
        if (!s->row.env_json)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        /* A sandbox id reused after destroy/expiry starts empty. */
        workspace_destroy(&s->ws);
        r = store_sandbox_put(m->store, &s->row);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot store sandbox: %s", strerror(-r));
        if (warm) {
                m->pool_rows++;
                m->class_rows += s->row.warm_class[0] ? 1 : 0;
                m->pool_reserved += sandbox_workspace_bytes(m, s);
        } else {
                sandbox_emit(m, s, "sandbox.created", NULL);
        }
        return 0;
}

/* Loads id from the store, or creates it (a warm one with warm) when it
 * has no row and create is true (else ERR_NOT_FOUND). */
static int sandbox_load(struct sandbox_mgr *m, const char *id, bool create, const struct sbx_create_options *opts,
                        bool warm,
                        bool *ret_created, struct sandbox **ret, struct err *err)
{
        struct sandbox *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->mount_lock, NULL);
        s->netns_fd = -1;
        workspace_init(&s->ws, m->opt.data_dir, id);
        s->ws.pool = m->ws_pool;
        int r = store_sandbox_get(m->store, id, &s->row);
        if (r == -ENOENT && !create)
                sandbox_not_found(id, err);
        else if (r == -ENOENT) {
                r = sandbox_create_row(m, s, id, opts, warm, err);
                if (r == 0 && ret_created)
                        *ret_created = true;
        }
        else if (r < 0)
                err_set(err, ERR_INTERNAL, -r, "Cannot load sandbox: %s", strerror(-r));
        else
                r = sandbox_check_owner(m, &s->row, err);
        /* No id left (store_sandbox_free_host_id: -ENOSPC) is a quota. */
        if (r == 0 && (r = sandbox_assign_host_id(m, s)) < 0)
                err_set(err, r == -ENOSPC ? ERR_QUOTA : ERR_INTERNAL, -r, "Cannot give the sandbox a host id: %s",
                        strerror(-r));
        if (r < 0) {
                sandbox_free(m, s);
                return r;
        }
        s->warm = strcmp(s->row.org_id, SBX_POOL_ORG) == 0;
        s->saved_last_used = s->row.last_used;
        s->env = env_parse(s->row.env_json);
        struct load_ctx lc = { m, s, &s->contexts, 0 };
        r = store_context_each(m->store, id, load_context_row, &lc);
        if (r < 0 || lc.r < 0) {
                sandbox_free(m, s);
                r = r < 0 ? r : lc.r;
                return err_set(err, ERR_INTERNAL, -r, "Cannot load sandbox: %s", strerror(-r));
        }
        *ret = s;
        return 0;
}

static bool sandbox_exists(struct sandbox_mgr *m, const char *id);
static void sandbox_unhash(struct sandbox_mgr *m, struct sandbox *s);

/* The loaded sandbox id, or NULL; caller holds m->lock. */
static struct sandbox *hash_find(struct sandbox_mgr *m, const char *id)
{
        struct sandbox *s = m->buckets[hash_id(id)];
        while (s && strcmp(s->row.id, id) != 0)
                s = s->hnext;
        return s;
}

int sandbox_rekey_hash(struct sandbox_mgr *m, struct sandbox *s, const char *id)
{
        _cleanup_(sandbox_row_done) struct sandbox_row row = { 0 };
        if (hash_find(m, id) || store_sandbox_get(m->store, id, &row) != -ENOENT)
                return -EEXIST;
        sandbox_unhash(m, s);
        s->deleted = false;
        snprintf(s->row.id, sizeof(s->row.id), "%s", id);
        unsigned h = hash_id(id);
        s->hnext = m->buckets[h];
        m->buckets[h] = s;
        return 0;
}

/* ---- references ---- */

uint64_t sandbox_workspace_bytes(const struct sandbox_mgr *m, const struct sandbox *s)
{
        return s->row.workspace_bytes ? s->row.workspace_bytes : m->opt.workspace_bytes;
}

uint64_t sandbox_workspace_inodes(const struct sandbox_mgr *m, const struct sandbox *s)
{
        return s->row.workspace_inodes ? s->row.workspace_inodes : m->opt.workspace_inodes;
}

uint64_t sandbox_file_bytes(const struct sandbox_mgr *m, const struct sandbox *s)
{
        return s->row.file_bytes ? s->row.file_bytes : m->opt.file_bytes;
}

struct sandbox *sandbox_get(struct sandbox_mgr *m, const char *id, struct err *err)
{
        return sandbox_get_opts(m, id, NULL, NULL, err);
}

struct sandbox *sandbox_get_opts(struct sandbox_mgr *m, const char *id, const struct sbx_create_options *opts,
                                 bool *ret_created, struct err *err)
{
        return sandbox_lookup(m, id, 0, opts, ret_created, err);
}

/* Whether a caller with flags may have s (caller holds m->lock). */
static int lookup_allowed(const struct sandbox *s, unsigned flags, struct err *err)
{
        bool want_warm = flags & SANDBOX_GET_WARM;
        if (s->warm == want_warm)
                return 0;
        /* A warm sandbox does not exist for tenants; a tenant's is never
         * taken back by the pool. */
        return want_warm ? err_set(err, ERR_EXISTS, EEXIST, "Sandbox %s belongs to a tenant", s->row.id)
                         : err_set(err, ERR_NOT_FOUND, ENOENT, "Sandbox not found: %s", s->row.id);
}

struct sandbox *sandbox_lookup(struct sandbox_mgr *m, const char *id, unsigned flags,
                               const struct sbx_create_options *opts, bool *ret_created, struct err *err)
{
        if (ret_created)
                *ret_created = false;
        if (!sbx_id_valid(id)) {
                err_set(err, ERR_INVALID, 0, "Invalid sandbox id: %s", id);
                err_detail(err, "id", id, (size_t)-1);
                return NULL;
        }
        unsigned h = hash_id(id);
        pthread_mutex_lock(&m->lock);
        struct sandbox *s = hash_find(m, id);
        if (!s) {
                /* Loading under the manager lock keeps two first requests for
                 * one id from creating it twice; it is a few store reads. */
                int r = sandbox_load(m, id, !(flags & SANDBOX_GET_EXISTING), opts, flags & SANDBOX_GET_WARM,
                                     ret_created, &s, err);
                if (r < 0) {
                        pthread_mutex_unlock(&m->lock);
                        err_detail(err, "id", id, (size_t)-1);
                        return NULL;
                }
                s->hnext = m->buckets[h];
                m->buckets[h] = s;
        }
        if (lookup_allowed(s, flags, err) < 0) {
                pthread_mutex_unlock(&m->lock);
                err_detail(err, "id", id, (size_t)-1);
                return NULL;
        }
        /* Another org's sandbox is not there for this caller (a warm one
         * belongs to the pool's org). */
        if (!(flags & SANDBOX_GET_WARM) && strcmp(s->row.org_id, sandbox_opts_org(opts)) != 0) {
                pthread_mutex_unlock(&m->lock);
                sandbox_not_found(id, err);
                return NULL;
        }
        s->refs++;
        pthread_mutex_unlock(&m->lock);
        return s;
}

void sandbox_not_found(const char *id, struct err *err)
{
        err_set(err, ERR_NOT_FOUND, ENOENT, "Sandbox not found: %s", id);
        err_detail(err, "id", id, (size_t)-1);
}

/* Whether s is past a deadline activity does not move (the reaper is
 * about to take it). Caller holds m->lock or s->lock. */
static bool sandbox_past_deadline(const struct sandbox *s)
{
        return s->row.expiry_fixed && s->row.expires_at && s->row.expires_at <= wall_ms();
}

struct sandbox *sandbox_get_existing(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err)
{
        if (!sbx_id_valid(id) || !sandbox_exists(m, id)) {
                sandbox_not_found(id, err);
                return NULL;
        }
        unsigned h = hash_id(id);
        pthread_mutex_lock(&m->lock);
        struct sandbox *s = hash_find(m, id);
        bool failed = false; /* err says why (a store failure is no 404) */
        if (!s && !(failed = sandbox_load(m, id, false, NULL, false, NULL, &s, err) < 0)) {
                s->hnext = m->buckets[h];
                m->buckets[h] = s;
        }
        if (s && org_id && (strcmp(s->row.org_id, org_id) != 0 || sandbox_past_deadline(s)))
                s = NULL;
        if (s)
                s->refs++;
        pthread_mutex_unlock(&m->lock);
        if (!s && !failed)
                sandbox_not_found(id, err);
        return s;
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

/* The last reference of a sandbox with nothing live unloads it: an idle
 * sandbox costs no memory, and its next request loads it from the store
 * (a few reads) exactly as a daemon restart would. */
void sandbox_put(struct sandbox_mgr *m, struct sandbox *s)
{
        pthread_mutex_lock(&m->lock);
        bool last = --s->refs == 0 && s->deleted;
        bool unload = !last && s->refs == 0 && !s->deleted && sandbox_nothing_live(m, s) &&
                      sandbox_last_used_saved(s);
        if (unload)
                sandbox_unhash(m, s);
        pthread_mutex_unlock(&m->lock);
        if (last || unload)
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
        if (s->row.expiry_fixed)
                return;
        uint64_t want = sandbox_expiry_for(&m->opt, now);
        if (want == 0 || s->row.expires_at == 0 || want - s->row.expires_at > m->opt.idle_ttl_ms / 10) {
                s->row.expires_at = want;
                if (store_sandbox_touch(m->store, s->row.id, now, want) == 0)
                        s->saved_last_used = now;
        }
}

static struct sandbox *enter(struct sandbox_mgr *m, const char *id, bool take_warm, struct err *err)
{
        /* A new sandbox with the defaults: a warm one becomes it. */
        if (take_warm && m->opt.warm_runtime && sbx_id_valid(id) && !sandbox_exists(m, id))
                warm_runtime_take(m, id);
        struct sandbox *s = sandbox_get(m, id, err);
        if (!s)
                return NULL;
        pthread_mutex_lock(&s->lock);
        sandbox_touch(m, s);
        return s;
}

struct sandbox *sandbox_enter(struct sandbox_mgr *m, const char *id, struct err *err)
{
        return enter(m, id, true, err);
}

struct sandbox *sandbox_enter_cold(struct sandbox_mgr *m, const char *id, struct err *err)
{
        return enter(m, id, false, err);
}

struct sandbox *sandbox_enter_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err)
{
        if (!org_id)
                return sandbox_enter(m, id, err);
        struct sandbox *s = sandbox_get_existing(m, org_id, id, err);
        if (!s)
                return NULL;
        pthread_mutex_lock(&s->lock);
        sandbox_touch(m, s);
        return s;
}

void sandbox_leave(struct sandbox_mgr *m, struct sandbox *s)
{
        pthread_mutex_unlock(&s->lock);
        sandbox_put(m, s);
}

struct sandbox *sandbox_ref_loaded(struct sandbox_mgr *m, const char *id)
{
        pthread_mutex_lock(&m->lock);
        struct sandbox *s = hash_find(m, id);
        if (s)
                s->refs++;
        pthread_mutex_unlock(&m->lock);
        return s;
}

void sandbox_touch_loaded(struct sandbox_mgr *m, const char *id)
{
        struct sandbox *s = sandbox_ref_loaded(m, id);
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        if (!s->deleted)
                sandbox_touch(m, s);
        pthread_mutex_unlock(&s->lock);
        sandbox_put(m, s);
}

void sandbox_netns(struct sandbox_mgr *m, struct sandbox *s)
{
        if (s->netns_fd >= 0)
                return sandbox_egress_attach(m, s);
        int fd = engine_netns_take(m->engine);
        if (fd < 0)
                return;
        /* Its loopback up, once: its commands' servers listen there (lo is
         * the namespace's only interface, so nothing routes out). */
        int r = engine_netns_loopback_up(fd);
        if (r < 0)
                log_warn("sandbox=%s msg=\"cannot bring the loopback up\" err=\"%s\"", s->row.id, strerror(-r));
        s->netns_fd = fd;
        sandbox_egress_attach(m, s);
}

int sandbox_cgroup(struct sandbox_mgr *m, struct sandbox *s)
{
        if (s->cgroup)
                return 0;
        /* cpu_millis is thousandths of a CPU, the quota tenths of those. */
        uint64_t pct = (s->row.cpu_millis + 9) / 10;
        const struct kproc_group_limits own = { .memory_bytes = s->row.memory_bytes,
                                                .cpu_quota_percent = pct > UINT32_MAX ? UINT32_MAX : (uint32_t)pct };
        int r = kproc_group_new(m->engine, &own, &s->cgroup);
        if (r < 0)
                log_warn("msg=\"no sandbox cgroup, its interpreters are limited one by one\" sandbox=%s err=\"%s\"",
                         s->row.id, strerror(-r));
        return r;
}

int sandbox_open_workspace(struct sandbox_mgr *m, struct sandbox *s, struct err *err)
{
        /* Ownership is settled once per mount, not on every request. */
        bool was_open = s->ws.mounted;
        int r = workspace_open(&s->ws, sandbox_workspace_bytes(m, s), sandbox_workspace_inodes(m, s));
        if (r == 0 && !was_open)
                r = sandbox_workspace_own(s);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot open the workspace: %s", strerror(-r));
        return 0;
}

/* ---- destruction ---- */

/* Every interpreter killed and the local workspace gone; with delete_row
 * its rows too (a destroy), without (sandbox_release: another node of a
 * cluster owns it now and keeps them). */
static int sandbox_teardown(struct sandbox_mgr *m, struct sandbox *s, bool delete_row)
{
        pthread_mutex_lock(&m->lock);
        int r = 0;
        bool warm_row_gone = false;
        if (s->warm && !s->deleted) {
                pool_forget(m, s); /* once, however many times it is wiped */
                /* Its row in the same step: between the two, the tenants'
                 * count (stored rows minus the pool's) would take it for a
                 * tenant's and refuse a tenant's create at the cap. */
                if (delete_row) {
                        r = store_sandbox_delete(m->store, s->row.id);
                        warm_row_gone = true;
                }
        }
        bool tenant_gone = delete_row && !s->warm && !s->deleted, warm = s->warm;
        sandbox_unhash(m, s);
        pthread_mutex_unlock(&m->lock);
        if (tenant_gone)
                sandbox_emit_gone(m, s);
        tunnels_drop(m, s->row.id);
        terminals_kill(m, s->row.id);
        pthread_mutex_lock(&s->lock);
        for (struct context *c = s->contexts; c; c = c->next) {
                c->deleted = true;
                if (c->kp)
                        kproc_kill(c->kp);
        }
        sessions_kill(s);
        sandbox_jails_kill(s);
        mounts_drop_all(s);
        /* A tenant's files before its row: while the row exists the id is
         * taken, so a sandbox made anew under it (a warm one moved there
         * above all) never has its fresh mount removed by this destroy. A
         * warm one's id is never reused, and its row goes first: it left
         * the pool's counts above, and until the row goes the tenants'
         * count would include it. */
        if (delete_row && warm && !warm_row_gone)
                r = store_sandbox_delete(m->store, s->row.id);
        /* After a warm one's row (it no longer counts as the pool's and
         * must leave the tenants' count at once), before the workspace
         * goes: the spare's jail holds the workspace. */
        spare_drop(m, s);
        int k = workspace_destroy(&s->ws);
        if (delete_row && !warm)
                r = store_sandbox_delete(m->store, s->row.id);
        if (tenant_gone) /* a warm one never had a replica */
                replica_forget(m, s->row.id);
        pthread_mutex_unlock(&s->lock);
        return r < 0 ? r : k;
}

/* Destroys a sandbox: every interpreter killed, workspace and rows gone.
 * Executions still running in it fail as their interpreter dies. */
int sandbox_wipe(struct sandbox_mgr *m, struct sandbox *s)
{
        return sandbox_teardown(m, s, true);
}

int sandbox_release(struct sandbox_mgr *m, struct sandbox *s)
{
        return sandbox_teardown(m, s, false);
}

/* The ids of the sandboxes loaded here (not the stored ones). */
void sandbox_loaded_ids(struct sandbox_mgr *m, struct id_list *ret)
{
        pthread_mutex_lock(&m->lock);
        for (size_t h = 0; h < SBX_HASH_BUCKETS; h++)
                for (struct sandbox *s = m->buckets[h]; s; s = s->hnext)
                        id_list_add(s->row.id, ret);
        pthread_mutex_unlock(&m->lock);
}

/* Whether id names a tenant's sandbox that exists (loaded or stored),
 * without creating it: destroying an unknown id must not count against the
 * caps, and a warm one does not exist for tenants. */
static bool sandbox_exists(struct sandbox_mgr *m, const char *id)
{
        pthread_mutex_lock(&m->lock);
        struct sandbox *s = hash_find(m, id);
        bool warm = s && s->warm;
        pthread_mutex_unlock(&m->lock);
        if (s)
                return !warm;
        _cleanup_(sandbox_row_done) struct sandbox_row row = { 0 };
        return store_sandbox_get(m->store, id, &row) != -ENOENT && strcmp(row.org_id, SBX_POOL_ORG) != 0;
}

int sbx_create(struct sandbox_mgr *m, const char *id, const struct sbx_create_options *opts, bool *ret_created,
               struct err *err)
{
        bool created = false;
        struct sandbox *s = sandbox_get_opts(m, id, opts, &created, err);
        if (ret_created)
                *ret_created = created;
        if (!s)
                return err_ret(err);
        pthread_mutex_lock(&s->lock);
        sandbox_touch(m, s);
        /* Limits of its own are real at once, or there is no sandbox. */
        int r = s->row.cpu_millis || s->row.memory_bytes ? sandbox_cgroup(m, s) : 0;
        pthread_mutex_unlock(&s->lock);
        if (r < 0 && created)
                sandbox_wipe(m, s);
        sandbox_put(m, s);
        if (r < 0)
                return err_set(err, ERR_UNAVAILABLE, -r, "Cannot enforce the sandbox's CPU and memory limits: %s",
                               strerror(-r));
        return 0;
}

int sbx_destroy(struct sandbox_mgr *m, const char *id, struct err *err)
{
        if (sbx_id_valid(id) && !sandbox_exists(m, id))
                return 0; /* nothing to destroy: the answer is the same */
        struct sandbox *s = sandbox_get(m, id, err);
        if (!s && err->reason == ERR_NOT_FOUND) {
                err_done(err); /* another org's: as if there were none */
                return 0;
        }
        if (!s)
                return err_ret(err);
        int r = sandbox_wipe(m, s);
        sandbox_put(m, s);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot destroy sandbox: %s", strerror(-r));
        return 0;
}
