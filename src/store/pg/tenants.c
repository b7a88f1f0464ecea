/* The tenant tables: users, api_keys, sessions, idempotency (and the org
 * row an account starts with). Every API-key statement names the org, so a
 * key id of another org reads as absent (-ENOENT). */
#include <errno.h>
#include <stdio.h>

#include "store/pg/pg.h"

int pgs_org_insert(PGconn *db, const struct org_row *org)
{
        return pgs_run(db, "INSERT INTO orgs(id, name, created_at, slug, plan) VALUES($1, $2, $3, NULLIF($4, ''), $5)",
                       "ttutt", org->id, org->name, org->created_at, org->slug, org->plan[0] ? org->plan : "hobby");
}

int pgs_user_insert(PGconn *db, const struct user_row *user)
{
        return pgs_run(db,
                       "INSERT INTO users(id, org_id, email, first_name, last_name, role, password_hash, created_at) "
                       "VALUES($1, $2, $3, $4, $5, $6, $7, $8)",
                       "tttttttu", user->id, user->org_id, user->email, user->first_name, user->last_name,
                       user->role, user->password_hash, user->created_at);
}

int pgs_account_create(struct store *s, const struct org_row *org, const struct user_row *user)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0 || (r = pgs_org_insert(db, org)) < 0 || (r = pgs_user_insert(db, user)) < 0)
                return r;
        return pgs_tx_commit(&tx);
}

#define USER_COLUMNS "id, org_id, email, first_name, last_name, role, password_hash, created_at"

static int user_by(struct store *s, const char *sql, const char *arg, struct user_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        struct user_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db, sql, &res, "t", arg);

        if (r < 0)
                return r;
        if ((r = pgs_copy(res, 0, 0, row.id, sizeof(row.id))) < 0 ||
            (r = pgs_copy(res, 0, 1, row.org_id, sizeof(row.org_id))) < 0 ||
            (r = pgs_copy(res, 0, 2, row.email, sizeof(row.email))) < 0 ||
            (r = pgs_copy(res, 0, 3, row.first_name, sizeof(row.first_name))) < 0 ||
            (r = pgs_copy(res, 0, 4, row.last_name, sizeof(row.last_name))) < 0 ||
            (r = pgs_copy(res, 0, 5, row.role, sizeof(row.role))) < 0 ||
            (r = pgs_copy(res, 0, 6, row.password_hash, sizeof(row.password_hash))) < 0)
                return r;
        row.created_at = pgs_u64(res, 0, 7);
        *ret = row;
        return 0;
}

int pgs_user_get(struct store *s, const char *id, struct user_row *ret)
{
        return user_by(s, "SELECT " USER_COLUMNS " FROM users WHERE id = $1", id, ret);
}

int pgs_user_get_by_email(struct store *s, const char *email, struct user_row *ret)
{
        return user_by(s, "SELECT " USER_COLUMNS " FROM users WHERE email = $1", email, ret);
}

int pgs_apikey_create(struct store *s, const struct apikey_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO api_keys(id, org_id, user_id, name, prefix, hash, created_at) "
                       "VALUES($1, $2, $3, $4, $5, $6, $7)",
                       "ttttttu", row->id, row->org_id, row->user_id, row->name, row->prefix, row->hash,
                       row->created_at);
}

#define APIKEY_COLUMNS "id, org_id, user_id, name, prefix, hash, created_at"

static int apikey_decode(const PGresult *res, int i, void *item)
{
        struct apikey_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->user_id, sizeof(row->user_id))) < 0 ||
            (r = pgs_copy(res, i, 3, row->name, sizeof(row->name))) < 0 ||
            (r = pgs_copy(res, i, 4, row->prefix, sizeof(row->prefix))) < 0 ||
            (r = pgs_copy(res, i, 5, row->hash, sizeof(row->hash))) < 0)
                return r;
        row->created_at = pgs_u64(res, i, 6);
        return 0;
}

static int apikey_by(struct store *s, const char *sql, const char *a, const char *b, struct apikey_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        struct apikey_row row = {};
        PGS_CONN(s, db);
        int r = b ? pgs_query_row(db, sql, &res, "tt", a, b) : pgs_query_row(db, sql, &res, "t", a);

        if (r < 0 || (r = apikey_decode(res, 0, &row)) < 0)
                return r;
        *ret = row;
        return 0;
}

int pgs_apikey_get_by_hash(struct store *s, const char *hash, struct apikey_row *ret)
{
        return apikey_by(s, "SELECT " APIKEY_COLUMNS " FROM api_keys WHERE hash = $1", hash, NULL, ret);
}

int pgs_apikey_get(struct store *s, const char *org_id, const char *id, struct apikey_row *ret)
{
        return apikey_by(s, "SELECT " APIKEY_COLUMNS " FROM api_keys WHERE org_id = $1 AND id = $2", org_id, id,
                         ret);
}

int pgs_apikey_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                    uint64_t *ret_total)
{
        PGS_CONN(s, db);
        return pgs_org_page(db, "SELECT COUNT(*) FROM api_keys WHERE org_id = $1",
                            "SELECT " APIKEY_COLUMNS " FROM api_keys WHERE org_id = $1 ORDER BY created_at, id "
                            "LIMIT $2 OFFSET $3",
                            apikey_decode, org_id, limit, offset, out, ret_total);
}

int pgs_apikey_delete(struct store *s, const char *org_id, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM api_keys WHERE org_id = $1 AND id = $2", "tt", org_id, id);
}

int pgs_apikey_rehash(struct store *s, const char *org_id, const char *id, const char *hash, const char *prefix)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "UPDATE api_keys SET hash = $1, prefix = $2 WHERE org_id = $3 AND id = $4",
                               "tttt", hash, prefix, org_id, id);
}

int pgs_session_create(struct store *s, const struct session_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO sessions(id, user_id, org_id, created_at, expires_at, revoked) "
                       "VALUES($1, $2, $3, $4, $5, $6)",
                       "tttuub", row->id, row->user_id, row->org_id, row->created_at, row->expires_at,
                       (int)row->revoked);
}

int pgs_session_get(struct store *s, const char *id, struct session_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        struct session_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db,
                              "SELECT id, user_id, org_id, created_at, expires_at, revoked FROM sessions "
                              "WHERE id = $1",
                              &res, "t", id);

        if (r < 0)
                return r;
        if ((r = pgs_copy(res, 0, 0, row.id, sizeof(row.id))) < 0 ||
            (r = pgs_copy(res, 0, 1, row.user_id, sizeof(row.user_id))) < 0 ||
            (r = pgs_copy(res, 0, 2, row.org_id, sizeof(row.org_id))) < 0)
                return r;
        row.created_at = pgs_u64(res, 0, 3);
        row.expires_at = pgs_u64(res, 0, 4);
        row.revoked = pgs_bool(res, 0, 5);
        *ret = row;
        return 0;
}

int pgs_session_revoke(struct store *s, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "UPDATE sessions SET revoked = TRUE WHERE id = $1", "t", id);
}

int pgs_idem_get(struct store *s, const char *org_id, const char *key, const char *route, uint64_t not_before,
                 struct idem_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        struct idem_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db,
                              "SELECT body_hash, status, response, created_at FROM idempotency "
                              "WHERE org_id = $1 AND key = $2 AND route = $3",
                              &res, "ttt", org_id, key, route);

        if (r < 0)
                return r;
        row.created_at = pgs_u64(res, 0, 3);
        if (row.created_at < not_before)
                return pgs_run(db, "DELETE FROM idempotency WHERE org_id = $1 AND key = $2 AND route = $3", "ttt",
                               org_id, key, route) < 0 ? -EIO : -ENOENT;
        if ((r = pgs_copy(res, 0, 0, row.body_hash, sizeof(row.body_hash))) < 0 ||
            (r = pgs_dup(res, 0, 2, "", &row.response)) < 0)
                return r;
        snprintf(row.org_id, sizeof(row.org_id), "%s", org_id);
        snprintf(row.key, sizeof(row.key), "%s", key);
        snprintf(row.route, sizeof(row.route), "%s", route);
        row.status = (int)pgs_u64(res, 0, 1);
        *ret = row;
        return 0;
}

int pgs_idem_put(struct store *s, const struct idem_row *row, uint64_t not_before)
{
        PGS_CONN(s, db);
        int r = pgs_run(db, "DELETE FROM idempotency WHERE created_at < $1", "u", not_before);

        if (r < 0)
                return r;
        return pgs_run(db,
                       "INSERT INTO idempotency(org_id, key, route, body_hash, status, response, created_at) "
                       "VALUES($1, $2, $3, $4, $5, $6, $7)",
                       "ttttutu", row->org_id, row->key, row->route, row->body_hash, (uint64_t)row->status,
                       row->response, row->created_at);
}
