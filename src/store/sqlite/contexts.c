/* The contexts table. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

#define CONTEXT_COLUMNS                                                      \
        "id, sandbox_id, binding, language, cwd, env_json, created_at, "     \
        "last_used, executions, snap_taken_at, snap_cells, snap_bytes, "     \
        "snap_stale, build"

/* Fills r from a CONTEXT_COLUMNS row. env_json is dup'd last, so on
 * failure r owns nothing. */
static int decode_context(sqlite3_stmt *st, void *item)
{
        struct context_row *r = item;
        int q;

        if ((q = sq_column_copy(st, 0, r->id, sizeof(r->id))) < 0 ||
            (q = sq_column_copy(st, 1, r->sandbox_id, sizeof(r->sandbox_id))) < 0 ||
            (q = sq_column_copy(st, 2, r->binding, sizeof(r->binding))) < 0 ||
            (q = sq_column_copy(st, 3, r->language, sizeof(r->language))) < 0 ||
            (q = sq_column_copy(st, 4, r->cwd, sizeof(r->cwd))) < 0 ||
            (q = sq_column_copy(st, 13, r->build, sizeof(r->build))) < 0 ||
            (q = sq_column_dup(st, 5, "{}", &r->env_json)) < 0)
                return q;
        r->created_at = sq_column_u64(st, 6);
        r->last_used = sq_column_u64(st, 7);
        r->executions = sq_column_u64(st, 8);
        r->snap_taken_at = sq_column_u64(st, 9);
        r->snap_cells = sq_column_u64(st, 10);
        r->snap_bytes = sq_column_u64(st, 11);
        r->snap_stale = sqlite3_column_int64(st, 12) != 0;
        return 0;
}

/* cwd, env_json, last_used, executions, the snap_* columns and build: the
 * part of a row that both insert and update write. */
#define STATE_TYPES "ttuuuuubt"
#define STATE_ARGS(row)                                                               \
        (row)->cwd, sq_env_or_default((row)->env_json), (row)->last_used, (row)->executions, \
                (row)->snap_taken_at, (row)->snap_cells, (row)->snap_bytes, (int)(row)->snap_stale, \
                (row)->build

int sq_context_insert(struct store *s, const struct context_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO contexts(id, sandbox_id, binding, language, created_at, "
                      "cwd, env_json, last_used, executions, snap_taken_at, snap_cells, "
                      "snap_bytes, snap_stale, build) "
                      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "ttttu" STATE_TYPES, row->id, row->sandbox_id, row->binding, row->language,
                      row->created_at, STATE_ARGS(row));
}

/* Kept prepared: every executed cell writes its context's row. */
int sq_context_update(struct store *s, const struct context_row *row)
{
        return sq_hot_run_changed(s, SQ_HOT_CONTEXT_UPDATE,
                                  "UPDATE contexts SET cwd = ?, env_json = ?, last_used = ?, executions = ?, "
                                  "snap_taken_at = ?, snap_cells = ?, snap_bytes = ?, snap_stale = ?, build = ? "
                                  "WHERE id = ?",
                                  STATE_TYPES "t", STATE_ARGS(row), row->id);
}

int sq_context_get(struct store *s, const char *id, struct context_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_(context_row_done) struct context_row row = {};
        int r;

        r = sq_query_row(sq_db(s), "SELECT " CONTEXT_COLUMNS " FROM contexts WHERE id = ?", &st, "t", id);
        if (r < 0)
                return r;
        r = decode_context(st, &row);
        if (r < 0)
                return r;
        *ret = row;
        row.env_json = NULL;
        return 0;
}

/* Cells go with it (ON DELETE CASCADE). */
int sq_context_delete(struct store *s, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM contexts WHERE id = ?", "t", id);
}

int sq_context_list(struct store *s, const char *sandbox_id, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT " CONTEXT_COLUMNS " FROM contexts WHERE sandbox_id = ? ORDER BY created_at, id",
                       out, decode_context, "t", sandbox_id);
}

int sq_context_count(struct store *s, const char *sandbox_id, uint64_t *ret)
{
        return sq_query_u64(sq_db(s), "SELECT COUNT(*) FROM contexts WHERE sandbox_id = ?", sandbox_id, ret);
}

int sq_context_exists(sqlite3 *db, const char *id)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        return sq_query_row(db, "SELECT 1 FROM contexts WHERE id = ?", &st, "t", id);
}
