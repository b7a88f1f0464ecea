/* Shared between the files of src/sandbox/ only: the in-memory registry of
 * sandboxes and contexts, and the locks that guard it.
 *
 * Locking order: m->lock (hash, refs, LRU) is never held while taking
 * s->lock; s->lock (a sandbox's rows, env, context list) may be held while
 * taking m->lock; c->run_lock (one execution at a time per context) is taken
 * without s->lock held. */
#pragma once

#include <pthread.h>
#include <sys/stat.h>

#include "base/thread.h"
#include "engine/kproc.h"
#include "jail/jail.h"

#include "sandbox/sandbox.h"
#include "sandbox/workspace.h"

#define SBX_HASH_BUCKETS 4096

struct sandbox;

/* Why a context has no interpreter (what its next restore reports). */
enum context_lost {
        CONTEXT_LOST_RESTART = 0,    /* never resident in this daemon run */
        CONTEXT_LOST_EVICTED,        /* evicted for another sandbox */
        CONTEXT_LOST_EVICTED_OWN,    /* evicted because its sandbox was over its share */
        CONTEXT_LOST_LIMIT,          /* killed by a limit, or died */
        CONTEXT_LOST_INTERRUPT,      /* killed by an interrupt */
};

/* What journal_replay achieved. */
enum replay_verdict {
        REPLAY_OK,
        REPLAY_FAILED,               /* some cell died or hit a limit: stale */
        REPLAY_TOO_LONG,             /* past sandbox.replay_ms: start fresh */
        REPLAY_TOO_BIG,              /* journal past sandbox.journal_bytes: start fresh */
};

struct context {
        struct context_row row;
        const struct runtime *rt;
        struct sandbox *sbx;
        struct kproc *kp;            /* resident interpreter, or NULL */
        bool need_reseed;            /* first run after a restore */
        enum context_lost lost;      /* why kp is NULL */
        struct sbx_restore last_restore;
        const char *stale_reason;    /* why snap_stale was set (this run) */
        bool deleted;
        int refs;                    /* executions holding it (sandbox lock) */
        /* Interrupts (m->lock): a cell is in the kernel; an interrupt came
         * for the cell about to run or running; what it did; cells begun. */
        bool running;
        bool interrupt_pending;
        enum sbx_interrupt interrupted;
        uint64_t cell_seq;
        pthread_mutex_t run_lock;    /* serialises executions */
        int ws_fd;                   /* run_lock: the workspace fd of the execution in progress */
        const struct mount_view *mounts; /* run_lock: its sandbox's mounts, taken with ws_fd */
        struct context *next;        /* sandbox's list, by created_at */
        struct context *lru_prev, *lru_next; /* resident LRU (manager lock) */
};

/* What a sandbox's spare jail (spare.c) was built from: it serves a
 * command only while all of it is still what the command would get. */
struct spare_key {
        dev_t dev;                   /* the workspace mount's root */
        ino_t ino;
        int netns_fd;
        bool local_dns, stdin_pipe, side_channel;
        uid_t host_id;
        const struct kproc_group *group;
        const void *mounts;          /* s->mounts' head, with nbinds */
        size_t nbinds;
        struct exec_limits lim;
};

struct sandbox {
        struct sandbox_row row;
        json_t *env;                 /* {string: string} */
        struct workspace ws;
        struct context *contexts;
        pthread_mutex_t lock;
        int refs;                    /* manager lock */
        size_t resident;             /* its contexts in the LRU (manager lock) */
        int netns_fd;                /* its own network namespace, shared by its jails; -1: none yet */
        struct egress_link *egress;  /* its way out (s->lock), NULL: none (netaccess.c) */
        struct kproc_group *cgroup;  /* its parent cgroup (CPU, memory, pids of all its
                                      * interpreters together); NULL: none yet */
        struct session *sessions;    /* the bridge's shell sessions (s->lock) */
        bool deleted;
        bool warm;                   /* in SBX_POOL_ORG: only the pool may get it (manager lock) */
        struct bucket_mount *mounts; /* its bucket mounts (s->lock) */
        pthread_mutex_t mount_lock;  /* serialises mounts and unmounts; taken before s->lock */
        unsigned mount_seq;          /* names their private directories */
        int *jails;                  /* pidfds of its jails that may still run (s->lock), */
        size_t njails, jails_cap;    /* for mounts made after they started */
        uint64_t saved_last_used;    /* row.last_used as the store has it (s->lock) */
        /* A warm sandbox of the runtime API's (warm_runtime.c): the kernel
         * its first python context adopts, started with warm_lim (s->lock). */
        struct kproc *warm_kp;
        struct exec_limits warm_lim;
        struct proc *spare;          /* a deferred jail for its next command (spare.c; s->lock) */
        struct spare_key spare_key;  /* what it was built from */
        bool spare_stdin_pipe, spare_side_channel; /* the shape its next spare gets */
        struct sandbox *hnext;
};

/* A growable list of sandbox ids. */
struct id_list {
        char (*ids)[STORE_ID_MAX];
        size_t n, cap;
};
/* Appends id (dropped on ENOMEM); a store_sandbox_each_* callback. */
void id_list_add(const char *id, void *list);
void id_list_done(struct id_list *l);

/* Spare jails (spare.c): the sandboxes that want one, made off the
 * request path by one thread; hits and misses for the stats. */
struct sbx_spares {
        struct bg_thread bg;         /* its lock guards want */
        struct id_list want;
        uint64_t hits, misses;       /* atomic */
        uint64_t held;               /* atomic: spares alive now */
};

/* The warm pool (pool.c). */
struct sbx_pool {
        struct bg_thread bg;         /* the refill loop; its lock guards what follows */
        struct id_list ready;        /* prepared, oldest first */
        struct id_list adopt;        /* left by the previous run, not looked at yet */
        bool active;                 /* filling toward the target (false: disabled or paused) */
        bool kick;                   /* look again now (a take, a yield, a prime) */
        uint64_t quiet_until;        /* now_ns(): no refill before, while some are warm */
        uint64_t defer_until;        /* now_ns(): no work at all before (warm_runtime_take) */
};

struct sandbox_mgr {
        struct sandbox_options opt;
        struct engine *engine;
        struct store *store;
        pthread_mutex_t lock;        /* hash, refs, LRU */
        struct sandbox *buckets[SBX_HASH_BUCKETS];
        struct context *lru_head, *lru_tail;
        size_t resident;
        struct bg_thread reaper;     /* idle expiry, every TTL/10 */
        uint64_t pool_rows;          /* manager lock: stored sandboxes of SBX_POOL_ORG */
        uint64_t pool_reserved;      /* manager lock: their workspace quotas together */
        uint64_t class_rows;         /* manager lock: those of them in a warm class (warm_class.c) */
        struct sbx_pool pool;        /* its lock is taken last: never held while taking another */
        pthread_mutex_t tunnel_lock; /* tunnels */
        struct tunnel *tunnels;      /* tunnel.c */
        struct terminals *terminals; /* terminal.c: the live terminals */
        sbx_org_env_fn org_env;      /* orgenv.c; NULL: no org gives env */
        struct egress *egress;       /* netaccess.c; NULL: no sandbox has network */
        void *org_env_userdata;
        sbx_checkpoint_event_fn checkpoint_event; /* checkpoint.c; NULL: none */
        void *checkpoint_event_userdata;
        struct events *events;       /* lifecycle.c; NULL: no event log */
        struct replica_sched *replica; /* replica_sched.c; NULL: no workspace replica */
        struct bg_thread flusher;    /* journal.c: sandbox.journal_sync=group */
        bool journal_dirty;          /* flusher's lock: a lazy commit not flushed yet */
        struct ws_pool *ws_pool;     /* ready workspace images; NULL: none */
        struct sbx_warm_runtime_stats warm_rt; /* manager lock (warm_runtime.c) */
        struct sbx_spares spares;    /* spare.c */
};

/* replica_sched.c (sandbox/replica.h) */
struct replica_sched;
/* A command of id started: id is dirty now, and stays dirty (persisted
 * every delay) until exit_fd (borrowed, duplicated here; readable once the
 * process has exited) says it ended, so its last writes are persisted at
 * most one delay after it ends. No-op without a replica. */
void replica_dirty_command(struct sandbox_mgr *m, const char *id, int exit_fd);
/* id was deleted: its replica files go, its pending persist is dropped. */
void replica_forget(struct sandbox_mgr *m, const char *id);
/* Daemon shutdown: stops the thread, persists every dirty sandbox. */
void replica_sched_stop(struct sandbox_mgr *m);

/* lifecycle.c: events about s (org and sandbox id from its row); data is
 * taken (NULL: {}). Best effort: a failed append is not the caller's. */
void sandbox_emit(struct sandbox_mgr *m, const struct sandbox *s, const char *name, json_t *data);
/* sandbox.stopped {reason} then sandbox.deleted. */
void sandbox_emit_gone(struct sandbox_mgr *m, const struct sandbox *s);
/* resources.limit_warning when o hit a limit, security.violation when it
 * had system calls refused. */
void sandbox_emit_outcome(struct sandbox_mgr *m, const struct sandbox *s, const char *context_id,
                          const struct exec_outcome *o);

/* registry.c */
/* Frees an unreachable sandbox (no references left, unhashed). */
void sandbox_free(struct sandbox_mgr *m, struct sandbox *s);
/* Looks up (loading or creating) a sandbox and takes a reference; one it
 * creates gets opts' limits (NULL: the defaults). A warm one is "not
 * found" (ERR_NOT_FOUND) unless flags has SANDBOX_GET_WARM; with it, a
 * missing sandbox is created warm and a tenant's is refused (ERR_EXISTS).
 * SANDBOX_GET_EXISTING: a missing one is ERR_NOT_FOUND, never created. */
#define SANDBOX_GET_WARM 1u
#define SANDBOX_GET_EXISTING 2u
struct sandbox *sandbox_lookup(struct sandbox_mgr *m, const char *id, unsigned flags,
                               const struct sbx_create_options *opts, bool *ret_created, struct err *err);
/* A tenant's sandbox (sandbox_lookup without flags). */
struct sandbox *sandbox_get(struct sandbox_mgr *m, const char *id, struct err *err);
/* The same; a sandbox it creates gets opts' limits (NULL: the defaults).
 * A sandbox of another org than opts' is ERR_NOT_FOUND. */
struct sandbox *sandbox_get_opts(struct sandbox_mgr *m, const char *id, const struct sbx_create_options *opts,
                                 bool *ret_created, struct err *err);
/* An existing sandbox of org_id (NULL: of any org; else not past a fixed
 * deadline), never created; NULL with ERR_NOT_FOUND. */
struct sandbox *sandbox_get_existing(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err);
void sandbox_not_found(const char *id, struct err *err);
/* opts' org: SBX_DEFAULT_ORG when opts or its org_id is NULL. */
const char *sandbox_opts_org(const struct sbx_create_options *opts);
/* s's effective limits: its own, else the service's. */
uint64_t sandbox_workspace_bytes(const struct sandbox_mgr *m, const struct sandbox *s);
uint64_t sandbox_workspace_inodes(const struct sandbox_mgr *m, const struct sandbox *s);
uint64_t sandbox_file_bytes(const struct sandbox_mgr *m, const struct sandbox *s);
void sandbox_put(struct sandbox_mgr *m, struct sandbox *s);
/* Destroys s: interpreters killed, workspace and rows gone (s stays
 * referenced by the caller). 0 or -errno. */
int sandbox_wipe(struct sandbox_mgr *m, struct sandbox *s);
/* The same without deleting its rows or emitting an event: another node
 * of a cluster took it over (lease.c's fencing). */
int sandbox_release(struct sandbox_mgr *m, struct sandbox *s);
/* Appends the id of every sandbox loaded here to ret. */
void sandbox_loaded_ids(struct sandbox_mgr *m, struct id_list *ret);
/* lease.c: in cluster mode (opt.node_id set) drops from l every id whose
 * stored row names another node, so the store sweeps (expiry, warm pool
 * adoption, warm classes) touch only this node's sandboxes; else nothing. */
void ids_keep_owned(struct sandbox_mgr *m, struct id_list *l);
/* lease.c: 0 when this node may load row's sandbox (cluster mode off, the
 * row names this node or nobody); else -EREMOTE with err ERR_BUSY naming
 * the owner: whatever path reached the sandbox layer without being routed
 * to the owner gets a clear "retry" instead of a second live copy. */
int sandbox_check_owner(struct sandbox_mgr *m, const struct sandbox_row *row, struct err *err);
/* sandbox_get + lock + activity; NULL with err filled. A new id takes a
 * warm sandbox (sandbox.warm_runtime) when one is ready. */
struct sandbox *sandbox_enter(struct sandbox_mgr *m, const char *id, struct err *err);
/* The same, but a new id never takes a warm sandbox: for calls that only
 * read (an info GET). An idle sandbox that nothing ran in must hold no
 * interpreter, no mount and no workspace image: only its rows. */
struct sandbox *sandbox_enter_cold(struct sandbox_mgr *m, const char *id, struct err *err);
/* The same for org_id's existing sandbox (NULL: sandbox_enter). */
struct sandbox *sandbox_enter_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err);
/* unlock + sandbox_put. */
void sandbox_leave(struct sandbox_mgr *m, struct sandbox *s);
/* Counts as activity for sandbox id if it is loaded (never creates it, nor
 * revives a destroyed one): for long-lived users such as terminals. */
void sandbox_touch_loaded(struct sandbox_mgr *m, const char *id);
/* A reference to sandbox id if it is loaded (never loads nor creates it);
 * NULL when it is not. */
struct sandbox *sandbox_ref_loaded(struct sandbox_mgr *m, const char *id);

/* unload.c: idle sandboxes leave memory (their rows are the truth). */
/* Whether s holds nothing that lives only in memory (no mount, jail,
 * namespace, cgroup, session, resident interpreter; every context as a
 * load from the store builds it) and is not the pool's; cluster mode keeps
 * everything loaded (its heartbeats count and fence loaded sandboxes).
 * Caller holds m->lock and s has no references. */
bool sandbox_nothing_live(const struct sandbox_mgr *m, const struct sandbox *s);
/* Whether the store's last_used is close enough to s's (within
 * SBX_UNLOAD_SLACK_MS) for s to go without a write. */
bool sandbox_last_used_saved(const struct sandbox *s);
/* The reaper's pass: persists last_used of loaded sandboxes with nothing
 * live that have been quiet for SBX_UNLOAD_SLACK_MS, so that their last
 * sandbox_put unloads them. */
void sbx_unload_idle(struct sandbox_mgr *m);

/* Takes the sandbox's own network namespace if it has none yet (caller
 * holds s->lock); without one (rootless) every jail has its own. */
void sandbox_netns(struct sandbox_mgr *m, struct sandbox *s);
/* Makes the sandbox's parent cgroup (with its own limits when it has
 * them) if it has none yet (caller holds s->lock); on failure (logged, and
 * returned as -errno) its interpreters get groups of their own. */
int sandbox_cgroup(struct sandbox_mgr *m, struct sandbox *s);
/* Mounts the workspace if needed (caller holds s->lock). */
int sandbox_open_workspace(struct sandbox_mgr *m, struct sandbox *s, struct err *err);
/* Mounts the workspace if needed and fills ret as sbx_workspace_acquire
 * does (ret->sbx = s; caller holds s->lock and keeps it until it closes
 * ret->root_fd). 0 or -errno with err filled. */
int sandbox_workspace_locked(struct sandbox_mgr *m, struct sandbox *s, struct sbx_workspace *ret, struct err *err);
/* Tenants' sandboxes and the disk their quotas reserve (warm ones left
 * out); caller holds m->lock. 0 or -errno. */
int sandbox_tenant_usage(struct sandbox_mgr *m, uint64_t *ret_n, uint64_t *ret_reserved);
/* The tenants' caps (sandboxes, disk) for one more tenant sandbox of quota
 * bytes; caller holds m->lock. 0, or ERR_QUOTA / ERR_STORAGE. */
int sandbox_check_caps(struct sandbox_mgr *m, uint64_t quota, struct err *err);
/* Destroys s: interpreters killed, workspace and rows gone (it is freed
 * with its last reference). 0 or -errno. */
int sandbox_wipe(struct sandbox_mgr *m, struct sandbox *s);
uint64_t sandbox_expiry_for(const struct sandbox_options *opt, uint64_t now);
json_t *env_parse(const char *text);

/* netaccess.c: attaches the egress proxy to s's namespace when the manager
 * has one and s belongs to a tenant org (caller holds s->lock); adds the
 * proxy variables to a command's env when s has it. */
void sandbox_egress_attach(struct sandbox_mgr *m, struct sandbox *s);
void sandbox_egress_env(const struct sandbox_mgr *m, const struct sandbox *s, json_t *env);

/* pool.c */
/* Reads the warm sandboxes a previous run left and starts the refill
 * loop when there is work; at manager start. 0 or -errno. */
int pool_start(struct sandbox_mgr *m);
void pool_stop(struct sandbox_mgr *m);
/* A tenant sandbox is about to be created: wakes the loop, which gives
 * back warm sandboxes past the caps (the pool never takes a tenant's
 * place). Caller may hold m->lock. */
void pool_yield(struct sandbox_mgr *m);
/* s (warm) leaves the pool's counts: taken or destroyed. Caller holds
 * m->lock. */
void pool_forget(struct sandbox_mgr *m, struct sandbox *s);
/* A step on a warm sandbox, run under its lock. */
typedef int pool_step_fn(struct sandbox_mgr *m, struct sandbox *s, struct err *err);
/* Everything a first command would do (workspace mounted and owned,
 * network namespace, parent cgroup), done now; idempotent. */
pool_step_fn pool_prepare_locked;
/* Re-labels a warm sandbox as the default org's (class cleared, created
 * now, idle expiry armed) within the tenants' caps (ERR_QUOTA). */
pool_step_fn pool_assign_locked;
/* Runs step on the warm sandbox id (looked up with SANDBOX_GET_WARM |
 * flags; a missing one made with opts) under its lock. *ret_s: the
 * reference (sandbox_put it), NULL when the lookup failed. */
int pool_on_warm(struct sandbox_mgr *m, const char *id, unsigned flags, const struct sbx_create_options *opts,
                 pool_step_fn *step, struct sandbox **ret_s, struct err *err);
/* Destroys the warm sandbox id if it still is one (failures logged). 0,
 * -ENOENT (none such), or -errno. */
int pool_destroy(struct sandbox_mgr *m, const char *id);
/* The workspace quota of the default pool's sandboxes. */
uint64_t pool_warm_quota(const struct sandbox_mgr *m);
/* warm + assigned the pools may reach, given the tenants' sandboxes and
 * the disk their quotas reserve. */
uint64_t pool_limit(const struct sandbox_mgr *m, uint64_t assigned, uint64_t reserved);
/* registry.c: s (caller holds s->lock and m->lock) is found under id
 * from now on, its row's id set. -EEXIST when id is loaded or stored. */
int sandbox_rekey_hash(struct sandbox_mgr *m, struct sandbox *s, const char *id);

/* warm_runtime.c: the runtime API's warm sandboxes (sandbox.warm_runtime). */
/* Before the default org's sandbox id is looked up: when it does not exist
 * yet, a warm sandbox becomes it (workspace, host id, namespace, cgroup and
 * a started python kernel), else nothing happens (the lookup creates it
 * cold). Never fails: any problem means the cold path. */
void warm_runtime_take(struct sandbox_mgr *m, const char *id);
/* c's interpreter is about to be started fresh (caller holds c->run_lock,
 * not s->lock): takes the sandbox's warm kernel instead when it is what
 * that start would make (python, limits lim, no bucket mounts). */
bool warm_runtime_adopt(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim);
/* One unit of the refill loop's work (pool.c), no lock held: one past the
 * target destroyed, or a warm sandbox's kernel restarted, or (unless quiet
 * while some are ready: a take's first cell is running) a new one
 * prepared. false: nothing to do. */
bool warm_runtime_step(struct sandbox_mgr *m, bool quiet);
/* s goes away (caller holds s->lock or s is unreachable): its warm kernel
 * is killed. */
void warm_runtime_drop(struct sandbox_mgr *m, struct sandbox *s);

/* orgs.c: the stored view of a sandbox (no env, contexts or usage). */
void sandbox_info_fill(const struct sandbox_row *row, struct sbx_info *ret);

/* orgenv.c: the env s's org gives its jails, a new object into *ret ({}
 * for SBX_DEFAULT_ORG or without a hook). 0 or -errno with err filled. */
int sandbox_org_env(struct sandbox_mgr *m, const struct sandbox *s, json_t **ret, struct err *err);
/* The same with env (strings and nulls) applied over it. */
int sandbox_env_over_org(struct sandbox_mgr *m, const struct sandbox *s, json_t *env, json_t **ret, struct err *err);

/* tunnel.c: drops the tunnels of sandbox id (NULL: all of them). */
void tunnels_drop(struct sandbox_mgr *m, const char *id);

/* command.c: a command's whole environment (the base one, then the
 * sandbox's, then call_env's strings and nulls), a new object; NULL on ENOMEM. */
json_t *command_env_json(json_t *sandbox_env, json_t *call_env);

/* session.c: the bridge's shell sessions of a sandbox (s->sessions). */
struct session;
/* Kills the commands running in s's sessions (caller holds s->lock). */
void sessions_kill(struct sandbox *s);
/* Frees every session of s (s is going: no command holds one). */
void sessions_free(struct sandbox *s);

/* owner.c: the sandbox's host identity. */
/* Gives s a host id from the engine's range if it has none (and stores it);
 * caller holds m->lock (serialises the choice). 0 or -errno. */
int sandbox_assign_host_id(struct sandbox_mgr *m, struct sandbox *s);
/* Makes the mounted workspace belong to s's host id, mode 0700. 0 or -errno. */
int sandbox_workspace_own(struct sandbox *s);
/* Applies {k: string|null} onto base (null unsets). */
void env_merge(json_t *base, json_t *delta);

/* lru.c: resident interpreters (each takes m->lock itself). */
void lru_touch(struct sandbox_mgr *m, struct context *c);
void lru_add(struct sandbox_mgr *m, struct context *c);
/* Evicts idle interpreters while self's sandbox is over its own cap or all
 * are over the global one, fairly (see lru.c). self_ok: self may go too
 * (after its cell; the caller holds its run_lock). */
void lru_evict(struct sandbox_mgr *m, struct context *self, bool self_ok);
void context_drop_interpreter(struct sandbox_mgr *m, struct context *c);

/* context.c */
void context_free(struct sandbox_mgr *m, struct context *c);
/* Builds a context from its stored row (registry load). NULL on ENOMEM. */
struct context *context_from_row(struct sandbox_mgr *m, struct sandbox *s, const struct context_row *row);
/* Creates and stores a context (caller holds s->lock); cid NULL: a fresh
 * id. NULL with err filled (ERR_LIMIT past sandbox.max_contexts). */
struct context *context_new(struct sandbox_mgr *m, struct sandbox *s, const struct runtime *rt, const char *binding,
                            const char *cwd, json_t *env, const char *cid, struct err *err);
/* Unlinks, unstores and frees c (a running execution frees it when it
 * ends, its interpreter killed). Caller holds s->lock. */
void context_remove(struct sandbox_mgr *m, struct sandbox *s, struct context *c);
void context_info_fill(const struct context *c, struct sbx_context_info *ret);

/* terminal.c: the manager's terminals (sandbox/terminal.h). */
struct terminals;
int terminals_new(struct terminals **ret);
/* Kills the shells of sandbox id's terminals (their listeners are told). */
void terminals_kill(struct sandbox_mgr *m, const char *id);
/* Kills every terminal and waits for their threads; frees. NULL-safe. */
void terminals_free(struct terminals *ts);

/* journal.c */
/* The build that writes a journal: language, engine and kernel version. */
void journal_build_id(const struct runtime *rt, char *buf, size_t len);
/* Replays the journal into c's fresh interpreter (throw-away workspace),
 * within sandbox.replay_ms in total and only for a journal of at most
 * sandbox.journal_bytes. */
enum replay_verdict journal_replay(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim);
/* Empties c's journal (a fresh start): the context is stale from now on. */
void journal_reset(struct sandbox_mgr *m, struct context *c, const char *why);
/* Appends one successful cell and writes c's row (the caller has counted
 * the execution in it) in the same transaction; on failure the row is
 * still written, stale. *ret_ms: how long that took. */
void journal_append(struct sandbox_mgr *m, struct context *c, const char *code, json_t *env,
                    const char *cwd_before, bool ts, double *ret_ms);
/* Resynchronises c's counters with the journal rows (the truth). */
void journal_sync(struct sandbox_mgr *m, struct context *c);
/* sandbox.journal_sync: makes the store's journal writes lazy (none,
 * group) and, for group, starts the thread that flushes them. */
int journal_flusher_start(struct sandbox_mgr *m);
/* Stops the flusher after a last flush. Safe when never started. */
void journal_flusher_stop(struct sandbox_mgr *m);

/* s3fs.c: one bucket served by s3fs (FUSE) on the host. */
struct s3fs_request {
        const char *endpoint, *bucket;
        const char *prefix;          /* NULL or "/…" */
        const char *key_id, *secret;
        const char *provider_opt;    /* "" or the endpoint's provider flag */
        const char *const *opts;     /* the client's options, already allowed */
        size_t nopts;
        bool readonly;
        unsigned uid, gid;           /* owner of every file (the sandbox's host id) */
};
struct s3fs_proc {
        char dir[4096];              /* its private dir: mnt/, log (and passwd while starting) */
        char mnt[4200];
        pid_t pid;                   /* s3fs -f, the daemon's child; -1: none */
        int root_fd;                 /* O_PATH of the mounted root, for the jails */
};
/* Mounts rq on dir/mnt (dir exists, 0700) and checks the bucket answers.
 * On failure nothing is left (no mount, no process, no credentials file).
 * 0 or -errno with err filled (ERR_UNAVAILABLE: s3fs's own words). */
int s3fs_mount(const struct s3fs_request *rq, const char *dir, struct s3fs_proc *ret, struct err *err);
/* Detaches the mount, ends s3fs (copies in running jails go dead with it),
 * removes dir. Safe on a failed or zeroed p. */
void s3fs_unmount(struct s3fs_proc *p);
/* Detaches every mount below base and removes base: what a killed daemon
 * left, at start-up, and a backstop at shutdown. */
void s3fs_sweep(const char *base);

/* mount.c: a sandbox's bucket mounts as its jails get them. */
struct mount_view {
        struct kproc_bind binds[JAIL_MAX_BINDS];
        char paths[JAIL_MAX_BINDS][SBX_MOUNT_PATH_MAX];
        size_t n;
};
/* Copies s's mounts (fds duplicated) for a spawn after s->lock is
 * released; caller holds s->lock. */
void mount_view_take(const struct sandbox *s, struct mount_view *v);
void mount_view_done(struct mount_view *v);
/* Unmounts all of s's mounts; caller holds s->lock, or s is unreachable. */
void mounts_drop_all(struct sandbox *s);
/* Remembers a jail of s that just started (pidfd of its init, duplicated
 * here; -1 is ignored): a later mount is attached in it too. Caller holds
 * s->lock. */
void sandbox_jail_started(struct sandbox *s, int pidfd);
/* Kills every jail of s still running (its commands, sessions, terminals;
 * interpreters too): a deleted sandbox leaves nothing running on a copy of
 * its workspace. Caller holds s->lock. */
void sandbox_jails_kill(struct sandbox *s);
/* Closes what sandbox_jail_started kept (s unreachable). */
void sandbox_jails_forget(struct sandbox *s);
/* Start-up and shutdown: no bucket mount of this data dir survives. */
void mounts_sweep(const char *data_dir);

/* command.c: where a sandbox's command runs (workspace, namespace, host id,
 * group, mounts) and with which limits; what spawn_locked and spare.c
 * build a jail from. Caller holds s->lock, through the spawn. */
struct command_site {
        int fd;                      /* O_PATH of the mounted workspace */
        struct stat st;
        struct kproc_workspace ws;
        struct mount_view view;
        struct kproc_where where;
        struct exec_limits lim;
};
int command_site_open(struct sandbox_mgr *m, struct sandbox *s, struct command_site *cs, struct err *err);
void command_site_done(struct command_site *cs);

/* spare.c: one pre-spawned (deferred) jail per sandbox that ran a command
 * recently or came from the warm pool, so its next command skips the jail
 * build (namespaces, mounts, cgroup attach). */
struct proc_spec;
int spares_start(struct sandbox_mgr *m);
void spares_stop(struct sandbox_mgr *m);
/* Asks for a spare in s of that stdin shape, made in the background.
 * s->lock held. */
void spare_want(struct sandbox_mgr *m, struct sandbox *s, bool stdin_pipe, bool side_channel);
/* Builds s's spare of that shape now, on the caller's (background)
 * thread. s->lock held. */
void spare_make_now(struct sandbox_mgr *m, struct sandbox *s, bool stdin_pipe, bool side_channel);
/* The spare with spec's command started in it when it was built from cs
 * and spec's shape (a stale one is dropped), else NULL. s->lock held. */
struct proc *spare_take(struct sandbox_mgr *m, struct sandbox *s, const struct command_site *cs,
                        const struct proc_spec *spec);
/* Kills and releases s's spare, if any: what it was built from changed
 * or goes. s->lock held (or s unreachable). */
void spare_drop(struct sandbox_mgr *m, struct sandbox *s);
