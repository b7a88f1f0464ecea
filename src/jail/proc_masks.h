/* procfs entries every jail hides behind /dev/null: kernel memory, symbols,
 * keys and allocator state that say too much about the host. Shared by the
 * jail and the fork-server shim, which mounts a fresh procfs per execution. */
#pragma once

static const char *const jail_proc_masks[] = {
        "kcore", "kallsyms", "keys", "timer_list", "sched_debug", "sysrq-trigger", "kmsg",
        "latency_stats", "config.gz", "modules", "vmallocinfo", "slabinfo", "pagetypeinfo",
        "buddyinfo", "zoneinfo", "iomem", "ioports", "kpagecount", "kpageflags", "kpagecgroup",
};
