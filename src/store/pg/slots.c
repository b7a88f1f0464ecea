/* The exec_slots table (issue 16): the concurrency slots orgs hold, so a
 * budget is counted over every node sharing the store. */
#include <errno.h>
#include <stdio.h>

#include "store/pg/pg.h"

/* Under READ COMMITTED two takers would both count the same committed
 * rows; a transaction advisory lock per org makes the second count after
 * the first committed (other orgs do not wait). */
int pgs_slot_take(struct store *s, const struct slot_row *row, uint64_t limit)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        char lock[STORE_ID_MAX + 16];
        int r;

        snprintf(lock, sizeof(lock), "sandboxd.slots.%s", row->org_id);
        if ((r = pgs_tx_begin(db, &tx)) < 0 || (r = pgs_tx_lock(db, lock)) < 0)
                return r;
        r = pgs_run_changed(db,
                            "INSERT INTO exec_slots(id, org_id, node_id, kind, started_at) "
                            "SELECT $1, $2, $3, $4, $5 WHERE (SELECT COUNT(*) FROM exec_slots "
                            "WHERE org_id = $2 AND kind = $4) < $6",
                            "ttttuu", row->id, row->org_id, row->node_id, row->kind, row->started_at, limit);
        if (r < 0)
                return r == -ENOENT ? -EBUSY : r;
        return pgs_tx_commit(&tx);
}

int pgs_slot_give(struct store *s, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM exec_slots WHERE id = $1", "t", id);
}

int pgs_slot_free_node(struct store *s, const char *node_id, uint64_t *ret_n)
{
        PGS_CONN(s, db);
        return pgs_query_u64(db, ret_n,
                             "WITH gone AS (DELETE FROM exec_slots WHERE node_id = $1 RETURNING 1) "
                             "SELECT COUNT(*) FROM gone",
                             "t", node_id);
}

int pgs_slot_count(struct store *s, const char *org_id, const char *kind, uint64_t *ret)
{
        PGS_CONN(s, db);
        return pgs_query_u64(db, ret, "SELECT COUNT(*) FROM exec_slots WHERE org_id = $1 AND kind = $2", "tt",
                             org_id, kind);
}

/* The compare-and-set that lets one runner of several start a request:
 * the second UPDATE re-checks status after the first committed. */
int pgs_queue_start(struct store *s, const char *id, const char *node_id, uint64_t started_at)
{
        PGS_CONN(s, db);
        uint64_t n;
        int r = pgs_run_changed(db,
                                "UPDATE queued_requests SET status = 'processing', started_at = $1, node_id = $2 "
                                "WHERE id = $3 AND status = 'queued'",
                                "utt", started_at, node_id, id);

        if (r != -ENOENT)
                return r;
        r = pgs_query_u64(db, &n, "SELECT COUNT(*) FROM queued_requests WHERE id = $1", "t", id);
        return r < 0 ? r : n ? -EBUSY : -ENOENT;
}

int pgs_queue_fail_node(struct store *s, const char *node_id, uint32_t failed_status, const char *failed_body,
                        uint64_t now)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "UPDATE queued_requests SET status = 'failed', response_status = $1, response_body = $2, "
                       "finished_at = $3 WHERE status = 'processing' AND node_id = $4",
                       "utut", (uint64_t)failed_status, failed_body, now, node_id);
}
