/* The PostgreSQL backend's internals (libpq), shared by its files; nothing
 * outside src/store/pg/ includes this.
 *
 * Connections: a fixed pool (PGS_POOL_SIZE connections, opened lazily, one
 * at open to migrate) guarded by a mutex and a condition variable. The
 * store is called from many threads, so the ops table says serialize =
 * false: every op leases a connection for its duration (PGS_CONN), runs,
 * and gives it back; an op waits only when every connection is leased. A
 * connection found broken (the server restarted, a network cut) is reset
 * when it is given back, so the next lease gets a fresh one. A pool rather
 * than a connection per thread: libmicrohttpd's thread pool, the reaper and
 * the queue worker are many threads, most idle, and a server's connection
 * slots are scarce when several nodes share it.
 *
 * Statements: PQexecParams with typed parameters (text, int8, bool OIDs)
 * and text results; user data never goes into SQL text. Multi-statement
 * ops run in one transaction (READ COMMITTED) and take an explicit lock
 * where order matters: cell_append locks the context row (FOR UPDATE) so a
 * journal's seq check and insert cannot interleave; event_append and
 * queue_insert hold a transaction advisory lock so ids (sequences) commit
 * in id order and a reader "after id N" never misses a later-committed
 * lower id.
 *
 * Files: db.c pool, open/close, the ops table; stmt.c statement,
 * transaction and error helpers; migrate.c schema migrations; orgs.c,
 * tenants.c, secrets.c, checkpoints.c, queue.c, events.c, sandboxes.c,
 * contexts.c, cells.c, artifacts.c, snapshots.c, github.c, egress.c, sso.c,
 * webhooks.c one table family each, as in src/store/sqlite/. */
#pragma once

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "store/backend.h"

#define PGS_POOL_SIZE 8

struct pgs_store;

/* A leased connection; the cleanup gives it back. */
struct pgs_lease {
        struct pgs_store *p;
        PGconn *db;
        size_t slot;   /* its index in the pool */
};
struct pgs_lease pgs_lease(struct store *s);
void pgs_lease_done(struct pgs_lease *l);

/* Declares db, a connection leased for the rest of the scope; returns -EIO
 * from the op when none can be had (the server is unreachable). */
#define PGS_CONN(s, db)                                                        \
        _cleanup_(pgs_lease_done) struct pgs_lease lease_ = pgs_lease(s);      \
        PGconn *db = lease_.db;                                                \
        if (!db)                                                               \
                return -EIO

/* ---- stmt.c ----------------------------------------------------------- */

/* A result's SQLSTATE as -errno: unique violation -EEXIST, foreign key
 * violation -ENOENT (the referenced row is missing), other constraints
 * -EINVAL, out of range -ERANGE, anything else -EIO. */
int pgs_errno(const PGresult *res);

void pgs_clearp(PGresult **res);
#define _cleanup_res_ _cleanup_(pgs_clearp)

/* A transaction is represented by its connection; the cleanup rolls back
 * unless pgs_tx_commit() cleared it. */
void pgs_rollbackp(PGconn **tx);
#define _cleanup_tx_ _cleanup_(pgs_rollbackp)
int pgs_tx_begin(PGconn *db, PGconn **ret_tx);
int pgs_tx_commit(PGconn **tx);
/* A transaction-scoped advisory lock on the name (released at commit or
 * rollback): serialises writers whose order must match their ids. */
int pgs_tx_lock(PGconn *db, const char *name);

/* Runs SQL text without parameters (migrations); err gets the message. */
int pgs_exec(PGconn *db, const char *sql, struct err *err);

/* The helpers below bind the arguments that follow types to $1, $2, ...:
 * types has one letter per argument, 't' for a const char * (NULL binds
 * SQL NULL), 'u' for a uint64_t (exactly: cast literals; -ERANGE above
 * INT64_MAX), 'b' for a bool (passed as int). */
int pgs_query_va(PGconn *db, const char *sql, PGresult **ret, const char *types, va_list ap);
/* Runs a statement, rows or not, and drops its result. */
int pgs_run(PGconn *db, const char *sql, const char *types, ...);
/* UPDATE/DELETE by key: -ENOENT when no row changed. */
int pgs_run_changed(PGconn *db, const char *sql, const char *types, ...);
/* The result of a query with at least one row; -ENOENT: no row. */
int pgs_query_row(PGconn *db, const char *sql, PGresult **ret, const char *types, ...);
/* Fills one item of a store_rows from row i; may leave it half filled on
 * failure (out->done frees it). */
typedef int (*pgs_decode_fn)(const PGresult *res, int i, void *item);
/* The backend's one collect loop: pushes an item per row into out. */
int pgs_list(PGconn *db, const char *sql, struct store_rows *out, pgs_decode_fn decode, const char *types, ...);
/* One page of an org's rows: *ret_total from count_sql ($1 = org_id), the
 * rows from list_sql ($1 org_id, LIMIT $2 OFFSET $3). */
int pgs_org_page(PGconn *db, const char *count_sql, const char *list_sql, pgs_decode_fn decode, const char *org_id,
                 uint64_t limit, uint64_t offset, struct store_rows *out, uint64_t *ret_total);
/* The first column of the first row as an integer (0 when no row or NULL). */
int pgs_query_u64(PGconn *db, uint64_t *ret, const char *sql, const char *types, ...);

uint64_t pgs_u64(const PGresult *res, int i, int col);
bool pgs_bool(const PGresult *res, int i, int col);
/* Copies a text column into a char[size] field; never truncates
 * (-ENAMETOOLONG). NULL reads as "". */
int pgs_copy(const PGresult *res, int i, int col, char *dst, size_t size);
/* A malloc'd copy of a text column, or of dflt when NULL. */
int pgs_dup(const PGresult *res, int i, int col, const char *dflt, char **ret);

static inline const char *pgs_env_or_default(const char *env_json)
{
        return env_json ? env_json : "{}";
}

/* ---- migrate.c -------------------------------------------------------- */

int pgs_migrate(PGconn *db, struct err *err);
int pgs_schema_version(struct store *s);
int pgs_schema_version_on(PGconn *db);
int pgs_schema_latest(void);

/* ---- the ops, one file per table family ------------------------------- */

int pgs_org_ensure(struct store *s, const char *id, const char *name);
int pgs_org_get(struct store *s, const char *id, struct org_row *ret);

int pgs_account_create(struct store *s, const struct org_row *org, const struct user_row *user);
/* The rows an account starts with, inside the caller's transaction
 * (tenants.c; sso.c makes accounts too). */
int pgs_org_insert(PGconn *db, const struct org_row *org);
int pgs_user_insert(PGconn *db, const struct user_row *user);
int pgs_sso_identity_get(struct store *s, const char *issuer, const char *subject, struct sso_identity_row *ret);
int pgs_sso_identity_create(struct store *s, const struct sso_identity_row *row);
int pgs_sso_user_create(struct store *s, const struct org_row *new_org, const struct user_row *user,
                        const struct sso_identity_row *ident);
int pgs_sso_link_get(struct store *s, const char *org_id, struct sso_link_row *ret);
int pgs_sso_link_find(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret);
int pgs_sso_link_put(struct store *s, const struct sso_link_row *row);
int pgs_sso_link_delete(struct store *s, const char *org_id);
int pgs_user_get(struct store *s, const char *id, struct user_row *ret);
int pgs_user_get_by_email(struct store *s, const char *email, struct user_row *ret);
int pgs_apikey_create(struct store *s, const struct apikey_row *row);
int pgs_apikey_get_by_hash(struct store *s, const char *hash, struct apikey_row *ret);
int pgs_apikey_get(struct store *s, const char *org_id, const char *id, struct apikey_row *ret);
int pgs_apikey_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                    uint64_t *ret_total);
int pgs_apikey_delete(struct store *s, const char *org_id, const char *id);
int pgs_apikey_rehash(struct store *s, const char *org_id, const char *id, const char *hash, const char *prefix);
int pgs_session_create(struct store *s, const struct session_row *row);
int pgs_session_get(struct store *s, const char *id, struct session_row *ret);
int pgs_session_revoke(struct store *s, const char *id);
int pgs_idem_get(struct store *s, const char *org_id, const char *key, const char *route, uint64_t not_before,
                 struct idem_row *ret);
int pgs_idem_put(struct store *s, const struct idem_row *row, uint64_t not_before);

int pgs_secret_create(struct store *s, const struct secret_row *row);
int pgs_secret_update(struct store *s, const struct secret_row *row);
int pgs_secret_delete(struct store *s, const char *org_id, const char *name);
int pgs_secret_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                    uint64_t *ret_total);
int pgs_checkpoint_create(struct store *s, const struct checkpoint_row *row);
int pgs_checkpoint_get(struct store *s, const char *org_id, const char *id, struct checkpoint_row *ret);
int pgs_checkpoint_delete(struct store *s, const char *org_id, const char *id);
int pgs_checkpoint_list(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit,
                        uint64_t offset, struct store_rows *out, uint64_t *ret_total);
int pgs_checkpoint_usage(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes);

int pgs_snapshot_profile_put(struct store *s, const struct snapshot_profile_row *row,
                             struct snapshot_profile_row *ret);
int pgs_snapshot_profile_get(struct store *s, const char *key, struct snapshot_profile_row *ret);
int pgs_snapshot_profile_delete(struct store *s, const char *key);
int pgs_snapshot_profile_list(struct store *s, struct store_rows *out);

int pgs_gh_install_put(struct store *s, const struct gh_install_row *row);
int pgs_gh_install_get(struct store *s, const char *id, struct gh_install_row *ret);
int pgs_gh_install_delete(struct store *s, const char *id);
int pgs_gh_install_link(struct store *s, const char *id, const char *from_org, const char *to_org, uint64_t at);
int pgs_gh_install_list(struct store *s, const char *org_id, bool pending, struct store_rows *out);
int pgs_gh_settings_get(struct store *s, const char *org_id, char **ret_json, uint64_t *ret_updated_at);
int pgs_gh_settings_put(struct store *s, const char *org_id, const char *json, uint64_t updated_at);
int pgs_gh_event_insert(struct store *s, const struct gh_event_row *row, uint64_t keep);
int pgs_gh_event_update(struct store *s, const struct gh_event_row *row);
int pgs_gh_event_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                      uint64_t *ret_total);
int pgs_gh_event_stats(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret);
int pgs_gh_event_sandboxes(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                           struct store_rows *out);

int pgs_egress_policy_create(struct store *s, const struct egress_policy_row *row);
int pgs_egress_policy_update(struct store *s, const struct egress_policy_row *row);
int pgs_egress_policy_delete(struct store *s, const char *org_id, const char *id);
int pgs_egress_policy_list(struct store *s, const char *org_id, struct store_rows *out);
int pgs_egress_audit_insert(struct store *s, const struct egress_audit_row *row);
int pgs_egress_audit_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                          struct store_rows *out, uint64_t *ret_total);
int pgs_egress_audit_prune(struct store *s, uint64_t before);

int pgs_artifact_put(struct store *s, const struct artifact_row *row);
int pgs_artifact_get(struct store *s, const char *org_id, const char *id, struct artifact_row *ret);
int pgs_artifact_delete(struct store *s, const char *org_id, const char *id);
int pgs_artifact_list(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                      struct store_rows *out, uint64_t *ret_total);
int pgs_artifact_list_expired(struct store *s, uint64_t now, struct store_rows *out);
int pgs_artifact_bytes(struct store *s, const char *org_id, uint64_t *ret);

int pgs_queue_insert(struct store *s, const struct queue_row *row);
int pgs_queue_get(struct store *s, const char *org_id, const char *id, struct queue_row *ret);
int pgs_queue_update(struct store *s, const struct queue_row *row);
int pgs_queue_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                   uint64_t *ret_total);
int pgs_queue_heads(struct store *s, struct store_rows *out);
int pgs_queue_position(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead,
                       uint64_t *ret_depth);
int pgs_queue_stats(struct store *s, const char *org_id, uint64_t since, struct queue_stats *ret);
int pgs_queue_settle(struct store *s, bool at_start, uint32_t failed_status, const char *failed_body, uint64_t now,
                     uint64_t expire_before, uint64_t forget_before);

int pgs_event_append(struct store *s, const struct event_row *row, uint64_t keep, uint64_t not_before,
                     uint64_t *ret_id);
int pgs_event_last(struct store *s, uint64_t *ret);
int pgs_event_list(struct store *s, const char *org_id, uint64_t after, uint64_t limit, struct store_rows *out);
int pgs_audit_append(struct store *s, const struct audit_row *row, uint64_t not_before);
int pgs_audit_list(struct store *s, const char *org_id, const struct audit_filter *f, uint64_t limit,
                   uint64_t offset, struct store_rows *out, uint64_t *ret_total);
int pgs_audit_summary(struct store *s, const char *org_id, const char *sandbox_id, struct store_rows *out);

int pgs_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret);
int pgs_sandbox_put(struct store *s, const struct sandbox_row *row);
int pgs_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at);
int pgs_sandbox_set_env(struct store *s, const char *id, const char *env_json);
int pgs_sandbox_delete(struct store *s, const char *id);
int pgs_sandbox_list_expired(struct store *s, uint64_t now, struct store_rows *out);
int pgs_sandbox_count(struct store *s, uint64_t *ret);
int pgs_sandbox_ids_in_class(struct store *s, const char *org_id, const char *warm_class, struct store_rows *out);
int pgs_sandbox_ids_in_org(struct store *s, const char *org_id, struct store_rows *out);
int pgs_sandbox_list_org(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                         struct store_rows *out, uint64_t *ret_total);
int pgs_sandbox_disk_reserved(struct store *s, uint64_t default_bytes, uint64_t *ret);
int pgs_sandbox_free_host_id(struct store *s, uint32_t first, uint32_t n, uint32_t *ret);
/* cluster.c: the cluster_nodes table and the sandboxes' ownership lease. */
int pgs_node_heartbeat(struct store *s, const struct node_row *n);
/* slots.c */
int pgs_slot_take(struct store *s, const struct slot_row *row, uint64_t limit);
int pgs_slot_give(struct store *s, const char *id);
int pgs_slot_free_node(struct store *s, const char *node_id, uint64_t *ret_n);
int pgs_slot_count(struct store *s, const char *org_id, const char *kind, uint64_t *ret);
int pgs_queue_start(struct store *s, const char *id, const char *node_id, uint64_t started_at);
int pgs_queue_fail_node(struct store *s, const char *node_id, uint32_t failed_status, const char *failed_body,
                         uint64_t now);
int pgs_node_list(struct store *s, struct store_rows *out);
int pgs_sandbox_claim(struct store *s, const char *id, const char *node_id, uint64_t expected_epoch);
int pgs_sandbox_owner(struct store *s, const char *id, struct store_owner *ret);
int pgs_sandbox_list_on_node(struct store *s, const char *node_id, struct store_rows *out);
int pgs_sandbox_usage_on_node(struct store *s, const char *node_id, uint64_t default_bytes, uint64_t *ret_count,
                             uint64_t *ret_reserved);

int pgs_context_insert(struct store *s, const struct context_row *row);
int pgs_context_update(struct store *s, const struct context_row *row);
/* The same on a connection the caller holds (in its transaction). */
int pgs_context_update_on(PGconn *db, const struct context_row *row);
int pgs_context_get(struct store *s, const char *id, struct context_row *ret);
int pgs_context_delete(struct store *s, const char *id);
int pgs_context_list(struct store *s, const char *sandbox_id, struct store_rows *out);
int pgs_context_count(struct store *s, const char *sandbox_id, uint64_t *ret);
/* 0 when the context exists, -ENOENT when not; for_update also locks its
 * row until the transaction ends (cells.c). */
int pgs_context_exists(PGconn *db, const char *id, bool for_update);

int pgs_cell_append(struct store *s, const char *context_id, const struct cell_row *cell);
int pgs_cell_append_row(struct store *s, const struct cell_row *cell, const struct context_row *row);
int pgs_cell_list(struct store *s, const char *context_id, struct store_rows *out);
int pgs_cells_delete(struct store *s, const char *context_id);
int pgs_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes);

int pgs_webhook_create(struct store *s, const struct webhook_row *row);
int pgs_webhook_get(struct store *s, const char *org_id, const char *id, struct webhook_row *ret);
int pgs_webhook_update(struct store *s, const struct webhook_row *row);
int pgs_webhook_set_active(struct store *s, const char *org_id, const char *id, bool active);
int pgs_webhook_delete(struct store *s, const char *org_id, const char *id);
int pgs_webhook_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                     uint64_t *ret_total);
int pgs_webhook_health(struct store *s, const char *id, uint64_t failing_since, bool disable, const char *reason);
int pgs_webhook_enqueue(struct store *s, const char *webhook_id, uint64_t cursor,
                        const struct webhook_delivery_row *row, uint64_t keep);
int pgs_webhook_delivery_get(struct store *s, const char *org_id, const char *webhook_id, const char *id,
                             struct webhook_delivery_row *ret);
int pgs_webhook_delivery_update(struct store *s, const struct webhook_delivery_row *row);
int pgs_webhook_delivery_list(struct store *s, const char *org_id, const char *webhook_id, uint64_t limit,
                              uint64_t offset, struct store_rows *out, uint64_t *ret_total);
int pgs_webhook_delivery_heads(struct store *s, struct store_rows *out);
