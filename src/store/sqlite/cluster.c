/* The cluster_nodes table and the sandboxes' ownership lease (issue 16). */
#include <errno.h>

#include "store/sqlite/sqlite.h"

#define NODE_COLUMNS \
        "id, url, epoch, started_at, heartbeat_at, cpu_millis, mem_bytes, contexts, sandboxes, state"

int sq_node_heartbeat(struct store *s, const struct node_row *n)
{
        return sq_run(sq_db(s),
                      "INSERT INTO cluster_nodes(" NODE_COLUMNS ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                      "ON CONFLICT(id) DO UPDATE SET url = excluded.url, epoch = excluded.epoch, "
                      "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, "
                      "cpu_millis = excluded.cpu_millis, mem_bytes = excluded.mem_bytes, "
                      "contexts = excluded.contexts, sandboxes = excluded.sandboxes, state = excluded.state",
                      "ttuuuuuuut", n->id, n->url, n->epoch, n->started_at, n->heartbeat_at, n->cpu_millis,
                      n->mem_bytes, n->contexts, n->sandboxes, n->state);
}

static int node_decode(sqlite3_stmt *st, void *item)
{
        struct node_row *n = item;
        int r;

        if ((r = sq_column_copy(st, 0, n->id, sizeof(n->id))) < 0 ||
            (r = sq_column_copy(st, 1, n->url, sizeof(n->url))) < 0 ||
            (r = sq_column_copy(st, 9, n->state, sizeof(n->state))) < 0)
                return r;
        n->epoch = sq_column_u64(st, 2);
        n->started_at = sq_column_u64(st, 3);
        n->heartbeat_at = sq_column_u64(st, 4);
        n->cpu_millis = sq_column_u64(st, 5);
        n->mem_bytes = sq_column_u64(st, 6);
        n->contexts = sq_column_u64(st, 7);
        n->sandboxes = sq_column_u64(st, 8);
        return 0;
}

int sq_node_list(struct store *s, struct store_rows *out)
{
        return sq_list(sq_db(s), "SELECT " NODE_COLUMNS " FROM cluster_nodes ORDER BY id", out, node_decode, "");
}

/* The compare-and-set: the WHERE on lease_epoch makes two claims with the
 * same expected epoch exclusive (the second matches no row). */
int sq_sandbox_claim(struct store *s, const char *id, const char *node_id, uint64_t expected_epoch)
{
        int r = sq_run_changed(sq_db(s),
                               "UPDATE sandboxes SET node_id = ?, lease_epoch = lease_epoch + 1 "
                               "WHERE id = ? AND lease_epoch = ?",
                               "ttu", node_id, id, expected_epoch);
        struct store_owner o;

        if (r != -ENOENT)
                return r;
        r = sq_sandbox_owner(s, id, &o);
        return r < 0 ? r : -EBUSY;
}

static int owner_decode(sqlite3_stmt *st, void *item)
{
        struct store_owner *o = item;
        int r;

        if ((r = sq_column_copy(st, 0, o->id, sizeof(o->id))) < 0 ||
            (r = sq_column_copy(st, 1, o->node_id, sizeof(o->node_id))) < 0)
                return r;
        o->lease_epoch = sq_column_u64(st, 2);
        return 0;
}

int sq_sandbox_owner(struct store *s, const char *id, struct store_owner *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT id, node_id, lease_epoch FROM sandboxes WHERE id = ?", &st, "t", id);

        return r < 0 ? r : owner_decode(st, ret);
}

int sq_sandbox_list_on_node(struct store *s, const char *node_id, struct store_rows *out)
{
        return sq_list(sq_db(s), "SELECT id, node_id, lease_epoch FROM sandboxes WHERE node_id = ? ORDER BY id", out,
                       owner_decode, "t", node_id);
}

int sq_sandbox_usage_on_node(struct store *s, const char *node_id, uint64_t default_bytes, uint64_t *ret_count,
                             uint64_t *ret_reserved)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s),
                             "SELECT COUNT(*), COALESCE(SUM(CASE WHEN workspace_bytes = 0 THEN ? "
                             "ELSE workspace_bytes END), 0) FROM sandboxes WHERE node_id = ?",
                             &st, "ut", default_bytes, node_id);
        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        *ret_count = sq_column_u64(st, 0);
        *ret_reserved = sq_column_u64(st, 1);
        return 0;
}
