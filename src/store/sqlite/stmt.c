/* Statement, transaction and error helpers of the SQLite backend. */
#include <errno.h>
#include <string.h>

#include "store/sqlite/sqlite.h"

int sq_errno(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_DONE:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_CONSTRAINT:
                switch (rc) {
                case SQLITE_CONSTRAINT_PRIMARYKEY:
                case SQLITE_CONSTRAINT_UNIQUE:
                        return -EEXIST;
                case SQLITE_CONSTRAINT_FOREIGNKEY:
                        /* The referenced org/sandbox/context does not exist. */
                        return -ENOENT;
                default:
                        return -EINVAL;
                }
        default:
                return -EIO;
        }
}

int sq_err(sqlite3 *db, int r, char *buf, size_t len, const char *what)
{
        store_set_msg(buf, len, "%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
        return r;
}

void sq_finalizep(sqlite3_stmt **st)
{
        if (*st)
                sqlite3_finalize(*st);
}

/* Statements live in helpers called under the transaction, so none is
 * pending when it rolls back. */
void sq_rollbackp(sqlite3 **tx)
{
        /* A failed COMMIT may already have rolled back on its own. */
        if (*tx && !sqlite3_get_autocommit(*tx))
                sqlite3_exec(*tx, "ROLLBACK", NULL, NULL, NULL);
}

/* IMMEDIATE takes the write lock up front: a deferred transaction that
 * reads and then writes can fail with SQLITE_BUSY on the upgrade in WAL
 * mode without the busy handler ever retrying, and the read-check-write
 * sequences of this backend must not interleave with another writer. */
int sq_tx_begin(sqlite3 *db, sqlite3 **ret_tx)
{
        int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return sq_errno(rc);
        *ret_tx = db;
        return 0;
}

int sq_tx_commit(sqlite3 **tx)
{
        int rc = sqlite3_exec(*tx, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return sq_errno(rc);   /* *tx kept: the cleanup rolls back */
        *tx = NULL;
        return 0;
}

int sq_exec(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return sq_err(db, sq_errno(rc), err, errlen, sql);
        return 0;
}

int sq_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v3(db, sql, -1, 0, &st, NULL);
        if (rc != SQLITE_OK) {
                sqlite3_finalize(st);
                return sq_errno(rc);
        }
        *ret = st;
        return 0;
}

int sq_prepare_with(sqlite3 *db, const char *sql, const char *arg, sqlite3_stmt **ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare(db, sql, &st);
        if (r < 0)
                return r;
        if (arg && (r = sq_bind_text(st, 1, arg)) < 0)
                return r;
        *ret = TAKE_PTR(st);
        return 0;
}

int sq_bind_text(sqlite3_stmt *st, int idx, const char *v)
{
        return sq_errno(sqlite3_bind_text(st, idx, v, -1, SQLITE_TRANSIENT));
}

/* SQLite integers are signed 64-bit; refuse what would come back negative
 * and break ordering and the expiry comparison. */
int sq_bind_u64(sqlite3_stmt *st, int idx, uint64_t v)
{
        if (v > (uint64_t)INT64_MAX)
                return -ERANGE;
        return sq_errno(sqlite3_bind_int64(st, idx, (sqlite3_int64)v));
}

int sq_bind_bool(sqlite3_stmt *st, int idx, bool v)
{
        return sq_errno(sqlite3_bind_int(st, idx, v ? 1 : 0));
}

int sq_step(sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        return sq_errno(rc);
}

int sq_step_done(sqlite3_stmt *st)
{
        int r = sq_step(st);
        return r > 0 ? -EIO : r;
}

int sq_exec_by_id(sqlite3_stmt *st, int idx, const char *id)
{
        int r = sq_bind_text(st, idx, id);
        if (r < 0)
                return r;
        r = sq_step_done(st);
        if (r < 0)
                return r;
        return sqlite3_changes(sqlite3_db_handle(st)) > 0 ? 0 : -ENOENT;
}

int sq_query_u64(sqlite3 *db, const char *sql, const char *arg, uint64_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare_with(db, sql, arg, &st);
        if (r < 0)
                return r;
        r = sq_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EIO;
        *ret = sq_column_u64(st, 0);
        return 0;
}

/* One statement, so a cascade to child rows is atomic without an explicit
 * transaction. */
int sq_delete_by_id(sqlite3 *db, const char *sql, const char *id)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare(db, sql, &st);
        if (r < 0)
                return r;
        return sq_exec_by_id(st, 1, id);
}

int sq_collect(sqlite3_stmt *st, struct store_rows *out, int (*decode)(sqlite3_stmt *st, void *item))
{
        void *item;
        int r;

        while ((r = sq_step(st)) > 0) {
                item = store_rows_push(out);
                if (!item)
                        return -ENOMEM;
                r = decode(st, item);
                if (r < 0)
                        return r;
        }
        return r;
}

uint64_t sq_column_u64(sqlite3_stmt *st, int col)
{
        return (uint64_t)sqlite3_column_int64(st, col);
}

int sq_column_copy(sqlite3_stmt *st, int col, char *dst, size_t size)
{
        const unsigned char *t = sqlite3_column_text(st, col);
        size_t n;

        if (!t) {
                if (sqlite3_column_type(st, col) != SQLITE_NULL)
                        return -ENOMEM;
                dst[0] = '\0';
                return 0;
        }
        n = (size_t)sqlite3_column_bytes(st, col);
        if (n >= size)
                return -ENAMETOOLONG;
        memcpy(dst, t, n);
        dst[n] = '\0';
        return 0;
}

int sq_column_dup(sqlite3_stmt *st, int col, const char *dflt, char **ret)
{
        const unsigned char *t = sqlite3_column_text(st, col);
        char *p;

        if (!t && sqlite3_column_type(st, col) != SQLITE_NULL)
                return -ENOMEM;
        p = strdup(t ? (const char *)t : dflt);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}
