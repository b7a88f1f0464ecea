/* A sandbox's parent cgroup: one CPU quota, memory and pids limit for all
 * its context kernels together, each kernel's own group a child of it (so
 * N resident contexts cannot use N quotas between requests). Shared by
 * reference: the sandbox holds one, every kernel started in it another,
 * and the directory goes with the last. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/internal.h"
#include "engine/kproc.h"

struct kproc_group {
        struct cgroup *cg;
        int refs; /* atomic */
};

int kproc_group_new(struct engine *e, const struct kproc_group_limits *own, struct kproc_group **ret)
{
        *ret = NULL;
        if (cgroup_root_backend(e->jail.cgroot) == CGROUP_NONE)
                return 0;
        struct kproc_group *g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        char name[64];
        engine_next_cgroup_name(e, name, sizeof(name));
        name[0] = 's'; /* "s<seq>": a sandbox's family, next to the "x<seq>" jails */
        struct cgroup_limits lim = { .memory_bytes = e->opt.sandbox_memory_bytes, .pids = e->opt.sandbox_pids };
        if (own && own->memory_bytes)
                lim.memory_bytes = own->memory_bytes;
        if (own && own->cpu_quota_percent)
                lim.cpu_quota_percent = own->cpu_quota_percent;
        int r = cgroup_create_parent(e->jail.cgroot, name, &lim, &g->cg);
        if (r < 0) {
                free(g);
                return r;
        }
        g->refs = 1;
        *ret = g;
        return 0;
}

struct kproc_group *kproc_group_ref(struct kproc_group *g)
{
        if (g)
                __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
        return g;
}

void kproc_group_unref(struct kproc_group *g)
{
        if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        cgroup_destroy(g->cg);
        free(g);
}

struct cgroup *kproc_group_cgroup(const struct kproc_group *g)
{
        return g ? g->cg : NULL;
}
