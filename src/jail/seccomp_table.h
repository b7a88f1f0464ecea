/* The reviewed syscall table behind the jail's seccomp policy (seccomp.c
 * compiles it). Internal to src/jail. */
#pragma once

#include <stddef.h>

/* A syscall by name, with its x86_64 number for the names libseccomp 2.5.4
 * does not know yet (0: libseccomp must know it, or it is skipped). */
struct sc_name {
        const char *name;
        int nr_x86_64;
};

struct sc_group {
        const char *why; /* shown by the unit tests when a group is broken */
        const struct sc_name *names;
        size_t n;
};

/* Allowed without argument checks. */
extern const struct sc_group seccomp_allow_groups[];
extern const size_t seccomp_n_allow_groups;

/* Refused with EPERM: known, reviewed and dangerous (tests and callers rely
 * on "operation not permitted" rather than "not implemented"). */
extern const struct sc_name seccomp_deny_eperm[];
extern const size_t seccomp_n_deny_eperm;

/* Refused with ENOSYS: the caller is meant to fall back or give up as on an
 * old kernel (AIO, openat2). Everything absent from every list gets ENOSYS
 * too; these are listed only to document the decision. */
extern const struct sc_name seccomp_deny_enosys[];
extern const size_t seccomp_n_deny_enosys;

/* Resolves a table entry to the native syscall number, or -1 when neither
 * libseccomp nor the raw x86_64 column knows it on this architecture. */
int seccomp_table_resolve(const struct sc_name *s);
