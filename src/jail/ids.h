/* Host identities of jails (issue 10, rows 3 and 4): a dedicated range of
 * host uids/gids, never shared with an account of the machine, from which
 * every sandbox gets its own id and stateless runs and templates take ids
 * from a small rotating set. In-jail the user is always JAIL_UID; only the
 * host side of the mapping changes.
 *
 * Layout of [base, base + count):
 *   base                     the templates' root (owner of their user namespaces)
 *   base + 1 .. + STATELESS  rotating ids of stateless runs and template executors
 *   the rest                 one per sandbox (stored with the sandbox) */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

#define JAIL_IDS_DEFAULT_BASE 1000000000U
#define JAIL_IDS_DEFAULT_COUNT 65536U
#define JAIL_IDS_STATELESS 64U
/* The smallest range: the template id, the rotating set and some sandboxes. */
#define JAIL_IDS_MIN_COUNT (JAIL_IDS_STATELESS + 2U)

struct jail_ctx;

/* Checks a range before use: it must fit below 2^32-1, hold at least
 * JAIL_IDS_MIN_COUNT ids, and contain neither the daemon's uid/gid, 65534,
 * nor any uid or gid named in /etc/passwd or /etc/group (passwd, group:
 * NULL for the real files). Returns 0 or -errno with err saying which id
 * collides. */
int jail_ids_check(uint64_t base, uint64_t count, const char *passwd, const char *group, struct err *err);
/* Gives the context its range (after jail_ctx_init) and checks it. Rootless:
 * the range is the daemon user's subordinate uid range (/etc/subuid, the
 * configured one when it lies inside, else its start) when newuidmap
 * exists; otherwise none (every jail maps the daemon's own id, with a
 * warning in the log). */
int jail_ctx_set_ids(struct jail_ctx *ctx, uint64_t base, uint64_t count, struct err *err);
/* Reads the first subordinate range of uid (or of the user name) from an
 * /etc/subuid-style file. Returns 0, -ENOENT (no entry) or -errno. */
int jail_ids_subordinate(const char *path, uid_t uid, const char *name, uint64_t *base, uint64_t *count);
/* Rootless: maps JAIL_UID in pid's (fresh) user namespace to host_id, a
 * subordinate id, and its root to the daemon's own uid, by running the
 * setuid newuidmap. Returns 0 or -errno. */
int jail_ids_map_user(pid_t pid, uid_t host_id);
/* The templates' root id (JAIL_TEMPLATE_UID without a range). */
uid_t jail_ids_template(const struct jail_ctx *ctx);
/* The next id of the rotating stateless set (thread-safe). Without a range:
 * the daemon's own uid (rootless) or JAIL_UID (root, e.g. unit tests). */
uid_t jail_ids_stateless(struct jail_ctx *ctx);
/* The ids sandboxes are given: [*first, *first + *n). n = 0 without a range. */
void jail_ids_sandbox_range(const struct jail_ctx *ctx, uid_t *first, uint32_t *n);
