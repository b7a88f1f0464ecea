/* The webhooks and webhook_deliveries tables (issue 15): an org's
 * endpoints, and per endpoint a queue of messages with the record of
 * their attempts. Every read the API makes names the org in its WHERE
 * clause, so another org's rows read as absent; the dispatcher's reads
 * (heads, health, enqueue) go by webhook id.
 *
 * Ordering across connections and nodes needs no advisory lock: a
 * webhook's deliveries are ordered by seq only among themselves (heads
 * takes each webhook's lowest pending seq), and webhook_enqueue updates
 * the webhook's row before it inserts, so two enqueues for one webhook
 * hold its row lock in turn and take their seqs in commit order. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg/pg.h"

#define WEBHOOK_COLUMNS                                                                                   \
        "id, org_id, url, events_json, description, active, sealed_secret, key_id, cursor, failing_since, " \
        "disabled_reason, created_at, updated_at"

int pgs_webhook_create(struct store *s, const struct webhook_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO webhooks(" WEBHOOK_COLUMNS ") "
                       "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                       "tttttbttuutuu", row->id, row->org_id, row->url, row->events_json, row->description,
                       (int)row->active, row->sealed_secret, row->key_id, row->cursor, row->failing_since,
                       row->disabled_reason, row->created_at, row->updated_at);
}

static int webhook_decode(const PGresult *res, int i, void *item)
{
        struct webhook_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_dup(res, i, 2, "", &row->url)) < 0 || (r = pgs_dup(res, i, 3, "[]", &row->events_json)) < 0 ||
            (r = pgs_dup(res, i, 4, "", &row->description)) < 0 ||
            (r = pgs_dup(res, i, 6, "", &row->sealed_secret)) < 0 ||
            (r = pgs_copy(res, i, 7, row->key_id, sizeof(row->key_id))) < 0 ||
            (r = pgs_copy(res, i, 10, row->disabled_reason, sizeof(row->disabled_reason))) < 0)
                return r;
        row->active = pgs_bool(res, i, 5);
        row->cursor = pgs_u64(res, i, 8);
        row->failing_since = pgs_u64(res, i, 9);
        row->created_at = pgs_u64(res, i, 11);
        row->updated_at = pgs_u64(res, i, 12);
        return 0;
}

/* The one row of sql decoded into item (size bytes), copied to ret only
 * when whole; -ENOENT when there is none. */
static int get_one(struct store *s, pgs_decode_fn decode, void (*release)(void *item), void *item, void *ret,
                   size_t size, const char *sql, const char *types, ...)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        va_list ap;
        va_start(ap, types);
        int r = pgs_query_va(db, sql, &res, types, ap);
        va_end(ap);

        if (r == 0 && PQntuples(res) == 0)
                return -ENOENT;
        if (r == 0 && (r = decode(res, 0, item)) < 0)
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

int pgs_webhook_get(struct store *s, const char *org_id, const char *id, struct webhook_row *ret)
{
        struct webhook_row row = {};
        return get_one(s, webhook_decode, webhook_release, &row, ret, sizeof(row),
                       "SELECT " WEBHOOK_COLUMNS " FROM webhooks WHERE org_id = $1 AND id = $2", "tt", org_id, id);
}

int pgs_webhook_update(struct store *s, const struct webhook_row *row)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db,
                               "UPDATE webhooks SET url = $1, events_json = $2, description = $3, sealed_secret = $4, "
                               "key_id = $5, updated_at = $6 WHERE org_id = $7 AND id = $8",
                               "tttttutt", row->url, row->events_json, row->description, row->sealed_secret,
                               row->key_id, row->updated_at, row->org_id, row->id);
}

/* SET reads the row's old values: "NOT active" is what it was before. */
int pgs_webhook_set_active(struct store *s, const char *org_id, const char *id, bool active)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db,
                               "UPDATE webhooks SET "
                               "failing_since = CASE WHEN $1 AND NOT active THEN 0 ELSE failing_since END, "
                               "disabled_reason = CASE WHEN $1 AND NOT active THEN '' ELSE disabled_reason END, "
                               "active = $1 WHERE org_id = $2 AND id = $3",
                               "btt", (int)active, org_id, id);
}

int pgs_webhook_delete(struct store *s, const char *org_id, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM webhooks WHERE org_id = $1 AND id = $2", "tt", org_id, id);
}

int pgs_webhook_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                     uint64_t *ret_total)
{
        PGS_CONN(s, db);
        if (org_id)
                return pgs_org_page(db, "SELECT COUNT(*) FROM webhooks WHERE org_id = $1",
                                    "SELECT " WEBHOOK_COLUMNS " FROM webhooks WHERE org_id = $1 "
                                    "ORDER BY created_at, id LIMIT $2 OFFSET $3",
                                    webhook_decode, org_id, limit, offset, out, ret_total);
        int r = pgs_query_u64(db, ret_total, "SELECT COUNT(*) FROM webhooks", "");
        if (r < 0)
                return r;
        return pgs_list(db, "SELECT " WEBHOOK_COLUMNS " FROM webhooks ORDER BY created_at, id LIMIT $1 OFFSET $2", out,
                        webhook_decode, "uu", limit, offset);
}

int pgs_webhook_health(struct store *s, const char *id, uint64_t failing_since, bool disable, const char *reason)
{
        PGS_CONN(s, db);
        if (!disable)
                return pgs_run_changed(db, "UPDATE webhooks SET failing_since = $1 WHERE id = $2", "ut", failing_since,
                                       id);
        return pgs_run_changed(db,
                               "UPDATE webhooks SET failing_since = $1, active = FALSE, disabled_reason = $2 "
                               "WHERE id = $3",
                               "utt", failing_since, reason, id);
}

/* ---- deliveries ---- */

#define DELIVERY_COLUMNS                                                                                     \
        "seq, id, webhook_id, org_id, origin, event_id, event, payload, status, attempts, last_status, "    \
        "last_error, last_duration_ms, log_json, next_attempt_at, created_at, delivered_at"

/* ON CONFLICT DO NOTHING (no target: the id and the (webhook, event)
 * index alike), as SQLite's INSERT OR IGNORE: an event offered again
 * after a restart is already queued. */
static int delivery_insert(PGconn *db, const struct webhook_delivery_row *row)
{
        return pgs_run(db,
                       "INSERT INTO webhook_deliveries(id, webhook_id, org_id, origin, event_id, event, "
                       "payload, status, log_json, next_attempt_at, created_at) "
                       "VALUES($1, $2, $3, $4, $5, $6, $7, 'pending', '[]', $8, $9) ON CONFLICT DO NOTHING",
                       "ttttuttuu", row->id, row->webhook_id, row->org_id, row->origin, row->event_id, row->event,
                       row->payload, row->next_attempt_at, row->created_at);
}

/* The webhook's finished deliveries beyond the newest keep: the log stays
 * bounded whatever the webhook receives. */
static int delivery_trim(PGconn *db, const char *webhook_id, uint64_t keep)
{
        if (!keep)
                return 0;
        return pgs_run(db,
                       "DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND status <> 'pending' AND seq <= "
                       "(SELECT seq FROM webhook_deliveries WHERE webhook_id = $1 AND status <> 'pending' "
                       "ORDER BY seq DESC LIMIT 1 OFFSET $2)",
                       "tu", webhook_id, keep);
}

/* The cursor and the delivery row commit together, so a restart neither
 * loses nor repeats an event. */
int pgs_webhook_enqueue(struct store *s, const char *webhook_id, uint64_t cursor,
                        const struct webhook_delivery_row *row, uint64_t keep)
{
        _cleanup_tx_ PGconn *tx = NULL;
        PGS_CONN(s, db);
        int r = pgs_tx_begin(db, &tx);

        if (r < 0)
                return r;
        r = pgs_run_changed(db, "UPDATE webhooks SET cursor = GREATEST(cursor, $1) WHERE id = $2", "ut", cursor,
                            webhook_id);
        if (r == 0 && row)
                r = delivery_insert(db, row);
        if (r == 0)
                r = delivery_trim(db, webhook_id, keep);
        return r < 0 ? r : pgs_tx_commit(&tx);
}

static int delivery_decode(const PGresult *res, int i, void *item)
{
        struct webhook_delivery_row *row = item;
        int r;

        row->seq = pgs_u64(res, i, 0);
        if ((r = pgs_copy(res, i, 1, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->webhook_id, sizeof(row->webhook_id))) < 0 ||
            (r = pgs_copy(res, i, 3, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 4, row->origin, sizeof(row->origin))) < 0 ||
            (r = pgs_copy(res, i, 6, row->event, sizeof(row->event))) < 0 ||
            (r = pgs_dup(res, i, 7, "{}", &row->payload)) < 0 ||
            (r = pgs_copy(res, i, 8, row->status, sizeof(row->status))) < 0 ||
            (r = pgs_dup(res, i, 11, "", &row->last_error)) < 0 || (r = pgs_dup(res, i, 13, "[]", &row->log_json)) < 0)
                return r;
        row->event_id = pgs_u64(res, i, 5);
        row->attempts = (uint32_t)pgs_u64(res, i, 9);
        row->last_status = (uint32_t)pgs_u64(res, i, 10);
        row->last_duration_ms = pgs_u64(res, i, 12);
        row->next_attempt_at = pgs_u64(res, i, 14);
        row->created_at = pgs_u64(res, i, 15);
        row->delivered_at = pgs_u64(res, i, 16);
        return 0;
}

static void delivery_release(void *item)
{
        webhook_delivery_row_done(item);
}

int pgs_webhook_delivery_get(struct store *s, const char *org_id, const char *webhook_id, const char *id,
                             struct webhook_delivery_row *ret)
{
        struct webhook_delivery_row row = {};
        return get_one(s, delivery_decode, delivery_release, &row, ret, sizeof(row),
                       "SELECT " DELIVERY_COLUMNS " FROM webhook_deliveries "
                       "WHERE org_id = $1 AND webhook_id = $2 AND id = $3",
                       "ttt", org_id, webhook_id, id);
}

int pgs_webhook_delivery_update(struct store *s, const struct webhook_delivery_row *row)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db,
                               "UPDATE webhook_deliveries SET status = $1, attempts = $2, last_status = $3, "
                               "last_error = $4, last_duration_ms = $5, log_json = $6, next_attempt_at = $7, "
                               "delivered_at = $8 WHERE id = $9",
                               "tuututuut", row->status, (uint64_t)row->attempts, (uint64_t)row->last_status,
                               row->last_error, row->last_duration_ms, row->log_json, row->next_attempt_at,
                               row->delivered_at, row->id);
}

int pgs_webhook_delivery_list(struct store *s, const char *org_id, const char *webhook_id, uint64_t limit,
                              uint64_t offset, struct store_rows *out, uint64_t *ret_total)
{
        PGS_CONN(s, db);
        int r = pgs_query_u64(db, ret_total,
                              "SELECT COUNT(*) FROM webhook_deliveries WHERE org_id = $1 AND webhook_id = $2", "tt",
                              org_id, webhook_id);
        if (r < 0)
                return r;
        return pgs_list(db,
                        "SELECT " DELIVERY_COLUMNS " FROM webhook_deliveries WHERE org_id = $1 AND webhook_id = $2 "
                        "ORDER BY seq DESC LIMIT $3 OFFSET $4",
                        out, delivery_decode, "ttuu", org_id, webhook_id, limit, offset);
}

int pgs_webhook_delivery_heads(struct store *s, struct store_rows *out)
{
        PGS_CONN(s, db);
        return pgs_list(db,
                        "SELECT " DELIVERY_COLUMNS " FROM webhook_deliveries WHERE seq IN "
                        "(SELECT MIN(d.seq) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id "
                        "WHERE d.status = 'pending' AND w.active GROUP BY d.webhook_id) ORDER BY seq",
                        out, delivery_decode, "");
}
