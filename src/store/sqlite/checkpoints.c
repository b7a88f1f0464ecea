/* The checkpoints table: an org's workspace checkpoints (their tar files
 * live in the data dir). Every statement names the org in its WHERE
 * clause, so another org's checkpoint reads as absent. */
#include <errno.h>
#include <stdlib.h>

#include "store/sqlite/sqlite.h"

#define CHECKPOINT_COLUMNS \
        "id, org_id, sandbox_id, name, description, checksum, size_bytes, file_count, meta_json, created_at"

int sq_checkpoint_create(struct store *s, const struct checkpoint_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO checkpoints(" CHECKPOINT_COLUMNS ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "ttttttuutu", row->id, row->org_id, row->sandbox_id, row->name, row->description, row->checksum,
                      row->size_bytes, row->file_count, row->meta_json, row->created_at);
}

static int checkpoint_decode(sqlite3_stmt *st, void *item)
{
        struct checkpoint_row *row = item;
        int r;

        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = sq_column_dup(st, 3, "", &row->name)) < 0 || (r = sq_column_dup(st, 4, "", &row->description)) < 0 ||
            (r = sq_column_copy(st, 5, row->checksum, sizeof(row->checksum))) < 0 ||
            (r = sq_column_dup(st, 8, "{}", &row->meta_json)) < 0)
                return r;
        row->size_bytes = sq_column_u64(st, 6);
        row->file_count = sq_column_u64(st, 7);
        row->created_at = sq_column_u64(st, 9);
        return 0;
}

int sq_checkpoint_get(struct store *s, const char *org_id, const char *id, struct checkpoint_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct checkpoint_row row = {};
        int r = sq_query_row(sq_db(s), "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE org_id = ? AND id = ?",
                             &st, "tt", org_id, id);
        if (r == 0 && (r = checkpoint_decode(st, &row)) < 0)
                checkpoint_row_done(&row);
        if (r < 0)
                return r;
        *ret = row;
        return 0;
}

int sq_checkpoint_delete(struct store *s, const char *org_id, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM checkpoints WHERE org_id = ? AND id = ?", "tt", org_id, id);
}

int sq_checkpoint_list(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit, uint64_t offset,
                       struct store_rows *out, uint64_t *ret_total)
{
        if (!sandbox_id)
                return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM checkpoints WHERE org_id = ?",
                                   "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE org_id = ? "
                                   "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                                   checkpoint_decode, org_id, limit, offset, out, ret_total);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT COUNT(*) FROM checkpoints WHERE org_id = ? AND sandbox_id = ?", &st,
                             "tt", org_id, sandbox_id);
        if (r < 0)
                return r;
        *ret_total = sq_column_u64(st, 0);
        return sq_list(sq_db(s),
                       "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE org_id = ? AND sandbox_id = ? "
                       "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                       out, checkpoint_decode, "ttuu", org_id, sandbox_id, limit, offset);
}

int sq_checkpoint_usage(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT COUNT(*), COALESCE(SUM(size_bytes), 0) FROM checkpoints WHERE org_id = ?",
                             &st, "t", org_id);
        if (r < 0)
                return r;
        *ret_count = sq_column_u64(st, 0);
        *ret_bytes = sq_column_u64(st, 1);
        return 0;
}
