#include "jail/landlock.h"

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12 ships 6.1 uapi headers: they know the syscalls but not the
 * network or scope fields, so the ABI pieces we use are spelled out here. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

#define SBX_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define SBX_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SBX_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#define SBX_LANDLOCK_ABI_SCOPES 6

/* Layout of struct landlock_ruleset_attr as of ABI 6. The kernel accepts a
 * shorter or longer struct as long as unknown trailing bytes are zero. */
struct sbx_landlock_ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};

int landlock_abi_version(void)
{
        long v = syscall(__NR_landlock_create_ruleset, NULL, 0,
                         SBX_LANDLOCK_CREATE_RULESET_VERSION);
        if (v < 0)
                return -errno;
        return (int)v;
}

int landlock_restrict_scopes(void)
{
        int abi = landlock_abi_version();
        /* ENOSYS: not built in; EOPNOTSUPP: built in but disabled at boot. */
        if (abi == -ENOSYS || abi == -EOPNOTSUPP)
                return -EOPNOTSUPP;
        if (abi < 0)
                return abi;
        if (abi < SBX_LANDLOCK_ABI_SCOPES)
                return -EOPNOTSUPP;

        /* No filesystem or network access is handled: the mount namespace
         * already shapes the file view, and the point here is only to wall
         * off abstract unix sockets (which live in the shared network
         * namespace, not the filesystem) and signals to other domains. */
        const struct sbx_landlock_ruleset_attr attr = {
                .scoped = SBX_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | SBX_LANDLOCK_SCOPE_SIGNAL,
        };
        /* The kernel always returns the ruleset fd with O_CLOEXEC set. */
        int fd = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
        if (fd < 0)
                return -errno;
        int r = 0;
        if (syscall(__NR_landlock_restrict_self, fd, 0) < 0)
                r = -errno;
        close(fd);
        return r;
}
