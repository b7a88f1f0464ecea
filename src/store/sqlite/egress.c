/* The egress tables: an org's policies (opaque JSON documents) and the
 * audit of its sandboxes' proxied requests. Every org-scoped statement
 * names the org in its WHERE clause, so another org's rows read as absent. */
#include <errno.h>
#include <stdlib.h>

#include "store/sqlite/sqlite.h"

int sq_egress_policy_create(struct store *s, const struct egress_policy_row *row)
{
        return sq_run(sq_db(s), "INSERT INTO egress_policies(id, org_id, doc, created_at, updated_at) VALUES(?, ?, ?, ?, ?)",
                      "tttuu", row->id, row->org_id, row->doc, row->created_at, row->updated_at);
}

int sq_egress_policy_update(struct store *s, const struct egress_policy_row *row)
{
        return sq_run_changed(sq_db(s), "UPDATE egress_policies SET doc = ?, updated_at = ? WHERE org_id = ? AND id = ?",
                              "tutt", row->doc, row->updated_at, row->org_id, row->id);
}

int sq_egress_policy_delete(struct store *s, const char *org_id, const char *id)
{
        return sq_run_changed(sq_db(s), "DELETE FROM egress_policies WHERE org_id = ? AND id = ?", "tt", org_id, id);
}

static int policy_decode(sqlite3_stmt *st, void *item)
{
        struct egress_policy_row *row = item;
        int r;

        if ((r = sq_column_copy(st, 0, row->id, sizeof(row->id))) < 0 ||
            (r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_dup(st, 2, "{}", &row->doc)) < 0)
                return r;
        row->created_at = sq_column_u64(st, 3);
        row->updated_at = sq_column_u64(st, 4);
        return 0;
}

#define POLICY_COLUMNS "SELECT id, org_id, doc, created_at, updated_at FROM egress_policies "

int sq_egress_policy_list(struct store *s, const char *org_id, struct store_rows *out)
{
        if (!org_id)
                return sq_list(sq_db(s), POLICY_COLUMNS "ORDER BY created_at, id LIMIT ?", out, policy_decode, "u",
                               (uint64_t)STORE_EGRESS_POLICIES_MAX);
        return sq_list(sq_db(s), POLICY_COLUMNS "WHERE org_id = ? ORDER BY created_at, id LIMIT ?", out, policy_decode,
                       "tu", org_id, (uint64_t)STORE_EGRESS_POLICIES_MAX);
}

int sq_egress_audit_insert(struct store *s, const struct egress_audit_row *row)
{
        return sq_run(sq_db(s),
                      "INSERT INTO egress_audit(org_id, sandbox_id, at, host, port, protocol, decision, mode, violation,"
                      " reason, bytes_out, bytes_in) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "ttututttbtuu", row->org_id, row->sandbox_id, row->at, row->host, (uint64_t)row->port,
                      row->protocol, row->decision, row->mode, row->violation, row->reason, row->bytes_out,
                      row->bytes_in);
}

static int audit_decode(sqlite3_stmt *st, void *item)
{
        struct egress_audit_row *row = item;
        int r;

        row->seq = sq_column_u64(st, 0);
        if ((r = sq_column_copy(st, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = sq_column_copy(st, 2, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = sq_column_copy(st, 4, row->host, sizeof(row->host))) < 0 ||
            (r = sq_column_copy(st, 6, row->protocol, sizeof(row->protocol))) < 0 ||
            (r = sq_column_copy(st, 7, row->decision, sizeof(row->decision))) < 0 ||
            (r = sq_column_copy(st, 8, row->mode, sizeof(row->mode))) < 0 ||
            (r = sq_column_copy(st, 10, row->reason, sizeof(row->reason))) < 0)
                return r;
        row->at = sq_column_u64(st, 3);
        row->port = (uint32_t)sq_column_u64(st, 5);
        row->violation = sq_column_u64(st, 9) != 0;
        row->bytes_out = sq_column_u64(st, 11);
        row->bytes_in = sq_column_u64(st, 12);
        return 0;
}

int sq_egress_audit_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                         uint64_t *ret_total)
{
        return sq_org_page(sq_db(s), "SELECT COUNT(*) FROM egress_audit WHERE org_id = ?",
                           "SELECT seq, org_id, sandbox_id, at, host, port, protocol, decision, mode, violation, reason,"
                           " bytes_out, bytes_in FROM egress_audit WHERE org_id = ? ORDER BY seq DESC LIMIT ? OFFSET ?",
                           audit_decode, org_id, limit, offset, out, ret_total);
}

int sq_egress_audit_prune(struct store *s, uint64_t before)
{
        return sq_run(sq_db(s), "DELETE FROM egress_audit WHERE at < ?", "u", before);
}
