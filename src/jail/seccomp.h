/* The jail's seccomp policy, compiled once with libseccomp and applied in a
 * freshly cloned child without allocating (house style R7). */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>

struct seccomp_prog {
        struct sock_fprog fprog; /* filter points into owned memory */
};

/* Builds the deny-list policy and exports it as raw BPF. The caller owns the
 * result; free with seccomp_prog_free(). allow_inet: when false, socket()
 * families other than AF_UNIX fail with EAFNOSUPPORT (network is off).
 * Returns 0 or -errno. */
int seccomp_prog_build(bool allow_inet, struct seccomp_prog **ret);
void seccomp_prog_free(struct seccomp_prog *p);

/* Installs the filter on the calling thread. Async-signal-safe: only a
 * prctl(), no allocation, so it is usable after clone(). Requires
 * no_new_privs to be set already (or CAP_SYS_ADMIN). Returns 0 or -errno. */
int seccomp_prog_apply(const struct seccomp_prog *p);
