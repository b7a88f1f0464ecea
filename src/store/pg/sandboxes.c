/* The sandboxes table. */
#include <errno.h>

#include "store/pg/pg.h"

#define SANDBOX_COLUMNS                                                                     \
        "id, org_id, created_at, last_used, expires_at, env_json, host_id, workspace_bytes, " \
        "workspace_inodes, file_bytes, cpu_millis, memory_bytes, expiry_fixed, warm_class, node_id, lease_epoch"

/* A row of SANDBOX_COLUMNS into item (a struct sandbox_row; env_json owned). */
static int sandbox_decode(const PGresult *res, int i, void *item)
{
        struct sandbox_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 13, row->warm_class, sizeof(row->warm_class))) < 0 ||
            (r = pgs_copy(res, i, 14, row->node_id, sizeof(row->node_id))) < 0 ||
            (r = pgs_dup(res, i, 5, "{}", &row->env_json)) < 0)
                return r;
        row->created_at = pgs_u64(res, i, 2);
        row->last_used = pgs_u64(res, i, 3);
        row->expires_at = pgs_u64(res, i, 4);
        row->host_id = (uint32_t)pgs_u64(res, i, 6);
        row->workspace_bytes = pgs_u64(res, i, 7);
        row->workspace_inodes = pgs_u64(res, i, 8);
        row->file_bytes = pgs_u64(res, i, 9);
        row->cpu_millis = pgs_u64(res, i, 10);
        row->memory_bytes = pgs_u64(res, i, 11);
        row->expiry_fixed = pgs_bool(res, i, 12);
        row->lease_epoch = pgs_u64(res, i, 15);
        return 0;
}

int pgs_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        _cleanup_(sandbox_row_done) struct sandbox_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE id = $1", &res, "t", id);

        if (r < 0 || (r = sandbox_decode(res, 0, &row)) < 0)
                return r;
        *ret = row;
        row.env_json = NULL;
        return 0;
}

int pgs_sandbox_list_org(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                         struct store_rows *out, uint64_t *ret_total)
{
        PGS_CONN(s, db);
        return pgs_org_page(db, "SELECT COUNT(*) FROM sandboxes WHERE org_id = $1",
                            "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE org_id = $1 ORDER BY created_at, id "
                            "LIMIT $2 OFFSET $3",
                            sandbox_decode, org_id, limit, offset, out, ret_total);
}

/* An upsert that updates in place: the row keeps its contexts and cells,
 * and its node_id and lease_epoch (only store_sandbox_claim moves those). */
int pgs_sandbox_put(struct store *s, const struct sandbox_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO sandboxes(" SANDBOX_COLUMNS ") "
                       "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) "
                       "ON CONFLICT(id) DO UPDATE SET org_id = EXCLUDED.org_id, "
                       "created_at = EXCLUDED.created_at, last_used = EXCLUDED.last_used, "
                       "expires_at = EXCLUDED.expires_at, env_json = EXCLUDED.env_json, "
                       "host_id = EXCLUDED.host_id, workspace_bytes = EXCLUDED.workspace_bytes, "
                       "workspace_inodes = EXCLUDED.workspace_inodes, file_bytes = EXCLUDED.file_bytes, "
                       "cpu_millis = EXCLUDED.cpu_millis, memory_bytes = EXCLUDED.memory_bytes, "
                       "expiry_fixed = EXCLUDED.expiry_fixed, warm_class = EXCLUDED.warm_class",
                       "ttuuutuuuuuubttu", row->id, row->org_id, row->created_at, row->last_used, row->expires_at,
                       pgs_env_or_default(row->env_json), (uint64_t)row->host_id, row->workspace_bytes,
                       row->workspace_inodes, row->file_bytes, row->cpu_millis, row->memory_bytes,
                       (int)row->expiry_fixed, row->warm_class, row->node_id, row->lease_epoch);
}

int pgs_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "UPDATE sandboxes SET last_used = $1, expires_at = $2 WHERE id = $3", "uut",
                               last_used, expires_at, id);
}

int pgs_sandbox_set_env(struct store *s, const char *id, const char *env_json)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "UPDATE sandboxes SET env_json = $1 WHERE id = $2", "tt", env_json, id);
}

/* One statement: the cascade to contexts and cells is atomic. */
int pgs_sandbox_delete(struct store *s, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM sandboxes WHERE id = $1", "t", id);
}

static int decode_id(const PGresult *res, int i, void *item)
{
        struct store_id *e = item;
        return pgs_copy(res, i, 0, e->id, sizeof(e->id));
}

int pgs_sandbox_list_expired(struct store *s, uint64_t now, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT id FROM sandboxes WHERE expires_at > 0 AND expires_at <= $1 ORDER BY expires_at, id",
                        out, decode_id, "u", now);
}

int pgs_sandbox_ids_in_org(struct store *s, const char *org_id, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db, "SELECT id FROM sandboxes WHERE org_id = $1 ORDER BY id", out, decode_id, "t", org_id);
}

int pgs_sandbox_ids_in_class(struct store *s, const char *org_id, const char *warm_class, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db, "SELECT id FROM sandboxes WHERE org_id = $1 AND warm_class = $2 ORDER BY created_at, id",
                        out, decode_id, "tt", org_id, warm_class);
}

int pgs_sandbox_count(struct store *s, uint64_t *ret)
{
        PGS_CONN(s, db);
        return pgs_query_u64(db, ret, "SELECT COUNT(*) FROM sandboxes", "");
}

int pgs_sandbox_disk_reserved(struct store *s, uint64_t default_bytes, uint64_t *ret)
{
        PGS_CONN(s, db);
        return pgs_query_u64(db, ret,
                             "SELECT COALESCE(SUM(CASE WHEN workspace_bytes = 0 THEN $1 ELSE workspace_bytes END), 0) "
                             "FROM sandboxes",
                             "u", default_bytes);
}

/* The first id of the range when free, else the lowest used id in range
 * whose successor is free (the index on host_id keeps both cheap). */
int pgs_sandbox_free_host_id(struct store *s, uint32_t first, uint32_t n, uint32_t *ret)
{
        PGS_CONN(s, db);
        uint64_t id;
        int r = pgs_query_u64(db, &id,
                              "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM sandboxes WHERE host_id = $1) THEN $1 "
                              "ELSE (SELECT MIN(a.host_id) + 1 FROM sandboxes a WHERE a.host_id >= $1 "
                              "AND a.host_id < $2 AND NOT EXISTS "
                              "(SELECT 1 FROM sandboxes b WHERE b.host_id = a.host_id + 1)) END",
                              "uu", (uint64_t)first, (uint64_t)first + n);
        if (r < 0)
                return r;
        if (id < first || id >= (uint64_t)first + n)
                return -ENOSPC;
        *ret = (uint32_t)id;
        return 0;
}
