/* Executions: a kernel process (one language interpreter running the kernel
 * script inside a jail) and the request/response exchange with it, with
 * every limit enforced from the daemon side. Used for stateless runs (one
 * request, then the jail is torn down) and by code contexts (many requests). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "base/util.h"
#include "jail/jail.h"
#include "runtimes/runtime.h"

/* The execution engine: jail context + limits + bookkeeping of live jails. */
struct engine;

int engine_new(const struct config *cfg, struct engine **ret, const char **ret_err);
void engine_free(struct engine *e);
const struct config *engine_config(const struct engine *e);
enum cgroup_backend engine_cgroup_backend(const struct engine *e);
/* Warm-start statistics per language (new ref): {ready, target, hits,
 * misses[, template: {alive, forks, failures}]}. */
json_t *engine_pool_stats(struct engine *e);
/* SIGKILLs every live kernel process (shutdown). */
void engine_kill_all(struct engine *e);
size_t engine_live_count(struct engine *e);

enum exec_limit {
        EXEC_LIMIT_NONE,
        EXEC_LIMIT_CPU,
        EXEC_LIMIT_WALL,
        EXEC_LIMIT_MEMORY,
        EXEC_LIMIT_OUTPUT,
        EXEC_LIMIT_PIDS,
        _EXEC_LIMIT_MAX
};

struct exec_limits {
        uint64_t cpu_ms, wall_ms, memory_bytes, pids;
        uint64_t output_bytes, output_entries, result_bytes;
};
void exec_limits_from_config(const struct config *cfg, struct exec_limits *ret);

/* What one request produced. */
struct exec_outcome {
        json_t *response;       /* the kernel's answer {results, error, cwd}, or NULL */
        struct buf out, err;    /* raw guest stdout / stderr (capped) */
        enum exec_limit limit;  /* limit that ended the run, if any */
        bool died;              /* the kernel process is gone */
        int exit_status;        /* wait status when died */
        uint64_t duration_ns;
        uint64_t cpu_ns;        /* CPU used by this request */
        uint64_t memory_peak;
};
void exec_outcome_done(struct exec_outcome *o);

struct kproc;

/* Spawns a kernel in MODE ("once" or "repl") with workspace_dir bound at
 * /workspace (NULL: a private tmpfs). replay_overlay: start with /workspace
 * as a throw-away overlay until kproc_end_replay() (context restore).
 * Returns 0 or -errno (ret_err: step). */
int kproc_spawn(struct engine *e, const struct runtime *rt, const char *mode,
                const char *workspace_dir, bool replay_overlay, const struct exec_limits *lim,
                struct kproc **ret, const char **ret_err);
/* Swaps the real workspace in after a replay. Returns 0 or -errno. */
int kproc_end_replay(struct kproc *kp);
/* Sends one request and collects everything until the answer (and, for a
 * kernel that exits, until it is gone). Kills the kernel on any limit.
 * Returns 0 (outcome filled, even on limits) or -errno on internal error. */
int kproc_run(struct kproc *kp, json_t *request, const struct exec_limits *lim,
              struct exec_outcome *ret);
bool kproc_alive(const struct kproc *kp);
/* SIGKILLs the jail without reaping (safe from another thread while a
 * kproc_run is in progress: that run then reports the kernel died). */
void kproc_kill(struct kproc *kp);
/* Kills (if still running), reaps and frees. NULL-safe. */
void kproc_free(struct kproc *kp);

/* Builds the wire request for a kernel. env is borrowed. */
json_t *exec_build_request(const char *code, json_t *env, const char *cwd, bool typescript,
                           uint64_t result_limit, bool replay);

/* Turns an outcome into the product's ExecutionResult object (new ref). */
json_t *exec_result_json(const struct runtime *rt, const char *code, const struct exec_outcome *o,
                         const struct exec_limits *lim);

/* One stateless execution end to end: spawn, run, tear down. env may be NULL.
 * Returns a new ExecutionResult, or NULL with ret_err set on internal error. */
json_t *exec_stateless(struct engine *e, const struct runtime *rt, const char *code, json_t *env,
                       bool typescript, const char **ret_err);

/* The kernel's start-up environment plus the guest env, as "K=V" strings. */
size_t exec_base_env(const struct runtime *rt, const char **out, size_t max);
