/* Privilege and resource-limit handling for a process about to run guest
 * code. Shared by the jail (its cloned child and init) and the fork-server
 * shim (src/shim/), so it is fork-safe: raw system calls only, no malloc,
 * no stdio, no logging. Every function returns 0 or -errno. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct jail_limits;

enum privs_flags {
        PRIVS_SETID = 1 << 0,     /* become uid/gid (else keep the current ids) */
        PRIVS_SETGROUPS = 1 << 1, /* and drop supplementary groups first (not
                                   * allowed in an unprivileged user namespace) */
};

/* Drops every privilege: the bounding and ambient capability sets, then
 * (PRIVS_SETID) supplementary groups and uid/gid, then the remaining
 * capability sets, and finally sets no_new_privs so setuid binaries and file
 * capabilities are inert. The bounding set needs CAP_SETPCAP, so it goes
 * before the uid. */
int privs_drop(uid_t uid, gid_t gid, unsigned flags);
/* Becomes uid/gid 0 of the current user namespace, without supplementary
 * groups (a template jail's init, whose host uid is not mapped). */
int privs_become_root(void);
/* Becomes host_id (uid and gid, no supplementary groups; needs CAP_SETUID,
 * CAP_SETGID), then unshares a user namespace, which is therefore owned by
 * host_id, and maps inner_id there to host_id (uid and gid, setgroups
 * denied), as an unprivileged process may. Afterwards the caller is inner_id
 * with every capability of the new namespace and none outside it, and not
 * dumpable (exec makes it dumpable again). */
int privs_enter_userns(uid_t host_id, uid_t inner_id);
int privs_setrlimit(int resource, uint64_t soft, uint64_t hard);
/* The jail's rlimits from its limits (0 = unset), plus no core dumps and no
 * POSIX message queues. */
int privs_apply_limits(const struct jail_limits *l);
