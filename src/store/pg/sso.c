/* The single sign-on tables: sso_identities ((issuer, subject) → user) and
 * sso_links (an org's provider organization id and email domain). */
#include <errno.h>

#include "store/pg/pg.h"

#define IDENTITY_COLUMNS "issuer, subject, user_id, org_id, created_at"
#define LINK_COLUMNS "org_id, COALESCE(provider_org_id, ''), COALESCE(domain, ''), created_at, updated_at"

int pgs_sso_identity_get(struct store *s, const char *issuer, const char *subject, struct sso_identity_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " IDENTITY_COLUMNS " FROM sso_identities WHERE issuer = $1 AND subject = $2",
                              &res, "tt", issuer, subject);

        if (r < 0 || (r = pgs_copy(res, 0, 0, ret->issuer, sizeof(ret->issuer))) < 0 ||
            (r = pgs_copy(res, 0, 1, ret->subject, sizeof(ret->subject))) < 0 ||
            (r = pgs_copy(res, 0, 2, ret->user_id, sizeof(ret->user_id))) < 0 ||
            (r = pgs_copy(res, 0, 3, ret->org_id, sizeof(ret->org_id))) < 0)
                return r;
        ret->created_at = pgs_u64(res, 0, 4);
        return 0;
}

static int identity_insert(PGconn *db, const struct sso_identity_row *row)
{
        return pgs_run(db, "INSERT INTO sso_identities(" IDENTITY_COLUMNS ") VALUES($1, $2, $3, $4, $5)", "ttttu",
                       row->issuer, row->subject, row->user_id, row->org_id, row->created_at);
}

int pgs_sso_identity_create(struct store *s, const struct sso_identity_row *row)
{
        PGS_CONN(s, db);
        return identity_insert(db, row);
}

/* One transaction: two first logins of one identity on two nodes make one
 * account; the loser's insert of the identity fails -EEXIST and its org and
 * user roll back. */
int pgs_sso_user_create(struct store *s, const struct org_row *new_org, const struct user_row *user,
                        const struct sso_identity_row *ident)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0 || (new_org && (r = pgs_org_insert(db, new_org)) < 0) ||
            (r = pgs_user_insert(db, user)) < 0 || (r = identity_insert(db, ident)) < 0)
                return r;
        return pgs_tx_commit(&tx);
}

static int link_by(struct store *s, const char *sql, const char *arg, struct sso_link_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, sql, &res, "t", arg);

        if (r < 0 || (r = pgs_copy(res, 0, 0, ret->org_id, sizeof(ret->org_id))) < 0 ||
            (r = pgs_copy(res, 0, 1, ret->provider_org_id, sizeof(ret->provider_org_id))) < 0 ||
            (r = pgs_copy(res, 0, 2, ret->domain, sizeof(ret->domain))) < 0)
                return r;
        ret->created_at = pgs_u64(res, 0, 3);
        ret->updated_at = pgs_u64(res, 0, 4);
        return 0;
}

int pgs_sso_link_get(struct store *s, const char *org_id, struct sso_link_row *ret)
{
        return link_by(s, "SELECT " LINK_COLUMNS " FROM sso_links WHERE org_id = $1", org_id, ret);
}

int pgs_sso_link_find(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret)
{
        return link_by(s,
                       by_domain ? "SELECT " LINK_COLUMNS " FROM sso_links WHERE domain = $1"
                                 : "SELECT " LINK_COLUMNS " FROM sso_links WHERE provider_org_id = $1",
                       value, ret);
}

int pgs_sso_link_put(struct store *s, const struct sso_link_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO sso_links(org_id, provider_org_id, domain, created_at, updated_at) "
                       "VALUES($1, NULLIF($2, ''), NULLIF($3, ''), $4, $5) ON CONFLICT(org_id) DO UPDATE SET "
                       "provider_org_id = EXCLUDED.provider_org_id, domain = EXCLUDED.domain, "
                       "updated_at = EXCLUDED.updated_at",
                       "tttuu", row->org_id, row->provider_org_id, row->domain, row->created_at, row->updated_at);
}

int pgs_sso_link_delete(struct store *s, const char *org_id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM sso_links WHERE org_id = $1", "t", org_id);
}
