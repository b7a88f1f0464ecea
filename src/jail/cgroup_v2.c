/* cgroup v2: one unified group per execution, with whichever of the
 * memory, pids and cpu controllers our own group can delegate. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/cgroup_internal.h"

/* CG_CPU and CG_CPUQ are the same "cpu" controller on v2. */
static const char *const v2_names[_CG_CTRL_MAX] = { "memory", "pids", "cpu", "cpu" };

static unsigned v2_available(const char *dir)
{
        char p[PATH_MAX], buf[512];
        unsigned bits = 0;
        if (cg_join_path(p, dir, "cgroup.controllers") < 0 ||
            read_file_small(p, buf, sizeof(buf), NULL) < 0)
                return 0;
        for (enum cg_ctrl c = 0; c < _CG_CTRL_MAX; c++)
                if (cg_list_has(buf, v2_names[c], ' '))
                        bits |= CG_BIT(c);
        return bits;
}

/* Enables each available controller for dir's children, one write per
 * controller because one unavailable name fails the whole write. Returns the
 * controllers that ended up enabled. */
static unsigned v2_enable(const char *dir, unsigned want)
{
        unsigned done = 0;
        for (enum cg_ctrl c = 0; c < _CG_CTRL_MAX; c++) {
                char op[32];
                if (!(want & CG_BIT(c)))
                        continue;
                snprintf(op, sizeof(op), "+%s", v2_names[c]);
                if (cg_write(dir, "cgroup.subtree_control", op) == 0)
                        done |= CG_BIT(c);
        }
        return done;
}

static int open_v2(struct cgroup_root *root, const char *name)
{
        char dir[PATH_MAX];
        int r = cg_find_own_dir(NULL, dir, sizeof(dir));
        if (r == -ENOENT)
                return -EOPNOTSUPP;
        if (r < 0)
                return r;
        /* Our own group usually holds the daemon itself, and v2's "no
         * internal processes" rule then refuses (EBUSY) to enable domain
         * controllers there; a delegating manager may have done it for us
         * already, so this is best effort and what counts is what our new
         * group receives. */
        v2_enable(dir, v2_available(dir));
        r = cg_root_add(root, dir, name, CG_MEMORY);
        if (r < 0)
                return r;
        /* One directory for all controllers: replace cg_root_add's bit with
         * what is really enabled for the execution groups below it. */
        root->h[0].ctrls = v2_enable(root->h[0].path, v2_available(root->h[0].path));
        return 0;
}

/* v2 is only worth it with the memory controller: without it there are no
 * limits. Checked before creating anything, so a v1 machine is untouched. */
bool cg_v2_has_memory(void)
{
        char dir[PATH_MAX];
        return cg_find_own_dir(NULL, dir, sizeof(dir)) == 0 &&
               (v2_available(dir) & CG_BIT(CG_MEMORY));
}

static int set_limits_v2(struct cgroup *cg, const struct cgroup_limits *lim)
{
        const char *dir = cg->h[0].path;
        unsigned have = cg->h[0].ctrls;
        int r;
        /* Refuse rather than silently run without a requested limit. */
        if ((lim->memory_bytes && !(have & CG_BIT(CG_MEMORY))) ||
            (lim->pids && !(have & CG_BIT(CG_PIDS))) ||
            (lim->cpu_quota_percent && !(have & CG_BIT(CG_CPUQ))))
                return -EOPNOTSUPP;
        if (lim->memory_bytes) {
                r = cg_write_u64(dir, "memory.max", lim->memory_bytes);
                if (r < 0)
                        return r;
                r = cg_write(dir, "memory.swap.max", "0");
                if (r < 0 && r != -ENOENT) /* absent without CONFIG_SWAP */
                        return r;
        }
        if (lim->pids) {
                r = cg_write_u64(dir, "pids.max", lim->pids);
                if (r < 0)
                        return r;
        }
        if (lim->cpu_quota_percent) {
                char v[64];
                snprintf(v, sizeof(v), "%llu %llu", (unsigned long long)cg_cpu_quota_us(lim->cpu_quota_percent),
                         CG_CPU_PERIOD_US);
                r = cg_write(dir, "cpu.max", v);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* memory.peak and memory.events exist only with the memory controller. */
static const char *memory_dir(const struct cgroup *cg)
{
        return cg->h[0].ctrls & CG_BIT(CG_MEMORY) ? cg->h[0].path : NULL;
}

static int read_raw_v2(struct cgroup *cg, struct cgroup_usage *u, unsigned what)
{
        uint64_t usec = 0;
        int r = cg_counter_key(cg, CG_CNT_CPU, cg->h[0].path, "cpu.stat", "usage_usec", &usec);
        u->cpu_ns = usec * 1000;
        if (r >= 0 && (what & CGROUP_USAGE_PEAK))
                r = cg_counter_u64(cg, CG_CNT_PEAK, memory_dir(cg), "memory.peak", &u->memory_peak);
        if (r >= 0 && (what & CGROUP_USAGE_OOM))
                r = cg_counter_key(cg, CG_CNT_OOM, cg->h[0].path, "memory.events", "oom_kill", &u->oom_kills);
        if (r >= 0 && (what & CGROUP_USAGE_PIDS))
                r = cg_counter_key(cg, CG_CNT_PIDS, cg->h[0].path, "pids.events", "max", &u->pids_max_hits);
        return r;
}

/* "populated" also covers nested groups. */
static int is_empty_v2(const struct cgroup *cg)
{
        uint64_t populated;
        int r = cg_read_key_u64(cg->h[0].path, "cgroup.events", "populated", &populated);
        return r < 0 ? r : populated == 0;
}

/* cgroup.kill (5.14+) kills atomically, including tasks forked meanwhile
 * and nested groups; older kernels lack the file (-ENOENT). */
static int kill_all_v2(struct cgroup *cg)
{
        int r = cg_write(cg->h[0].path, "cgroup.kill", "1");
        return r < 0 ? r : cg_wait_empty(cg);
}

/* 6.12+: a write resets the peak seen through this fd; older kernels
 * refuse and the peak stays the group's lifetime max. */
static void reset_peaks_v2(struct cgroup *cg)
{
        (void)cg_counter_write(cg, CG_CNT_PEAK, memory_dir(cg), "memory.peak", "reset\n");
}

/* A parent group holds no process, so v2's "no internal processes" rule
 * lets it pass its controllers on; its children get only what it could. */
static int delegate_v2(struct cgroup *cg)
{
        unsigned want = cg->h[0].ctrls;
        unsigned got = v2_enable(cg->h[0].path, want);
        if ((want & CG_BIT(CG_MEMORY)) && !(got & CG_BIT(CG_MEMORY)))
                return -EOPNOTSUPP;
        cg->h[0].ctrls = got;
        return 0;
}

const struct cgroup_ops cg_ops_v2 = {
        .backend = CGROUP_V2,
        .unified = true,
        .root_open = open_v2,
        .set_limits = set_limits_v2,
        .read_raw = read_raw_v2,
        .is_empty = is_empty_v2,
        .kill_all = kill_all_v2,
        .reset_peaks = reset_peaks_v2,
        .delegate = delegate_v2,
};
