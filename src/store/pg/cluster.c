/* The cluster_nodes table and the sandboxes' ownership lease (issue 16). */
#include <errno.h>

#include "store/pg/pg.h"

#define NODE_COLUMNS \
        "id, url, epoch, started_at, heartbeat_at, cpu_millis, mem_bytes, contexts, sandboxes, state"

int pgs_node_heartbeat(struct store *s, const struct node_row *n)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO cluster_nodes(" NODE_COLUMNS ") VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
                       "ON CONFLICT(id) DO UPDATE SET url = EXCLUDED.url, epoch = EXCLUDED.epoch, "
                       "started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, "
                       "cpu_millis = EXCLUDED.cpu_millis, mem_bytes = EXCLUDED.mem_bytes, "
                       "contexts = EXCLUDED.contexts, sandboxes = EXCLUDED.sandboxes, state = EXCLUDED.state",
                       "ttuuuuuuut", n->id, n->url, n->epoch, n->started_at, n->heartbeat_at, n->cpu_millis,
                       n->mem_bytes, n->contexts, n->sandboxes, n->state);
}

static int node_decode(const PGresult *res, int i, void *item)
{
        struct node_row *n = item;
        int r;

        if ((r = pgs_copy(res, i, 0, n->id, sizeof(n->id))) < 0 ||
            (r = pgs_copy(res, i, 1, n->url, sizeof(n->url))) < 0 ||
            (r = pgs_copy(res, i, 9, n->state, sizeof(n->state))) < 0)
                return r;
        n->epoch = pgs_u64(res, i, 2);
        n->started_at = pgs_u64(res, i, 3);
        n->heartbeat_at = pgs_u64(res, i, 4);
        n->cpu_millis = pgs_u64(res, i, 5);
        n->mem_bytes = pgs_u64(res, i, 6);
        n->contexts = pgs_u64(res, i, 7);
        n->sandboxes = pgs_u64(res, i, 8);
        return 0;
}

int pgs_node_list(struct store *s, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db, "SELECT " NODE_COLUMNS " FROM cluster_nodes ORDER BY id", out, node_decode, "");
}

static int owner_decode(const PGresult *res, int i, void *item)
{
        struct store_owner *o = item;
        int r;

        if ((r = pgs_copy(res, i, 0, o->id, sizeof(o->id))) < 0 ||
            (r = pgs_copy(res, i, 1, o->node_id, sizeof(o->node_id))) < 0)
                return r;
        o->lease_epoch = pgs_u64(res, i, 2);
        return 0;
}

static int owner_on(PGconn *db, const char *id, struct store_owner *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        int r = pgs_query_row(db, "SELECT id, node_id, lease_epoch FROM sandboxes WHERE id = $1", &res, "t", id);

        return r < 0 ? r : owner_decode(res, 0, ret);
}

/* The compare-and-set: under READ COMMITTED the second of two concurrent
 * UPDATEs re-checks its WHERE against the first's committed row, whose
 * lease_epoch moved, and changes nothing — exactly one claim wins. */
int pgs_sandbox_claim(struct store *s, const char *id, const char *node_id, uint64_t expected_epoch)
{
        PGS_CONN(s, db);
        struct store_owner o;
        int r = pgs_run_changed(db,
                                "UPDATE sandboxes SET node_id = $1, lease_epoch = lease_epoch + 1 "
                                "WHERE id = $2 AND lease_epoch = $3",
                                "ttu", node_id, id, expected_epoch);

        if (r != -ENOENT)
                return r;
        r = owner_on(db, id, &o);
        return r < 0 ? r : -EBUSY;
}

int pgs_sandbox_owner(struct store *s, const char *id, struct store_owner *ret)
{
        PGS_CONN(s, db);
        return owner_on(db, id, ret);
}

int pgs_sandbox_list_on_node(struct store *s, const char *node_id, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db, "SELECT id, node_id, lease_epoch FROM sandboxes WHERE node_id = $1 ORDER BY id", out,
                        owner_decode, "t", node_id);
}

int pgs_sandbox_usage_on_node(struct store *s, const char *node_id, uint64_t default_bytes, uint64_t *ret_count,
                              uint64_t *ret_reserved)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db,
                              "SELECT COUNT(*), COALESCE(SUM(CASE WHEN workspace_bytes = 0 THEN $1 "
                              "ELSE workspace_bytes END), 0) FROM sandboxes WHERE node_id = $2",
                              &res, "ut", default_bytes, node_id);
        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        *ret_count = pgs_u64(res, 0, 0);
        *ret_reserved = pgs_u64(res, 0, 1);
        return 0;
}
