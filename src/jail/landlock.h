/* Landlock scoping (ABI >= 6): confines abstract unix sockets and signals to
 * the calling process's own domain, so executions sharing the empty network
 * namespace cannot reach each other's abstract sockets. */
#pragma once

/* Returns the running kernel's Landlock ABI version, or -errno. */
int landlock_abi_version(void);
/* Creates a scoped ruleset (abstract unix sockets + signals) and restricts
 * the calling thread. Async-signal-safe (raw syscalls only). Returns 0,
 * -EOPNOTSUPP when the kernel lacks scoping, or -errno. */
int landlock_restrict_scopes(void);
