/* The cells table: each context's journal, replayed in seq order to
 * rebuild its state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/sqlite.h"

static int cell_max_seq(sqlite3 *db, const char *context_id, uint64_t *ret)
{
        return sq_query_u64(db, "SELECT COALESCE(MAX(seq), 0) FROM cells WHERE context_id = ?", context_id, ret);
}

static int cell_insert(sqlite3 *db, const char *context_id, const struct cell_row *cell)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare(db,
                       "INSERT INTO cells(context_id, seq, code, env_json, cwd, typescript) "
                       "VALUES(?, ?, ?, ?, ?, ?)",
                       &st);
        if (r < 0)
                return r;
        if ((r = sq_bind_text(st, 1, context_id)) < 0 ||
            (r = sq_bind_u64(st, 2, cell->seq)) < 0 ||
            (r = sq_bind_text(st, 3, cell->code)) < 0 ||
            (r = sq_bind_text(st, 4, sq_env_or_default(cell->env_json))) < 0 ||
            (r = sq_bind_text(st, 5, cell->cwd)) < 0 ||
            (r = sq_bind_bool(st, 6, cell->typescript)) < 0)
                return r;
        return sq_step_done(st);
}

/* The journal must replay exactly, so a gap or a repeat is refused rather
 * than stored; reading MAX(seq) and inserting share one transaction. */
int sq_cell_append(struct store *s, const char *context_id, const struct cell_row *cell)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        sqlite3 *db = sq_db(s);
        uint64_t max;
        int r;

        r = sq_tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = sq_context_exists(db, context_id);
        if (r < 0)
                return r;
        r = cell_max_seq(db, context_id, &max);
        if (r < 0)
                return r;
        if (cell->seq != max + 1)
                return -EINVAL;
        r = cell_insert(db, context_id, cell);
        if (r < 0)
                return r;
        return sq_tx_commit(&tx);
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
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare_with(sq_db(s),
                            "SELECT seq, code, env_json, cwd, typescript FROM cells "
                            "WHERE context_id = ? ORDER BY seq",
                            context_id, &st);
        if (r < 0)
                return r;
        return sq_collect(st, out, decode_cell);
}

/* -ENOENT names a missing context; an empty journal is not an error. */
int sq_cells_delete(struct store *s, const char *context_id)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        sqlite3 *db = sq_db(s);
        int r;

        r = sq_tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = sq_context_exists(db, context_id);
        if (r < 0)
                return r;
        r = sq_prepare_with(db, "DELETE FROM cells WHERE context_id = ?", context_id, &st);
        if (r < 0)
                return r;
        r = sq_step_done(st);
        if (r < 0)
                return r;
        return sq_tx_commit(&tx);
}

/* Read from the cells themselves, in one statement so the count and the
 * bytes describe the same journal. */
int sq_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare_with(sq_db(s),
                            "SELECT COALESCE(MAX(seq), 0), COALESCE(SUM(length(CAST(code AS BLOB))), 0) "
                            "FROM cells WHERE context_id = ?",
                            context_id, &st);
        if (r < 0)
                return r;
        r = sq_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EIO;
        *ret_count = sq_column_u64(st, 0);
        *ret_bytes = sq_column_u64(st, 1);
        return 0;
}
