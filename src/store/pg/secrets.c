/* The secrets table: an org's sealed values. Every statement names the
 * org, so another org's secret reads as absent. */
#include <errno.h>
#include <stdlib.h>

#include "store/pg/pg.h"

int pgs_secret_create(struct store *s, const struct secret_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO secrets(org_id, name, sealed, key_id, created_at, updated_at) "
                       "VALUES($1, $2, $3, $4, $5, $6)",
                       "ttttuu", row->org_id, row->name, row->sealed, row->key_id, row->created_at, row->updated_at);
}

int pgs_secret_update(struct store *s, const struct secret_row *row)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db,
                               "UPDATE secrets SET sealed = $1, key_id = $2, updated_at = $3 "
                               "WHERE org_id = $4 AND name = $5",
                               "ttutt", row->sealed, row->key_id, row->updated_at, row->org_id, row->name);
}

int pgs_secret_delete(struct store *s, const char *org_id, const char *name)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM secrets WHERE org_id = $1 AND name = $2", "tt", org_id, name);
}

static int secret_decode(const PGresult *res, int i, void *item)
{
        struct secret_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->name, sizeof(row->name))) < 0 ||
            (r = pgs_dup(res, i, 2, "", &row->sealed)) < 0 ||
            (r = pgs_copy(res, i, 3, row->key_id, sizeof(row->key_id))) < 0)
                return r;
        row->created_at = pgs_u64(res, i, 4);
        row->updated_at = pgs_u64(res, i, 5);
        return 0;
}

int pgs_secret_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                    uint64_t *ret_total)
{
        PGS_CONN(s, db);
        return pgs_org_page(db, "SELECT COUNT(*) FROM secrets WHERE org_id = $1",
                            "SELECT org_id, name, sealed, key_id, created_at, updated_at FROM secrets "
                            "WHERE org_id = $1 ORDER BY name LIMIT $2 OFFSET $3",
                            secret_decode, org_id, limit, offset, out, ret_total);
}
