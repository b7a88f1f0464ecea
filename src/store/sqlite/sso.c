/* The single sign-on tables: sso_identities ((issuer, subject) → user) and
 * sso_links (an org's provider organization id and email domain). */
#include <errno.h>

#include "store/sqlite/sqlite.h"

#define IDENTITY_COLUMNS "issuer, subject, user_id, org_id, created_at"
#define LINK_COLUMNS "org_id, COALESCE(provider_org_id, ''), COALESCE(domain, ''), created_at, updated_at"

int sq_sso_identity_get(struct store *s, const char *issuer, const char *subject, struct sso_identity_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT " IDENTITY_COLUMNS " FROM sso_identities WHERE issuer = ? AND subject = ?",
                             &st, "tt", issuer, subject);
        if (r < 0 || (r = sq_column_copy(st, 0, ret->issuer, sizeof(ret->issuer))) < 0 ||
            (r = sq_column_copy(st, 1, ret->subject, sizeof(ret->subject))) < 0 ||
            (r = sq_column_copy(st, 2, ret->user_id, sizeof(ret->user_id))) < 0 ||
            (r = sq_column_copy(st, 3, ret->org_id, sizeof(ret->org_id))) < 0)
                return r;
        ret->created_at = sq_column_u64(st, 4);
        return 0;
}

static int identity_insert(sqlite3 *db, const struct sso_identity_row *row)
{
        return sq_run(db, "INSERT INTO sso_identities(" IDENTITY_COLUMNS ") VALUES(?, ?, ?, ?, ?)", "ttttu",
                      row->issuer, row->subject, row->user_id, row->org_id, row->created_at);
}

int sq_sso_identity_create(struct store *s, const struct sso_identity_row *row)
{
        return identity_insert(sq_db(s), row);
}

int sq_sso_user_create(struct store *s, const struct org_row *new_org, const struct user_row *user,
                       const struct sso_identity_row *ident)
{
        sqlite3 *db = sq_db(s);
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r;

        if ((r = sq_tx_begin(db, &tx)) < 0 || (new_org && (r = sq_org_insert(db, new_org)) < 0) ||
            (r = sq_user_insert(db, user)) < 0 || (r = identity_insert(db, ident)) < 0)
                return r;
        return sq_tx_commit(&tx);
}

static int link_by(struct store *s, const char *sql, const char *arg, struct sso_link_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), sql, &st, "t", arg);
        if (r < 0 || (r = sq_column_copy(st, 0, ret->org_id, sizeof(ret->org_id))) < 0 ||
            (r = sq_column_copy(st, 1, ret->provider_org_id, sizeof(ret->provider_org_id))) < 0 ||
            (r = sq_column_copy(st, 2, ret->domain, sizeof(ret->domain))) < 0)
                return r;
        ret->created_at = sq_column_u64(st, 3);
        ret->updated_at = sq_column_u64(st, 4);
        return 0;
}

int sq_sso_link_get(struct store *s, const char *org_id, struct sso_link_row *ret)
{
        return link_by(s, "SELECT " LINK_COLUMNS " FROM sso_links WHERE org_id = ?", org_id, ret);
}

int sq_sso_link_find(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret)
{
        return link_by(s,
                       by_domain ? "SELECT " LINK_COLUMNS " FROM sso_links WHERE domain = ?"
                                 : "SELECT " LINK_COLUMNS " FROM sso_links WHERE provider_org_id = ?",
                       value, ret);
}

int sq_sso_link_put(struct store *s, const struct sso_link_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO sso_links(org_id, provider_org_id, domain, created_at, updated_at) "
                      "VALUES(?, NULLIF(?, ''), NULLIF(?, ''), ?, ?) ON CONFLICT(org_id) DO UPDATE SET "
                      "provider_org_id = excluded.provider_org_id, domain = excluded.domain, "
                      "updated_at = excluded.updated_at",
                      "tttuu", row->org_id, row->provider_org_id, row->domain, row->created_at, row->updated_at);
}

int sq_sso_link_delete(struct store *s, const char *org_id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM sso_links WHERE org_id = ?", "t", org_id);
}
