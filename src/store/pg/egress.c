/* The egress tables: an org's policies (opaque JSON documents) and the
 * audit of its sandboxes' proxied requests. Every org-scoped statement
 * names the org. */
#include <errno.h>
#include <stdlib.h>

#include "store/pg/pg.h"

int pgs_egress_policy_create(struct store *s, const struct egress_policy_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO egress_policies(id, org_id, doc, created_at, updated_at) VALUES($1, $2, $3, $4, $5)",
                       "tttuu", row->id, row->org_id, row->doc, row->created_at, row->updated_at);
}

int pgs_egress_policy_update(struct store *s, const struct egress_policy_row *row)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "UPDATE egress_policies SET doc = $1, updated_at = $2 WHERE org_id = $3 AND id = $4",
                               "tutt", row->doc, row->updated_at, row->org_id, row->id);
}

int pgs_egress_policy_delete(struct store *s, const char *org_id, const char *id)
{
        PGS_CONN(s, db);
        return pgs_run_changed(db, "DELETE FROM egress_policies WHERE org_id = $1 AND id = $2", "tt", org_id, id);
}

static int policy_decode(const PGresult *res, int i, void *item)
{
        struct egress_policy_row *row = item;
        int r;

        if ((r = pgs_copy(res, i, 0, row->id, sizeof(row->id))) < 0 ||
            (r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_dup(res, i, 2, "{}", &row->doc)) < 0)
                return r;
        row->created_at = pgs_u64(res, i, 3);
        row->updated_at = pgs_u64(res, i, 4);
        return 0;
}

#define POLICY_COLUMNS "SELECT id, org_id, doc, created_at, updated_at FROM egress_policies "

int pgs_egress_policy_list(struct store *s, const char *org_id, struct store_rows *out)
{
        PGS_CONN(s, db);
        if (!org_id)
                return pgs_list(db, POLICY_COLUMNS "ORDER BY created_at, id LIMIT $1", out, policy_decode, "u",
                                (uint64_t)STORE_EGRESS_POLICIES_MAX);
        return pgs_list(db, POLICY_COLUMNS "WHERE org_id = $1 ORDER BY created_at, id LIMIT $2", out, policy_decode,
                        "tu", org_id, (uint64_t)STORE_EGRESS_POLICIES_MAX);
}

int pgs_egress_audit_insert(struct store *s, const struct egress_audit_row *row)
{
        PGS_CONN(s, db);
        return pgs_run(db,
                       "INSERT INTO egress_audit(org_id, sandbox_id, at, host, port, protocol, decision, mode, "
                       "violation, reason, bytes_out, bytes_in) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                       "ttututttbtuu", row->org_id, row->sandbox_id, row->at, row->host, (uint64_t)row->port,
                       row->protocol, row->decision, row->mode, (int)row->violation, row->reason, row->bytes_out,
                       row->bytes_in);
}

static int audit_decode(const PGresult *res, int i, void *item)
{
        struct egress_audit_row *row = item;
        int r;

        row->seq = pgs_u64(res, i, 0);
        if ((r = pgs_copy(res, i, 1, row->org_id, sizeof(row->org_id))) < 0 ||
            (r = pgs_copy(res, i, 2, row->sandbox_id, sizeof(row->sandbox_id))) < 0 ||
            (r = pgs_copy(res, i, 4, row->host, sizeof(row->host))) < 0 ||
            (r = pgs_copy(res, i, 6, row->protocol, sizeof(row->protocol))) < 0 ||
            (r = pgs_copy(res, i, 7, row->decision, sizeof(row->decision))) < 0 ||
            (r = pgs_copy(res, i, 8, row->mode, sizeof(row->mode))) < 0 ||
            (r = pgs_copy(res, i, 10, row->reason, sizeof(row->reason))) < 0)
                return r;
        row->at = pgs_u64(res, i, 3);
        row->port = (uint32_t)pgs_u64(res, i, 5);
        row->violation = pgs_bool(res, i, 9);
        row->bytes_out = pgs_u64(res, i, 11);
        row->bytes_in = pgs_u64(res, i, 12);
        return 0;
}

int pgs_egress_audit_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                          struct store_rows *out, uint64_t *ret_total)
{
        PGS_CONN(s, db);
        return pgs_org_page(db, "SELECT COUNT(*) FROM egress_audit WHERE org_id = $1",
                            "SELECT seq, org_id, sandbox_id, at, host, port, protocol, decision, mode, violation, "
                            "reason, bytes_out, bytes_in FROM egress_audit WHERE org_id = $1 ORDER BY seq DESC "
                            "LIMIT $2 OFFSET $3",
                            audit_decode, org_id, limit, offset, out, ret_total);
}

int pgs_egress_audit_prune(struct store *s, uint64_t before)
{
        PGS_CONN(s, db);
        return pgs_run(db, "DELETE FROM egress_audit WHERE at < $1", "u", before);
}
