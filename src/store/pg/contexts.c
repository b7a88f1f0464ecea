/* The contexts table. */
#include <errno.h>

#include "store/pg/pg.h"

#define CONTEXT_COLUMNS                                                  \
        "id, sandbox_id, binding, language, cwd, env_json, created_at, " \
        "last_used, executions, snap_taken_at, snap_cells, snap_bytes, " \
        "snap_stale, build"

/* env_json is dup'd last, so on failure r owns nothing. */
static int decode_context(const PGresult *res, int i, void *item)
{
        struct context_row *r = item;
        int q;

        if ((q = pgs_copy(res, i, 0, r->id, sizeof(r->id))) < 0 ||
            (q = pgs_copy(res, i, 1, r->sandbox_id, sizeof(r->sandbox_id))) < 0 ||
            (q = pgs_copy(res, i, 2, r->binding, sizeof(r->binding))) < 0 ||
            (q = pgs_copy(res, i, 3, r->language, sizeof(r->language))) < 0 ||
            (q = pgs_copy(res, i, 4, r->cwd, sizeof(r->cwd))) < 0 ||
            (q = pgs_copy(res, i, 13, r->build, sizeof(r->build))) < 0 ||
            (q = pgs_dup(res, i, 5, "{}", &r->env_json)) < 0)
                return q;
        r->created_at = pgs_u64(res, i, 6);
        r->last_used = pgs_u64(res, i, 7);
        r->executions = pgs_u64(res, i, 8);
        r->snap_taken_at = pgs_u64(res, i, 9);
        r->snap_cells = pgs_u64(res, i, 10);
        r->snap_bytes = pgs_u64(res, i, 11);
        r->snap_stale = pgs_bool(res, i, 12);
        return 0;
}

/* cwd, env_json, last_used, executions, the snap_* columns and build: the
 * part of a row that both insert and update write. */
#define STATE_TYPES "ttuuuuubt"
#define STATE_ARGS(row)                                                                          \
        (row)->cwd, pgs_env_or_default((row)->env_json), (row)->last_used, (row)->executions,    \
                (row)->snap_taken_at, (row)->snap_cells, (row)->snap_bytes, (int)(row)->snap_stale, \
                (row)->build

int pgs_context_insert(struct store *s, const struct context_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO contexts(id, sandbox_id, binding, language, created_at, "
                       "cwd, env_json, last_used, executions, snap_taken_at, snap_cells, "
                       "snap_bytes, snap_stale, build) "
                       "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                       "ttttu" STATE_TYPES, row->id, row->sandbox_id, row->binding, row->language, row->created_at,
                       STATE_ARGS(row));
}

int pgs_context_update_on(PGconn *db, const struct context_row *row)
{
        return pgs_run_changed(db,
                               "UPDATE contexts SET cwd = $1, env_json = $2, last_used = $3, executions = $4, "
                               "snap_taken_at = $5, snap_cells = $6, snap_bytes = $7, snap_stale = $8, build = $9 "
                               "WHERE id = $10",
                               STATE_TYPES "t", STATE_ARGS(row), row->id);
}

int pgs_context_update(struct store *s, const struct context_row *row)
{
        PGS_CONN(s, db);
        return pgs_context_update_on(db, row);
}

int pgs_context_get(struct store *s, const char *id, struct context_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        _cleanup_(context_row_done) struct context_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " CONTEXT_COLUMNS " FROM contexts WHERE id = $1", &res, "t", id);

        if (r < 0 || (r = decode_context(res, 0, &row)) < 0)
                return r;
        *ret = row;
        row.env_json = NULL;
        return 0;
}

/* Cells go with it (ON DELETE CASCADE). */
int pgs_context_delete(struct store *s, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM contexts WHERE id = $1", "t", id);
}

int pgs_context_list(struct store *s, const char *sandbox_id, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT " CONTEXT_COLUMNS " FROM contexts WHERE sandbox_id = $1 ORDER BY created_at, id",
                        out, decode_context, "t", sandbox_id);
}

int pgs_context_count(struct store *s, const char *sandbox_id, uint64_t *ret)
{
        PGS_CONN(s, db);
        return pgs_query_u64(db, ret, "SELECT COUNT(*) FROM contexts WHERE sandbox_id = $1", "t", sandbox_id);
}

int pgs_context_exists(PGconn *db, const char *id, bool for_update)
{
        _cleanup_res_ PGresult *res = NULL;
        return pgs_query_row(db,
                             for_update ? "SELECT 1 FROM contexts WHERE id = $1 FOR UPDATE"
                                        : "SELECT 1 FROM contexts WHERE id = $1",
                             &res, "t", id);
}
