/* The artifacts table: an org's durable objects and its multipart uploads
 * in progress. Every read by id names the org, so another org's artifact
 * reads as absent. */
#include <errno.h>
#include <stdlib.h>

#include "base/cleanup.h"
#include "store/sqlite/sqlite.h"

#define ARTIFACT_COLUMNS                                                                                    \
        "id, org_id, sandbox_id, state, name, path, content_type, checksum, metadata, size, created_at, " \
        "expires_at, ttl_s"

int sq_artifact_put(struct store *s, const struct artifact_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT OR REPLACE INTO artifacts(" ARTIFACT_COLUMNS ") "
                      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "tttttttttuuuu", row->id, row->org_id, row->sandbox_id, row->state, row->name, row->path,
                      row->content_type, row->checksum, row->metadata ? row->metadata : "{}", row->size,
                      row->created_at, row->expires_at, row->ttl_s);
}

static int artifact_decode(sqlite3_stmt *st, void *item)
{
        struct artifact_row *row = item;
        int r;
        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = sq_column_copy(st, 3, row->state, sizeof(row->state))) < 0 ||
            (r = sq_column_copy(st, 4, row->name, sizeof(row->name))) < 0 ||
            (r = sq_column_copy(st, 5, row->path, sizeof(row->path))) < 0 ||
            (r = sq_column_copy(st, 6, row->content_type, sizeof(row->content_type))) < 0 ||
            (r = sq_column_copy(st, 7, row->checksum, sizeof(row->checksum))) < 0 ||
            (r = sq_column_dup(st, 8, "{}", &row->metadata)) < 0)
                return r;
        row->size = sq_column_u64(st, 9);
        row->created_at = sq_column_u64(st, 10);
        row->expires_at = sq_column_u64(st, 11);
        row->ttl_s = sq_column_u64(st, 12);
        return 0;
}

int sq_artifact_get(struct store *s, const char *org_id, const char *id, struct artifact_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE id = ? AND org_id = ?",
                             &st, "tt", id, org_id);
        if (r < 0)
                return r;
        *ret = (struct artifact_row){ 0 };
        r = artifact_decode(st, ret);
        if (r < 0)
                artifact_row_done(ret);
        return r;
}

int sq_artifact_delete(struct store *s, const char *org_id, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM artifacts WHERE id = ? AND org_id = ?", "tt", id, org_id);
}

/* substr(name, 1, length(p)) = p: a prefix test with no LIKE wildcards to
 * escape ("" matches every name). */
#define ARTIFACT_WHERE                                                                            \
        " FROM artifacts WHERE org_id = ? AND state = ? AND (? = '' OR sandbox_id = ?) AND "     \
        "substr(name, 1, length(?)) = ? AND (expires_at = 0 OR expires_at > ?)"

int sq_artifact_list(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                     struct store_rows *out, uint64_t *ret_total)
{
        sqlite3 *db = sq_db(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(db, "SELECT COUNT(*)" ARTIFACT_WHERE, &st, "ttttttu", f->org_id, f->state,
                             f->sandbox_id, f->sandbox_id, f->name_prefix, f->name_prefix, f->now);
        if (r < 0)
                return r;
        *ret_total = sq_column_u64(st, 0);
        return sq_list(db,
                       "SELECT " ARTIFACT_COLUMNS ARTIFACT_WHERE " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                       out, artifact_decode, "ttttttuuu", f->org_id, f->state, f->sandbox_id, f->sandbox_id,
                       f->name_prefix, f->name_prefix, f->now, limit, offset);
}

int sq_artifact_list_expired(struct store *s, uint64_t now, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE expires_at > 0 AND expires_at <= ? "
                       "ORDER BY expires_at, id",
                       out, artifact_decode, "u", now);
}

int sq_artifact_bytes(struct store *s, const char *org_id, uint64_t *ret)
{
        return sq_query_u64(sq_db(s), "SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE org_id = ?", org_id, ret);
}
