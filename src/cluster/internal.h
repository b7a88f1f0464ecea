/* Private to src/cluster/: the cluster handle shared by cluster.c (routing,
 * placement, the node table) and heartbeat.c (the heartbeat thread,
 * fencing and re-homing). */
#pragma once

#include <pthread.h>

#include "base/thread.h"
#include "cluster/cluster.h"

struct cluster {
        struct cluster_options opt;
        struct store *store;
        struct sandbox_mgr *mgr;
        struct events *events;
        uint64_t epoch, started_at;
        cluster_restore_fn restore;   /* set once before requests */
        pthread_mutex_t lock;         /* nodes, n */
        struct node_row *nodes;       /* the last read of cluster_nodes, by id */
        size_t n;
        uint64_t rehomes;             /* atomic */
        struct bg_thread bg;          /* the heartbeat loop */
};

/* cluster.c */
/* Re-reads cluster_nodes into c->nodes. 0 or -errno. */
int cluster_refresh(struct cluster *c);
bool cluster_node_live(const struct cluster *c, const struct node_row *n, uint64_t now);
/* A node's load as one number: lower is less loaded. */
uint64_t cluster_load_score(const struct node_row *n);
/* Takes sandbox id over from node from ("" = nobody) if its lease is still
 * at epoch: 0 = ours now (workspace restored, sandbox.rehomed emitted when
 * it came from a node), -EBUSY = another node moved it first, -ENOENT = no
 * such sandbox, other -errno from the store. */
int cluster_adopt(struct cluster *c, const char *id, const char *from, uint64_t epoch);

/* heartbeat.c */
/* Writes this node's row now (state "up" or "down"). 0 or -errno. */
int cluster_beat(struct cluster *c, const char *state);
int cluster_heartbeat_start(struct cluster *c);
