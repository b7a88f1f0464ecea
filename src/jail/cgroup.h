/* Per-execution control groups on cgroup v1 (memory, pids, cpuacct as
 * separate hierarchies) or v2 (one unified group), or none when neither is
 * usable (rootless without delegation): then only rlimits apply.
 * Core and api code never see which backend is in use. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_backend { CGROUP_NONE, CGROUP_V1, CGROUP_V2, _CGROUP_BACKEND_MAX };

struct cgroup_root; /* the daemon's parent group(s), discovered once */
struct cgroup;      /* one execution's group */

struct cgroup_limits {
        uint64_t memory_bytes; /* 0 = unlimited */
        uint64_t pids;         /* 0 = unlimited */
        uint32_t cpu_quota_percent; /* CFS quota in % of one CPU; 0 = the root's */
};

struct cgroup_usage {
        uint64_t cpu_ns;       /* cumulative CPU time of the group */
        uint64_t memory_peak;  /* peak memory in bytes (0 if unknown) */
        uint64_t oom_kills;    /* OOM kills inside the group */
        uint64_t pids_max_hits;/* times fork failed on pids limit */
};

/* Discovers the backend and creates "<own group>/<name>" in every used
 * hierarchy. force: CGROUP_NONE..V2 to force one, or -1 to auto-detect.
 * Returns 0 or -errno; free with cgroup_root_free(). */
int cgroup_root_open(const char *name, int force, struct cgroup_root **ret);
void cgroup_root_free(struct cgroup_root *root);
enum cgroup_backend cgroup_root_backend(const struct cgroup_root *root);
const char *cgroup_backend_name(enum cgroup_backend b);
/* The root's directory in its i-th hierarchy (one on v2, up to three on v1,
 * none without cgroups), or NULL past the last: for diagnostics and for
 * checking that nothing is left behind. */
const char *cgroup_root_path(const struct cgroup_root *root, size_t i);
/* Every group created from now on gets a CPU bandwidth quota of percent %
 * of one CPU (v1 cpu.cfs_quota_us / cfs_period_us, v2 cpu.max), so a job
 * is throttled at all times, also while nobody samples its usage (an idle
 * context's leftover processes). 0 disables. -EOPNOTSUPP when the backend
 * has no CPU bandwidth controller (the quota is then not applied). */
int cgroup_root_set_cpu_quota(struct cgroup_root *root, uint32_t percent);

/* Creates a child group "name" with the limits. Returns 0 or -errno. */
int cgroup_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *lim,
                  struct cgroup **ret);
/* A parent group (one per sandbox): "name" under the root with lim (the
 * CPU quota defaulting to the root's), holding no process itself, every
 * controller passed on to its children. Its limits hold for all of them
 * together. Destroy it after its children. Returns 0 or -errno. */
int cgroup_create_parent(struct cgroup_root *root, const char *name, const struct cgroup_limits *lim,
                         struct cgroup **ret);
/* cgroup_create below parent (NULL: the root). A child gets no CPU quota
 * of the root's: its parent's holds for the whole family. */
int cgroup_create_in(struct cgroup_root *root, struct cgroup *parent, const char *name,
                     const struct cgroup_limits *lim, struct cgroup **ret);
/* True for a group created below a parent: it must never be reused for a
 * jail of another parent (or of none). */
bool cgroup_is_nested(const struct cgroup *cg);
/* Moves pid into every hierarchy of the group. */
int cgroup_attach(struct cgroup *cg, pid_t pid);
int cgroup_read_usage(struct cgroup *cg, struct cgroup_usage *ret);
/* What cgroup_read_usage_of reads besides the CPU time (each a file read;
 * a counter not asked for is 0). */
enum {
        CGROUP_USAGE_PEAK = 1u << 0,
        CGROUP_USAGE_OOM = 1u << 1,
        CGROUP_USAGE_PIDS = 1u << 2,
        CGROUP_USAGE_ALL = CGROUP_USAGE_PEAK | CGROUP_USAGE_OOM | CGROUP_USAGE_PIDS,
};
int cgroup_read_usage_of(struct cgroup *cg, unsigned what, struct cgroup_usage *ret);
/* True when no process is left in the group. */
bool cgroup_is_empty(struct cgroup *cg);
/* SIGKILLs every process in the group (cgroup.kill on v2, procs loop on v1). */
int cgroup_kill_all(struct cgroup *cg);
/* Restarts the peak/OOM/pids counters from now (v1 max_usage_in_bytes;
 * counters that cannot be written are remembered and subtracted).
 * Works on a live group: a warm interpreter's next request measures only
 * itself. Pool reuse checks emptiness separately (cgroup_is_empty). */
int cgroup_reset(struct cgroup *cg);
/* cpu.idle (v1 and v2, Linux >= 5.15): the group's tasks then run only when
 * nothing outside an idle group wants their CPU. cgroup_reset clears it.
 * -ENOENT without the cpu controller (or on an older kernel). */
int cgroup_set_cpu_idle(struct cgroup *cg, bool idle);
/* The same, and what cgroup_read_usage would have answered just before
 * (memory_peak excepted: 0), from the one read the reset needs anyway:
 * a resident kernel's next request reads its counters once, not three
 * times. before may be NULL. */
int cgroup_reset_read(struct cgroup *cg, struct cgroup_usage *before);
/* Kills what is left, removes the directories and frees. NULL-safe. */
void cgroup_destroy(struct cgroup *cg);
