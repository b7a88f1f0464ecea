/* The cells table: each context's journal, replayed in seq order to
 * rebuild its state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg/pg.h"

/* Under the caller's transaction, which holds the context row's lock:
 * MAX(seq) and the insert cannot interleave with another append. */
static int cell_insert(PGconn *db, const char *context_id, const struct cell_row *cell)
{
        uint64_t max;
        int r;

        r = pgs_query_u64(db, &max, "SELECT COALESCE(MAX(seq), 0) FROM cells WHERE context_id = $1", "t", context_id);
        if (r < 0)
                return r;
        if (cell->seq != max + 1)
                return -EINVAL;
        return pgs_run(db,
                       "INSERT INTO cells(context_id, seq, code, env_json, cwd, typescript) "
                       "VALUES($1, $2, $3, $4, $5, $6)",
                       "tutttb", context_id, cell->seq, cell->code, pgs_env_or_default(cell->env_json), cell->cwd,
                       (int)cell->typescript);
}

/* The journal must replay exactly, so a gap or a repeat is refused rather
 * than stored. The context row's lock (FOR UPDATE) orders concurrent
 * appends to one journal, from this node or another: the second waits,
 * then reads the first's seq as MAX and is refused (-EINVAL), as SQLite's
 * single writer would refuse it, never a duplicate-key error. */
int pgs_cell_append(struct store *s, const char *context_id, const struct cell_row *cell)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0 || (r = pgs_context_exists(db, context_id, true)) < 0 ||
            (r = cell_insert(db, context_id, cell)) < 0)
                return r;
        return pgs_tx_commit(&tx);
}

/* The same and the context's row, in one transaction. */
int pgs_cell_append_row(struct store *s, const struct cell_row *cell, const struct context_row *row)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0 || (r = pgs_context_exists(db, row->id, true)) < 0 ||
            (r = cell_insert(db, row->id, cell)) < 0 || (r = pgs_context_update_on(db, row)) < 0)
                return r;
        return pgs_tx_commit(&tx);
}

/* Columns: seq, code, env_json, cwd, typescript. One allocation holds the
 * three strings. */
static int decode_cell(const PGresult *res, int i, void *item)
{
        struct store_cell *c = item;
        const char **dst[3] = { &c->row.code, &c->row.env_json, &c->row.cwd };
        size_t len[3], total = 0;
        char *p;

        for (int k = 0; k < 3; k++) {
                len[k] = (size_t)PQgetlength(res, i, 1 + k);
                total += len[k] + 1;
        }
        c->buf = p = malloc(total);
        if (!p)
                return -ENOMEM;
        for (int k = 0; k < 3; k++) {
                memcpy(p, PQgetvalue(res, i, 1 + k), len[k]);
                p[len[k]] = '\0';
                *dst[k] = p;
                p += len[k] + 1;
        }
        c->row.seq = pgs_u64(res, i, 0);
        c->row.typescript = pgs_bool(res, i, 4);
        return 0;
}

int pgs_cell_list(struct store *s, const char *context_id, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT seq, code, env_json, cwd, typescript FROM cells WHERE context_id = $1 ORDER BY seq",
                        out, decode_cell, "t", context_id);
}

/* -ENOENT names a missing context; an empty journal is not an error. */
int pgs_cells_delete(struct store *s, const char *context_id)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0 || (r = pgs_context_exists(db, context_id, true)) < 0 ||
            (r = pgs_run(db, "DELETE FROM cells WHERE context_id = $1", "t", context_id)) < 0)
                return r;
        return pgs_tx_commit(&tx);
}

/* From the cells themselves, in one statement so the count and the bytes
 * describe the same journal. */
int pgs_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db,
                              "SELECT COALESCE(MAX(seq), 0), COALESCE(SUM(octet_length(code)), 0) "
                              "FROM cells WHERE context_id = $1",
                              &res, "t", context_id);

        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        *ret_count = pgs_u64(res, 0, 0);
        *ret_bytes = pgs_u64(res, 0, 1);
        return 0;
}
