/* The jail's seccomp policy, compiled once with libseccomp and applied in a
 * freshly cloned child without allocating (house style R7). */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

#include <linux/seccomp.h>

struct seccomp_prog {
        struct sock_fprog fprog;  /* refusals return their errno; owned memory */
        struct sock_fprog notify; /* the same policy, refusals (but glibc's
                                   * clone3 probe) go to the listener as
                                   * SECCOMP_RET_USER_NOTIF (raw BPF for the
                                   * fork-server shim too) */
};

/* Builds the default-deny policy (allowlist: seccomp_table.c) and exports it as raw BPF. The caller owns the
 * result; free with seccomp_prog_free(). allow_inet: when false, socket()
 * families other than AF_UNIX fail with EAFNOSUPPORT (network is off).
 * Returns 0 or -errno. */
int seccomp_prog_build(bool allow_inet, struct seccomp_prog **ret);
void seccomp_prog_free(struct seccomp_prog *p);

/* Installs the filter on the calling thread. Async-signal-safe: only a
 * prctl(), no allocation, so it is usable after clone(). Requires
 * no_new_privs to be set already (or CAP_SYS_ADMIN). Returns 0 or -errno. */
int seccomp_prog_apply(const struct seccomp_prog *p);

/* Installs the notify program with SECCOMP_FILTER_FLAG_NEW_LISTENER and
 * returns the listener fd (close-on-exec), or -errno. Async-signal-safe.
 * The fd must leave the jail before any guest code runs: whoever holds it
 * could answer its own notifications. */
int seccomp_prog_apply_listener(const struct seccomp_prog *p);

/* The errno the policy gives the syscall described by d (a notification's
 * data): what the listener must answer. 0 if the policy allows it (never
 * notified), ENOSYS for anything else than an errno verdict. */
int seccomp_prog_refusal(const struct seccomp_prog *p, const struct seccomp_data *d);

/* The syscall's name for logs ("io_setup"), or its number when unknown. */
void seccomp_syscall_name(int nr, char *buf, size_t len);
