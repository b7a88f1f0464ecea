/* The exec_slots table (issue 16): the concurrency slots orgs hold, so a
 * budget is counted over every node sharing the store. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

/* The count and the insert are one statement in one IMMEDIATE
 * transaction: no other connection writes between them. */
int sq_slot_take(struct store *s, const struct slot_row *row, uint64_t limit)
{
        sqlite3 *db = sq_db(s);
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r = sq_tx_begin(db, &tx);

        if (r < 0)
                return r;
        r = sq_run_changed(db,
                           "INSERT INTO exec_slots(id, org_id, node_id, kind, started_at) "
                           "SELECT ?, ?, ?, ?, ? WHERE (SELECT COUNT(*) FROM exec_slots "
                           "WHERE org_id = ? AND kind = ?) < ?",
                           "ttttuttu", row->id, row->org_id, row->node_id, row->kind, row->started_at, row->org_id,
                           row->kind, limit);
        if (r < 0)
                return r == -ENOENT ? -EBUSY : r;
        return sq_tx_commit(&tx);
}

int sq_slot_give(struct store *s, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM exec_slots WHERE id = ?", "t", id);
}

int sq_slot_free_node(struct store *s, const char *node_id, uint64_t *ret_n)
{
        int r = sq_run(sq_db(s), "DELETE FROM exec_slots WHERE node_id = ?", "t", node_id);

        if (r >= 0)
                *ret_n = (uint64_t)sqlite3_changes(sq_db(s));
        return r;
}

int sq_slot_count(struct store *s, const char *org_id, const char *kind, uint64_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT COUNT(*) FROM exec_slots WHERE org_id = ? AND kind = ?", &st, "tt",
                             org_id, kind);

        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        *ret = sq_column_u64(st, 0);
        return 0;
}

/* The compare-and-set that lets one runner of several start a request. */
int sq_queue_start(struct store *s, const char *id, const char *node_id, uint64_t started_at)
{
        int r = sq_run_changed(sq_db(s),
                               "UPDATE queued_requests SET status = 'processing', started_at = ?, node_id = ? "
                               "WHERE id = ? AND status = 'queued'",
                               "utt", started_at, node_id, id);
        uint64_t n;

        if (r != -ENOENT)
                return r;
        r = sq_query_u64(sq_db(s), "SELECT COUNT(*) FROM queued_requests WHERE id = ?", id, &n);
        return r < 0 ? r : n ? -EBUSY : -ENOENT;
}

int sq_queue_fail_node(struct store *s, const char *node_id, uint32_t failed_status, const char *failed_body,
                       uint64_t now)
{
        return sq_run(sq_db(s),
                      "UPDATE queued_requests SET status = 'failed', response_status = ?, response_body = ?, "
                      "finished_at = ? WHERE status = 'processing' AND node_id = ?",
                      "utut", (uint64_t)failed_status, failed_body, now, node_id);
}
