/* The orgs table. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

int sq_org_ensure(struct store *s, const char *id, const char *name)
{
        /* DO NOTHING keeps the first name and created_at. */
        return sq_run(sq_db(s),
                      "INSERT INTO orgs(id, name, created_at) VALUES(?, ?, ?) ON CONFLICT(id) DO NOTHING",
                      "ttu", id, name, wall_ms());
}

int sq_org_get(struct store *s, const char *id, struct org_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct org_row row = {};
        int r;

        r = sq_query_row(sq_db(s), "SELECT id, name, created_at, slug, plan FROM orgs WHERE id = ?", &st, "t", id);
        if (r < 0)
                return r;
        if ((r = sq_column_copy(st, 0, row.id, sizeof(row.id))) < 0 ||
            (r = sq_column_copy(st, 1, row.name, sizeof(row.name))) < 0 ||
            (r = sq_column_copy(st, 3, row.slug, sizeof(row.slug))) < 0 ||
            (r = sq_column_copy(st, 4, row.plan, sizeof(row.plan))) < 0)
                return r;
        row.created_at = sq_column_u64(st, 2);
        *ret = row;
        return 0;
}
