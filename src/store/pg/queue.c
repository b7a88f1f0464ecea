/* The queued_requests table (controller queue mode): requests waiting for
 * their org's concurrency budget, in insertion order (seq), and what they
 * answered once run. Every read by id names the org. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "store/pg/pg.h"

#define QUEUE_COLUMNS                                                                                          \
        "id, org_id, kind, route, sandbox_id, body, caller, status, response_status, response_body, created_at, " \
        "started_at, finished_at"

/* seq is a sequence: two inserts can take 5 and 6 and commit 6 first, and
 * a head read between would skip 5. The advisory lock makes seq order
 * commit order. */
int pgs_queue_insert(struct store *s, const struct queue_row *row)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0 || (r = pgs_tx_lock(db, "sandboxd.queue")) < 0)
                return r;
        r = pgs_run(db,
                    "INSERT INTO queued_requests(id, org_id, kind, route, sandbox_id, body, caller, status, "
                    "created_at) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    "ttttttttu", row->id, row->org_id, row->kind, row->route, row->sandbox_id, row->body,
                    row->caller, row->status, row->created_at);
        if (r < 0)
                return r;
        return pgs_tx_commit(&tx);
}

static int queue_decode(const PGresult *res, int i, void *item)
{
        struct queue_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->kind, sizeof(row->kind))) < 0 ||
            (r = pgs_copy(res, i, 3, row->route, sizeof(row->route))) < 0 ||
            (r = pgs_copy(res, i, 4, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = pgs_dup(res, i, 5, "", &row->body)) < 0 || (r = pgs_dup(res, i, 6, "{}", &row->caller)) < 0 ||
            (r = pgs_copy(res, i, 7, row->status, sizeof(row->status))) < 0)
                return r;
        row->response_status = (uint32_t)pgs_u64(res, i, 8);
        if (!PQgetisnull(res, i, 9) && (r = pgs_dup(res, i, 9, "", &row->response_body)) < 0)
                return r;
        row->created_at = pgs_u64(res, i, 10);
        row->started_at = pgs_u64(res, i, 11);
        row->finished_at = pgs_u64(res, i, 12);
        return 0;
}

int pgs_queue_get(struct store *s, const char *org_id, const char *id, struct queue_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " QUEUE_COLUMNS " FROM queued_requests WHERE id = $1 AND org_id = $2",
                              &res, "tt", id, org_id);

        if (r < 0)
                return r;
        *ret = (struct queue_row){ 0 };
        r = queue_decode(res, 0, ret);
        if (r < 0)
                queue_row_done(ret);
        return r;
}

int pgs_queue_update(struct store *s, const struct queue_row *row)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db,
                               "UPDATE queued_requests SET status = $1, response_status = $2, response_body = $3, "
                               "started_at = $4, finished_at = $5 WHERE id = $6",
                               "tutuut", row->status, (uint64_t)row->response_status, row->response_body,
                               row->started_at, row->finished_at, row->id);
}

int pgs_queue_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                   uint64_t *ret_total)
{
        PGS_CONN(s, db);
        return pgs_org_page(db, "SELECT COUNT(*) FROM queued_requests WHERE org_id = $1",
                            "SELECT " QUEUE_COLUMNS " FROM queued_requests WHERE org_id = $1 ORDER BY seq DESC "
                            "LIMIT $2 OFFSET $3",
                            queue_decode, org_id, limit, offset, out, ret_total);
}

int pgs_queue_heads(struct store *s, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT " QUEUE_COLUMNS " FROM queued_requests q WHERE status = 'queued' AND seq = "
                        "(SELECT MIN(seq) FROM queued_requests WHERE org_id = q.org_id AND status = 'queued') "
                        "ORDER BY seq",
                        out, queue_decode, "");
}

int pgs_queue_position(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead,
                       uint64_t *ret_depth)
{
        PGS_CONN(s, db);
        int r = pgs_query_u64(db, ret_ahead,
                              "SELECT COUNT(*) FROM queued_requests WHERE org_id = $1 AND status = 'queued' AND seq < "
                              "(SELECT seq FROM queued_requests WHERE id = $2 AND org_id = $1)",
                              "tt", org_id, id);
        if (r < 0)
                return r;
        return pgs_query_u64(db, ret_depth,
                             "SELECT COUNT(*) FROM queued_requests WHERE org_id = $1 AND status = 'queued'", "t",
                             org_id);
}

int pgs_queue_stats(struct store *s, const char *org_id, uint64_t since, struct queue_stats *ret)
{
        static const char *const by_status =
                "SELECT COUNT(*) FROM queued_requests WHERE org_id = $1 AND status = $2 AND finished_at >= $3";
        static const char *const waits =
                "FROM queued_requests WHERE org_id = $1 AND started_at >= $2 AND started_at > 0";
        char sql[256];
        PGS_CONN(s, db);
        int r;

        *ret = (struct queue_stats){ 0 };
        if ((r = pgs_query_u64(db, &ret->depth,
                               "SELECT COUNT(*) FROM queued_requests WHERE org_id = $1 AND status = 'queued'", "t",
                               org_id)) < 0 ||
            (r = pgs_query_u64(db, &ret->processing,
                               "SELECT COUNT(*) FROM queued_requests WHERE org_id = $1 AND status = 'processing'",
                               "t", org_id)) < 0 ||
            (r = pgs_query_u64(db, &ret->oldest_created_at,
                               "SELECT COALESCE(MIN(created_at), 0) FROM queued_requests "
                               "WHERE org_id = $1 AND status = 'queued'",
                               "t", org_id)) < 0 ||
            (r = pgs_query_u64(db, &ret->completed, by_status, "ttu", org_id, "completed", since)) < 0 ||
            (r = pgs_query_u64(db, &ret->failed, by_status, "ttu", org_id, "failed", since)) < 0 ||
            (r = pgs_query_u64(db, &ret->expired, by_status, "ttu", org_id, "expired", since)) < 0)
                return r;
        snprintf(sql, sizeof(sql), "SELECT COUNT(*) %s", waits);
        if ((r = pgs_query_u64(db, &ret->started, sql, "tu", org_id, since)) < 0 || ret->started == 0)
                return r;
        /* Truncated, as SQLite's CAST(AVG(...) AS INTEGER). */
        snprintf(sql, sizeof(sql), "SELECT TRUNC(AVG(started_at - created_at))::BIGINT %s", waits);
        if ((r = pgs_query_u64(db, &ret->avg_wait_ms, sql, "tu", org_id, since)) < 0)
                return r;
        /* The nearest-rank 95th percentile. */
        snprintf(sql, sizeof(sql), "SELECT started_at - created_at %s ORDER BY 1 LIMIT 1 OFFSET $3", waits);
        uint64_t rank = (ret->started * 95 + 99) / 100;
        return pgs_query_u64(db, &ret->p95_wait_ms, sql, "tuu", org_id, since, rank > 0 ? rank - 1 : 0);
}

int pgs_queue_settle(struct store *s, bool at_start, uint32_t failed_status, const char *failed_body, uint64_t now,
                     uint64_t expire_before, uint64_t forget_before)
{
        PGS_CONN(s, db);
        int r = 0;

        if (at_start)
                r = pgs_run(db,
                            "UPDATE queued_requests SET status = 'failed', response_status = $1, "
                            "response_body = $2, finished_at = $3 WHERE status = 'processing'",
                            "utu", (uint64_t)failed_status, failed_body, now);
        if (r >= 0)
                r = pgs_run(db,
                            "UPDATE queued_requests SET status = 'expired', finished_at = $1 "
                            "WHERE status = 'queued' AND created_at < $2",
                            "uu", now, expire_before);
        if (r >= 0)
                r = pgs_run(db, "DELETE FROM queued_requests WHERE finished_at > 0 AND finished_at < $1", "u",
                            forget_before);
        return r;
}
