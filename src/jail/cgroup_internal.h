/* Shared by the cgroup backends (cgroup.c: discovery, files, dispatch;
 * cgroup_v1.c; cgroup_v2.c) and their unit test. Not for use elsewhere:
 * the rest of the daemon sees only jail/cgroup.h. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jail/cgroup.h"

/* Controllers we use. On v1 the CPU one is "cpuacct" (accounting only; it is
 * often a separate hierarchy from "cpu"), on v2 it is "cpu". CG_CPUQ is the
 * CFS bandwidth (quota) controller: "cpu" on v1, the same "cpu" on v2. */
enum cg_ctrl { CG_MEMORY, CG_PIDS, CG_CPU, CG_CPUQ, _CG_CTRL_MAX };
#define CG_BIT(c) (1U << (c))

/* A task killed with SIGKILL stays in its group until it has finished
 * exiting (freeing a large address space takes milliseconds), so emptiness
 * is polled for a bounded time: CG_KILL_ROUNDS x CG_POLL_NS = 2 s. */
#define CG_KILL_ROUNDS 2000
#define CG_POLL_NS 1000000L

/* CFS bandwidth: quota per period, both in microseconds. */
#define CG_CPU_PERIOD_US 100000ULL
static inline uint64_t cg_cpu_quota_us(uint32_t percent)
{
        return CG_CPU_PERIOD_US * percent / 100;
}

struct cgroup_ops;

/* The usage counters a request reads, each through an fd the group keeps
 * open from its first read to its destruction: a read is one pread from
 * offset 0 (a cgroup file is regenerated then) instead of a path walk,
 * open, two reads and a close. CG_CNT_PEAK is opened read-write: its
 * reset is a write to it (on v2 a reset is per open file, so the reads
 * must go through the same fd). */
enum cg_counter { CG_CNT_CPU, CG_CNT_PEAK, CG_CNT_OOM, CG_CNT_PIDS, _CG_CNT_MAX };
#define CG_CNT_CLOSED (-1)  /* not opened yet */
#define CG_CNT_MISSING (-2) /* the file does not exist: reads as 0 */

/* One directory per hierarchy; on v1 a hierarchy may carry several of our
 * controllers (e.g. "cpu,cpuacct" co-mounted), so ctrls is a bitmask. On v2
 * there is a single entry and ctrls says which controllers are enabled. */
struct cg_hier {
        char *path;
        unsigned ctrls;
};

struct cgroup_root {
        const struct cgroup_ops *ops;
        uint32_t cpu_quota_percent; /* applied to every group created below */
        size_t n;
        struct cg_hier h[_CG_CTRL_MAX];
};

struct cgroup {
        const struct cgroup_ops *ops;
        size_t n; /* hierarchies whose directory we created */
        struct cg_hier h[_CG_CTRL_MAX];
        bool nested;              /* below a parent group (cgroup_create_in) */
        int cnt_fd[_CG_CNT_MAX];  /* CG_CNT_CLOSED, CG_CNT_MISSING or an fd */
        struct cgroup_usage base; /* cumulative counters at the last reset */
        bool cpu_idle;            /* cpu.idle written 1 (cgroup_set_cpu_idle) */
};

/* What differs between cgroup v1 and v2 (crun's cgroup manager idea). The
 * none backend has no hierarchy (n == 0) and every entry points nowhere:
 * cgroup.c answers for it. */
struct cgroup_ops {
        enum cgroup_backend backend;
        /* One directory holds every controller's files (v2). */
        bool unified;
        /* Fills root with "<own group>/<name>" in each hierarchy used. */
        int (*root_open)(struct cgroup_root *root, const char *name);
        int (*set_limits)(struct cgroup *cg, const struct cgroup_limits *lim);
        /* Raw cumulative counters, before subtracting the reset baseline.
         * The CPU time always; of the others only those in what
         * (CGROUP_USAGE_*), the rest left 0, unread (a syscall each fewer). */
        int (*read_raw)(struct cgroup *cg, struct cgroup_usage *u, unsigned what);
        /* Optional: 1 empty, 0 not, < 0 unknown (cgroup.procs is read then). */
        int (*is_empty)(const struct cgroup *cg);
        /* Optional: atomic kill; -ENOENT falls back to the procs loop. */
        int (*kill_all)(struct cgroup *cg);
        void (*reset_peaks)(struct cgroup *cg);
        /* Optional: lets cg's children use its controllers (v2
         * cgroup.subtree_control); v1 hierarchies need nothing. */
        int (*delegate)(struct cgroup *cg);
};

extern const struct cgroup_ops cg_ops_v1, cg_ops_v2;

/* Directory holding controller c's files, or NULL when not in use. */
const char *cg_ctrl_dir(const struct cgroup *cg, enum cg_ctrl c);

/* Files (all return 0 or -errno). */
int cg_join_path(char buf[static PATH_MAX], const char *dir, const char *file);
int cg_write(const char *dir, const char *file, const char *value);
int cg_write_u64(const char *dir, const char *file, uint64_t v);
/* True when word is an element of a list separated by sep. */
bool cg_list_has(const char *list, const char *word, char sep);
int cg_read_key_u64(const char *dir, const char *file, const char *key, uint64_t *ret);
int cg_read_key_opt(const char *dir, const char *file, const char *key, uint64_t *ret);
int cg_read_u64_opt(const char *dir, const char *file, uint64_t *ret);
/* Counter c (dir/file) through its kept fd, as cg_read_u64_opt and
 * cg_read_key_opt read it (a missing file reads as 0). dir NULL: 0. */
int cg_counter_u64(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file, uint64_t *ret);
int cg_counter_key(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file, const char *key,
                   uint64_t *ret);
/* Writes value to counter c's kept fd (a reset); -ENOENT when missing. */
int cg_counter_write(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file, const char *value);

/* Discovery. */
const char *cg_proc_cgroup_match(char *line, const char *ctrl);
int cg_mountinfo_match(char *line, const char *fstype, const char *ctrl, const char *own, char *ret,
                       size_t size);
int cg_find_own_dir(const char *ctrl, char *ret, size_t size);
int cg_root_add(struct cgroup_root *root, const char *dir, const char *name, enum cg_ctrl c);
/* v2 is only worth it with the memory controller (auto-detection). */
bool cg_v2_has_memory(void);

/* Removes the groups a dead daemon left in dir: entries named like name
 * (same text before its first '-', then a pid) whose pid is gone, depth
 * first; a group that still holds a process stays. */
void cg_sweep_stale(const char *dir, const char *name);

/* Killing and emptiness through cgroup.procs. */
bool cg_procs_empty(const char *dir);
int cg_kill_loop(struct cgroup *cg);
int cg_wait_empty(struct cgroup *cg);
