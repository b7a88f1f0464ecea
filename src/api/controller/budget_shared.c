/* Budgets across a cluster (issue 16): with cluster mode on, the
 * executions an org runs are rows of the store's exec_slots, taken by a
 * conditional insert that fails at the org's limit, so every node counts
 * the same executions (queue.c counts them in memory otherwise). A dead
 * node's slots are freed by the cluster's heartbeat scan, a node's own
 * leftovers when it starts (src/cluster/). Queued requests a dead node was
 * running fail (they died with it), as a single daemon's do at restart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/log.h"
#include "base/time.h"
#include "cluster/cluster.h"

bool ctl_slot_shared(const struct app *app, enum ctl_slot kind)
{
        return app->cluster && kind == CTL_SLOT_EXECUTE;
}

bool ctl_slot_take_shared(struct app *app, const char *org_id, const char *kind, uint64_t limit,
                          char ticket[static STORE_ID_MAX])
{
        struct slot_row row = { .started_at = wall_ms() };
        int r;

        if (tenant_id_new("slot", row.id) < 0)
                return false;
        snprintf(row.org_id, sizeof(row.org_id), "%s", org_id);
        snprintf(row.node_id, sizeof(row.node_id), "%s", cluster_node_id(app->cluster));
        snprintf(row.kind, sizeof(row.kind), "%s", kind);
        r = store_slot_take(app->store, &row, limit);
        if (r < 0) {
                if (r != -EBUSY)
                        log_warn("msg=\"cannot take a budget slot\" org=%s err=%d", org_id, r);
                return false;
        }
        memcpy(ticket, row.id, STORE_ID_MAX);
        return true;
}

void ctl_slot_give_shared(struct app *app, const char *ticket)
{
        int r = store_slot_give(app->store, ticket);
        /* -ENOENT: this node was taken for dead meanwhile and its slots freed. */
        if (r < 0 && r != -ENOENT)
                log_warn("msg=\"cannot give a budget slot back\" slot=%s err=%d", ticket, r);
}

uint64_t ctl_slots_in_use(struct app *app, const char *org_id, const char *kind)
{
        uint64_t n = 0;
        return store_slot_count(app->store, org_id, kind, &n) < 0 ? 0 : n;
}

const char *ctl_node_id(const struct app *app)
{
        return app->cluster ? cluster_node_id(app->cluster) : "";
}

void ctl_queue_fail_dead(struct app *app, bool at_start, uint32_t status, const char *body, uint64_t now)
{
        struct cluster_node_info *v = NULL;
        size_t n = 0;

        if (at_start)
                (void)store_queue_fail_node(app->store, ctl_node_id(app), status, body, now);
        if (cluster_nodes(app->cluster, &v, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (!v[i].live && !v[i].self)
                        (void)store_queue_fail_node(app->store, v[i].row.id, status, body, now);
        free(v);
}
