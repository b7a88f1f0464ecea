/* The orgs table. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

int sq_org_ensure(struct store *s, const char *id, const char *name)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        /* DO NOTHING keeps the first name and created_at. */
        r = sq_prepare(sq_db(s),
                       "INSERT INTO orgs(id, name, created_at) VALUES(?, ?, ?) "
                       "ON CONFLICT(id) DO NOTHING",
                       &st);
        if (r < 0)
                return r;
        if ((r = sq_bind_text(st, 1, id)) < 0 ||
            (r = sq_bind_text(st, 2, name)) < 0 ||
            (r = sq_bind_u64(st, 3, wall_ms())) < 0)
                return r;
        return sq_step_done(st);
}

int sq_org_get(struct store *s, const char *id, struct org_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct org_row row = {};
        int r;

        r = sq_prepare_with(sq_db(s), "SELECT id, name, created_at FROM orgs WHERE id = ?", id, &st);
        if (r < 0)
                return r;
        r = sq_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        if ((r = sq_column_copy(st, 0, row.id, sizeof(row.id))) < 0 ||
            (r = sq_column_copy(st, 1, row.name, sizeof(row.name))) < 0)
                return r;
        row.created_at = sq_column_u64(st, 2);
        *ret = row;
        return 0;
}
