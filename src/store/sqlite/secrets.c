/* The secrets table: an org's sealed values. Every statement names the org
 * in its WHERE clause, so another org's secret reads as absent. */
#include <errno.h>
#include <stdlib.h>

#include "store/sqlite/sqlite.h"

int sq_secret_create(struct store *s, const struct secret_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO secrets(org_id, name, sealed, key_id, created_at, updated_at) "
                      "VALUES(?, ?, ?, ?, ?, ?)",
                      "ttttuu", row->org_id, row->name, row->sealed, row->key_id, row->created_at, row->updated_at);
}

int sq_secret_update(struct store *s, const struct secret_row *row)
{
        return sq_run_changed(sq_db(s),
                              "UPDATE secrets SET sealed = ?, key_id = ?, updated_at = ? WHERE org_id = ? AND name = ?",
                              "ttutt", row->sealed, row->key_id, row->updated_at, row->org_id, row->name);
}

int sq_secret_delete(struct store *s, const char *org_id, const char *name)
{
        return sq_run_changed(sq_db(s), "DELETE FROM secrets WHERE org_id = ? AND name = ?", "tt", org_id, name);
}

static int secret_decode(sqlite3_stmt *st, void *item)
{
        struct secret_row *row = item;
        int r;

        if ((r = sq_column_copy(st, 0, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 1, row->name, sizeof(row->name))) < 0 ||
            (r = sq_column_dup(st, 2, "", &row->sealed)) < 0 ||
            (r = sq_column_copy(st, 3, row->key_id, sizeof(row->key_id))) < 0)
                return r;
        row->created_at = sq_column_u64(st, 4);
        row->updated_at = sq_column_u64(st, 5);
        return 0;
}

int sq_secret_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                   uint64_t *ret_total)
{
        return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM secrets WHERE org_id = ?",
                           "SELECT org_id, name, sealed, key_id, created_at, updated_at FROM secrets "
                           "WHERE org_id = ? ORDER BY name LIMIT ? OFFSET ?",
                           secret_decode, org_id, limit, offset, out, ret_total);
}
