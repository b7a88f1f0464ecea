/* A kernel: a jailed process (engine/proc.h) running one language
 * interpreter's kernel script, plus the JSON-line protocol on its control
 * socket (docs/kernel-protocol.md). Used for stateless runs (one request,
 * then the jail is torn down) and by code contexts (many requests). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "engine/engine.h"
#include "runtimes/runtime.h"

struct kproc;

/* A sandbox's workspace for a kernel: its host dir and an O_PATH fd of it
 * opened while the sandbox was locked. The jail mounts a copy of the mount
 * that fd is on (jail_workspace_tree), never what the path names later;
 * rootless (user namespaces) binds the path. */
struct kproc_workspace {
        const char *dir;
        int fd;
};

/* Spawns a kernel in MODE ("once" or "repl") with the workspace ws at
 * /workspace (NULL: a private tmpfs). replay_overlay: start with /workspace
 * as a throw-away overlay until kproc_end_replay() (context restore).
 * Returns 0 or -errno (err: the failing step, as jail_spawn; a workspace
 * unmounted meanwhile fails at "workspace"). */
int kproc_spawn(struct engine *e, const struct runtime *rt, const char *mode,
                const struct kproc_workspace *ws, bool replay_overlay, const struct exec_limits *lim,
                struct kproc **ret, struct err *err);
/* A sandbox's parent cgroup (engine/group.c), shared by reference: the
 * sandbox's CPU quota (engine_options.cpu_quota_percent), memory and pids
 * (sandbox_memory_bytes, sandbox_pids) hold for all its kernels together.
 * *ret = NULL (and 0) without cgroups. Returns 0 or -errno. */
struct kproc_group;
/* A sandbox's own limits for its group; 0: the engine's (engine_options
 * sandbox_memory_bytes; the root's CPU quota). */
struct kproc_group_limits {
        uint64_t memory_bytes;
        uint32_t cpu_quota_percent;  /* % of one CPU */
};
/* own may be NULL (the engine's limits). A quota the host's cgroups cannot
 * enforce is an error (-EOPNOTSUPP), never dropped. */
int kproc_group_new(struct engine *e, const struct kproc_group_limits *own, struct kproc_group **ret);
struct kproc_group *kproc_group_ref(struct kproc_group *g);
/* The last reference removes the group (its kernels' groups first). NULL-safe. */
void kproc_group_unref(struct kproc_group *g);
struct cgroup *kproc_group_cgroup(const struct kproc_group *g);

/* A sandbox's bucket mount for its jails: an O_PATH fd of the mounted
 * root (opened while the sandbox was locked) and where it goes in the jail
 * (jail_bind.path). */
struct kproc_bind {
        int fd;
        const char *path;
        bool readonly;
};

/* Where and as whom a kernel runs. */
struct kproc_where {
        const struct kproc_workspace *ws; /* NULL: a private tmpfs /workspace */
        int netns_fd;                     /* a sandbox's own (engine_netns_take); -1: a fresh one */
        uid_t host_id;                    /* the sandbox's host id (jail_spec.host_id); 0: a stateless id */
        struct kproc_group *group;        /* the sandbox's parent cgroup (the kernel takes a
                                           * reference); NULL: a group of its own under the root */
        /* inet sockets (jail_spec.allow_inet) in the sandbox's namespace:
         * its commands only (sbx_spawn). Ignored without netns_fd. */
        bool allow_inet;
        bool local_dns;                   /* jail_spec.local_dns (the sandbox has egress) */
        const struct kproc_bind *binds;   /* up to JAIL_MAX_BINDS; a bind whose mount is gone
                                           * (unmounted meanwhile) is left out */
        size_t nbinds;
};
/* kproc_spawn for a sandbox's context. */
int kproc_spawn_in(struct engine *e, const struct runtime *rt, const char *mode, const struct kproc_where *where,
                   bool replay_overlay, const struct exec_limits *lim, struct kproc **ret, struct err *err);
/* Swaps the real workspace in after a replay. Returns 0 or -errno. */
int kproc_end_replay(struct kproc *kp);
/* Sends one request and collects everything until the answer (and, for a
 * kernel that exits, until it is gone). Kills the kernel on any limit.
 * Returns 0 (outcome filled, even on limits) or -errno on internal error. */
int kproc_run(struct kproc *kp, json_t *request, const struct exec_limits *lim,
              struct exec_outcome *ret);
/* The same, with the guest's output also handed to sink as it comes
 * (sink may be NULL). */
int kproc_run_sink(struct kproc *kp, json_t *request, const struct exec_limits *lim, const struct exec_sink *sink,
                   struct exec_outcome *ret);
/* Sends sig to the kernel process itself (not its jail's init): SIGINT
 * asks a kernel to stop its running cell (docs/kernel-protocol.md
 * "Interrupts"). Safe from another thread while a kproc_run is in
 * progress, as long as kp is not freed meanwhile. 0 or -errno (-ESRCH:
 * gone). */
int kproc_signal(struct kproc *kp, int sig);
bool kproc_alive(const struct kproc *kp);
/* A pidfd of the kernel's jail (its init), the caller's to dup; -1 once
 * it is gone. */
int kproc_pidfd(const struct kproc *kp);
/* SIGKILLs the jail without reaping (safe from another thread while a
 * kproc_run is in progress: that run then reports the kernel died). */
void kproc_kill(struct kproc *kp);
/* Kills (if still running), reaps and frees. NULL-safe. */
void kproc_free(struct kproc *kp);

/* Builds the wire request for a kernel. env is borrowed. */
json_t *exec_build_request(const char *code, json_t *env, const char *cwd, bool typescript,
                           uint64_t result_limit, bool replay);

/* The start-up environment of a runtime's process, as "K=V" strings. */
size_t exec_base_env(const struct runtime *rt, const char **out, size_t max);

/* One stateless execution end to end (fresh jail, run, tear down) under
 * the engine's limits: a warm kernel, a template fork or a cold kernel,
 * or for a process runtime (shell) its argv with the code. env (a JSON
 * object of strings) may be NULL. Returns 0 with ret filled (limits and
 * guest failures included; exec_outcome_done it), or -errno with err
 * set on an internal error (logged here). */
int exec_stateless(struct engine *e, const struct runtime *rt, const char *code, json_t *env,
                   bool typescript, struct exec_outcome *ret, struct err *err);
