/* The events and audit tables (issue 15): append-only logs of an org,
 * trimmed on insert. Every read names the org. */
#include <errno.h>
#include <stdlib.h>

#include "store/pg/pg.h"

/* ---- events ---- */

static int event_trim(PGconn *db, const char *org_id, uint64_t keep, uint64_t not_before)
{
        int r = 0;
        if (keep)
                r = pgs_run(db,
                            "DELETE FROM events WHERE org_id = $1 AND id <= "
                            "(SELECT id FROM events WHERE org_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
                            "tu", org_id, keep);
        if (r == 0 && not_before)
                r = pgs_run(db, "DELETE FROM events WHERE created_at < $1", "u", not_before);
        return r;
}

/* Ids come from a sequence, handed out at insert but visible at commit:
 * without the lock, 7 could commit before 6 and a stream that replayed
 * "after 7" would never see 6. The lock makes id order commit order. */
int pgs_event_append(struct store *s, const struct event_row *row, uint64_t keep, uint64_t not_before,
                     uint64_t *ret_id)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        uint64_t id;
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0 || (r = pgs_tx_lock(db, "sandboxd.events")) < 0)
                return r;
        r = pgs_query_u64(db, &id,
                          "INSERT INTO events(org_id, name, sandbox_id, payload, created_at) "
                          "VALUES($1, $2, $3, $4, $5) RETURNING id",
                          "ttttu", row->org_id, row->name, row->sandbox_id, row->payload, row->created_at);
        if (r < 0 || (r = event_trim(db, row->org_id, keep, not_before)) < 0)
                return r;
        r = pgs_tx_commit(&tx);
        if (r == 0)
                *ret_id = id;
        return r;
}

/* The sequence's own counter: it outlives the rows a trim deleted. */
int pgs_event_last(struct store *s, uint64_t *ret)
{
        PGS_CONN(s, db);
        return pgs_query_u64(db, ret, "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM events_id_seq", "");
}

static int event_decode(const PGresult *res, int i, void *item)
{
        struct event_row *row = item;
        int r;

        row->id = pgs_u64(res, i, 0);
        if ((r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->name, sizeof(row->name))) < 0 ||
            (r = pgs_copy(res, i, 3, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = pgs_dup(res, i, 4, "{}", &row->payload)) < 0)
                return r;
        row->created_at = pgs_u64(res, i, 5);
        return 0;
}

int pgs_event_list(struct store *s, const char *org_id, uint64_t after, uint64_t limit, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT id, org_id, name, sandbox_id, payload, created_at FROM events "
                        "WHERE org_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                        out, event_decode, "tuu", org_id, after, limit);
}

/* ---- audit ---- */

int pgs_audit_append(struct store *s, const struct audit_row *row, uint64_t not_before)
{
        PGS_CONN(s, db);
        int r = pgs_run(db,
                        "INSERT INTO audit(org_id, user_id, key_id, action, method, path, status, sandbox_id, ip, "
                        "request_id, created_at) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                        "ttttttutttu", row->org_id, row->user_id, row->key_id, row->action, row->method, row->path,
                        (uint64_t)row->status, row->sandbox_id, row->ip, row->request_id, row->created_at);
        if (r == 0 && not_before)
                r = pgs_run(db, "DELETE FROM audit WHERE created_at < $1", "u", not_before);
        return r;
}

static int audit_decode(const PGresult *res, int i, void *item)
{
        struct audit_row *row = item;
        int r;

        row->id = pgs_u64(res, i, 0);
        if ((r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->user_id, sizeof(row->user_id))) < 0 ||
            (r = pgs_copy(res, i, 3, row->key_id, sizeof(row->key_id))) < 0 ||
            (r = pgs_copy(res, i, 4, row->action, sizeof(row->action))) < 0 ||
            (r = pgs_copy(res, i, 5, row->method, sizeof(row->method))) < 0 ||
            (r = pgs_copy(res, i, 6, row->path, sizeof(row->path))) < 0 ||
            (r = pgs_copy(res, i, 8, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = pgs_copy(res, i, 9, row->ip, sizeof(row->ip))) < 0 ||
            (r = pgs_copy(res, i, 10, row->request_id, sizeof(row->request_id))) < 0)
                return r;
        row->status = (int)pgs_u64(res, i, 7);
        row->created_at = pgs_u64(res, i, 11);
        return 0;
}

/* One WHERE clause for both the count and the page: an empty filter
 * string matches every row, so the SQL text never depends on the input. */
#define AUDIT_WHERE                                                                                  \
        " FROM audit WHERE org_id = $1 AND ($2 = '' OR action = $2) AND ($3 = '' OR sandbox_id = $3)" \
        " AND ($4 = '' OR user_id = $4) AND ($5 = '' OR key_id = $5) AND created_at >= $6 AND created_at < $7"
#define AUDIT_ARGS(org_id, f) org_id, f->action, f->sandbox_id, f->user_id, f->key_id, f->from, f->to

int pgs_audit_list(struct store *s, const char *org_id, const struct audit_filter *f, uint64_t limit,
                   uint64_t offset, struct store_rows *out, uint64_t *ret_total)
{
        PGS_CONN(s, db);
        int r = pgs_query_u64(db, ret_total, "SELECT COUNT(*)" AUDIT_WHERE, "tttttuu", AUDIT_ARGS(org_id, f));

        if (r < 0)
                return r;
        return pgs_list(db,
                        "SELECT id, org_id, user_id, key_id, action, method, path, status, sandbox_id, ip, "
                        "request_id, created_at" AUDIT_WHERE " ORDER BY created_at DESC, id DESC LIMIT $8 OFFSET $9",
                        out, audit_decode, "tttttuuuu", AUDIT_ARGS(org_id, f), limit, offset);
}

static int count_decode(const PGresult *res, int i, void *item)
{
        struct audit_count *c = item;
        int r = pgs_copy(res, i, 0, c->action, sizeof(c->action));

        c->count = pgs_u64(res, i, 1);
        c->first_at = pgs_u64(res, i, 2);
        c->last_at = pgs_u64(res, i, 3);
        return r;
}

int pgs_audit_summary(struct store *s, const char *org_id, const char *sandbox_id, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT action, COUNT(*), MIN(created_at), MAX(created_at) FROM audit "
                        "WHERE org_id = $1 AND sandbox_id = $2 GROUP BY action ORDER BY action",
                        out, count_decode, "tt", org_id, sandbox_id);
}
