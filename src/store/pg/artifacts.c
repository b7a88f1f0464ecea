/* The artifacts table: an org's durable objects and its multipart uploads
 * in progress. Every read by id names the org. */
#include <errno.h>
#include <stdlib.h>

#include "store/pg/pg.h"

#define ARTIFACT_COLUMNS                                                                                    \
        "id, org_id, sandbox_id, state, name, path, content_type, checksum, metadata, size, created_at, " \
        "expires_at, ttl_s"

/* Every column replaced, as SQLite's INSERT OR REPLACE (the id is the
 * only unique key, and nothing references an artifact). */
int pgs_artifact_put(struct store *s, const struct artifact_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO artifacts(" ARTIFACT_COLUMNS ") "
                       "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) "
                       "ON CONFLICT(id) DO UPDATE SET org_id = EXCLUDED.org_id, sandbox_id = EXCLUDED.sandbox_id, "
                       "state = EXCLUDED.state, name = EXCLUDED.name, path = EXCLUDED.path, "
                       "content_type = EXCLUDED.content_type, checksum = EXCLUDED.checksum, "
                       "metadata = EXCLUDED.metadata, size = EXCLUDED.size, created_at = EXCLUDED.created_at, "
                       "expires_at = EXCLUDED.expires_at, ttl_s = EXCLUDED.ttl_s",
                       "tttttttttuuuu", row->id, row->org_id, row->sandbox_id, row->state, row->name, row->path,
                       row->content_type, row->checksum, row->metadata ? row->metadata : "{}", row->size,
                       row->created_at, row->expires_at, row->ttl_s);
}

static int artifact_decode(const PGresult *res, int i, void *item)
{
        struct artifact_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = pgs_copy(res, i, 3, row->state, sizeof(row->state))) < 0 ||
            (r = pgs_copy(res, i, 4, row->name, sizeof(row->name))) < 0 ||
            (r = pgs_copy(res, i, 5, row->path, sizeof(row->path))) < 0 ||
            (r = pgs_copy(res, i, 6, row->content_type, sizeof(row->content_type))) < 0 ||
            (r = pgs_copy(res, i, 7, row->checksum, sizeof(row->checksum))) < 0 ||
            (r = pgs_dup(res, i, 8, "{}", &row->metadata)) < 0)
                return r;
        row->size = pgs_u64(res, i, 9);
        row->created_at = pgs_u64(res, i, 10);
        row->expires_at = pgs_u64(res, i, 11);
        row->ttl_s = pgs_u64(res, i, 12);
        return 0;
}

int pgs_artifact_get(struct store *s, const char *org_id, const char *id, struct artifact_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE id = $1 AND org_id = $2", &res,
                              "tt", id, org_id);

        if (r < 0)
                return r;
        *ret = (struct artifact_row){ 0 };
        r = artifact_decode(res, 0, ret);
        if (r < 0)
                artifact_row_done(ret);
        return r;
}

int pgs_artifact_delete(struct store *s, const char *org_id, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM artifacts WHERE id = $1 AND org_id = $2", "tt", id, org_id);
}

/* substr(name, 1, length(p)) = p: a prefix test with no LIKE wildcards to
 * escape ("" matches every name). */
#define ARTIFACT_WHERE                                                                          \
        " FROM artifacts WHERE org_id = $1 AND state = $2 AND ($3 = '' OR sandbox_id = $3) AND " \
        "substr(name, 1, length($4)) = $4 AND (expires_at = 0 OR expires_at > $5)"

int pgs_artifact_list(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                      struct store_rows *out, uint64_t *ret_total)
{
        PGS_CONN(s, db);
        int r = pgs_query_u64(db, ret_total, "SELECT COUNT(*)" ARTIFACT_WHERE, "ttttu", f->org_id, f->state,
                              f->sandbox_id, f->name_prefix, f->now);

        if (r < 0)
                return r;
        return pgs_list(db,
                        "SELECT " ARTIFACT_COLUMNS ARTIFACT_WHERE
                        " ORDER BY created_at DESC, id DESC LIMIT $6 OFFSET $7",
                        out, artifact_decode, "ttttuuu", f->org_id, f->state, f->sandbox_id, f->name_prefix, f->now,
                        limit, offset);
}

int pgs_artifact_list_expired(struct store *s, uint64_t now, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE expires_at > 0 AND expires_at <= $1 "
                        "ORDER BY expires_at, id",
                        out, artifact_decode, "u", now);
}

int pgs_artifact_bytes(struct store *s, const char *org_id, uint64_t *ret)
{
        PGS_CONN(s, db);
        return pgs_query_u64(db, ret, "SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE org_id = $1", "t", org_id);
}
