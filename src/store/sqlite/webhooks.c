/* The webhooks and webhook_deliveries tables (issue 15): an org's
 * endpoints, and per endpoint a queue of messages with the record of
 * their attempts. Every read the API makes names the org in its WHERE
 * clause, so another org's rows read as absent; the dispatcher's reads
 * (heads, health, enqueue) go by webhook id. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/sqlite.h"

#define WEBHOOK_COLUMNS                                                                                   \
        "id, org_id, url, events_json, description, active, sealed_secret, key_id, cursor, failing_since, " \
        "disabled_reason, created_at, updated_at"

int sq_webhook_create(struct store *s, const struct webhook_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO webhooks(" WEBHOOK_COLUMNS ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "tttttbttuutuu", row->id, row->org_id, row->url, row->events_json, row->description,
                      row->active, row->sealed_secret, row->key_id, row->cursor, row->failing_since,
                      row->disabled_reason, row->created_at, row->updated_at);
}

static int webhook_decode(sqlite3_stmt *st, void *item)
{
        struct webhook_row *row = item;
        int r;

        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_dup(st, 2, "", &row->url)) < 0 || (r = sq_column_dup(st, 3, "[]", &row->events_json)) < 0 ||
            (r = sq_column_dup(st, 4, "", &row->description)) < 0 ||
            (r = sq_column_dup(st, 6, "", &row->sealed_secret)) < 0 ||
            (r = sq_column_copy(st, 7, row->key_id, sizeof(row->key_id))) < 0 ||
            (r = sq_column_copy(st, 10, row->disabled_reason, sizeof(row->disabled_reason))) < 0)
                return r;
        row->active = sq_column_u64(st, 5) != 0;
        row->cursor = sq_column_u64(st, 8);
        row->failing_since = sq_column_u64(st, 9);
        row->created_at = sq_column_u64(st, 11);
        row->updated_at = sq_column_u64(st, 12);
        return 0;
}

/* The one row of sql decoded into item (size bytes), copied to ret only
 * when whole; -ENOENT when there is none. */
static int get_one(sqlite3 *db, sq_decode_fn decode, void (*release)(void *item), void *item, void *ret, size_t size,
                   const char *sql, const char *types, ...)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        va_list ap;
        va_start(ap, types);
        int r = sq_prepare_bound_va(db, sql, &st, types, ap);
        va_end(ap);
        if (r == 0)
                r = sq_step(st);
        if (r == 0)
                return -ENOENT;
        if (r == 1 && (r = decode(st, item)) < 0)
                release(item);
        if (r < 0)
                return r;
        memcpy(ret, item, size);
        return 0;
}

static void webhook_release(void *item)
{
        webhook_row_done(item);
}

int sq_webhook_get(struct store *s, const char *org_id, const char *id, struct webhook_row *ret)
{
        struct webhook_row row = {};
        return get_one(sq_db(s), webhook_decode, webhook_release, &row, ret, sizeof(row),
                       "SELECT " WEBHOOK_COLUMNS " FROM webhooks WHERE org_id = ? AND id = ?", "tt", org_id, id);
}

int sq_webhook_update(struct store *s, const struct webhook_row *row)
{
        return sq_run_changed(sq_db(s),
                              "UPDATE webhooks SET url = ?, events_json = ?, description = ?, sealed_secret = ?, "
                              "key_id = ?, updated_at = ? WHERE org_id = ? AND id = ?",
                              "tttttutt", row->url, row->events_json, row->description, row->sealed_secret,
                              row->key_id, row->updated_at, row->org_id, row->id);
}

/* SET reads the row's old values: "active = 0" is what it was before. */
int sq_webhook_set_active(struct store *s, const char *org_id, const char *id, bool active)
{
        return sq_run_changed(sq_db(s),
                              "UPDATE webhooks SET "
                              "failing_since = CASE WHEN ? AND active = 0 THEN 0 ELSE failing_since END, "
                              "disabled_reason = CASE WHEN ? AND active = 0 THEN '' ELSE disabled_reason END, "
                              "active = ? WHERE org_id = ? AND id = ?",
                              "bbbtt", active, active, active, org_id, id);
}

int sq_webhook_delete(struct store *s, const char *org_id, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM webhooks WHERE org_id = ? AND id = ?", "tt", org_id, id);
}

int sq_webhook_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                    uint64_t *ret_total)
{
        if (org_id)
                return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM webhooks WHERE org_id = ?",
                                   "SELECT " WEBHOOK_COLUMNS " FROM webhooks WHERE org_id = ? "
                                   "ORDER BY created_at, id LIMIT ? OFFSET ?",
                                   webhook_decode, org_id, limit, offset, out, ret_total);
        int r = sq_query_u64(sq_db(s), "SELECT COUNT(*) FROM webhooks", NULL, ret_total);
        if (r < 0)
                return r;
        return sq_list(sq_db(s), "SELECT " WEBHOOK_COLUMNS " FROM webhooks ORDER BY created_at, id LIMIT ? OFFSET ?",
                       out, webhook_decode, "uu", limit, offset);
}

int sq_webhook_health(struct store *s, const char *id, uint64_t failing_since, bool disable, const char *reason)
{
        if (!disable)
                return sq_run_changed(sq_db(s), "UPDATE webhooks SET failing_since = ? WHERE id = ?", "ut",
                                      failing_since, id);
        return sq_run_changed(sq_db(s),
                              "UPDATE webhooks SET failing_since = ?, active = 0, disabled_reason = ? WHERE id = ?",
                              "utt", failing_since, reason, id);
}

/* ---- deliveries ---- */

#define DELIVERY_COLUMNS                                                                                     \
        "seq, id, webhook_id, org_id, origin, event_id, event, payload, status, attempts, last_status, "    \
        "last_error, last_duration_ms, log_json, next_attempt_at, created_at, delivered_at"

static int delivery_insert(sqlite3 *db, const struct webhook_delivery_row *row)
{
        return sq_run(db,
                      "INSERT OR IGNORE INTO webhook_deliveries(id, webhook_id, org_id, origin, event_id, event, "
                      "payload, status, log_json, next_attempt_at, created_at) "
                      "VALUES(?, ?, ?, ?, ?, ?, ?, 'pending', '[]', ?, ?)",
                      "ttttuttuu", row->id, row->webhook_id, row->org_id, row->origin, row->event_id, row->event,
                      row->payload, row->next_attempt_at, row->created_at);
}

/* The webhook's finished deliveries beyond the newest keep: the log stays
 * bounded whatever the webhook receives. */
static int delivery_trim(sqlite3 *db, const char *webhook_id, uint64_t keep)
{
        if (!keep)
                return 0;
        return sq_run(db,
                      "DELETE FROM webhook_deliveries WHERE webhook_id = ? AND status != 'pending' AND seq <= "
                      "(SELECT seq FROM webhook_deliveries WHERE webhook_id = ? AND status != 'pending' "
                      "ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                      "ttu", webhook_id, webhook_id, keep);
}

int sq_webhook_enqueue(struct store *s, const char *webhook_id, uint64_t cursor, const struct webhook_delivery_row *row,
                       uint64_t keep)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        sqlite3 *db = sq_db(s);
        int r = sq_tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = sq_run_changed(db, "UPDATE webhooks SET cursor = MAX(cursor, ?) WHERE id = ?", "ut", cursor, webhook_id);
        if (r == 0 && row)
                r = delivery_insert(db, row);
        if (r == 0)
                r = delivery_trim(db, webhook_id, keep);
        return r < 0 ? r : sq_tx_commit(&tx);
}

static int delivery_decode(sqlite3_stmt *st, void *item)
{
        struct webhook_delivery_row *row = item;
        int r;

        row->seq = sq_column_u64(st, 0);
        if ((r = sq_column_copy(st, 1, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 2, row->webhook_id, sizeof(row->webhook_id))) < 0 ||
            (r = sq_column_copy(st, 3, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 4, row->origin, sizeof(row->origin))) < 0 ||
            (r = sq_column_copy(st, 6, row->event, sizeof(row->event))) < 0 ||
            (r = sq_column_dup(st, 7, "{}", &row->payload)) < 0 ||
            (r = sq_column_copy(st, 8, row->status, sizeof(row->status))) < 0 ||
            (r = sq_column_dup(st, 11, "", &row->last_error)) < 0 || (r = sq_column_dup(st, 13, "[]", &row->log_json)) < 0)
                return r;
        row->event_id = sq_column_u64(st, 5);
        row->attempts = (uint32_t)sq_column_u64(st, 9);
        row->last_status = (uint32_t)sq_column_u64(st, 10);
        row->last_duration_ms = sq_column_u64(st, 12);
        row->next_attempt_at = sq_column_u64(st, 14);
        row->created_at = sq_column_u64(st, 15);
        row->delivered_at = sq_column_u64(st, 16);
        return 0;
}

static void delivery_release(void *item)
{
        webhook_delivery_row_done(item);
}

int sq_webhook_delivery_get(struct store *s, const char *org_id, const char *webhook_id, const char *id,
                            struct webhook_delivery_row *ret)
{
        struct webhook_delivery_row row = {};
        return get_one(sq_db(s), delivery_decode, delivery_release, &row, ret, sizeof(row),
                       "SELECT " DELIVERY_COLUMNS " FROM webhook_deliveries WHERE org_id = ? AND webhook_id = ? AND id = ?",
                       "ttt", org_id, webhook_id, id);
}

int sq_webhook_delivery_update(struct store *s, const struct webhook_delivery_row *row)
{
        return sq_run_changed(sq_db(s),
                              "UPDATE webhook_deliveries SET status = ?, attempts = ?, last_status = ?, last_error = ?, "
                              "last_duration_ms = ?, log_json = ?, next_attempt_at = ?, delivered_at = ? WHERE id = ?",
                              "tuututuut", row->status, (uint64_t)row->attempts, (uint64_t)row->last_status,
                              row->last_error, row->last_duration_ms, row->log_json, row->next_attempt_at,
                              row->delivered_at, row->id);
}

int sq_webhook_delivery_list(struct store *s, const char *org_id, const char *webhook_id, uint64_t limit,
                             uint64_t offset, struct store_rows *out, uint64_t *ret_total)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(sq_db(s), "SELECT COUNT(*) FROM webhook_deliveries WHERE org_id = ? AND webhook_id = ?",
                             &st, "tt", org_id, webhook_id);
        if (r < 0)
                return r;
        *ret_total = sq_column_u64(st, 0);
        return sq_list(sq_db(s),
                       "SELECT " DELIVERY_COLUMNS " FROM webhook_deliveries WHERE org_id = ? AND webhook_id = ? "
                       "ORDER BY seq DESC LIMIT ? OFFSET ?",
                       out, delivery_decode, "ttuu", org_id, webhook_id, limit, offset);
}

int sq_webhook_delivery_heads(struct store *s, struct store_rows *out)
{
        return sq_list(sq_db(s),
                       "SELECT " DELIVERY_COLUMNS " FROM webhook_deliveries WHERE seq IN "
                       "(SELECT MIN(d.seq) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id "
                       "WHERE d.status = 'pending' AND w.active = 1 GROUP BY d.webhook_id) ORDER BY seq",
                       out, delivery_decode, "");
}
