/* The tenant tables: users, api_keys, sessions (and the org row an account
 * starts with). Every API-key statement names the org in its WHERE clause,
 * so a key id of another org reads as absent (-ENOENT), never as "not
 * yours". */
#include <errno.h>
#include <stdio.h>

#include "store/sqlite/sqlite.h"

int sq_org_insert(sqlite3 *db, const struct org_row *org)
{
        return sq_run(db, "INSERT INTO orgs(id, name, created_at, slug, plan) VALUES(?, ?, ?, NULLIF(?, ''), ?)",
                      "ttutt", org->id, org->name, org->created_at, org->slug, org->plan[0] ? org->plan : "hobby");
}

int sq_user_insert(sqlite3 *db, const struct user_row *user)
{
        return sq_run(db,
                      "INSERT INTO users(id, org_id, email, first_name, last_name, role, password_hash, created_at) "
                      "VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                      "tttttttu", user->id, user->org_id, user->email, user->first_name, user->last_name,
                      user->role, user->password_hash, user->created_at);
}

int sq_account_create(struct store *s, const struct org_row *org, const struct user_row *user)
{
        sqlite3 *db = sq_db(s);
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r;

        if ((r = sq_tx_begin(db, &tx)) < 0 || (r = sq_org_insert(db, org)) < 0 || (r = sq_user_insert(db, user)) < 0)
                return r;
        return sq_tx_commit(&tx);
}

#define USER_COLUMNS "id, org_id, email, first_name, last_name, role, password_hash, created_at"

static int user_decode(sqlite3_stmt *st, struct user_row *ret)
{
        struct user_row row = {};
        int r;

        if ((r = sq_column_copy(st, 0, row.id, sizeof(row.id))) < 0 ||
            (r = sq_column_copy(st, 1, row.org_id, sizeof(row.org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row.email, sizeof(row.email))) < 0 ||
            (r = sq_column_copy(st, 3, row.first_name, sizeof(row.first_name))) < 0 ||
            (r = sq_column_copy(st, 4, row.last_name, sizeof(row.last_name))) < 0 ||
            (r = sq_column_copy(st, 5, row.role, sizeof(row.role))) < 0 ||
            (r = sq_column_copy(st, 6, row.password_hash, sizeof(row.password_hash))) < 0)
                return r;
        row.created_at = sq_column_u64(st, 7);
        *ret = row;
        return 0;
}

static int user_by(struct store *s, const char *sql, const char *arg, struct user_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), sql, &st, "t", arg);
        return r < 0 ? r : user_decode(st, ret);
}

int sq_user_get(struct store *s, const char *id, struct user_row *ret)
{
        return user_by(s, "SELECT " USER_COLUMNS " FROM users WHERE id = ?", id, ret);
}

int sq_user_get_by_email(struct store *s, const char *email, struct user_row *ret)
{
        return user_by(s, "SELECT " USER_COLUMNS " FROM users WHERE email = ?", email, ret);
}

int sq_apikey_create(struct store *s, const struct apikey_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO api_keys(id, org_id, user_id, name, prefix, hash, created_at) "
                      "VALUES(?, ?, ?, ?, ?, ?, ?)",
                      "ttttttu", row->id, row->org_id, row->user_id, row->name, row->prefix, row->hash,
                      row->created_at);
}

#define APIKEY_COLUMNS "id, org_id, user_id, name, prefix, hash, created_at"

static int apikey_decode(sqlite3_stmt *st, void *item)
{
        struct apikey_row *row = item;
        int r;

        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->user_id, sizeof(row->user_id))) < 0 ||
            (r = sq_column_copy(st, 3, row->name, sizeof(row->name))) < 0 ||
            (r = sq_column_copy(st, 4, row->prefix, sizeof(row->prefix))) < 0 ||
            (r = sq_column_copy(st, 5, row->hash, sizeof(row->hash))) < 0)
                return r;
        row->created_at = sq_column_u64(st, 6);
        return 0;
}

int sq_apikey_get_by_hash(struct store *s, const char *hash, struct apikey_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct apikey_row row = {};
        int r = sq_query_row(sq_db(s), "SELECT " APIKEY_COLUMNS " FROM api_keys WHERE hash = ?", &st, "t", hash);
        if (r < 0 || (r = apikey_decode(st, &row)) < 0)
                return r;
        *ret = row;
        return 0;
}

int sq_apikey_get(struct store *s, const char *org_id, const char *id, struct apikey_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct apikey_row row = {};
        int r = sq_query_row(sq_db(s), "SELECT " APIKEY_COLUMNS " FROM api_keys WHERE org_id = ? AND id = ?", &st,
                             "tt", org_id, id);
        if (r < 0 || (r = apikey_decode(st, &row)) < 0)
                return r;
        *ret = row;
        return 0;
}

int sq_apikey_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                   uint64_t *ret_total)
{
        return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM api_keys WHERE org_id = ?",
                           "SELECT " APIKEY_COLUMNS " FROM api_keys WHERE org_id = ? ORDER BY created_at, id "
                           "LIMIT ? OFFSET ?",
                           apikey_decode, org_id, limit, offset, out, ret_total);
}

int sq_apikey_delete(struct store *s, const char *org_id, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM api_keys WHERE org_id = ? AND id = ?", "tt", org_id, id);
}

int sq_apikey_rehash(struct store *s, const char *org_id, const char *id, const char *hash, const char *prefix)
{
        return sq_run_changed(sq_db(s), "UPDATE api_keys SET hash = ?, prefix = ? WHERE org_id = ? AND id = ?",
                              "tttt", hash, prefix, org_id, id);
}

int sq_session_create(struct store *s, const struct session_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO sessions(id, user_id, org_id, created_at, expires_at, revoked) "
                      "VALUES(?, ?, ?, ?, ?, ?)",
                      "tttuub", row->id, row->user_id, row->org_id, row->created_at, row->expires_at, row->revoked);
}

int sq_session_get(struct store *s, const char *id, struct session_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct session_row row = {};
        int r = sq_query_row(sq_db(s),
                             "SELECT id, user_id, org_id, created_at, expires_at, revoked FROM sessions WHERE id = ?",
                             &st, "t", id);
        if (r < 0)
                return r;
        if ((r = sq_column_copy(st, 0, row.id, sizeof(row.id))) < 0 ||
            (r = sq_column_copy(st, 1, row.user_id, sizeof(row.user_id))) < 0 ||
            (r = sq_column_copy(st, 2, row.org_id, sizeof(row.org_id))) < 0)
                return r;
        row.created_at = sq_column_u64(st, 3);
        row.expires_at = sq_column_u64(st, 4);
        row.revoked = sq_column_u64(st, 5) != 0;
        *ret = row;
        return 0;
}

int sq_session_revoke(struct store *s, const char *id)
{
        return sq_run_changed(sq_db(s), "UPDATE sessions SET revoked = 1 WHERE id = ?", "t", id);
}

int sq_idem_get(struct store *s, const char *org_id, const char *key, const char *route, uint64_t not_before,
                struct idem_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct idem_row row = {};
        int r = sq_query_row(sq_db(s),
                             "SELECT body_hash, status, response, created_at FROM idempotency "
                             "WHERE org_id = ? AND key = ? AND route = ?",
                             &st, "ttt", org_id, key, route);
        if (r < 0)
                return r;
        row.created_at = sq_column_u64(st, 3);
        if (row.created_at < not_before) {
                sq_finalizep(&st);
                st = NULL;
                return sq_run(sq_db(s), "DELETE FROM idempotency WHERE org_id = ? AND key = ? AND route = ?", "ttt",
                              org_id, key, route) < 0 ? -EIO : -ENOENT;
        }
        if ((r = sq_column_copy(st, 0, row.body_hash, sizeof(row.body_hash))) < 0 ||
            (r = sq_column_dup(st, 2, "", &row.response)) < 0)
                return r;
        snprintf(row.org_id, sizeof(row.org_id), "%s", org_id);
        snprintf(row.key, sizeof(row.key), "%s", key);
        snprintf(row.route, sizeof(row.route), "%s", route);
        row.status = (int)sq_column_u64(st, 1);
        *ret = row;
        return 0;
}

int sq_idem_put(struct store *s, const struct idem_row *row, uint64_t not_before)
{
        int r = sq_run(sq_db(s), "DELETE FROM idempotency WHERE created_at < ?", "u", not_before);
        if (r < 0)
                return r;
        return sq_run(sq_db(s),
                      "INSERT INTO idempotency(org_id, key, route, body_hash, status, response, created_at) "
                      "VALUES(?, ?, ?, ?, ?, ?, ?)",
                      "ttttutu", row->org_id, row->key, row->route, row->body_hash, (uint64_t)row->status,
                      row->response, row->created_at);
}
