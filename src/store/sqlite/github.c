/* The GitHub integration's tables: installations (pending while org_id is
 * ''), per-org settings, and the webhook deliveries kept as events. An org
 * reads only its own rows; pending installations are nobody's. */
#include <errno.h>
#include <stdlib.h>

#include "store/sqlite/sqlite.h"

#define INSTALL_COLUMNS \
        "id, org_id, account_login, account_type, status, repos_json, created_at, updated_at, connected_at"
#define EVENT_COLUMNS                                                                                    \
        "id, delivery_id, org_id, installation_id, event, action, repo, pr_number, status, error, detail, " \
        "sandbox_id, received_at"

/* ---- installations ----------------------------------------------------- */

int sq_gh_install_put(struct store *s, const struct gh_install_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO github_installations(" INSTALL_COLUMNS ") VALUES(?, '', ?, ?, ?, ?, ?, ?, 0) "
                      "ON CONFLICT(id) DO UPDATE SET account_login = excluded.account_login, "
                      "account_type = excluded.account_type, status = excluded.status, "
                      "repos_json = excluded.repos_json, updated_at = excluded.updated_at",
                      "tttttuu", row->id, row->account_login, row->account_type, row->status, row->repos_json,
                      row->created_at, row->updated_at);
}

static int install_decode(sqlite3_stmt *st, void *item)
{
        struct gh_install_row *row = item;
        int r;

        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->account_login, sizeof(row->account_login))) < 0 ||
            (r = sq_column_copy(st, 3, row->account_type, sizeof(row->account_type))) < 0 ||
            (r = sq_column_copy(st, 4, row->status, sizeof(row->status))) < 0 ||
            (r = sq_column_dup(st, 5, "[]", &row->repos_json)) < 0)
                return r;
        row->created_at = sq_column_u64(st, 6);
        row->updated_at = sq_column_u64(st, 7);
        row->connected_at = sq_column_u64(st, 8);
        return 0;
}

int sq_gh_install_get(struct store *s, const char *id, struct gh_install_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct gh_install_row row = {};
        int r = sq_query_row(sq_db(s), "SELECT " INSTALL_COLUMNS " FROM github_installations WHERE id = ?", &st, "t",
                             id);
        if (r == 0 && (r = install_decode(st, &row)) < 0)
                gh_install_row_done(&row);
        if (r < 0)
                return r;
        *ret = row;
        return 0;
}

int sq_gh_install_delete(struct store *s, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM github_installations WHERE id = ?", "t", id);
}

int sq_gh_install_link(struct store *s, const char *id, const char *from_org, const char *to_org, uint64_t at)
{
        sqlite3 *db = sq_db(s);
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r = sq_tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = sq_run_changed(db,
                           "UPDATE github_installations SET org_id = ?, connected_at = ?, updated_at = ? "
                           "WHERE id = ? AND org_id = ?",
                           "tuutt", to_org, to_org[0] ? at : (uint64_t)0, at, id, from_org);
        if (r < 0)
                return r;
        /* What the installation sent while pending (its "created" delivery)
         * is the connecting org's history; what it sent while another org
         * held it stays that org's. */
        if (!from_org[0] &&
            (r = sq_run(db, "UPDATE github_events SET org_id = ? WHERE installation_id = ? AND org_id = ''", "tt",
                        to_org, id)) < 0)
                return r;
        return sq_tx_commit(&tx);
}

int sq_gh_install_list(struct store *s, const char *org_id, bool pending, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT " INSTALL_COLUMNS " FROM github_installations WHERE org_id = ? OR (? AND org_id = '') "
                       "ORDER BY org_id = '', created_at, id",
                       out, install_decode, "tb", org_id, pending);
}

/* ---- settings ---------------------------------------------------------- */

int sq_gh_settings_get(struct store *s, const char *org_id, char **ret_json, uint64_t *ret_updated_at)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT settings_json, updated_at FROM github_settings WHERE org_id = ?", &st,
                             "t", org_id);
        if (r < 0 || (r = sq_column_dup(st, 0, "{}", ret_json)) < 0)
                return r;
        *ret_updated_at = sq_column_u64(st, 1);
        return 0;
}

int sq_gh_settings_put(struct store *s, const char *org_id, const char *json, uint64_t updated_at)
{
        return sq_run(sq_db(s),
                      "INSERT INTO github_settings(org_id, settings_json, updated_at) VALUES(?, ?, ?) "
                      "ON CONFLICT(org_id) DO UPDATE SET settings_json = excluded.settings_json, "
                      "updated_at = excluded.updated_at",
                      "ttu", org_id, json, updated_at);
}

/* ---- events ------------------------------------------------------------ */

int sq_gh_event_insert(struct store *s, const struct gh_event_row *row, uint64_t keep)
{
        sqlite3 *db = sq_db(s);
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r = sq_tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = sq_run(db,
                   "INSERT INTO github_events(" EVENT_COLUMNS ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "tttttttuttttu", row->id, row->delivery_id, row->org_id, row->installation_id, row->event,
                   row->action, row->repo, row->pr_number, row->status, row->error, row->detail, row->sandbox_id,
                   row->received_at);
        /* The log is bounded: anyone can post deliveries (unverified ones
         * are kept too), so the oldest rows go first. */
        if (r < 0 || (r = sq_run(db,
                                 "DELETE FROM github_events WHERE seq <= "
                                 "(SELECT MAX(seq) FROM github_events) - ?",
                                 "u", keep)) < 0)
                return r;
        return sq_tx_commit(&tx);
}

int sq_gh_event_update(struct store *s, const struct gh_event_row *row)
{
        return sq_run_changed(sq_db(s),
                              "UPDATE github_events SET org_id = ?, status = ?, error = ?, detail = ?, sandbox_id = ? "
                              "WHERE id = ?",
                              "tttttt", row->org_id, row->status, row->error, row->detail, row->sandbox_id, row->id);
}

static int event_decode(sqlite3_stmt *st, void *item)
{
        struct gh_event_row *row = item;
        int r;

        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->delivery_id, sizeof(row->delivery_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 3, row->installation_id, sizeof(row->installation_id))) < 0 ||
            (r = sq_column_copy(st, 4, row->event, sizeof(row->event))) < 0 ||
            (r = sq_column_copy(st, 5, row->action, sizeof(row->action))) < 0 ||
            (r = sq_column_copy(st, 6, row->repo, sizeof(row->repo))) < 0 ||
            (r = sq_column_copy(st, 8, row->status, sizeof(row->status))) < 0 ||
            (r = sq_column_copy(st, 9, row->error, sizeof(row->error))) < 0 ||
            (r = sq_column_copy(st, 10, row->detail, sizeof(row->detail))) < 0 ||
            (r = sq_column_copy(st, 11, row->sandbox_id, sizeof(row->sandbox_id))) < 0)
                return r;
        row->pr_number = sq_column_u64(st, 7);
        row->received_at = sq_column_u64(st, 12);
        return 0;
}

int sq_gh_event_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                     uint64_t *ret_total)
{
        return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM github_events WHERE org_id = ?",
                           "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = ? "
                           "ORDER BY seq DESC LIMIT ? OFFSET ?",
                           event_decode, org_id, limit, offset, out, ret_total);
}

/* The newest of the org's events matching status_sql, into *ret. */
static int latest_event(sqlite3 *db, const char *sql, const char *org_id, struct gh_event_row *ret, bool *ret_found)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(db, sql, &st, "t", org_id);
        *ret_found = r == 0;
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : event_decode(st, ret);
}

int sq_gh_event_stats(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret)
{
        sqlite3 *db = sq_db(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        *ret = (struct gh_event_stats){};
        int r = sq_query_row(db,
                             "SELECT COALESCE(SUM(status = 'success'), 0), COALESCE(SUM(status = 'failure'), 0) "
                             "FROM github_events WHERE org_id = ? AND received_at >= ?",
                             &st, "tu", org_id, since);
        if (r < 0)
                return r;
        ret->success = sq_column_u64(st, 0);
        ret->failure = sq_column_u64(st, 1);
        return latest_event(db, "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = ? ORDER BY seq DESC LIMIT 1",
                            org_id, &ret->latest, &ret->has_latest)
                       ?: latest_event(db,
                                       "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = ? AND status = "
                                       "'failure' ORDER BY seq DESC LIMIT 1",
                                       org_id, &ret->latest_failure, &ret->has_failure);
}

int sq_gh_event_sandboxes(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                          struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT " EVENT_COLUMNS " FROM github_events WHERE org_id = ? AND repo = ? AND pr_number = ? "
                       "AND sandbox_id != '' ORDER BY seq",
                       out, event_decode, "ttu", org_id, repo, pr_number);
}
