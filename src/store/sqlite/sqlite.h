/* The SQLite backend's internals, shared by its files and by its own unit
 * tests; nothing outside src/store/sqlite/ (and tests/unit/store/) includes
 * this. One connection per store, opened without SQLite's own mutexes: the
 * store core serialises every op (store_sqlite_ops.serialize), and each
 * multi-statement op runs in one transaction so it is atomic on disk too.
 * Statements are prepared per call; all user data goes through
 * sqlite3_bind_*, never into SQL text.
 *
 * Files: db.c connection, pragmas, open/close, the ops table; stmt.c
 * statement, transaction and error helpers; migrate.c schema migrations;
 * orgs.c, sandboxes.c, contexts.c, cells.c, secrets.c, checkpoints.c, events.c,
 * webhooks.c
 * (events and audit) one table family each;
 * orgs.c, sandboxes.c, contexts.c, cells.c, secrets.c, artifacts.c one table each;
 * orgs.c, sandboxes.c, contexts.c, cells.c, secrets.c, checkpoints.c, snapshots.c one table each;
 * orgs.c, sandboxes.c, contexts.c, cells.c, secrets.c, checkpoints.c one table each; github.c the GitHub
 * integration's three tables;
 * orgs.c, sandboxes.c, contexts.c, cells.c, secrets.c, checkpoints.c one table each;
 * sso.c sso_identities and sso_links; slots.c exec_slots (cluster budgets);
 * tenants.c users, api_keys and sessions. */
#pragma once

#include <stdarg.h>

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "store/backend.h"

/* The slots of the kept statements (hot.c). */
enum sq_hot {
        SQ_HOT_BEGIN,
        SQ_HOT_COMMIT,
        SQ_HOT_CELL_MAX_SEQ,
        SQ_HOT_CELL_INSERT,
        SQ_HOT_CONTEXT_UPDATE,
        SQ_HOT_N
};

struct sq_store {
        struct store base;   /* first: the core's part */
        sqlite3 *db;
        char *wal;           /* "<file>-wal" (store_sync), NULL in memory */
        sqlite3_stmt *hot[SQ_HOT_N];
};

static inline sqlite3 *sq_db(struct store *s)
{
        return ((struct sq_store *)s)->db;
}

/* ---- stmt.c ----------------------------------------------------------- */

/* rc is an extended result code (enabled at open). */
int sq_errno(int rc);
/* Fills buf with "what: <sqlite message>" and returns r. Must be called
 * before anything else runs on db, since a later ROLLBACK resets the
 * message. */
int sq_err(sqlite3 *db, int r, char *buf, size_t len, const char *what);
/* The same into err (ERR_INTERNAL, errno -r): the open path. */
int sq_fail(sqlite3 *db, int r, struct err *err, const char *what);

void sq_finalizep(sqlite3_stmt **st);
#define _cleanup_stmt_ _cleanup_(sq_finalizep)

/* A transaction is represented by its connection; the cleanup rolls back
 * unless sq_tx_commit() cleared it. */
void sq_rollbackp(sqlite3 **tx);
#define _cleanup_tx_ _cleanup_(sq_rollbackp)
int sq_tx_begin(sqlite3 *db, sqlite3 **ret_tx);
int sq_tx_commit(sqlite3 **tx);

int sq_exec(sqlite3 *db, const char *sql, struct err *err);
int sq_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret);
int sq_bind_text(sqlite3_stmt *st, int idx, const char *v);
int sq_bind_u64(sqlite3_stmt *st, int idx, uint64_t v);   /* -ERANGE above INT64_MAX */
int sq_bind_bool(sqlite3_stmt *st, int idx, bool v);
int sq_step(sqlite3_stmt *st);           /* 1 row, 0 done, -errno */
int sq_step_done(sqlite3_stmt *st);      /* a statement that returns no rows */
/* Binds the arguments after types (below) from parameter idx on. */
int sq_bind_va(sqlite3_stmt *st, int idx, const char *types, va_list ap);

/* The helpers below prepare sql and bind the arguments that follow types
 * to its parameters 1, 2, ...: types has one letter per argument, 't' for
 * a const char *, 'u' for a uint64_t (exactly: cast literals), 'b' for a
 * bool. */
int sq_prepare_bound(sqlite3 *db, const char *sql, sqlite3_stmt **ret, const char *types, ...);
int sq_prepare_bound_va(sqlite3 *db, const char *sql, sqlite3_stmt **ret, const char *types, va_list ap);
/* Runs a statement that returns no rows (INSERT, a DELETE of many). */
int sq_run(sqlite3 *db, const char *sql, const char *types, ...);
/* UPDATE/DELETE by key: -ENOENT when no row changed. */
int sq_run_changed(sqlite3 *db, const char *sql, const char *types, ...);
/* Steps to the first row and hands the statement over; -ENOENT: no row. */
int sq_query_row(sqlite3 *db, const char *sql, sqlite3_stmt **ret, const char *types, ...);
/* Fills one item of a store_rows from the current row; may leave it half
 * filled on failure (out->done frees it). */
typedef int (*sq_decode_fn)(sqlite3_stmt *st, void *item);
/* The backend's one collect loop: pushes an item per row into out. */
int sq_list(sqlite3 *db, const char *sql, struct store_rows *out, sq_decode_fn decode, const char *types, ...);
/* One page of an org's rows: *ret_total from count_sql (one "?" = org_id),
 * the rows from list_sql ("?" org_id, then LIMIT ? OFFSET ?). */
int sq_org_page(sqlite3 *db, const char *count_sql, const char *list_sql, sq_decode_fn decode, const char *org_id,
                uint64_t limit, uint64_t offset, struct store_rows *out, uint64_t *ret_total);
/* A one-row, one-integer query with an optional text parameter. */
int sq_query_u64(sqlite3 *db, const char *sql, const char *arg, uint64_t *ret);

uint64_t sq_column_u64(sqlite3_stmt *st, int col);
/* Copies a text column into a char[size] field; never truncates
 * (-ENAMETOOLONG). NULL reads as "". */
int sq_column_copy(sqlite3_stmt *st, int col, char *dst, size_t size);
/* A malloc'd copy of a text column, or of dflt when NULL. */
int sq_column_dup(sqlite3_stmt *st, int col, const char *dflt, char **ret);

static inline const char *sq_env_or_default(const char *env_json)
{
        return env_json ? env_json : "{}";
}

/* ---- hot.c: statements kept prepared (the per-cell journal write) ---- */

/* Each runs the slot's statement, prepared from sql on its first use and
 * reset after every use; as sq_run, sq_run_changed, sq_query_u64 (the
 * last with one text argument). */
int sq_hot_run(struct store *s, enum sq_hot slot, const char *sql, const char *types, ...);
int sq_hot_run_changed(struct store *s, enum sq_hot slot, const char *sql, const char *types, ...);
int sq_hot_query_u64(struct store *s, enum sq_hot slot, const char *sql, const char *arg, uint64_t *ret);
int sq_hot_tx_begin(struct store *s, sqlite3 **ret_tx);
int sq_hot_tx_commit(struct store *s, sqlite3 **tx);
void sq_hot_resetp(sqlite3_stmt **st);
void sq_hot_done(struct sq_store *q);

/* ---- migrate.c -------------------------------------------------------- */

int sq_migrate(sqlite3 *db, struct err *err);
int sq_schema_version(struct store *s);
/* The number of migrations this build knows (its schema version). */
int sq_schema_latest(void);

/* ---- the ops, one file per table --------------------------------------- */

int sq_org_ensure(struct store *s, const char *id, const char *name);
int sq_org_get(struct store *s, const char *id, struct org_row *ret);

int sq_account_create(struct store *s, const struct org_row *org, const struct user_row *user);
int sq_user_get(struct store *s, const char *id, struct user_row *ret);
int sq_user_get_by_email(struct store *s, const char *email, struct user_row *ret);
int sq_apikey_create(struct store *s, const struct apikey_row *row);
int sq_apikey_get_by_hash(struct store *s, const char *hash, struct apikey_row *ret);
int sq_apikey_get(struct store *s, const char *org_id, const char *id, struct apikey_row *ret);
int sq_apikey_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                   uint64_t *ret_total);
int sq_apikey_delete(struct store *s, const char *org_id, const char *id);
int sq_apikey_rehash(struct store *s, const char *org_id, const char *id, const char *hash, const char *prefix);
int sq_session_create(struct store *s, const struct session_row *row);
int sq_session_get(struct store *s, const char *id, struct session_row *ret);
int sq_session_revoke(struct store *s, const char *id);
int sq_idem_get(struct store *s, const char *org_id, const char *key, const char *route, uint64_t not_before,
                struct idem_row *ret);
int sq_idem_put(struct store *s, const struct idem_row *row, uint64_t not_before);

int sq_gh_install_put(struct store *s, const struct gh_install_row *row);
int sq_gh_install_get(struct store *s, const char *id, struct gh_install_row *ret);
int sq_gh_install_delete(struct store *s, const char *id);
int sq_gh_install_link(struct store *s, const char *id, const char *from_org, const char *to_org, uint64_t at);
int sq_gh_install_list(struct store *s, const char *org_id, bool pending, struct store_rows *out);
int sq_gh_settings_get(struct store *s, const char *org_id, char **ret_json, uint64_t *ret_updated_at);
int sq_gh_settings_put(struct store *s, const char *org_id, const char *json, uint64_t updated_at);
int sq_gh_event_insert(struct store *s, const struct gh_event_row *row, uint64_t keep);
int sq_gh_event_update(struct store *s, const struct gh_event_row *row);
int sq_gh_event_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                     uint64_t *ret_total);
int sq_gh_event_stats(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret);
int sq_gh_event_sandboxes(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                          struct store_rows *out);
int sq_queue_insert(struct store *s, const struct queue_row *row);
int sq_queue_get(struct store *s, const char *org_id, const char *id, struct queue_row *ret);
int sq_queue_update(struct store *s, const struct queue_row *row);
int sq_queue_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                  uint64_t *ret_total);
int sq_queue_heads(struct store *s, struct store_rows *out);
int sq_queue_position(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead, uint64_t *ret_depth);
int sq_queue_stats(struct store *s, const char *org_id, uint64_t since, struct queue_stats *ret);
int sq_queue_settle(struct store *s, bool at_start, uint32_t failed_status, const char *failed_body, uint64_t now,
                    uint64_t expire_before, uint64_t forget_before);
/* egress.c */
int sq_egress_policy_create(struct store *s, const struct egress_policy_row *row);
int sq_egress_policy_update(struct store *s, const struct egress_policy_row *row);
int sq_egress_policy_delete(struct store *s, const char *org_id, const char *id);
int sq_egress_policy_list(struct store *s, const char *org_id, struct store_rows *out);
int sq_egress_audit_insert(struct store *s, const struct egress_audit_row *row);
int sq_egress_audit_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                         struct store_rows *out, uint64_t *ret_total);
int sq_egress_audit_prune(struct store *s, uint64_t before);
int sq_secret_create(struct store *s, const struct secret_row *row);
int sq_secret_update(struct store *s, const struct secret_row *row);
int sq_secret_delete(struct store *s, const char *org_id, const char *name);
int sq_secret_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                   uint64_t *ret_total);
int sq_checkpoint_create(struct store *s, const struct checkpoint_row *row);
int sq_checkpoint_get(struct store *s, const char *org_id, const char *id, struct checkpoint_row *ret);
int sq_checkpoint_delete(struct store *s, const char *org_id, const char *id);
int sq_checkpoint_list(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit, uint64_t offset,
                       struct store_rows *out, uint64_t *ret_total);
int sq_checkpoint_usage(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes);
int sq_snapshot_profile_put(struct store *s, const struct snapshot_profile_row *row, struct snapshot_profile_row *ret);
int sq_snapshot_profile_get(struct store *s, const char *key, struct snapshot_profile_row *ret);
int sq_snapshot_profile_delete(struct store *s, const char *key);
int sq_snapshot_profile_list(struct store *s, struct store_rows *out);

int sq_event_append(struct store *s, const struct event_row *row, uint64_t keep, uint64_t not_before,
                    uint64_t *ret_id);
int sq_event_last(struct store *s, uint64_t *ret);
int sq_event_list(struct store *s, const char *org_id, uint64_t after, uint64_t limit, struct store_rows *out);
int sq_audit_append(struct store *s, const struct audit_row *row, uint64_t not_before);
int sq_audit_list(struct store *s, const char *org_id, const struct audit_filter *f, uint64_t limit, uint64_t offset,
                  struct store_rows *out, uint64_t *ret_total);
int sq_audit_summary(struct store *s, const char *org_id, const char *sandbox_id, struct store_rows *out);

int sq_artifact_put(struct store *s, const struct artifact_row *row);
int sq_artifact_get(struct store *s, const char *org_id, const char *id, struct artifact_row *ret);
int sq_artifact_delete(struct store *s, const char *org_id, const char *id);
int sq_artifact_list(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                     struct store_rows *out, uint64_t *ret_total);
int sq_artifact_list_expired(struct store *s, uint64_t now, struct store_rows *out);
int sq_artifact_bytes(struct store *s, const char *org_id, uint64_t *ret);

int sq_sso_identity_get(struct store *s, const char *issuer, const char *subject, struct sso_identity_row *ret);
int sq_sso_identity_create(struct store *s, const struct sso_identity_row *row);
int sq_sso_user_create(struct store *s, const struct org_row *new_org, const struct user_row *user,
                       const struct sso_identity_row *ident);
int sq_sso_link_get(struct store *s, const char *org_id, struct sso_link_row *ret);
int sq_sso_link_find(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret);
int sq_sso_link_put(struct store *s, const struct sso_link_row *row);
int sq_sso_link_delete(struct store *s, const char *org_id);
/* tenants.c: one org row, one user row (inside the caller's transaction). */
int sq_org_insert(sqlite3 *db, const struct org_row *org);
int sq_user_insert(sqlite3 *db, const struct user_row *user);
int sq_webhook_create(struct store *s, const struct webhook_row *row);
int sq_webhook_get(struct store *s, const char *org_id, const char *id, struct webhook_row *ret);
int sq_webhook_update(struct store *s, const struct webhook_row *row);
int sq_webhook_set_active(struct store *s, const char *org_id, const char *id, bool active);
int sq_webhook_delete(struct store *s, const char *org_id, const char *id);
int sq_webhook_list(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                    uint64_t *ret_total);
int sq_webhook_health(struct store *s, const char *id, uint64_t failing_since, bool disable, const char *reason);
int sq_webhook_enqueue(struct store *s, const char *webhook_id, uint64_t cursor, const struct webhook_delivery_row *row,
                       uint64_t keep);
int sq_webhook_delivery_get(struct store *s, const char *org_id, const char *webhook_id, const char *id,
                            struct webhook_delivery_row *ret);
int sq_webhook_delivery_update(struct store *s, const struct webhook_delivery_row *row);
int sq_webhook_delivery_list(struct store *s, const char *org_id, const char *webhook_id, uint64_t limit,
                             uint64_t offset, struct store_rows *out, uint64_t *ret_total);
int sq_webhook_delivery_heads(struct store *s, struct store_rows *out);

int sq_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret);
int sq_sandbox_put(struct store *s, const struct sandbox_row *row);
int sq_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at);
int sq_sandbox_set_env(struct store *s, const char *id, const char *env_json);
int sq_sandbox_delete(struct store *s, const char *id);
int sq_sandbox_list_expired(struct store *s, uint64_t now, struct store_rows *out);
int sq_sandbox_count(struct store *s, uint64_t *ret);
int sq_sandbox_ids_in_org(struct store *s, const char *org_id, struct store_rows *out);
int sq_sandbox_ids_in_class(struct store *s, const char *org_id, const char *warm_class, struct store_rows *out);
int sq_sandbox_list_org(struct store *s, const char *org_id, uint64_t limit, uint64_t offset, struct store_rows *out,
                        uint64_t *ret_total);
int sq_sandbox_disk_reserved(struct store *s, uint64_t default_bytes, uint64_t *ret);
int sq_sandbox_free_host_id(struct store *s, uint32_t first, uint32_t n, uint32_t *ret);
/* cluster.c: the cluster_nodes table and the sandboxes' ownership lease. */
int sq_node_heartbeat(struct store *s, const struct node_row *n);
/* slots.c */
int sq_slot_take(struct store *s, const struct slot_row *row, uint64_t limit);
int sq_slot_give(struct store *s, const char *id);
int sq_slot_free_node(struct store *s, const char *node_id, uint64_t *ret_n);
int sq_slot_count(struct store *s, const char *org_id, const char *kind, uint64_t *ret);
int sq_queue_start(struct store *s, const char *id, const char *node_id, uint64_t started_at);
int sq_queue_fail_node(struct store *s, const char *node_id, uint32_t failed_status, const char *failed_body,
                        uint64_t now);
int sq_node_list(struct store *s, struct store_rows *out);
int sq_sandbox_claim(struct store *s, const char *id, const char *node_id, uint64_t expected_epoch);
int sq_sandbox_owner(struct store *s, const char *id, struct store_owner *ret);
int sq_sandbox_list_on_node(struct store *s, const char *node_id, struct store_rows *out);
int sq_sandbox_usage_on_node(struct store *s, const char *node_id, uint64_t default_bytes, uint64_t *ret_count,
                            uint64_t *ret_reserved);

int sq_context_insert(struct store *s, const struct context_row *row);
int sq_context_update(struct store *s, const struct context_row *row);
int sq_context_get(struct store *s, const char *id, struct context_row *ret);
int sq_context_delete(struct store *s, const char *id);
int sq_context_list(struct store *s, const char *sandbox_id, struct store_rows *out);
int sq_context_count(struct store *s, const char *sandbox_id, uint64_t *ret);
/* 0 when the context exists, -ENOENT when not (cells.c checks it). */
int sq_context_exists(sqlite3 *db, const char *id);

int sq_cell_append(struct store *s, const char *context_id, const struct cell_row *cell);
int sq_cell_append_row(struct store *s, const struct cell_row *cell, const struct context_row *row);
int sq_cell_list(struct store *s, const char *context_id, struct store_rows *out);
int sq_cells_delete(struct store *s, const char *context_id);
int sq_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes);
