/* Mount helpers shared by the jail and the fork-server shim (which mounts a
 * fresh procfs per execution): fork-safe, raw system calls only, no malloc,
 * no stdio. Every function returns 0 or -errno. */
#pragma once

#include <stdbool.h>

/* Bind-mounts src onto dst read-only, nosuid, nodev (rec: with submounts). */
int jail_bind_ro(const char *src, const char *dst, bool rec);
/* Hides the procfs entries that say too much about the host (kernel memory,
 * symbols, keys, allocator state) behind /dev/null, as OCI runtimes do, and
 * makes proc_dir/sys read-only. proc_dir is a freshly mounted procfs. */
int jail_mask_proc(const char *proc_dir);
