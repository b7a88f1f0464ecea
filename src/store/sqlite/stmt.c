/* Statement, transaction and error helpers of the SQLite backend. */
#include <errno.h>
#include <stdarg.h>
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

int sq_fail(sqlite3 *db, int r, struct err *err, const char *what)
{
        err_set(err, ERR_INTERNAL, -r, "%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
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

int sq_exec(sqlite3 *db, const char *sql, struct err *err)
{
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return sq_fail(db, sq_errno(rc), err, sql);
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

int sq_bind_va(sqlite3_stmt *st, int idx, const char *types, va_list ap)
{
        int r = 0;

        for (const char *t = types; *t && r >= 0; t++, idx++) {
                switch (*t) {
                case 't':
                        r = sq_bind_text(st, idx, va_arg(ap, const char *));
                        break;
                case 'u':
                        r = sq_bind_u64(st, idx, va_arg(ap, uint64_t));
                        break;
                case 'b':
                        r = sq_bind_bool(st, idx, va_arg(ap, int) != 0);
                        break;
                default:
                        return -EINVAL;   /* a typo in this backend */
                }
        }
        return r;
}

static int prepare_va(sqlite3 *db, const char *sql, sqlite3_stmt **ret, const char *types, va_list ap)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare(db, sql, &st);
        if (r < 0)
                return r;
        r = sq_bind_va(st, 1, types, ap);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(st);
        return 0;
}

/* The functions below share one shape: prepare sql, bind the arguments
 * after types, step. They differ in what the step must find. */
int sq_prepare_bound_va(sqlite3 *db, const char *sql, sqlite3_stmt **ret, const char *types, va_list ap)
{
        return prepare_va(db, sql, ret, types, ap);
}

#define WITH_ARGS(call) STORE_WITH_ARGS(types, call)

int sq_prepare_bound(sqlite3 *db, const char *sql, sqlite3_stmt **ret, const char *types, ...)
{
        return WITH_ARGS(prepare_va(db, sql, ret, types, ap_));
}

int sq_run(sqlite3 *db, const char *sql, const char *types, ...)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = WITH_ARGS(prepare_va(db, sql, &st, types, ap_));

        return r < 0 ? r : sq_step_done(st);
}

int sq_run_changed(sqlite3 *db, const char *sql, const char *types, ...)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = WITH_ARGS(prepare_va(db, sql, &st, types, ap_));

        if (r < 0 || (r = sq_step_done(st)) < 0)
                return r;
        return sqlite3_changes(db) > 0 ? 0 : -ENOENT;
}

int sq_query_row(sqlite3 *db, const char *sql, sqlite3_stmt **ret, const char *types, ...)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = WITH_ARGS(prepare_va(db, sql, &st, types, ap_));

        if (r < 0 || (r = sq_step(st)) < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        *ret = TAKE_PTR(st);
        return 0;
}

int sq_list(sqlite3 *db, const char *sql, struct store_rows *out, sq_decode_fn decode, const char *types, ...)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = WITH_ARGS(prepare_va(db, sql, &st, types, ap_));
        void *item;

        if (r < 0)
                return r;
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

int sq_query_u64(sqlite3 *db, const char *sql, const char *arg, uint64_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(db, sql, &st, arg ? "t" : "", arg);

        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        *ret = sq_column_u64(st, 0);
        return 0;
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

int sq_org_page(sqlite3 *db, const char *count_sql, const char *list_sql, sq_decode_fn decode, const char *org_id,
                uint64_t limit, uint64_t offset, struct store_rows *out, uint64_t *ret_total)
{
        int r = sq_query_u64(db, count_sql, org_id, ret_total);
        return r < 0 ? r : sq_list(db, list_sql, out, decode, "tuu", org_id, limit, offset);
}
