#include "jail/procfs.h"

#include <errno.h>
#include <sys/mount.h>
#include <unistd.h>

#include "jail/internal.h"

/* procfs entries that leak host state even inside a pid namespace. The
 * last row identifies the host and its other users: the kernel command line
 * (root device, boot options), the boot id (the same for every jail of the
 * boot: ties tenants' sessions together) and every uid's key quotas. sys/
 * entries are masked before sys is made read-only, whose recursive bind
 * keeps them. */
static const char *const proc_masks[] = {
        "kcore", "kallsyms", "keys", "timer_list", "sched_debug", "sysrq-trigger", "kmsg",
        "latency_stats", "config.gz", "modules", "vmallocinfo", "slabinfo", "pagetypeinfo",
        "buddyinfo", "zoneinfo", "iomem", "ioports", "kpagecount", "kpageflags", "kpagecgroup",
        "cmdline", "sys/kernel/random/boot_id", "key-users",
};

/* A bind mount ignores flags on creation, so a second remount pass applies them. */
int jail_bind_ro(const char *src, const char *dst, bool rec)
{
        unsigned long f = MS_BIND | (rec ? MS_REC : 0);
        if (mount(src, dst, NULL, f, NULL) < 0 ||
            mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                return -errno;
        return 0;
}

int jail_mask_proc(const char *proc_dir)
{
        char dst[PATHLEN];
        for (size_t i = 0; i < sizeof(proc_masks) / sizeof(proc_masks[0]); i++) {
                /* An entry this kernel lacks fails with ENOENT: no access()
                 * first, which walked the path once more on every jail and
                 * every template execution (a cold procfs: ~5 us each). */
                if (mount("/dev/null", path_join(dst, proc_dir, proc_masks[i]), NULL, MS_BIND, NULL) < 0 &&
                    errno != ENOENT)
                        return -errno;
        }
        return jail_bind_ro(path_join(dst, proc_dir, "sys"), dst, true);
}
