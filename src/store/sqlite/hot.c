/* Statements kept prepared for the life of the connection: the few that
 * every executed cell runs (its journal write). Parsing and planning them
 * again for each cell was most of the store's CPU on a warm context round
 * trip; a kept statement is reset after each use instead of finalized. */
#include <errno.h>
#include <stdarg.h>

#include "store/sqlite/sqlite.h"

void sq_hot_resetp(sqlite3_stmt **st)
{
        if (*st) {
                sqlite3_reset(*st);
                sqlite3_clear_bindings(*st);
        }
}

/* The slot's statement, prepared from sql on first use. One sql per slot:
 * the slot, not the text, is the key. */
static int hot_get(struct store *s, enum sq_hot slot, const char *sql, sqlite3_stmt **ret)
{
        struct sq_store *q = (struct sq_store *)s;
        if (slot >= SQ_HOT_N)
                return -EINVAL;
        if (!q->hot[slot]) {
                int rc = sqlite3_prepare_v3(q->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &q->hot[slot], NULL);
                if (rc != SQLITE_OK) {
                        sqlite3_finalize(q->hot[slot]);
                        q->hot[slot] = NULL;
                        return sq_errno(rc);
                }
        }
        *ret = q->hot[slot];
        return 0;
}

static int hot_bind_va(struct store *s, enum sq_hot slot, const char *sql, sqlite3_stmt **ret, const char *types,
                       va_list ap)
{
        sqlite3_stmt *st;
        int r = hot_get(s, slot, sql, &st);
        if (r < 0)
                return r;
        *ret = st;   /* bound or not, the caller resets it */
        return sq_bind_va(st, 1, types, ap);
}

int sq_hot_run(struct store *s, enum sq_hot slot, const char *sql, const char *types, ...)
{
        _cleanup_(sq_hot_resetp) sqlite3_stmt *st = NULL;
        int r = STORE_WITH_ARGS(types, hot_bind_va(s, slot, sql, &st, types, ap_));

        return r < 0 ? r : sq_step_done(st);
}

int sq_hot_run_changed(struct store *s, enum sq_hot slot, const char *sql, const char *types, ...)
{
        _cleanup_(sq_hot_resetp) sqlite3_stmt *st = NULL;
        int r = STORE_WITH_ARGS(types, hot_bind_va(s, slot, sql, &st, types, ap_));

        if (r < 0 || (r = sq_step_done(st)) < 0)
                return r;
        return sqlite3_changes(sq_db(s)) > 0 ? 0 : -ENOENT;
}

int sq_hot_query_u64(struct store *s, enum sq_hot slot, const char *sql, const char *arg, uint64_t *ret)
{
        _cleanup_(sq_hot_resetp) sqlite3_stmt *st = NULL;
        int r = hot_get(s, slot, sql, &st);

        if (r < 0 || (r = sq_bind_text(st, 1, arg)) < 0 || (r = sq_step(st)) < 0)
                return r;
        if (r == 0)
                return -EIO;   /* an aggregate always has a row */
        *ret = sq_column_u64(st, 0);
        return 0;
}

/* BEGIN IMMEDIATE and COMMIT, as sq_tx_begin/sq_tx_commit, kept prepared. */
int sq_hot_tx_begin(struct store *s, sqlite3 **ret_tx)
{
        int r = sq_hot_run(s, SQ_HOT_BEGIN, "BEGIN IMMEDIATE", "");
        if (r < 0)
                return r;
        *ret_tx = sq_db(s);
        return 0;
}

int sq_hot_tx_commit(struct store *s, sqlite3 **tx)
{
        int r = sq_hot_run(s, SQ_HOT_COMMIT, "COMMIT", "");
        if (r < 0)
                return r;   /* *tx kept: the cleanup rolls back */
        *tx = NULL;
        return 0;
}

/* Before the connection closes: a kept statement would make it BUSY. */
void sq_hot_done(struct sq_store *q)
{
        for (size_t i = 0; i < SQ_HOT_N; i++) {
                sqlite3_finalize(q->hot[i]);
                q->hot[i] = NULL;
        }
}
