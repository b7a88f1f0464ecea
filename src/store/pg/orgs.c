/* The orgs table. */
#include <errno.h>

#include "store/pg/pg.h"

int pgs_org_ensure(struct store *s, const char *id, const char *name)
{
        PGS_CONN(s, db);
        /* DO NOTHING keeps the first name and created_at. */
        return pgs_run(db, "INSERT INTO orgs(id, name, created_at) VALUES($1, $2, $3) ON CONFLICT(id) DO NOTHING",
                       "ttu", id, name, wall_ms());
}

int pgs_org_get(struct store *s, const char *id, struct org_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        struct org_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT id, name, created_at, slug, plan FROM orgs WHERE id = $1", &res, "t", id);

        if (r < 0)
                return r;
        if ((r = pgs_copy(res, 0, 0, row.id, sizeof(row.id))) < 0 ||
            (r = pgs_copy(res, 0, 1, row.name, sizeof(row.name))) < 0 ||
            (r = pgs_copy(res, 0, 3, row.slug, sizeof(row.slug))) < 0 ||
            (r = pgs_copy(res, 0, 4, row.plan, sizeof(row.plan))) < 0)
                return r;
        row.created_at = pgs_u64(res, 0, 2);
        *ret = row;
        return 0;
}
