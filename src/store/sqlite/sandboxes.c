/* The sandboxes table. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

#define SANDBOX_COLUMNS                                                                     \
        "id, org_id, created_at, last_used, expires_at, env_json, host_id, workspace_bytes, " \
        "workspace_inodes, file_bytes, cpu_millis, memory_bytes, expiry_fixed, warm_class, node_id, lease_epoch"

/* A row of SANDBOX_COLUMNS into item (a struct sandbox_row; env_json owned). */
static int sandbox_decode(sqlite3_stmt *st, void *item)
{
        struct sandbox_row *row = item;
        int r;
        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 13, row->warm_class, sizeof(row->warm_class))) < 0 ||
            (r = sq_column_copy(st, 14, row->node_id, sizeof(row->node_id))) < 0 ||
            (r = sq_column_dup(st, 5, "{}", &row->env_json)) < 0)
                return r;
        row->created_at = sq_column_u64(st, 2);
        row->last_used = sq_column_u64(st, 3);
        row->expires_at = sq_column_u64(st, 4);
        row->host_id = (uint32_t)sq_column_u64(st, 6);
        row->workspace_bytes = sq_column_u64(st, 7);
        row->workspace_inodes = sq_column_u64(st, 8);
        row->file_bytes = sq_column_u64(st, 9);
        row->cpu_millis = sq_column_u64(st, 10);
        row->memory_bytes = sq_column_u64(st, 11);
        row->expiry_fixed = sq_column_u64(st, 12) != 0;
        row->lease_epoch = sq_column_u64(st, 15);
        return 0;
}

int sq_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_(sandbox_row_done) struct sandbox_row row = {};
        int r = sq_query_row(sq_db(s), "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE id = ?", &st, "t", id);
        if (r < 0 || (r = sandbox_decode(st, &row)) < 0)
                return r;
        *ret = row;
        row.env_json = NULL;
        return 0;
}

int sq_sandbox_list_org(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                        uint64_t *ret_total)
{
        return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM sandboxes WHERE org_id = ?",
                           "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE org_id = ? ORDER BY created_at, id "
                           "LIMIT ? OFFSET ?",
                           sandbox_decode, org_id, limit, offset, out, ret_total);
}

int sq_sandbox_put(struct store *s, const struct sandbox_row *row)
{
        /* An upsert, not INSERT OR REPLACE: REPLACE deletes the old row
         * first, and with foreign keys on that cascades and wipes the
         * sandbox's contexts and cells. node_id and lease_epoch are not
         * updated: only store_sandbox_claim moves ownership. */
        return sq_run(sq_db(s),
                      "INSERT INTO sandboxes(" SANDBOX_COLUMNS ") "
                      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                      "ON CONFLICT(id) DO UPDATE SET org_id = excluded.org_id, "
                      "created_at = excluded.created_at, last_used = excluded.last_used, "
                      "expires_at = excluded.expires_at, env_json = excluded.env_json, "
                      "host_id = excluded.host_id, workspace_bytes = excluded.workspace_bytes, "
                      "workspace_inodes = excluded.workspace_inodes, file_bytes = excluded.file_bytes, "
                      "cpu_millis = excluded.cpu_millis, memory_bytes = excluded.memory_bytes, "
                      "expiry_fixed = excluded.expiry_fixed, warm_class = excluded.warm_class",
                      "ttuuutuuuuuuuttu", row->id, row->org_id, row->created_at, row->last_used, row->expires_at,
                      sq_env_or_default(row->env_json), (uint64_t)row->host_id, row->workspace_bytes,
                      row->workspace_inodes, row->file_bytes, row->cpu_millis, row->memory_bytes,
                      (uint64_t)row->expiry_fixed, row->warm_class, row->node_id, row->lease_epoch);
}

int sq_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at)
{
        return sq_run_changed(sq_db(s), "UPDATE sandboxes SET last_used = ?, expires_at = ? WHERE id = ?",
                              "uut", last_used, expires_at, id);
}

int sq_sandbox_set_env(struct store *s, const char *id, const char *env_json)
{
        return sq_run_changed(sq_db(s), "UPDATE sandboxes SET env_json = ? WHERE id = ?", "tt", env_json, id);
}

/* One statement, so the cascade to contexts and cells (ON DELETE CASCADE)
 * is atomic without an explicit transaction. */
int sq_sandbox_delete(struct store *s, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM sandboxes WHERE id = ?", "t", id);
}

static int decode_id(sqlite3_stmt *st, void *item)
{
        struct store_id *e = item;
        return sq_column_copy(st, 0, e->id, sizeof(e->id));
}

int sq_sandbox_list_expired(struct store *s, uint64_t now, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT id FROM sandboxes WHERE expires_at > 0 AND expires_at <= ? ORDER BY expires_at, id",
                       out, decode_id, "u", now);
}

int sq_sandbox_ids_in_org(struct store *s, const char *org_id, struct store_rows *out)
{
        return sq_list(sq_db(s), "SELECT id FROM sandboxes WHERE org_id = ? ORDER BY id", out, decode_id, "t",
                       org_id);
}

int sq_sandbox_ids_in_class(struct store *s, const char *org_id, const char *warm_class, struct store_rows *out)
{
        return sq_list(sq_db(s), "SELECT id FROM sandboxes WHERE org_id = ? AND warm_class = ? ORDER BY created_at, id",
                       out, decode_id, "tt", org_id, warm_class);
}

int sq_sandbox_count(struct store *s, uint64_t *ret)
{
        return sq_query_u64(sq_db(s), "SELECT COUNT(*) FROM sandboxes", NULL, ret);
}

int sq_sandbox_disk_reserved(struct store *s, uint64_t default_bytes, uint64_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s),
                             "SELECT COALESCE(SUM(CASE WHEN workspace_bytes = 0 THEN ? ELSE workspace_bytes END), 0) "
                             "FROM sandboxes",
                             &st, "u", default_bytes);
        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        *ret = sq_column_u64(st, 0);
        return 0;
}

/* The first id of the range when free, else the lowest used id in range
 * whose successor is free (the index on host_id makes both lookups cheap). */
int sq_sandbox_free_host_id(struct store *s, uint32_t first, uint32_t n, uint32_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s),
                             "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM sandboxes WHERE host_id = ?1) THEN ?1 "
                             "ELSE (SELECT MIN(a.host_id) + 1 FROM sandboxes a WHERE a.host_id >= ?1 "
                             "AND a.host_id < ?2 AND NOT EXISTS "
                             "(SELECT 1 FROM sandboxes b WHERE b.host_id = a.host_id + 1)) END",
                             &st, "uu", (uint64_t)first, (uint64_t)first + n);
        if (r < 0)
                return r == -ENOENT ? -EIO : r;
        uint64_t id = sq_column_u64(st, 0);
        if (id < first || id >= (uint64_t)first + n)
                return -ENOSPC;
        *ret = (uint32_t)id;
        return 0;
}
