/* The cells table: each context's journal, replayed in seq order to
 * rebuild its state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/sqlite.h"

/* Under the caller's transaction: reading MAX(seq) and inserting must not
 * interleave with another writer. Both statements are kept prepared (one
 * pair per executed cell). */
static int cell_insert(struct store *s, const char *context_id, const struct cell_row *cell)
{
        uint64_t max;
        int r;

        r = sq_hot_query_u64(s, SQ_HOT_CELL_MAX_SEQ, "SELECT COALESCE(MAX(seq), 0) FROM cells WHERE context_id = ?",
                             context_id, &max);
        if (r < 0)
                return r;
        if (cell->seq != max + 1)
                return -EINVAL;
        return sq_hot_run(s, SQ_HOT_CELL_INSERT,
                          "INSERT INTO cells(context_id, seq, code, env_json, cwd, typescript) "
                          "VALUES(?, ?, ?, ?, ?, ?)",
                          "tutttb", context_id, cell->seq, cell->code, sq_env_or_default(cell->env_json), cell->cwd,
                          (int)cell->typescript);
}

/* The journal must replay exactly, so a gap or a repeat is refused rather
 * than stored. */
int sq_cell_append(struct store *s, const char *context_id, const struct cell_row *cell)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r;

        if ((r = sq_hot_tx_begin(s, &tx)) < 0 ||
            (r = sq_context_exists(sq_db(s), context_id)) < 0 ||
            (r = cell_insert(s, context_id, cell)) < 0)
                return r;
        return sq_hot_tx_commit(s, &tx);
}

/* One commit for the cell and its context's row (the row's UPDATE also
 * says whether the context exists). */
int sq_cell_append_row(struct store *s, const struct cell_row *cell, const struct context_row *row)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r;

        if ((r = sq_hot_tx_begin(s, &tx)) < 0 ||
            (r = sq_context_update(s, row)) < 0 ||
            (r = cell_insert(s, row->id, cell)) < 0)
                return r;
        return sq_hot_tx_commit(s, &tx);
}

/* Columns: seq, code, env_json, cwd, typescript. One allocation holds the
 * three strings. */
static int decode_cell(sqlite3_stmt *st, void *item)
{
        struct store_cell *c = item;
        const char *txt[3];
        const char **dst[3] = { &c->row.code, &c->row.env_json, &c->row.cwd };
        size_t len[3], total = 0;
        char *p;

        for (int i = 0; i < 3; i++) {
                txt[i] = (const char *)sqlite3_column_text(st, 1 + i);
                if (!txt[i] && sqlite3_column_type(st, 1 + i) != SQLITE_NULL)
                        return -ENOMEM;
                len[i] = txt[i] ? (size_t)sqlite3_column_bytes(st, 1 + i) : 0;
                total += len[i] + 1;
        }
        c->buf = p = malloc(total);
        if (!p)
                return -ENOMEM;
        for (int i = 0; i < 3; i++) {
                memcpy(p, txt[i] ?: "", len[i]);
                p[len[i]] = '\0';
                *dst[i] = p;
                p += len[i] + 1;
        }
        c->row.seq = sq_column_u64(st, 0);
        c->row.typescript = sqlite3_column_int64(st, 4) != 0;
        return 0;
}

int sq_cell_list(struct store *s, const char *context_id, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT seq, code, env_json, cwd, typescript FROM cells WHERE context_id = ? ORDER BY seq",
                       out, decode_cell, "t", context_id);
}

/* -ENOENT names a missing context; an empty journal is not an error. */
int sq_cells_delete(struct store *s, const char *context_id)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        sqlite3 *db = sq_db(s);
        int r;

        r = sq_tx_begin(db, &tx);
        if (r < 0)
                return r;
        if ((r = sq_context_exists(db, context_id)) < 0 ||
            (r = sq_run(db, "DELETE FROM cells WHERE context_id = ?", "t", context_id)) < 0)
                return r;
        return sq_tx_commit(&tx);
}

/* Read from the cells themselves, in one statement so the count and the
 * bytes describe the same journal. */
int sq_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_query_row(sq_db(s),
                         "SELECT COALESCE(MAX(seq), 0), COALESCE(SUM(length(CAST(code AS BLOB))), 0) "
                         "FROM cells WHERE context_id = ?",
                         &st, "t", context_id);
        if (r < 0)
                return r == -ENOENT ? -EIO : r;   /* an aggregate always has a row */
        *ret_count = sq_column_u64(st, 0);
        *ret_bytes = sq_column_u64(st, 1);
        return 0;
}
