/* The events and audit tables (issue 15): append-only logs of an org,
 * trimmed on insert. Every read names the org in its WHERE clause, so
 * another org's rows read as absent. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/sqlite.h"

/* ---- events ---- */

/* The org's rows beyond the newest keep, and everyone's before not_before:
 * the log stays bounded whatever an org emits. */
static int event_trim(sqlite3 *db, const char *org_id, uint64_t keep, uint64_t not_before)
{
        int r = 0;
        if (keep)
                r = sq_run(db,
                           "DELETE FROM events WHERE org_id = ? AND id <= "
                           "(SELECT id FROM events WHERE org_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                           "ttu", org_id, org_id, keep);
        if (r == 0 && not_before)
                r = sq_run(db, "DELETE FROM events WHERE created_at < ?", "u", not_before);
        return r;
}

int sq_event_append(struct store *s, const struct event_row *row, uint64_t keep, uint64_t not_before,
                    uint64_t *ret_id)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        sqlite3 *db = sq_db(s);
        int r = sq_tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = sq_run(db, "INSERT INTO events(org_id, name, sandbox_id, payload, created_at) VALUES(?, ?, ?, ?, ?)",
                   "ttttu", row->org_id, row->name, row->sandbox_id, row->payload, row->created_at);
        if (r < 0)
                return r;
        uint64_t id = (uint64_t)sqlite3_last_insert_rowid(db);
        r = event_trim(db, row->org_id, keep, not_before);
        if (r < 0)
                return r;
        r = sq_tx_commit(&tx);
        if (r == 0)
                *ret_id = id;
        return r;
}

/* AUTOINCREMENT's own counter: it outlives the rows a trim deleted. */
int sq_event_last(struct store *s, uint64_t *ret)
{
        return sq_query_u64(sq_db(s),
                            "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)", NULL, ret);
}

static int event_decode(sqlite3_stmt *st, void *item)
{
        struct event_row *row = item;
        int r;

        row->id = sq_column_u64(st, 0);
        if ((r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->name, sizeof(row->name))) < 0 ||
            (r = sq_column_copy(st, 3, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = sq_column_dup(st, 4, "{}", &row->payload)) < 0)
                return r;
        row->created_at = sq_column_u64(st, 5);
        return 0;
}

int sq_event_list(struct store *s, const char *org_id, uint64_t after, uint64_t limit, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT id, org_id, name, sandbox_id, payload, created_at FROM events "
                       "WHERE org_id = ? AND id > ? ORDER BY id LIMIT ?",
                       out, event_decode, "tuu", org_id, after, limit);
}

/* ---- audit ---- */

int sq_audit_append(struct store *s, const struct audit_row *row, uint64_t not_before)
{
        sqlite3 *db = sq_db(s);
        int r = sq_run(db,
                       "INSERT INTO audit(org_id, user_id, key_id, action, method, path, status, sandbox_id, ip, "
                       "request_id, created_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       "ttttttutttu", row->org_id, row->user_id, row->key_id, row->action, row->method, row->path,
                       (uint64_t)row->status, row->sandbox_id, row->ip, row->request_id, row->created_at);
        if (r == 0 && not_before)
                r = sq_run(db, "DELETE FROM audit WHERE created_at < ?", "u", not_before);
        return r;
}

static int audit_decode(sqlite3_stmt *st, void *item)
{
        struct audit_row *row = item;
        int r;

        row->id = sq_column_u64(st, 0);
        if ((r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->user_id, sizeof(row->user_id))) < 0 ||
            (r = sq_column_copy(st, 3, row->key_id, sizeof(row->key_id))) < 0 ||
            (r = sq_column_copy(st, 4, row->action, sizeof(row->action))) < 0 ||
            (r = sq_column_copy(st, 5, row->method, sizeof(row->method))) < 0 ||
            (r = sq_column_copy(st, 6, row->path, sizeof(row->path))) < 0 ||
            (r = sq_column_copy(st, 8, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = sq_column_copy(st, 9, row->ip, sizeof(row->ip))) < 0 ||
            (r = sq_column_copy(st, 10, row->request_id, sizeof(row->request_id))) < 0)
                return r;
        row->status = (int)sq_column_u64(st, 7);
        row->created_at = sq_column_u64(st, 11);
        return 0;
}

/* One WHERE clause for both the count and the page: an empty filter
 * string matches every row, so the SQL text never depends on the input. */
#define AUDIT_WHERE                                                                                        \
        " FROM audit WHERE org_id = ? AND (? = '' OR action = ?) AND (? = '' OR sandbox_id = ?)"         \
        " AND (? = '' OR user_id = ?) AND (? = '' OR key_id = ?) AND created_at >= ? AND created_at < ?"
#define AUDIT_ARGS(org_id, f)                                                                             \
        org_id, f->action, f->action, f->sandbox_id, f->sandbox_id, f->user_id, f->user_id, f->key_id,   \
                f->key_id, f->from, f->to

int sq_audit_list(struct store *s, const char *org_id, const struct audit_filter *f, uint64_t limit, uint64_t offset,
                  struct store_rows *out, uint64_t *ret_total)
{
        sqlite3 *db = sq_db(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(db, "SELECT COUNT(*)" AUDIT_WHERE, &st, "tttttttttuu", AUDIT_ARGS(org_id, f));
        if (r < 0)
                return r;
        *ret_total = sq_column_u64(st, 0);
        return sq_list(db,
                       "SELECT id, org_id, user_id, key_id, action, method, path, status, sandbox_id, ip, request_id, "
                       "created_at" AUDIT_WHERE " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                       out, audit_decode, "tttttttttuuuu", AUDIT_ARGS(org_id, f), limit, offset);
}

static int count_decode(sqlite3_stmt *st, void *item)
{
        struct audit_count *c = item;
        int r = sq_column_copy(st, 0, c->action, sizeof(c->action));
        c->count = sq_column_u64(st, 1);
        c->first_at = sq_column_u64(st, 2);
        c->last_at = sq_column_u64(st, 3);
        return r;
}

int sq_audit_summary(struct store *s, const char *org_id, const char *sandbox_id, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT action, COUNT(*), MIN(created_at), MAX(created_at) FROM audit "
                       "WHERE org_id = ? AND sandbox_id = ? GROUP BY action ORDER BY action",
                       out, count_decode, "tt", org_id, sandbox_id);
}
