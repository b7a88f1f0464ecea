/* The sandboxes table. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

int sq_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_(sandbox_row_done) struct sandbox_row row = {};
        int r;

        r = sq_prepare_with(sq_db(s),
                            "SELECT id, org_id, created_at, last_used, expires_at, env_json "
                            "FROM sandboxes WHERE id = ?",
                            id, &st);
        if (r < 0)
                return r;
        r = sq_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        if ((r = sq_column_copy(st, 0, row.id, sizeof(row.id))) < 0 ||
            (r = sq_column_copy(st, 1, row.org_id, sizeof(row.org_id))) < 0 ||
            (r = sq_column_dup(st, 5, "{}", &row.env_json)) < 0)
                return r;
        row.created_at = sq_column_u64(st, 2);
        row.last_used = sq_column_u64(st, 3);
        row.expires_at = sq_column_u64(st, 4);
        *ret = row;
        row.env_json = NULL;
        return 0;
}

int sq_sandbox_put(struct store *s, const struct sandbox_row *row)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        /* An upsert, not INSERT OR REPLACE: REPLACE deletes the old row
         * first, and with foreign keys on that cascades and wipes the
         * sandbox's contexts and cells. */
        r = sq_prepare(sq_db(s),
                       "INSERT INTO sandboxes(id, org_id, created_at, last_used, expires_at, env_json) "
                       "VALUES(?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT(id) DO UPDATE SET org_id = excluded.org_id, "
                       "created_at = excluded.created_at, last_used = excluded.last_used, "
                       "expires_at = excluded.expires_at, env_json = excluded.env_json",
                       &st);
        if (r < 0)
                return r;
        if ((r = sq_bind_text(st, 1, row->id)) < 0 ||
            (r = sq_bind_text(st, 2, row->org_id)) < 0 ||
            (r = sq_bind_u64(st, 3, row->created_at)) < 0 ||
            (r = sq_bind_u64(st, 4, row->last_used)) < 0 ||
            (r = sq_bind_u64(st, 5, row->expires_at)) < 0 ||
            (r = sq_bind_text(st, 6, sq_env_or_default(row->env_json))) < 0)
                return r;
        return sq_step_done(st);
}

int sq_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare(sq_db(s), "UPDATE sandboxes SET last_used = ?, expires_at = ? WHERE id = ?", &st);
        if (r < 0)
                return r;
        if ((r = sq_bind_u64(st, 1, last_used)) < 0 || (r = sq_bind_u64(st, 2, expires_at)) < 0)
                return r;
        return sq_exec_by_id(st, 3, id);
}

int sq_sandbox_set_env(struct store *s, const char *id, const char *env_json)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare_with(sq_db(s), "UPDATE sandboxes SET env_json = ? WHERE id = ?", env_json, &st);
        if (r < 0)
                return r;
        return sq_exec_by_id(st, 2, id);
}

/* Contexts and cells go with it (ON DELETE CASCADE). */
int sq_sandbox_delete(struct store *s, const char *id)
{
        return sq_delete_by_id(sq_db(s), "DELETE FROM sandboxes WHERE id = ?", id);
}

static int decode_id(sqlite3_stmt *st, void *item)
{
        struct store_id *e = item;
        return sq_column_copy(st, 0, e->id, sizeof(e->id));
}

int sq_sandbox_list_expired(struct store *s, uint64_t now, struct store_rows *out)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare(sq_db(s),
                       "SELECT id FROM sandboxes WHERE expires_at > 0 AND expires_at <= ? "
                       "ORDER BY expires_at, id",
                       &st);
        if (r < 0)
                return r;
        if ((r = sq_bind_u64(st, 1, now)) < 0)
                return r;
        return sq_collect(st, out, decode_id);
}

int sq_sandbox_count(struct store *s, uint64_t *ret)
{
        return sq_query_u64(sq_db(s), "SELECT COUNT(*) FROM sandboxes", NULL, ret);
}
