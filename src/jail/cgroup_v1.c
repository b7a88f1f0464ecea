/* cgroup v1: memory, pids and cpuacct as separate hierarchies (a
 * hierarchy may carry several of them when co-mounted). */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "jail/cgroup_internal.h"

static const char *const v1_names[_CG_CTRL_MAX] = { "memory", "pids", "cpuacct", "cpu" };

/* v1: memory and pids are required (they are the limits); cpuacct is
 * optional and only feeds cpu_ns; cpu (the CFS quota) is optional too:
 * cgroup_root_set_cpu_quota says when it is missing. */
static int open_v1(struct cgroup_root *root, const char *name)
{
        for (enum cg_ctrl c = 0; c < _CG_CTRL_MAX; c++) {
                char dir[PATH_MAX];
                int r = cg_find_own_dir(v1_names[c], dir, sizeof(dir));
                if (r == -ENOENT && (c == CG_CPU || c == CG_CPUQ))
                        continue;
                if (r == -ENOENT)
                        return -EOPNOTSUPP;
                if (r < 0)
                        return r;
                r = cg_root_add(root, dir, name, c);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The period first: a quota above the period of a fresh group is valid
 * either way, but the kernel checks the pair against the parent's. */
static int set_cpu_quota_v1(struct cgroup *cg, uint32_t percent)
{
        const char *cpu = cg_ctrl_dir(cg, CG_CPUQ);
        if (!percent)
                return 0;
        if (!cpu)
                return -EOPNOTSUPP;
        int r = cg_write_u64(cpu, "cpu.cfs_period_us", CG_CPU_PERIOD_US);
        return r < 0 ? r : cg_write_u64(cpu, "cpu.cfs_quota_us", cg_cpu_quota_us(percent));
}

static int set_limits_v1(struct cgroup *cg, const struct cgroup_limits *lim)
{
        const char *mem = cg_ctrl_dir(cg, CG_MEMORY), *pids = cg_ctrl_dir(cg, CG_PIDS);
        int r = set_cpu_quota_v1(cg, lim->cpu_quota_percent);
        if (r < 0)
                return r;
        if (lim->memory_bytes) {
                r = cg_write_u64(mem, "memory.limit_in_bytes", lim->memory_bytes);
                if (r < 0)
                        return r;
                /* Same value for memory+swap, or swap would be an escape hatch.
                 * The file is missing when swap accounting is off. */
                r = cg_write_u64(mem, "memory.memsw.limit_in_bytes", lim->memory_bytes);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        /* Keep the job's pages out of swap: best effort, as some kernels
         * refuse to change swappiness under use_hierarchy. */
        (void)cg_write(mem, "memory.swappiness", "0");
        /* memory.oom_control stays at its default (OOM killer enabled):
         * disabling it would freeze an over-limit job until someone
         * intervenes, instead of a prompt SIGKILL we can report. */
        if (lim->pids) {
                r = cg_write_u64(pids, "pids.max", lim->pids);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int read_raw_v1(struct cgroup *cg, struct cgroup_usage *u, unsigned what)
{
        const char *mem = cg_ctrl_dir(cg, CG_MEMORY), *pids = cg_ctrl_dir(cg, CG_PIDS);
        int r = cg_counter_u64(cg, CG_CNT_CPU, cg_ctrl_dir(cg, CG_CPU), "cpuacct.usage", &u->cpu_ns);
        if (r >= 0 && (what & CGROUP_USAGE_PEAK))
                r = cg_counter_u64(cg, CG_CNT_PEAK, mem, "memory.max_usage_in_bytes", &u->memory_peak);
        if (r >= 0 && (what & CGROUP_USAGE_OOM))
                r = cg_counter_key(cg, CG_CNT_OOM, mem, "memory.oom_control", "oom_kill", &u->oom_kills);
        if (r >= 0 && (what & CGROUP_USAGE_PIDS))
                r = cg_counter_key(cg, CG_CNT_PIDS, pids, "pids.events", "max", &u->pids_max_hits);
        return r;
}

/* Only the peak we report: failcnt and the memsw counters are read by
 * nobody, so resetting them would be three more writes per request. */
static void reset_peaks_v1(struct cgroup *cg)
{
        (void)cg_counter_write(cg, CG_CNT_PEAK, cg_ctrl_dir(cg, CG_MEMORY), "memory.max_usage_in_bytes", "0");
}

const struct cgroup_ops cg_ops_v1 = {
        .backend = CGROUP_V1,
        .root_open = open_v1,
        .set_limits = set_limits_v1,
        .read_raw = read_raw_v1,
        .reset_peaks = reset_peaks_v1,
};
