/* Statement, transaction and error helpers of the PostgreSQL backend. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg/pg.h"

/* Type OIDs of the parameters (catalog/pg_type_d.h is a server header). */
#define PGS_BOOLOID 16
#define PGS_INT8OID 20
#define PGS_TEXTOID 25
#define PGS_MAX_PARAMS 24

int pgs_errno(const PGresult *res)
{
        const char *state;

        if (!res)
                return -ENOMEM;
        switch (PQresultStatus(res)) {
        case PGRES_COMMAND_OK:
        case PGRES_TUPLES_OK:
                return 0;
        default:
                break;
        }
        state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (!state)
                return -EIO;   /* the connection failed: no server answer */
        if (strcmp(state, "23505") == 0)   /* unique_violation */
                return -EEXIST;
        if (strcmp(state, "23503") == 0)   /* foreign_key_violation */
                return -ENOENT;
        if (strncmp(state, "23", 2) == 0)   /* other integrity constraints */
                return -EINVAL;
        if (strcmp(state, "22003") == 0)   /* numeric_value_out_of_range */
                return -ERANGE;
        return -EIO;
}

void pgs_clearp(PGresult **res)
{
        if (*res)
                PQclear(*res);
}

static int exec_simple(PGconn *db, const char *sql)
{
        _cleanup_res_ PGresult *res = PQexec(db, sql);
        return pgs_errno(res);
}

void pgs_rollbackp(PGconn **tx)
{
        if (*tx && PQtransactionStatus(*tx) != PQTRANS_IDLE)
                exec_simple(*tx, "ROLLBACK");
}

int pgs_tx_begin(PGconn *db, PGconn **ret_tx)
{
        int r = exec_simple(db, "BEGIN");
        if (r < 0)
                return r;
        *ret_tx = db;
        return 0;
}

int pgs_tx_commit(PGconn **tx)
{
        int r = exec_simple(*tx, "COMMIT");
        if (r < 0)
                return r;   /* *tx kept: the cleanup rolls back */
        /* A COMMIT of a failed transaction answers ROLLBACK, not an error. */
        if (PQtransactionStatus(*tx) != PQTRANS_IDLE)
                return -EIO;
        *tx = NULL;
        return 0;
}

int pgs_tx_lock(PGconn *db, const char *name)
{
        return pgs_run(db, "SELECT pg_advisory_xact_lock(hashtext($1))", "t", name);
}

int pgs_exec(PGconn *db, const char *sql, struct err *err)
{
        _cleanup_res_ PGresult *res = PQexec(db, sql);
        int r = pgs_errno(res);

        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "%s", PQerrorMessage(db));
        return 0;
}

int pgs_query_va(PGconn *db, const char *sql, PGresult **ret, const char *types, va_list ap)
{
        const char *values[PGS_MAX_PARAMS];
        unsigned int oids[PGS_MAX_PARAMS];
        char nums[PGS_MAX_PARAMS][24];
        int n = 0;
        PGresult *res;
        int r;

        for (const char *t = types; *t; t++, n++) {
                if (n == PGS_MAX_PARAMS)
                        return -E2BIG;
                switch (*t) {
                case 't':
                        oids[n] = PGS_TEXTOID;
                        values[n] = va_arg(ap, const char *);
                        break;
                case 'u': {
                        uint64_t v = va_arg(ap, uint64_t);
                        /* int8 is signed: a value above INT64_MAX would come
                         * back negative and break ordering and comparisons. */
                        if (v > (uint64_t)INT64_MAX)
                                return -ERANGE;
                        oids[n] = PGS_INT8OID;
                        snprintf(nums[n], sizeof(nums[n]), "%" PRIu64, v);
                        values[n] = nums[n];
                        break;
                }
                case 'b':
                        oids[n] = PGS_BOOLOID;
                        values[n] = va_arg(ap, int) ? "t" : "f";
                        break;
                default:
                        return -EINVAL;
                }
        }
        res = PQexecParams(db, sql, n, oids, values, NULL, NULL, 0);
        r = pgs_errno(res);
        if (r < 0) {
                PQclear(res);
                return r;
        }
        *ret = res;
        return 0;
}

#define WITH_ARGS(call) STORE_WITH_ARGS(types, call)

int pgs_run(PGconn *db, const char *sql, const char *types, ...)
{
        _cleanup_res_ PGresult *res = NULL;
        return WITH_ARGS(pgs_query_va(db, sql, &res, types, ap_));
}

int pgs_run_changed(PGconn *db, const char *sql, const char *types, ...)
{
        _cleanup_res_ PGresult *res = NULL;
        int r = WITH_ARGS(pgs_query_va(db, sql, &res, types, ap_));

        if (r < 0)
                return r;
        return strtoull(PQcmdTuples(res), NULL, 10) > 0 ? 0 : -ENOENT;
}

int pgs_query_row(PGconn *db, const char *sql, PGresult **ret, const char *types, ...)
{
        _cleanup_res_ PGresult *res = NULL;
        int r = WITH_ARGS(pgs_query_va(db, sql, &res, types, ap_));

        if (r < 0)
                return r;
        if (PQntuples(res) == 0)
                return -ENOENT;
        *ret = TAKE_PTR(res);
        return 0;
}

int pgs_list(PGconn *db, const char *sql, struct store_rows *out, pgs_decode_fn decode, const char *types, ...)
{
        _cleanup_res_ PGresult *res = NULL;
        int r = WITH_ARGS(pgs_query_va(db, sql, &res, types, ap_));

        if (r < 0)
                return r;
        for (int i = 0; i < PQntuples(res); i++) {
                void *item = store_rows_push(out);
                if (!item)
                        return -ENOMEM;
                r = decode(res, i, item);
                if (r < 0)
                        return r;
        }
        return 0;
}

int pgs_query_u64(PGconn *db, uint64_t *ret, const char *sql, const char *types, ...)
{
        _cleanup_res_ PGresult *res = NULL;
        int r = WITH_ARGS(pgs_query_va(db, sql, &res, types, ap_));

        if (r < 0)
                return r;
        *ret = PQntuples(res) > 0 ? pgs_u64(res, 0, 0) : 0;
        return 0;
}

int pgs_org_page(PGconn *db, const char *count_sql, const char *list_sql, pgs_decode_fn decode, const char *org_id,
                 uint64_t limit, uint64_t offset, struct store_rows *out, uint64_t *ret_total)
{
        int r = pgs_query_u64(db, ret_total, count_sql, "t", org_id);
        return r < 0 ? r : pgs_list(db, list_sql, out, decode, "tuu", org_id, limit, offset);
}

/* Integers come back as decimal text; SUM() of int8 is numeric, still
 * plain digits for whole numbers. */
uint64_t pgs_u64(const PGresult *res, int i, int col)
{
        return strtoull(PQgetvalue(res, i, col), NULL, 10);
}

bool pgs_bool(const PGresult *res, int i, int col)
{
        return PQgetvalue(res, i, col)[0] == 't';
}

int pgs_copy(const PGresult *res, int i, int col, char *dst, size_t size)
{
        size_t n = (size_t)PQgetlength(res, i, col);

        if (n >= size)
                return -ENAMETOOLONG;
        memcpy(dst, PQgetvalue(res, i, col), n);   /* "" for NULL */
        dst[n] = '\0';
        return 0;
}

int pgs_dup(const PGresult *res, int i, int col, const char *dflt, char **ret)
{
        char *p = strdup(PQgetisnull(res, i, col) ? dflt : PQgetvalue(res, i, col));

        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}
