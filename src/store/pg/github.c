/* The GitHub integration's tables: installations (pending while org_id is
 * ''), per-org settings, and the webhook deliveries kept as events. An org
 * reads only its own rows; pending installations are nobody's. */
#include <errno.h>
#include <stdlib.h>

#include "store/pg/pg.h"

#define INSTALL_COLUMNS \
        "id, org_id, account_login, account_type, status, repos_json, created_at, updated_at, connected_at"
#define EVENT_COLUMNS                                                                                    \
        "id, delivery_id, org_id, installation_id, event, action, repo, pr_number, status, error, detail, " \
        "sandbox_id, received_at"

/* ---- installations ----------------------------------------------------- */

int pgs_gh_install_put(struct store *s, const struct gh_install_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO github_installations(" INSTALL_COLUMNS ") VALUES($1, '', $2, $3, $4, $5, $6, $7, 0) "
                       "ON CONFLICT(id) DO UPDATE SET account_login = EXCLUDED.account_login, "
                       "account_type = EXCLUDED.account_type, status = EXCLUDED.status, "
                       "repos_json = EXCLUDED.repos_json, updated_at = EXCLUDED.updated_at",
                       "tttttuu", row->id, row->account_login, row->account_type, row->status, row->repos_json,
                       row->created_at, row->updated_at);
}

static int install_decode(const PGresult *res, int i, void *item)
{
        struct gh_install_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->account_login, sizeof(row->account_login))) < 0 ||
            (r = pgs_copy(res, i, 3, row->account_type, sizeof(row->account_type))) < 0 ||
            (r = pgs_copy(res, i, 4, row->status, sizeof(row->status))) < 0 ||
            (r = pgs_dup(res, i, 5, "[]", &row->repos_json)) < 0)
                return r;
        row->created_at = pgs_u64(res, i, 6);
        row->updated_at = pgs_u64(res, i, 7);
        row->connected_at = pgs_u64(res, i, 8);
        return 0;
}

int pgs_gh_install_get(struct store *s, const char *id, struct gh_install_row *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        struct gh_install_row row = {};
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT " INSTALL_COLUMNS " FROM github_installations WHERE id = $1", &res, "t", id);

        if (r == 0 && (r = install_decode(res, 0, &row)) < 0)
                gh_install_row_done(&row);
        if (r < 0)
                return r;
        *ret = row;
        return 0;
}

int pgs_gh_install_delete(struct store *s, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM github_installations WHERE id = $1", "t", id);
}

/* The WHERE on from_org makes the move a compare-and-swap: two orgs
 * connecting one pending installation at once, one wins (-ENOENT for the
 * other), whichever node each asked. */
int pgs_gh_install_link(struct store *s, const char *id, const char *from_org, const char *to_org, uint64_t at)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r = pgs_tx_begin(db, &tx);

        if (r < 0)
                return r;
        r = pgs_run_changed(db,
                            "UPDATE github_installations SET org_id = $1, connected_at = $2, updated_at = $3 "
                            "WHERE id = $4 AND org_id = $5",
                            "tuutt", to_org, to_org[0] ? at : (uint64_t)0, at, id, from_org);
        if (r < 0)
                return r;
        /* What the installation sent while pending is the connecting org's
         * history; what it sent while another org held it stays that org's. */
        if (!from_org[0] &&
            (r = pgs_run(db, "UPDATE github_events SET org_id = $1 WHERE installation_id = $2 AND org_id = ''", "tt",
                         to_org, id)) < 0)
                return r;
        return pgs_tx_commit(&tx);
}

int pgs_gh_install_list(struct store *s, const char *org_id, bool pending, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT " INSTALL_COLUMNS " FROM github_installations WHERE org_id = $1 OR ($2 AND org_id = '') "
                        "ORDER BY org_id = '', created_at, id",
                        out, install_decode, "tb", org_id, (int)pending);
}

/* ---- settings ---------------------------------------------------------- */

int pgs_gh_settings_get(struct store *s, const char *org_id, char **ret_json, uint64_t *ret_updated_at)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT settings_json, updated_at FROM github_settings WHERE org_id = $1", &res, "t",
                              org_id);

        if (r < 0 || (r = pgs_dup(res, 0, 0, "{}", ret_json)) < 0)
                return r;
        *ret_updated_at = pgs_u64(res, 0, 1);
        return 0;
}

int pgs_gh_settings_put(struct store *s, const char *org_id, const char *json, uint64_t updated_at)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO github_settings(org_id, settings_json, updated_at) VALUES($1, $2, $3) "
                       "ON CONFLICT(org_id) DO UPDATE SET settings_json = EXCLUDED.settings_json, "
                       "updated_at = EXCLUDED.updated_at",
                       "ttu", org_id, json, updated_at);
}

/* ---- events ------------------------------------------------------------ */

int pgs_gh_event_insert(struct store *s, const struct gh_event_row *row, uint64_t keep)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r = pgs_tx_begin(db, &tx);

        if (r < 0)
                return r;
        r = pgs_run(db,
                    "INSERT INTO github_events(" EVENT_COLUMNS ") "
                    "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                    "tttttttuttttu", row->id, row->delivery_id, row->org_id, row->installation_id, row->event,
                    row->action, row->repo, row->pr_number, row->status, row->error, row->detail, row->sandbox_id,
                    row->received_at);
        /* The log is bounded: anyone can post deliveries, so the oldest go. */
        if (r < 0 || (r = pgs_run(db,
                                  "DELETE FROM github_events WHERE seq <= "
                                  "(SELECT MAX(seq) FROM github_events) - $1",
                                  "u", keep)) < 0)
                return r;
        return pgs_tx_commit(&tx);
}

int pgs_gh_event_update(struct store *s, const struct gh_event_row *row)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db,
                               "UPDATE github_events SET org_id = $1, status = $2, error = $3, detail = $4, "
                               "sandbox_id = $5 WHERE id = $6",
                               "tttttt", row->org_id, row->status, row->error, row->detail, row->sandbox_id, row->id);
}

static int event_decode(const PGresult *res, int i, void *item)
{
        struct gh_event_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->delivery_id, sizeof(row->delivery_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 3, row->installation_id, sizeof(row->installation_id))) < 0 ||
            (r = pgs_copy(res, i, 4, row->event, sizeof(row->event))) < 0 ||
            (r = pgs_copy(res, i, 5, row->action, sizeof(row->action))) < 0 ||
            (r = pgs_copy(res, i, 6, row->repo, sizeof(row->repo))) < 0 ||
            (r = pgs_copy(res, i, 8, row->status, sizeof(row->status))) < 0 ||
            (r = pgs_copy(res, i, 9, row->error, sizeof(row->error))) < 0 ||
            (r = pgs_copy(res, i, 10, row->detail, sizeof(row->detail))) < 0 ||
            (r = pgs_copy(res, i, 11, row->sandbox_id, sizeof(row->sandbox_id))) < 0)
                return r;
        row->pr_number = pgs_u64(res, i, 7);
        row->received_at = pgs_u64(res, i, 12);
        return 0;
}

int pgs_gh_event_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                      uint64_t *ret_total)
{
        PGS_CONN(s, db);
        return pgs_org_page(db, "SELECT COUNT(*) FROM github_events WHERE org_id = $1",
                            "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = $1 "
                            "ORDER BY seq DESC LIMIT $2 OFFSET $3",
                            event_decode, org_id, limit, offset, out, ret_total);
}

/* The newest of the org's events the query picks, into *ret. */
static int latest_event(PGconn *db, const char *sql, const char *org_id, struct gh_event_row *ret, bool *ret_found)
{
        _cleanup_res_ PGresult *res = NULL;
        int r = pgs_query_row(db, sql, &res, "t", org_id);

        *ret_found = r == 0;
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : event_decode(res, 0, ret);
}

int pgs_gh_event_stats(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r;

        *ret = (struct gh_event_stats){};
        r = pgs_query_row(db,
                          "SELECT COUNT(*) FILTER (WHERE status = 'success'), COUNT(*) FILTER (WHERE status = 'failure') "
                          "FROM github_events WHERE org_id = $1 AND received_at >= $2",
                          &res, "tu", org_id, since);
        if (r < 0)
                return r;
        ret->success = pgs_u64(res, 0, 0);
        ret->failure = pgs_u64(res, 0, 1);
        return latest_event(db, "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = $1 ORDER BY seq DESC LIMIT 1",
                            org_id, &ret->latest, &ret->has_latest)
                       ?: latest_event(db,
                                       "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = $1 AND status = "
                                       "'failure' ORDER BY seq DESC LIMIT 1",
                                       org_id, &ret->latest_failure, &ret->has_failure);
}

int pgs_gh_event_sandboxes(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                           struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = $1 AND repo = $2 AND pr_number = $3 "
                        "AND sandbox_id != '' ORDER BY seq",
                        out, event_decode, "ttu", org_id, repo, pr_number);
}
