/* The execution engine: the process-wide jail context, the limits every
 * execution runs under, bookkeeping of live jails (so shutdown can kill
 * them), warm pools and fork-server templates. engine/ knows no config
 * file, no HTTP and no JSON view: main.c fills struct engine_options. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "jail/jail.h"

/* At most this many runtimes get a warm pool (runtime table order). */
#define ENGINE_MAX_RUNTIMES 8

enum exec_limit {
        EXEC_LIMIT_NONE,
        EXEC_LIMIT_CPU,
        EXEC_LIMIT_WALL,
        EXEC_LIMIT_MEMORY,
        EXEC_LIMIT_OUTPUT,
        EXEC_LIMIT_PIDS,
        _EXEC_LIMIT_MAX
};

/* What one execution may use. */
struct exec_limits {
        uint64_t cpu_ms, wall_ms, memory_bytes, pids;
        uint64_t output_bytes, output_entries, result_bytes;
        uint64_t file_bytes;    /* largest file (RLIMIT_FSIZE); 0: engine_options.file_bytes */
};

/* What one execution produced (a kernel request or a whole process run). */
struct exec_outcome {
        json_t *response;       /* the kernel's answer {results, error, cwd}, or NULL */
        struct buf out, err;    /* raw guest stdout / stderr (capped) */
        enum exec_limit limit;  /* limit that ended the run, if any */
        bool died;              /* the process is gone */
        int exit_status;        /* wait status of the jail's init when died
                                 * (see proc_status_decode) */
        uint64_t duration_ns;
        uint64_t cpu_ns;        /* CPU used by this run */
        uint64_t memory_peak;
        uint64_t refused_syscalls; /* seccomp refusals during this run */
};
void exec_outcome_done(struct exec_outcome *o);

/* Where a run's guest output goes as it is produced (a streaming REPL):
 * called on the running thread with what the run keeps (within the output
 * limits, the same bytes exec_outcome.out/err get). which: 1 stdout, 2
 * stderr. */
struct exec_sink {
        void (*output)(void *userdata, int which, const char *data, size_t len);
        void *userdata;
};

struct engine_options {
        char run_dir[4200];          /* the jails' root dirs live here */
        char kernels_dir[4096];      /* bound read-only at JAIL_KERNELS_DIR */
        char forkserver_dir[4096];   /* holds JAIL_FORKSERVER_LIB */
        int cgroup_force;            /* -1: auto, else an enum cgroup_backend */
        bool templates;              /* fork-server templates where a runtime has one */
        struct exec_limits limits;   /* default limits of every execution */
        uint64_t file_bytes, nofile; /* rlimits */
        uint64_t tmp_bytes, tmp_inodes, workspace_bytes, workspace_inodes;
        unsigned workers;            /* executions at once (sizes a template's pids) */
        uint64_t pool_size[ENGINE_MAX_RUNTIMES]; /* warm members, by runtime_at() index */
        uint64_t pool_refill_per_s;  /* pool starts per second at most (0: no cap) */
        uint64_t pool_memory_budget; /* bytes all warm members may hold (0: no cap) */
        uint64_t pool_grow_idle_s;   /* grown pools shrink after this idle (0: pools never grow) */
        uint64_t id_base, id_count;  /* host ids of jails (jail/ids.h); count 0: none */
        bool no_landlock;            /* test-only: behave as on a kernel without Landlock */
        bool no_spawner;             /* clone jails from the daemon (jail_ctx_start_spawner not called) */
        /* CFS quota of every stateless jail's cgroup and of every sandbox's
         * parent group (engine/group.c), % of one CPU (0: none): it holds
         * between requests too, when nobody samples a context's usage. */
        uint32_t cpu_quota_percent;
        /* One sandbox's context kernels together (its parent cgroup, which
         * also holds the CPU quota for all of them): 0 = unlimited. */
        uint64_t sandbox_memory_bytes, sandbox_pids;
};

struct engine;

/* Returns 0 or -errno (err: what failed, e.g. the jail context). The
 * options are copied. */
int engine_new(const struct engine_options *opt, struct engine **ret, struct err *err);
void engine_free(struct engine *e);
enum cgroup_backend engine_cgroup_backend(const struct engine *e);
/* A fresh, empty network namespace (an O_CLOEXEC fd the caller owns), for
 * the jails of one sandbox to share (kproc_spawn_in). -EOPNOTSUPP in
 * rootless mode, where every jail has a namespace of its own anyway. */
int engine_netns_take(struct engine *e);
/* A socket (socket(2)'s domain and type; close-on-exec is added) created in
 * the network namespace netns_fd, by a short-lived thread that joins it:
 * the daemon's own threads never switch namespace. The socket stays bound
 * to that namespace wherever it is used: connect(), bind() and ioctl()s on
 * it act there. Root only. Returns the fd (the caller's) or -errno. */
int engine_netns_socket(int netns_fd, int domain, int type);
/* Brings the loopback interface "lo" up in netns_fd (a sandbox's own
 * namespace: lo is its only interface, so no route leaves it). Idempotent.
 * Returns 0 or -errno. */
int engine_netns_loopback_up(int netns_fd);
/* The default limits (engine_options.limits). */
const struct exec_limits *engine_limits(const struct engine *e);

/* Warm-start statistics of one runtime. */
struct engine_pool_stats {
        const char *lang;
        uint64_t ready, target, hits, misses, member_bytes;
        uint64_t grown; /* target grown by demand (>= target; back to it when idle) */
        bool has_template, template_alive;
        uint64_t template_forks, template_failures;
};
/* Fills at most max entries; returns how many. */
size_t engine_pool_stats(struct engine *e, struct engine_pool_stats *out, size_t max);

/* The host ids sandboxes are given, [*first, *first + *n) (jail/ids.h);
 * n = 0: none (rootless: every jail maps the daemon's own id). */
void engine_sandbox_ids(const struct engine *e, uid_t *first, uint32_t *n);

/* SIGKILLs every live jail (shutdown). */
void engine_kill_all(struct engine *e);
size_t engine_live_count(struct engine *e);
