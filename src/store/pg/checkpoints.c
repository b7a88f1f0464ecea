/* The checkpoints table: an org's workspace checkpoints (their tar files
 * live in the data dir). Every statement names the org. */
#include <errno.h>
#include <stdlib.h>

#include "store/pg/pg.h"

#define CHECKPOINT_COLUMNS \
        "id, org_id, sandbox_id, name, description, checksum, size_bytes, file_count, meta_json, created_at"

int pgs_checkpoint_create(struct store *s, const struct checkpoint_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO checkpoints(" CHECKPOINT_COLUMNS ") VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                       "ttttttuutu", row->id, row->org_id, row->sandbox_id, row->name, row->description,
                       row->checksum, row->size_bytes, row->file_count, row->meta_json, row->created_at);
}

static int checkpoint_decode(const PGresult *res, int i, void *item)
{
        struct checkpoint_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = pgs_dup(res, i, 3, "", &row->name)) < 0 || (r = pgs_dup(res, i, 4, "", &row->description)) < 0 ||
            (r = pgs_copy(res, i, 5, row->checksum, sizeof(row->checksum))) < 0 ||
            (r = pgs_dup(res, i, 8, "{}", &row->meta_json)) < 0)
                return r;
        row->size_bytes = pgs_u64(res, i, 6);
        row->file_count = pgs_u64(res, i, 7);
        row->created_at = pgs_u64(res, i, 9);
        return 0;
}

int pgs_checkpoint_get(struct store *s, const char *org_id, const char *id, struct checkpoint_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        struct checkpoint_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE org_id = $1 AND id = $2",
                              &res, "tt", org_id, id);

        if (r == 0 && (r = checkpoint_decode(res, 0, &row)) < 0)
                checkpoint_row_done(&row);
        if (r < 0)
                return r;
        *ret = row;
        return 0;
}

int pgs_checkpoint_delete(struct store *s, const char *org_id, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM checkpoints WHERE org_id = $1 AND id = $2", "tt", org_id, id);
}

int pgs_checkpoint_list(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit,
                        uint64_t offset, struct store_rows *out, uint64_t *ret_total)
{
        PGS_CONN(s, db);
        if (!sandbox_id)
                return pgs_org_page(db, "SELECT COUNT(*) FROM checkpoints WHERE org_id = $1",
                                    "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE org_id = $1 "
                                    "ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3",
                                    checkpoint_decode, org_id, limit, offset, out, ret_total);
        int r = pgs_query_u64(db, ret_total, "SELECT COUNT(*) FROM checkpoints WHERE org_id = $1 AND sandbox_id = $2",
                              "tt", org_id, sandbox_id);
        if (r < 0)
                return r;
        return pgs_list(db,
                        "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE org_id = $1 AND sandbox_id = $2 "
                        "ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4",
                        out, checkpoint_decode, "ttuu", org_id, sandbox_id, limit, offset);
}

int pgs_checkpoint_usage(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT COUNT(*), COALESCE(SUM(size_bytes), 0) FROM checkpoints WHERE org_id = $1",
                              &res, "t", org_id);

        if (r < 0)
                return r;
        *ret_count = pgs_u64(res, 0, 0);
        *ret_bytes = pgs_u64(res, 0, 1);
        return 0;
}
