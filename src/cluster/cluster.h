/* Cluster mode (issue 16): several daemons share one store (PostgreSQL)
 * and each serves the sandboxes it owns. Every node heartbeats its row of
 * cluster_nodes (url, epoch, load); a node whose heartbeat is older than
 * dead_after_ms is dead, and the live nodes re-home its sandboxes: they
 * race store_sandbox_claim (a compare-and-set on the sandbox's
 * lease_epoch, exactly one wins), the least-loaded first, and the winner
 * restores the workspace from the replica (the restore hook) and emits
 * sandbox.rehomed. Each heartbeat also fences: a sandbox loaded here whose
 * row now names another node is dropped (a node resumed after SIGSTOP does
 * not serve it twice). The HTTP side (forwarding a request to its owner)
 * is api/common/cluster_route.c's, built on cluster_route.
 *
 * A NULL struct cluster * everywhere means cluster mode is off: callers
 * test for it, and then nothing changes. Thread-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "store/store.h"

#define CLUSTER_URL_MAX 256

struct sandbox_mgr;
struct events;
struct cluster;   /* NULL everywhere = cluster mode off */

struct cluster_options {
        char node_id[STORE_ID_MAX];     /* non-empty */
        char url[CLUSTER_URL_MAX];      /* base URL other nodes forward to */
        char secret[256];               /* signs forwarded requests; non-empty */
        uint64_t heartbeat_ms;          /* heartbeat (and re-homing scan) period */
        uint64_t dead_after_ms;         /* a node silent this long is dead */
};

/* Registers this node (a new epoch) and starts its heartbeat thread. s, m
 * and ev (may be NULL: no events) must outlive the cluster. On failure err
 * is filled and *ret untouched. */
int cluster_new(const struct cluster_options *o, struct store *s, struct sandbox_mgr *m, struct events *ev,
                struct cluster **ret, struct err *err);
/* Stops the heartbeat thread (the last use of the manager): call before
 * freeing the manager. Idempotent, NULL-safe. */
void cluster_stop(struct cluster *c);
/* NULL-safe; stops heartbeats (cluster_stop) and marks this node down, so
 * the others re-home its sandboxes at once: call after the manager is
 * freed, when whatever it persists on the way down is persisted. */
void cluster_free(struct cluster *c);
const char *cluster_node_id(const struct cluster *c);
const char *cluster_secret(const struct cluster *c);
/* This node's epoch (bumped at every start). */
uint64_t cluster_epoch(const struct cluster *c);

/* What restores a re-homed sandbox's workspace here (the replica's
 * sbx_replica_restore): -ENOENT = no replica of it (it starts empty).
 * Unset: a re-homed sandbox starts with an empty workspace. Set once,
 * before requests come. */
typedef int (*cluster_restore_fn)(struct sandbox_mgr *m, const char *id, struct err *err);
void cluster_set_restore_hook(struct cluster *c, cluster_restore_fn fn);

enum { CLUSTER_LOCAL = 0, CLUSTER_REMOTE = 1 };
/* Where a request about sandbox_id goes. LOCAL: serve here (ours; or
 * unowned/dead owner and we just adopted it — workspace restored from the
 * replica, contexts replay their journal lazily; or it does not exist and
 * may_create and placement chose us, or it does not exist and !may_create:
 * the local handler answers 404). REMOTE: url = the owner's base URL (or
 * the placed node's for a create). -errno on store failure. */
int cluster_route(struct cluster *c, const char *sandbox_id, bool may_create, char url[static CLUSTER_URL_MAX]);
/* Placement for a create without an id (controller/bridge creates): the
 * least-loaded live node (cpu, memory, live contexts); this node unless
 * another is clearly less loaded. LOCAL or REMOTE+url. */
int cluster_place(struct cluster *c, char url[static CLUSTER_URL_MAX]);

/* A node as this one sees it (GET /api/v1/health/detailed). */
struct cluster_node_info {
        struct node_row row;
        bool live;             /* heartbeat within dead_after_ms, not down */
        bool self;
        uint64_t age_ms;       /* since its last heartbeat */
};
/* The nodes of the cluster (by id) from the last heartbeat's read;
 * *ret is malloc'ed (free()), *ret_n its length. 0 or -ENOMEM. */
int cluster_nodes(struct cluster *c, struct cluster_node_info **ret, size_t *ret_n);
/* Sandboxes this node re-homed (won from a dead node) since it started. */
uint64_t cluster_rehomes(const struct cluster *c);
