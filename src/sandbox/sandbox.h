/* Sandboxes: a durable workspace, env vars and up to N code contexts (live
 * REPL interpreters rebuilt from their cell journal when evicted or after a
 * daemon restart), each owned by an org. The domain layer under every facade:
 * no HTTP and no JSON views here (env is kept as a jansson object, a data
 * structure); failures come back as the domain error (base/err.h) with op
 * "sandbox.*" or "context.*". */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "engine/exec.h"
#include "jail/jail.h"
#include "runtimes/runtime.h"
#include "sandbox/files.h"
#include "store/store.h"

#define SBX_DEFAULT_ORG "default"
/* The owner of warm (prepared, unassigned) sandboxes: no tenant's org, so
 * no tenant sees them (a lookup by id answers "not found"). */
#define SBX_POOL_ORG "_warm_pool"
/* The warm class of the runtime API's warm sandboxes (sandbox.warm_runtime):
 * default limits, a python kernel started in each. */
#define SBX_RUNTIME_CLASS "_runtime"
/* The journal's size is also reported in the seed's 64 KiB "pages". */
#define SBX_JOURNAL_PAGE_BYTES (64 * 1024)

struct sandbox_mgr;

/* A sandbox's own limits, fixed when it is created (0: the service's
 * defaults, sandbox_options). A facade whose clients expect a container's
 * disk (the bridge) creates its sandboxes with larger ones. */
struct sbx_create_options {
        uint64_t workspace_bytes, workspace_inodes;
        uint64_t file_bytes;     /* largest file a guest or a files call may write */
        const char *org_id;      /* its owner; NULL: SBX_DEFAULT_ORG (must exist) */
        /* Its parent cgroup's CPU quota (thousandths of a CPU) and memory
         * limit, made when it is created (ERR_UNAVAILABLE when the host
         * cannot enforce them: never a silent downgrade). */
        uint64_t cpu_millis, memory_bytes;
        /* > 0: it expires lifetime_ms after its creation whatever its
         * activity; 0: idle expiry (sandbox_options.idle_ttl_ms). */
        uint64_t lifetime_ms;
        json_t *env;             /* NULL, or its env {name: string} (validated) */
        /* A warm sandbox's class (sbx_warm_*): NULL or "" the default
         * pool's. Ignored for a tenant's sandbox. */
        const char *warm_class;
};

/* The warm pool of prepared sandboxes (pool.c; the bridge's
 * WARM_POOL_* variables). */
struct sbx_pool_options {
        uint64_t target;             /* warm sandboxes to keep; 0: none */
        uint64_t refresh_ms;         /* the refill loop re-checks this often */
        uint64_t max_instances;      /* warm + assigned it fills up to; 0: sandbox.max_sandboxes */
        uint64_t batch;              /* prepared before the caps are checked again */
        struct sbx_create_options create; /* the limits of the sandboxes it makes */
        /* Writes a fresh NUL-terminated id (< STORE_ID_MAX bytes), 0 or
         * -errno: the ids of the facade that takes them (the bridge's). */
        int (*new_id)(char *out);
};

/* sandbox.journal_sync: when a context's journaled cell reaches the disk.
 * Every mode writes the cell to the store before the reply, so each one
 * survives a kill -9 of the daemon (the page cache outlives the process);
 * they differ on a power loss or kernel crash (docs/contexts.md). */
enum sbx_journal_sync {
        SBX_JOURNAL_GROUP,   /* flushed off the reply path, one fdatasync per journal_sync_ms at most */
        SBX_JOURNAL_NONE,    /* when the kernel writes back (or a later durable commit) */
        SBX_JOURNAL_ALWAYS,  /* fsynced before the reply */
};
/* "group" | "none" | "always" → 0, else -EINVAL. */
int sbx_journal_sync_parse(const char *name, enum sbx_journal_sync *ret);

/* What the manager needs from the configuration (main.c fills it). */
struct sandbox_options {
        char data_dir[4096];
        uint64_t idle_ttl_ms;            /* 0: sandboxes never expire */
        uint64_t max_contexts;           /* per sandbox */
        uint64_t max_sessions;           /* bridge shell sessions per sandbox; 0: no cap */
        uint64_t max_resident_contexts;  /* live interpreters, all sandboxes */
        /* Caps below: 0 means none (max_resident_per_sandbox: the total). */
        uint64_t max_resident_per_sandbox; /* live interpreters of one sandbox */
        uint64_t resident_grace_ms;      /* idle longer: evictable by any sandbox (0: never) */
        uint64_t replay_ms;              /* total replay time of one restore */
        uint64_t journal_bytes;          /* a journal past this restores fresh */
        enum sbx_journal_sync journal_sync;
        uint64_t journal_sync_ms;        /* group: the longest a cell waits for its flush */
        uint64_t max_sandboxes;          /* sandboxes at once */
        uint64_t max_disk_bytes;         /* workspace images in total */
        uint64_t workspace_bytes, workspace_inodes;
        uint64_t workspace_images;       /* ready images kept per quota in use (ws_pool.h); 0: none */
        uint64_t file_bytes;             /* one file, files API */
        uint64_t files_max_depth;        /* levels a recursive delete enters */
        struct exec_limits limits;       /* one execution in a context */
        struct sbx_pool_options pool;
        /* Warm sandboxes the runtime API's implicit creation takes
         * (warm_runtime.c), each with a python kernel started; 0: none. */
        uint64_t warm_runtime;
        /* Cluster mode (issue 16): this node's id, stamped on the sandboxes
         * it creates; the store sweeps then touch only its own. "": off. */
        char node_id[STORE_ID_MAX];
};

int sbx_mgr_new(const struct sandbox_options *opt, struct engine *engine, struct store *store,
                struct sandbox_mgr **ret);
/* Stops the reaper, kills every resident interpreter, unmounts workspaces. */
void sbx_mgr_free(struct sandbox_mgr *m);

/* The environment an org gives every jail of its sandboxes (the
 * controller's secrets): fn sets {name: value} strings in env (an empty
 * JSON object), or fails with err filled, and then nothing starts (a
 * command without the secrets its code expects would fail later and more
 * confusingly). Never called for SBX_DEFAULT_ORG, whose sandboxes (the
 * workers and bridge APIs') get none. Precedence, lowest first: the base
 * environment, the org's, the sandbox's env, a context's, the call's. A
 * code context journals its cells' env without the org's (the store never
 * holds a value in clear) and gets the org's again on replay. Set it once,
 * before the first request. */
typedef int (*sbx_org_env_fn)(void *userdata, const char *org_id, json_t *env, struct err *err);
/* The checkpoints' event hook (sandbox/checkpoint.h). */
struct checkpoint_row;
typedef void (*sbx_checkpoint_event_fn)(void *userdata, const char *event, const struct checkpoint_row *row,
                                        const char *sandbox_id);
void sbx_mgr_set_org_env(struct sandbox_mgr *m, sbx_org_env_fn fn, void *userdata);
/* The event log (tenant/events.h) the manager emits into: sandbox.created
 * / .stopped / .deleted for every org's sandboxes, resources.limit_warning
 * and security.violation for context executions. Set once, before the
 * first request; NULL (the default): none. */
struct events;
void sbx_mgr_set_events(struct sandbox_mgr *m, struct events *ev);
/* Gives tenant orgs' sandboxes network through eg (sandbox/egress/egress.h),
 * from their next namespace use on; NULL: none (the default). eg must
 * outlive the manager. Set before any sandbox runs. */
struct egress;
void sbx_mgr_set_egress(struct sandbox_mgr *m, struct egress *eg);

/* ^[A-Za-z0-9._-]{1,128}$ (a facade may allow fewer), no leading/trailing '-', not all dots, not a
 * reserved name. */
bool sbx_id_valid(const char *id);

/* The restore point of a context: its cell journal. */
struct sbx_snapshot {
        uint64_t taken_at;       /* epoch ms of the last journaled cell; 0: none */
        uint64_t cells, bytes;
        bool stale;              /* the journal cannot reproduce the live state */
        const char *stale_reason; /* static, as sbx_restore's; NULL when unknown (before a restart) */
        char build[128];         /* kernel + interpreter build that wrote it */
};

/* How a context's interpreter was last rebuilt from its journal: the
 * client is told (issue 10 rows 7 and 8), never left to guess. Reasons are
 * static strings: "restart" (daemon restarted or never resident), "evicted"
 * (by another sandbox), "evicted_own" (its sandbox was over its share),
 * "limit" (a limit killed it, or it died). */
struct sbx_restore {
        bool restored;
        const char *reason;
        uint64_t at;             /* epoch ms */
        uint64_t replay_ms;      /* time spent replaying */
        bool fresh;              /* replay abandoned: a fresh interpreter, state lost */
        const char *stale_reason; /* "replay_time", "journal_size", "replay_failed", or NULL */
};

struct sbx_context_info {
        char id[STORE_ID_MAX];
        char binding[64];
        char language[32];
        char cwd[4096];
        char engine[64];         /* "" when the language is gone */
        uint64_t created_at, last_used, executions;
        bool resident;
        bool busy;               /* an execution holds it (running or waiting for its turn) */
        bool available;          /* its language is still served (else it can never run) */
        struct sbx_snapshot snap;
        struct sbx_restore last_restore; /* restored false: never restored in this run */
};

struct sbx_info {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        uint64_t created_at, last_used, expires_at;   /* epoch ms; expires_at 0: never */
        bool expiry_fixed;                            /* expires_at is absolute */
        uint64_t cpu_millis, memory_bytes;            /* its own limits; 0: the service's */
        json_t *env;                                  /* owned {string: string} */
        struct sbx_context_info *contexts;            /* owned, by creation */
        size_t ncontexts;
        uint64_t ws_files, ws_bytes;                  /* 0 when no workspace exists */
};
void sbx_info_done(struct sbx_info *info);

/* Creates id with opts if it does not exist yet (*ret_created, may be
 * NULL, says whether it did); an existing sandbox keeps its limits, and
 * one of another org than opts->org_id is ERR_NOT_FOUND. Counts as
 * activity. 0 or a negative errno with err filled (the service's caps:
 * ERR_QUOTA, ERR_STORAGE).
 *
 * Orgs: every call below without an org argument acts for
 * SBX_DEFAULT_ORG (the single-key APIs): a sandbox of another org is
 * ERR_NOT_FOUND there (never created over, never destroyed). The *_org
 * calls act for an org's own existing sandboxes and never create one. */
int sbx_create(struct sandbox_mgr *m, const char *id, const struct sbx_create_options *opts, bool *ret_created,
               struct err *err);

/* org_id's sandbox id (the stored view: no contexts, no workspace
 * measure; env owned). ERR_NOT_FOUND when it does not exist, belongs to
 * another org, or is past a fixed deadline. */
int sbx_find(struct sandbox_mgr *m, const char *org_id, const char *id, struct sbx_info *ret, struct err *err);
/* One page of org_id's sandboxes by creation (fn gets a borrowed view);
 * *ret_total: how many it has. */
int sbx_list_org(struct sandbox_mgr *m, const char *org_id, uint64_t limit, uint64_t offset,
                 void (*fn)(const struct sbx_info *info, void *userdata), void *userdata, uint64_t *ret_total,
                 struct err *err);
/* Destroys org_id's sandbox id; ERR_NOT_FOUND as sbx_find. */
int sbx_destroy_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err);

/* Every call creates the sandbox on first use and counts as activity.
 * Each returns 0 or a negative errno with err filled. */
int sbx_info(struct sandbox_mgr *m, const char *id, struct sbx_info *ret, struct err *err);
int sbx_destroy(struct sandbox_mgr *m, const char *id, struct err *err);
/* env values: string sets, null unsets. Already validated. */
int sbx_set_env(struct sandbox_mgr *m, const char *id, json_t *env, struct err *err);
/* The same for org_id's existing sandbox (NULL: as sbx_set_env). */
int sbx_set_env_org(struct sandbox_mgr *m, const char *org_id, const char *id, json_t *env, struct err *err);
int sbx_context_create(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                       const char *cwd, json_t *env, struct sbx_context_info *ret, struct err *err);
/* *ret is a malloc'd array (free()) of *ret_n contexts, by creation. */
int sbx_context_list(struct sandbox_mgr *m, const char *id, struct sbx_context_info **ret, size_t *ret_n,
                     struct err *err);
int sbx_context_delete(struct sandbox_mgr *m, const char *id, const char *context_id, struct err *err);

/* The same for org_id's existing sandbox (NULL: as above, SBX_DEFAULT_ORG's
 * created on first use); another org's sandbox is ERR_NOT_FOUND. */
int sbx_context_create_org(struct sandbox_mgr *m, const char *org_id, const char *id, const struct runtime *rt,
                           const char *binding, const char *cwd, json_t *env, struct sbx_context_info *ret,
                           struct err *err);
int sbx_context_list_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct sbx_context_info **ret,
                         size_t *ret_n, struct err *err);
int sbx_context_delete_org(struct sandbox_mgr *m, const char *org_id, const char *id, const char *context_id,
                           struct err *err);

/* How a cell was interrupted (sbx_context_interrupt). */
enum sbx_interrupt {
        SBX_INTERRUPT_NONE,      /* it was not */
        SBX_INTERRUPT_SIGNALED,  /* SIGINT: the kernel stopped the cell and kept its state */
        SBX_INTERRUPT_SKIPPED,   /* interrupted before it started: it never ran */
        SBX_INTERRUPT_KILLED,    /* the kernel was killed; the next cell restores the journal */
        _SBX_INTERRUPT_MAX
};

/* One execution in a context. */
struct sbx_exec_result {
        struct exec_outcome outcome;     /* owned: exec_outcome_done */
        struct exec_limits limits;       /* the limits it ran under */
        const struct runtime *rt;
        char context_id[STORE_ID_MAX];
        char cwd[4096];                  /* the context's cwd afterwards */
        uint64_t executions;
        double snapshot_ms;              /* time to journal the cell; < 0: not journaled */
        uint64_t expires_at;             /* the sandbox's deadline; 0: never */
        struct sbx_restore restore;      /* restored: this execution rebuilt the interpreter */
        enum sbx_interrupt interrupted;  /* an interrupt ended it (then not journaled) */
};
void sbx_exec_result_done(struct sbx_exec_result *r);

/* Runs code in context_id, or in the binding's oldest context (created
 * lazily at /workspace). call_env may hold nulls (unset). */
int sbx_execute(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                const char *code, const char *context_id, json_t *call_env, struct sbx_exec_result *ret,
                struct err *err);

/* A cell for a REPL facade: in context_id of org_id's existing sandbox
 * (org_id NULL: SBX_DEFAULT_ORG's, created on first use). display: the
 * kernel adds rich MIME bundles to its answer (docs/kernel-protocol.md
 * "Display"); sink (may be NULL) gets the output as it comes. */
struct sbx_cell {
        const char *org_id;
        const char *context_id;
        const char *code;
        bool display;
        const struct exec_sink *sink;
};
int sbx_context_run(struct sandbox_mgr *m, const char *id, const struct sbx_cell *cell, struct sbx_exec_result *ret,
                    struct err *err);
/* sbx_execute with a cell's options (display, sink): the context is
 * cell->context_id or the binding's oldest, as sbx_execute. */
int sbx_execute_cell(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                     const struct sbx_cell *cell, json_t *call_env, struct sbx_exec_result *ret, struct err *err);
/* Interrupts the cell running (or waiting to run) in context_id: SIGINT
 * for an interruptible runtime (struct runtime.interruptible), and if the
 * cell still runs grace_ms later, or for other runtimes at once, the
 * kernel is killed (its context comes back from its journal on the next
 * cell: variables of journaled cells survive). The interrupted cell is
 * never journaled (a replay would hang on it); a cell that ran partly
 * leaves the context stale ("interrupted"). *ret: what was done (NONE:
 * nothing ran). 0 or -errno with err filled (ERR_NOT_FOUND). */
int sbx_context_interrupt(struct sandbox_mgr *m, const char *org_id, const char *id, const char *context_id,
                          uint64_t grace_ms, enum sbx_interrupt *ret, struct err *err);

/* A sandbox's workspace held open (and its sandbox locked) for file
 * operations: created and mounted on first use, like every call here. */
struct sbx_workspace {
        int root_fd;                 /* O_PATH|O_DIRECTORY fd of /workspace */
        struct files_limits limits;
        uint64_t created_at;         /* the sandbox's createdAt, epoch ms */
        unsigned uid, gid;           /* file system identity of the guest */
        void *sbx;                   /* private */
};
/* Returns 0 or a negative errno with err filled. */
int sbx_workspace_acquire(struct sandbox_mgr *m, const char *id, struct sbx_workspace *ret, struct err *err);
/* The same for org_id's existing sandbox (ERR_NOT_FOUND as sbx_find). */
int sbx_workspace_acquire_org(struct sandbox_mgr *m, const char *org_id, const char *id, struct sbx_workspace *ret,
                              struct err *err);
/* Closes the fd and unlocks. Safe on a failed acquire (sbx NULL). */
void sbx_workspace_release(struct sandbox_mgr *m, struct sbx_workspace *ws);

/* A command in a sandbox (the bridge's /exec, sessions, terminals): a
 * jailed process with the sandbox's /workspace, network namespace, host id
 * and parent cgroup (its memory, pids and CPU quota shared with the
 * sandbox's interpreters). Its environment is the base one, then its
 * org's (sbx_mgr_set_org_env), then the sandbox's env, then env (strings;
 * nulls unset). */
struct proc;
struct sbx_command {
        const char *const *argv;     /* NULL-terminated, paths inside the jail */
        json_t *env;                 /* may be NULL */
        const char *cwd;             /* inside the jail; NULL: /workspace */
        bool pty;                    /* a terminal for 0, 1 and 2 */
        unsigned short rows, cols;   /* pty: initial size (0: 24x80) */
        bool stdin_pipe;             /* pipes: a stdin pipe instead of /dev/null */
        bool side_channel;           /* pipes: fd 3 is a socket to proc_fds.side_fd */
        /* NULL: the sandbox's execution limits without a CPU-time or wall
         * cap (a command runs until it ends, is timed out or is killed by
         * its caller; the sandbox's CPU quota still holds). */
        const struct exec_limits *limits;
        /* NULL: SBX_DEFAULT_ORG's sandbox, created on first use; else
         * that org's existing sandbox (ERR_NOT_FOUND as sbx_find). */
        const char *org_id;
};
/* Creates the sandbox on first use, like every call here. The process
 * outlives the call (the caller owns it: proc_free or proc_bury). 0 or a
 * negative errno with err filled. */
int sbx_spawn(struct sandbox_mgr *m, const char *id, const struct sbx_command *cmd, struct proc **ret,
              struct err *err);

/* ---- the warm pool (pool.c) ----
 * Prepared sandboxes: row, host id, workspace made, mounted and owned,
 * network namespace and parent cgroup all done ahead of the request, so a
 * new sandbox's first command costs what a later one does. A warm sandbox
 * belongs to SBX_POOL_ORG: no API sees it, it counts in no tenant cap and
 * never expires; taken, it is an ordinary sandbox of the default org. A
 * background thread refills the pool (never the request path), and the
 * warm sandboxes left by a previous run are adopted (or destroyed when the
 * pool no longer wants them) at start. */

/* Spare jails (the next command's jail of a recently used or warm
 * sandbox, built ahead): held now, and commands that got one or not. */
struct sbx_spare_stats {
        uint64_t held, hits, misses;
};
void sbx_spare_stats(struct sandbox_mgr *m, struct sbx_spare_stats *ret);

/* Prepares the warm sandbox id now (creating it in SBX_POOL_ORG if it does
 * not exist; an existing warm one is mounted and set up again, as after a
 * restart). Refused (ERR_EXISTS) for a tenant's sandbox. */
int sbx_prepare(struct sandbox_mgr *m, const char *id, struct err *err);
/* Assigns a warm sandbox to the default org and writes its id to ret_id.
 * -ENOENT (err untouched) when none is warm; ERR_QUOTA when the tenants'
 * caps are reached. Wakes the refill. */
int sbx_pool_take(struct sandbox_mgr *m, char ret_id[STORE_ID_MAX], struct err *err);

struct sbx_pool_stats {
        uint64_t warm;               /* prepared, unassigned */
        uint64_t assigned;           /* tenants' sandboxes (every API's) */
        uint64_t limit;              /* warm + assigned the pool fills up to */
        struct sbx_pool_options config;
};
int sbx_pool_stats(struct sandbox_mgr *m, struct sbx_pool_stats *ret, struct err *err);
/* Destroys every warm sandbox and pauses the refill until sbx_pool_prime. */
int sbx_pool_shutdown_prewarmed(struct sandbox_mgr *m, struct err *err);
/* (Re)starts the refill loop: it fills toward the target now. */
void sbx_pool_prime(struct sandbox_mgr *m);

/* The runtime API's warm sandboxes (sandbox.warm_runtime): ready = warm
 * ones holding a started kernel; taken = new sandboxes that were warm ones;
 * adopted = first contexts that took the warm kernel. */
struct sbx_warm_runtime_stats {
        uint64_t ready, taken, adopted;
};
void sbx_warm_runtime_stats(struct sandbox_mgr *m, struct sbx_warm_runtime_stats *ret);

/* ---- warm classes (warm_class.c) ----
 * Warm sandboxes prepared with limits of their own (a class: the
 * controller's internal snapshot profiles), kept apart from the default
 * pool above: its refill loop never makes, adopts, sheds or hands out
 * one, and sbx_pool_take never gets one. They are made when asked
 * (sbx_warm_fill, the default pool's workspace limits with the class's CPU
 * and memory), are durable (a restart finds them stored; mount, namespace
 * and cgroup are redone when one is taken), and leave only by
 * sbx_warm_take or sbx_warm_drop. Like the pool's they belong to
 * SBX_POOL_ORG and count in no tenant cap; the default pool gives way to
 * them (fills less). */
struct sbx_warm_class {
        const char *name;            /* non-empty, < STORE_ID_MAX bytes */
        uint64_t cpu_millis, memory_bytes; /* 0: the service's */
};
/* Prepares warm sandboxes of c until it has count (fewer when the caps
 * leave no room: sandbox.max_sandboxes, the disk cap, the pool's
 * max_instances, counting tenants' and every warm class's). *ret_made: how
 * many it made. ERR_UNAVAILABLE without an id maker (pool.new_id). */
int sbx_warm_fill(struct sandbox_mgr *m, const struct sbx_warm_class *c, uint64_t count, uint64_t *ret_made,
                  struct err *err);
/* How many warm sandboxes class name has. */
int sbx_warm_count(struct sandbox_mgr *m, const char *name, uint64_t *ret, struct err *err);
/* A sandbox of class c handed to the default org: its oldest warm one
 * (*ret_warm true), else one created and prepared now with c's limits
 * (*ret_warm false). ERR_QUOTA at the tenants' caps. */
int sbx_warm_take(struct sandbox_mgr *m, const struct sbx_warm_class *c, char ret_id[STORE_ID_MAX], bool *ret_warm,
                  struct err *err);
/* Destroys every warm sandbox of class name; *ret_n (may be NULL): how
 * many. */
int sbx_warm_drop(struct sandbox_mgr *m, const char *name, uint64_t *ret_n, struct err *err);
/* Tunnels (tunnel.c): a port of a sandbox reached through the daemon. A
 * command's server listens on 127.0.0.1:port in the sandbox's own network
 * namespace (loopback only: no route out); the token is the capability a
 * facade's preview URL carries. In memory only: tunnels die with their
 * sandbox and with the daemon. */
#define SBX_TUNNEL_ID_BYTES 8
#define SBX_TUNNEL_TOKEN_BYTES 24
struct sbx_tunnel {
        char id[2 * SBX_TUNNEL_ID_BYTES + 1];       /* hex */
        char token[2 * SBX_TUNNEL_TOKEN_BYTES + 1]; /* hex, 192 random bits */
        unsigned port;
        char name[64];                              /* "" when none */
        uint64_t created_ms;                        /* epoch ms */
};
/* The tunnel of sandbox id to port, made if there is none (the same one
 * for every call: idempotent; a non-empty name replaces the old one).
 * Creates the sandbox on first use. The facade checks port and name
 * rules. 0 or a negative errno with err filled. */
int sbx_tunnel_open(struct sandbox_mgr *m, const char *id, unsigned port, const char *name, struct sbx_tunnel *ret,
                    struct err *err);
/* Removes it; nothing when there is none. */
void sbx_tunnel_close(struct sandbox_mgr *m, const char *id, unsigned port);
/* A TCP connection to the tunnel of token: a socket connected to
 * 127.0.0.1:port inside the sandbox's namespace (the caller owns *ret_fd,
 * blocking). ERR_NOT_FOUND: no such token; ERR_UNAVAILABLE: nothing
 * listens there. 0 or a negative errno with err filled. */
int sbx_tunnel_connect(struct sandbox_mgr *m, const char *token, struct sbx_tunnel *ret, int *ret_fd,
                       struct err *err);
/* Bucket mounts (the bridge's /mount, /unmount): an S3-compatible bucket
 * mounted by the daemon on the host with s3fs (FUSE; root only) and
 * attached at path in every jail of the sandbox started afterwards
 * (commands and code-context interpreters), and in the running ones when
 * path is below /workspace. Runtime state: a daemon restart or the
 * sandbox's deletion unmounts it. See docs/bridge/mount.md. */
#define SBX_MOUNT_PATH_MAX 1024
#define SBX_MOUNT_MAX JAIL_MAX_BINDS
struct sbx_mount_spec {
        const char *path;            /* absolute; normalised here */
        const char *endpoint;        /* http:// or https:// URL */
        const char *bucket;
        const char *prefix;          /* NULL or "/…": a key prefix of the bucket */
        bool readonly;
        /* Both NULL: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then
         * R2_ACCESS_KEY_ID/R2_SECRET_ACCESS_KEY, each from the daemon's
         * environment first and the sandbox's env second. */
        const char *access_key_id, *secret_access_key;
        const char *const *options;  /* extra s3fs options (an allowlist is checked) */
        size_t noptions;
};
/* Validates everything (ERR_INVALID), then mounts; mounts of one sandbox
 * are serialised. Another mount at, above or below path: ERR_EXISTS; s3fs
 * or the bucket failing: ERR_UNAVAILABLE with s3fs's reason. 0 or -errno
 * with err filled. */
int sbx_mount(struct sandbox_mgr *m, const char *id, const struct sbx_mount_spec *spec, struct err *err);
/* path is normalised ("/" is ERR_INVALID); no mount there: ERR_NOT_FOUND
 * "No active mount found at path: …". */
int sbx_unmount(struct sandbox_mgr *m, const char *id, const char *path, struct err *err);
/* Resolves ".", ".." and repeated slashes of an absolute path into out.
 * -EINVAL: not absolute, a component of 256 bytes or more, or too long. */
int sbx_mount_path_normalize(const char *in, char *out, size_t len);
/* A bucket the daemon mounts on the host for itself (the controller's
 * artifacts; no jail sees it): spec's endpoint, bucket, prefix and
 * credentials as for sbx_mount (path, readonly and options unused), served
 * by s3fs on dir/mnt, files owned by the daemon. dir must not exist or be
 * a leftover of an earlier run (detached and removed first); its parent
 * must be private to the daemon. ERR_INVALID, ERR_UNAVAILABLE (no FUSE,
 * not root, s3fs or the bucket failing). */
struct sbx_host_mount;
int sbx_host_mount(const struct sbx_mount_spec *spec, const char *dir, struct sbx_host_mount **ret, struct err *err);
/* The mounted directory (dir/mnt). */
const char *sbx_host_mount_dir(const struct sbx_host_mount *hm);
/* Unmounts, ends s3fs and removes dir. NULL-safe. */
void sbx_host_unmount(struct sbx_host_mount *hm);

/* Number of resident (live) context interpreters. */
size_t sbx_resident_count(struct sandbox_mgr *m);
/* Sandboxes loaded on this node. Outside cluster mode only those with
 * something live (a mount, a jail, an interpreter…) stay loaded: an idle
 * one goes with its last reference, or, when its last use is more than
 * SBX_UNLOAD_SLACK_MS newer than its stored row, once the reaper has
 * written it (src/sandbox/unload.c). */
#define SBX_UNLOAD_SLACK_MS 1000
size_t sbx_loaded_count(struct sandbox_mgr *m);
/* Fencing (cluster mode): re-reads the owner of every sandbox loaded here
 * and drops (kills its interpreters and jails, unmounts and removes its
 * local workspace, forgets it; the stored rows stay) each one whose row
 * names another node or is gone. *ret_dropped (may be NULL): how many.
 * Does nothing when opt.node_id is "". 0 or -errno of the store. */
int sbx_fence(struct sandbox_mgr *m, uint64_t *ret_dropped);
/* Runs one expiry pass now (tests and the reaper thread). */
void sbx_reap_expired(struct sandbox_mgr *m);

/* ---- shell commands and sessions (session.c, shell.c; the bridge's
 * /exec, /session, /pty) ----
 * A shell command is bash text run by `bash --norc --noprofile` as its own
 * jailed process (sbx_spawn). A session carries a shell's state between
 * commands: its cwd, exported environment, functions, aliases and other
 * variables, restored before each command and saved when the shell exits
 * (an EXIT trap writing to a side channel, never the user's stdout or
 * stderr). So a `cd` or `export` in one command is seen by the next, and a
 * wedged command never wedges its session: it is killed like any process.
 * Commands of one session run one at a time; sessions live in memory with
 * their sandbox (gone with it, and after a daemon restart). */
#define SBX_SESSION_ID_MAX 128
/* The session id the bridge's clients send to mean "no session". */
#define SBX_SESSION_DISABLED "__DISABLE_SESSION__"

/* path (absolute, or relative to /workspace) normalised lexically: empty
 * and "." segments dropped, ".." pops one (never above /). 0 with the
 * result in out; -EPERM when it is not /workspace or below it; -ENAMETOOLONG. */
int sbx_workspace_path(const char *path, char *out, size_t len);

/* Creates session sid with cwd (NULL: /workspace; resolved by
 * sbx_workspace_path) and env ({name: string}, merged over the sandbox's;
 * may be NULL). ERR_EXISTS when it exists, ERR_INVALID for a reserved id,
 * a cwd outside /workspace or a bad env. */
int sbx_session_create(struct sandbox_mgr *m, const char *id, const char *sid, const char *cwd, json_t *env,
                       struct err *err);
/* Deletes sid, killing its running command. ERR_NOT_FOUND when unknown. */
int sbx_session_delete(struct sandbox_mgr *m, const char *id, const char *sid, struct err *err);
/* For a terminal (or anything else started in a session's state): the
 * session's current cwd and env (*ret_env: a new reference, {name: string
 * or null}: null unsets a variable of the sandbox's env; pass it as
 * sbx_command.env). create: make the session (cwd /workspace, no env) when
 * it does not exist; else ERR_NOT_FOUND. 0 or a negative errno. */
int sbx_session_state(struct sandbox_mgr *m, const char *id, const char *sid, bool create, char *ret_cwd,
                      size_t cwd_len, json_t **ret_env, struct err *err);

struct sbx_shell;
/* Prepares a shell command: `script` (bash text, copied), in session sid
 * (NULL: none; an unknown sid is created), after a `cd` to cwd when cwd is
 * not NULL (already resolved; if that cd fails, bash says so on stderr and
 * the command exits 1). Creates the sandbox on first use. */
int sbx_shell_open(struct sandbox_mgr *m, const char *id, const char *sid, const char *script, const char *cwd,
                   struct sbx_shell **ret, struct err *err);
/* Waits up to timeout_ms (-1: forever) for the session's previous command
 * to end (sessionless: at once), then starts the shell. 0, -ETIMEDOUT (call
 * again), or a negative errno with err filled. */
int sbx_shell_start(struct sandbox_mgr *m, struct sbx_shell *sh, int timeout_ms, struct err *err);
/* The running shell (after sbx_shell_start); owned by sh. */
struct proc *sbx_shell_proc(struct sbx_shell *sh);
/* Reads the session's state channel (its proc_fds side_fd) while the shell
 * runs, so a large state never blocks the shell. false once it is at its
 * end (stop polling it). */
bool sbx_shell_pump_state(struct sbx_shell *sh);
/* A session takes the state its exited shell saved now (before the caller
 * reports the exit, so whatever the client does next — a terminal, a
 * command — starts from it); idempotent, sbx_shell_end does it too. */
void sbx_shell_save_state(struct sbx_shell *sh);
/* Ends the command: a session takes the state its shell saved (only a
 * complete one from a shell that has exited), the process is killed if
 * still running and buried, the session is free for its next command.
 * NULL-safe. */
void sbx_shell_end(struct sandbox_mgr *m, struct sbx_shell *sh);
