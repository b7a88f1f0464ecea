/* The queued_requests table (controller queue mode): requests waiting for
 * their org's concurrency budget, in insertion order (seq), and what they
 * answered once run. Every read by id names the org. */
#include <errno.h>
#include <stdlib.h>

#include "base/cleanup.h"
#include "store/sqlite/sqlite.h"

#define QUEUE_COLUMNS                                                                                          \
        "id, org_id, kind, route, sandbox_id, body, caller, status, response_status, response_body, created_at, " \
        "started_at, finished_at"

int sq_queue_insert(struct store *s, const struct queue_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO queued_requests(id, org_id, kind, route, sandbox_id, body, caller, status, "
                      "created_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "ttttttttu", row->id, row->org_id, row->kind, row->route, row->sandbox_id, row->body,
                      row->caller, row->status, row->created_at);
}

static int queue_decode(sqlite3_stmt *st, void *item)
{
        struct queue_row *row = item;
        int r;
        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->kind, sizeof(row->kind))) < 0 ||
            (r = sq_column_copy(st, 3, row->route, sizeof(row->route))) < 0 ||
            (r = sq_column_copy(st, 4, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = sq_column_dup(st, 5, "", &row->body)) < 0 || (r = sq_column_dup(st, 6, "{}", &row->caller)) < 0 ||
            (r = sq_column_copy(st, 7, row->status, sizeof(row->status))) < 0)
                return r;
        row->response_status = (uint32_t)sq_column_u64(st, 8);
        if (sqlite3_column_type(st, 9) != SQLITE_NULL && (r = sq_column_dup(st, 9, "", &row->response_body)) < 0)
                return r;
        row->created_at = sq_column_u64(st, 10);
        row->started_at = sq_column_u64(st, 11);
        row->finished_at = sq_column_u64(st, 12);
        return 0;
}

int sq_queue_get(struct store *s, const char *org_id, const char *id, struct queue_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT " QUEUE_COLUMNS " FROM queued_requests WHERE id = ? AND org_id = ?",
                             &st, "tt", id, org_id);
        if (r < 0)
                return r;
        *ret = (struct queue_row){ 0 };
        r = queue_decode(st, ret);
        if (r < 0)
                queue_row_done(ret);
        return r;
}

int sq_queue_update(struct store *s, const struct queue_row *row)
{
        return sq_run_changed(sq_db(s),
                              "UPDATE queued_requests SET status = ?, response_status = ?, response_body = ?, "
                              "started_at = ?, finished_at = ? WHERE id = ?",
                              "tutuut", row->status, (uint64_t)row->response_status, row->response_body,
                              row->started_at, row->finished_at, row->id);
}

int sq_queue_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                  uint64_t *ret_total)
{
        return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM queued_requests WHERE org_id = ?",
                           "SELECT " QUEUE_COLUMNS " FROM queued_requests WHERE org_id = ? ORDER BY seq DESC "
                           "LIMIT ? OFFSET ?",
                           queue_decode, org_id, limit, offset, out, ret_total);
}

int sq_queue_heads(struct store *s, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT " QUEUE_COLUMNS " FROM queued_requests q WHERE status = 'queued' AND seq = "
                       "(SELECT MIN(seq) FROM queued_requests WHERE org_id = q.org_id AND status = 'queued') "
                       "ORDER BY seq",
                       out, queue_decode, "");
}

static int count_u64(sqlite3 *db, uint64_t *ret, const char *sql, const char *types, ...)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        va_list ap;
        va_start(ap, types);
        int r = sq_prepare_bound_va(db, sql, &st, types, ap);
        va_end(ap);
        if (r < 0 || (r = sq_step(st)) < 0)
                return r;
        *ret = r == 0 ? 0 : sq_column_u64(st, 0);
        return 0;
}

int sq_queue_position(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead, uint64_t *ret_depth)
{
        sqlite3 *db = sq_db(s);
        int r = count_u64(db, ret_ahead,
                          "SELECT COUNT(*) FROM queued_requests WHERE org_id = ? AND status = 'queued' AND seq < "
                          "(SELECT seq FROM queued_requests WHERE id = ? AND org_id = ?)",
                          "ttt", org_id, id, org_id);
        if (r < 0)
                return r;
        return count_u64(db, ret_depth, "SELECT COUNT(*) FROM queued_requests WHERE org_id = ? AND status = 'queued'",
                         "t", org_id);
}

int sq_queue_stats(struct store *s, const char *org_id, uint64_t since, struct queue_stats *ret)
{
        sqlite3 *db = sq_db(s);
        static const char *const by_status =
                "SELECT COUNT(*) FROM queued_requests WHERE org_id = ? AND status = ? AND finished_at >= ?";
        int r;
        *ret = (struct queue_stats){ 0 };
        if ((r = count_u64(db, &ret->depth,
                           "SELECT COUNT(*) FROM queued_requests WHERE org_id = ? AND status = 'queued'", "t",
                           org_id)) < 0 ||
            (r = count_u64(db, &ret->processing,
                           "SELECT COUNT(*) FROM queued_requests WHERE org_id = ? AND status = 'processing'", "t",
                           org_id)) < 0 ||
            (r = count_u64(db, &ret->oldest_created_at,
                           "SELECT COALESCE(MIN(created_at), 0) FROM queued_requests "
                           "WHERE org_id = ? AND status = 'queued'",
                           "t", org_id)) < 0 ||
            (r = count_u64(db, &ret->completed, by_status, "ttu", org_id, "completed", since)) < 0 ||
            (r = count_u64(db, &ret->failed, by_status, "ttu", org_id, "failed", since)) < 0 ||
            (r = count_u64(db, &ret->expired, by_status, "ttu", org_id, "expired", since)) < 0)
                return r;
        static const char *const waits = "FROM queued_requests WHERE org_id = ? AND started_at >= ? AND started_at > 0";
        char sql[256];
        snprintf(sql, sizeof(sql), "SELECT COUNT(*) %s", waits);
        if ((r = count_u64(db, &ret->started, sql, "tu", org_id, since)) < 0 || ret->started == 0)
                return r;
        snprintf(sql, sizeof(sql), "SELECT CAST(AVG(started_at - created_at) AS INTEGER) %s", waits);
        if ((r = count_u64(db, &ret->avg_wait_ms, sql, "tu", org_id, since)) < 0)
                return r;
        /* The nearest-rank 95th percentile. */
        snprintf(sql, sizeof(sql), "SELECT started_at - created_at %s ORDER BY 1 LIMIT 1 OFFSET ?", waits);
        uint64_t rank = (ret->started * 95 + 99) / 100;
        return count_u64(db, &ret->p95_wait_ms, sql, "tuu", org_id, since, rank > 0 ? rank - 1 : 0);
}

int sq_queue_settle(struct store *s, bool at_start, uint32_t failed_status, const char *failed_body, uint64_t now,
                    uint64_t expire_before, uint64_t forget_before)
{
        sqlite3 *db = sq_db(s);
        int r = 0;
        if (at_start)
                r = sq_run(db,
                           "UPDATE queued_requests SET status = 'failed', response_status = ?, response_body = ?, "
                           "finished_at = ? WHERE status = 'processing'",
                           "utu", (uint64_t)failed_status, failed_body, now);
        if (r >= 0)
                r = sq_run(db,
                           "UPDATE queued_requests SET status = 'expired', finished_at = ? "
                           "WHERE status = 'queued' AND created_at < ?",
                           "uu", now, expire_before);
        if (r >= 0)
                r = sq_run(db, "DELETE FROM queued_requests WHERE finished_at > 0 AND finished_at < ?", "u",
                           forget_before);
        return r;
}
