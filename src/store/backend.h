/* The store's backend interface (crun's cgroup-manager idea): store.c keeps
 * what every backend shares (URL parsing, argument checks, locking for
 * single-connection backends, snapshot-then-callback iteration) and calls a
 * backend through struct store_ops. Only src/store/ includes this header.
 *
 * A backend embeds struct store as the first member of its own handle,
 * allocates it in ->open and frees it in ->close. Ops receive arguments
 * already validated by store.c: ids are non-empty and shorter than
 * STORE_ID_MAX, the fixed-size text fields fit their row fields, and
 * row/out pointers are non-NULL. Ops return 0 or -errno with the meanings
 * documented in store.h.
 *
 * Adding an op: its public function in store.h and store.c (argument
 * checks, STORE_CALL), its member here, and its implementation in EVERY
 * backend: src/store/sqlite/<family>.c + sqlite.h + store_sqlite_ops, and
 * src/store/pg/<family>.c + pg.h + store_pg_ops (a missing member is a
 * NULL call: `make unit-pg` catches it). A new table is a migration in
 * both backends under the same number. Tests go in the backend-agnostic
 * suites (tests/unit/store/, store_fixture.h), which `make unit` runs on
 * SQLite and `make unit-pg` on PostgreSQL. docs/store.md has the recipe.
 *
 * Adding a backend: implement every op in src/store/<name>/ (SQL stays
 * there), export a const struct store_ops below, add its scheme row to
 * backends[] in store.c, and make STORE_URL=<url>
 * build/unit/store/test_store_contract pass. */
#pragma once

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* A growable array of rows a backend fills while the store core holds its
 * lock; the core runs the caller's callbacks after releasing it. Items are
 * zeroed when pushed and released with done (which must accept a half-filled
 * item) by store_rows_done(). */
struct store_rows {
        void *items;
        size_t n, cap, size;
        void (*done)(void *item);
};
/* Appends a zeroed item and returns it, or NULL on -ENOMEM. */
void *store_rows_push(struct store_rows *l);

/* Item of a sandbox_list_expired or sandbox_ids_in_org result. */
struct store_id {
        char id[STORE_ID_MAX];
};

/* Item of a sandbox_owner or sandbox_list_on_node result. */
struct store_owner {
        char id[STORE_ID_MAX];
        char node_id[STORE_ID_MAX];
        uint64_t lease_epoch;
};

/* Item of a cell_list result: one allocation (buf) holds the three strings
 * row points into. */
struct store_cell {
        struct cell_row row;
        char *buf;
};

struct store_ops {
        const char *name;   /* "sqlite": used in messages */
        /* true: the core holds s->lock around every op (one connection, as
         * SQLite here); false: the backend is thread-safe on its own (e.g.
         * a connection pool) and ops may run concurrently. */
        bool serialize;

        /* url is the whole URL as given ("postgres://u@h/db"); rest is what
         * follows "scheme:" (for SQLite, the file path). On failure err is
         * filled (ERR_INTERNAL) and *ret is untouched. */
        int (*open)(const char *url, const char *rest, struct store **ret, struct err *err);
        void (*close)(struct store *s);   /* frees the backend's handle */
        int (*integrity_check)(struct store *s, char *msg, size_t len);
        int (*schema_version)(struct store *s);
        /* Called under the core's guard around a journal write (cell append,
         * context update) when the store's journal is lazy: on, the commit
         * reaches the OS but does not wait for the disk; off, as before. */
        int (*lazy_commit)(struct store *s, bool on);
        /* Makes every commit so far durable. Called WITHOUT the guard (a
         * background flusher must not stall the writers). */
        int (*sync)(struct store *s);

        int (*org_ensure)(struct store *s, const char *id, const char *name);
        int (*org_get)(struct store *s, const char *id, struct org_row *ret);

        int (*account_create)(struct store *s, const struct org_row *org, const struct user_row *user);
        int (*user_get)(struct store *s, const char *id, struct user_row *ret);
        int (*user_get_by_email)(struct store *s, const char *email, struct user_row *ret);
        int (*apikey_create)(struct store *s, const struct apikey_row *row);
        int (*apikey_get_by_hash)(struct store *s, const char *hash, struct apikey_row *ret);
        int (*apikey_get)(struct store *s, const char *org_id, const char *id, struct apikey_row *ret);
        /* Pushes struct apikey_row items of one page; ret_total: the org's count. */
        int (*apikey_list)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                           struct store_rows *out, uint64_t *ret_total);
        int (*apikey_delete)(struct store *s, const char *org_id, const char *id);
        int (*apikey_rehash)(struct store *s, const char *org_id, const char *id, const char *hash,
                             const char *prefix);
        int (*session_create)(struct store *s, const struct session_row *row);
        int (*session_get)(struct store *s, const char *id, struct session_row *ret);
        int (*session_revoke)(struct store *s, const char *id);
        int (*idem_get)(struct store *s, const char *org_id, const char *key, const char *route,
                        uint64_t not_before, struct idem_row *ret);
        int (*idem_put)(struct store *s, const struct idem_row *row, uint64_t not_before);

        int (*secret_create)(struct store *s, const struct secret_row *row);
        int (*secret_update)(struct store *s, const struct secret_row *row);
        int (*secret_delete)(struct store *s, const char *org_id, const char *name);
        /* Pushes struct secret_row items of one page; ret_total: the org's count. */
        int (*secret_list)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                           struct store_rows *out, uint64_t *ret_total);
        int (*checkpoint_create)(struct store *s, const struct checkpoint_row *row);
        int (*checkpoint_get)(struct store *s, const char *org_id, const char *id, struct checkpoint_row *ret);
        int (*checkpoint_delete)(struct store *s, const char *org_id, const char *id);
        /* Pushes struct checkpoint_row items; sandbox_id NULL: all the org's. */
        int (*checkpoint_list)(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit,
                               uint64_t offset, struct store_rows *out, uint64_t *ret_total);
        int (*checkpoint_usage)(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes);
        int (*snapshot_profile_put)(struct store *s, const struct snapshot_profile_row *row,
                                    struct snapshot_profile_row *ret);
        int (*snapshot_profile_get)(struct store *s, const char *key, struct snapshot_profile_row *ret);
        int (*snapshot_profile_delete)(struct store *s, const char *key);
        /* Pushes struct snapshot_profile_row items, newest first. */
        int (*snapshot_profile_list)(struct store *s, struct store_rows *out);

        int (*gh_install_put)(struct store *s, const struct gh_install_row *row);
        int (*gh_install_get)(struct store *s, const char *id, struct gh_install_row *ret);
        int (*gh_install_delete)(struct store *s, const char *id);
        int (*gh_install_link)(struct store *s, const char *id, const char *from_org, const char *to_org,
                               uint64_t at);
        /* Pushes struct gh_install_row items. */
        int (*gh_install_list)(struct store *s, const char *org_id, bool pending, struct store_rows *out);
        int (*gh_settings_get)(struct store *s, const char *org_id, char **ret_json, uint64_t *ret_updated_at);
        int (*gh_settings_put)(struct store *s, const char *org_id, const char *json, uint64_t updated_at);
        int (*gh_event_insert)(struct store *s, const struct gh_event_row *row, uint64_t keep);
        int (*gh_event_update)(struct store *s, const struct gh_event_row *row);
        /* Pushes struct gh_event_row items. */
        int (*gh_event_list)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                             struct store_rows *out, uint64_t *ret_total);
        int (*gh_event_stats)(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret);
        int (*gh_event_sandboxes)(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                                  struct store_rows *out);

        int (*egress_policy_create)(struct store *s, const struct egress_policy_row *row);
        int (*egress_policy_update)(struct store *s, const struct egress_policy_row *row);
        int (*egress_policy_delete)(struct store *s, const char *org_id, const char *id);
        /* Pushes struct egress_policy_row items; org_id NULL: every org. */
        int (*egress_policy_list)(struct store *s, const char *org_id, struct store_rows *out);
        int (*egress_audit_insert)(struct store *s, const struct egress_audit_row *row);
        /* Pushes struct egress_audit_row items of one page, newest first. */
        int (*egress_audit_list)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                                 struct store_rows *out, uint64_t *ret_total);
        int (*egress_audit_prune)(struct store *s, uint64_t before);

        int (*queue_insert)(struct store *s, const struct queue_row *row);
        int (*queue_get)(struct store *s, const char *org_id, const char *id, struct queue_row *ret);
        int (*queue_update)(struct store *s, const struct queue_row *row);
        int (*queue_start)(struct store *s, const char *id, const char *node_id, uint64_t started_at);
        int (*queue_fail_node)(struct store *s, const char *node_id, uint32_t failed_status, const char *failed_body,
                               uint64_t now);
        int (*queue_list)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                          struct store_rows *out, uint64_t *ret_total);
        /* Pushes struct queue_row items: each org's oldest queued request. */
        int (*queue_heads)(struct store *s, struct store_rows *out);
        int (*queue_position)(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead,
                              uint64_t *ret_depth);
        int (*queue_stats)(struct store *s, const char *org_id, uint64_t since, struct queue_stats *ret);
        int (*queue_settle)(struct store *s, bool at_start, uint32_t failed_status, const char *failed_body,
                            uint64_t now, uint64_t expire_before, uint64_t forget_before);

        /* Append, then trim, in one transaction (store_event_append). */
        int (*event_append)(struct store *s, const struct event_row *row, uint64_t keep, uint64_t not_before,
                            uint64_t *ret_id);
        int (*event_last)(struct store *s, uint64_t *ret);
        /* Pushes struct event_row items by id. */
        int (*event_list)(struct store *s, const char *org_id, uint64_t after, uint64_t limit,
                          struct store_rows *out);
        int (*audit_append)(struct store *s, const struct audit_row *row, uint64_t not_before);
        /* Pushes struct audit_row items of one page; f's strings are never
         * NULL here ("" = any) and f->to is never 0. */
        int (*audit_list)(struct store *s, const char *org_id, const struct audit_filter *f, uint64_t limit,
                          uint64_t offset, struct store_rows *out, uint64_t *ret_total);
        /* Pushes struct audit_count items by action. */
        int (*audit_summary)(struct store *s, const char *org_id, const char *sandbox_id, struct store_rows *out);
        int (*artifact_put)(struct store *s, const struct artifact_row *row);
        int (*artifact_get)(struct store *s, const char *org_id, const char *id, struct artifact_row *ret);
        int (*artifact_delete)(struct store *s, const char *org_id, const char *id);
        /* Pushes struct artifact_row items of one page; ret_total: how many match. */
        int (*artifact_list)(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                             struct store_rows *out, uint64_t *ret_total);
        int (*artifact_list_expired)(struct store *s, uint64_t now, struct store_rows *out);
        int (*artifact_bytes)(struct store *s, const char *org_id, uint64_t *ret);
        int (*sso_identity_get)(struct store *s, const char *issuer, const char *subject,
                                struct sso_identity_row *ret);
        int (*sso_identity_create)(struct store *s, const struct sso_identity_row *row);
        int (*sso_user_create)(struct store *s, const struct org_row *new_org, const struct user_row *user,
                               const struct sso_identity_row *ident);
        int (*sso_link_get)(struct store *s, const char *org_id, struct sso_link_row *ret);
        int (*sso_link_find)(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret);
        int (*sso_link_put)(struct store *s, const struct sso_link_row *row);
        int (*sso_link_delete)(struct store *s, const char *org_id);

        int (*webhook_create)(struct store *s, const struct webhook_row *row);
        int (*webhook_get)(struct store *s, const char *org_id, const char *id, struct webhook_row *ret);
        int (*webhook_update)(struct store *s, const struct webhook_row *row);
        int (*webhook_set_active)(struct store *s, const char *org_id, const char *id, bool active);
        int (*webhook_delete)(struct store *s, const char *org_id, const char *id);   /* cascades */
        /* Pushes struct webhook_row items; org_id NULL: every org's. */
        int (*webhook_list)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                            struct store_rows *out, uint64_t *ret_total);
        int (*webhook_health)(struct store *s, const char *id, uint64_t failing_since, bool disable,
                              const char *reason);
        int (*webhook_enqueue)(struct store *s, const char *webhook_id, uint64_t cursor,
                               const struct webhook_delivery_row *row, uint64_t keep);
        int (*webhook_delivery_get)(struct store *s, const char *org_id, const char *webhook_id, const char *id,
                                    struct webhook_delivery_row *ret);
        int (*webhook_delivery_update)(struct store *s, const struct webhook_delivery_row *row);
        /* Pushes struct webhook_delivery_row items, newest first. */
        int (*webhook_delivery_list)(struct store *s, const char *org_id, const char *webhook_id, uint64_t limit,
                                     uint64_t offset, struct store_rows *out, uint64_t *ret_total);
        int (*webhook_delivery_heads)(struct store *s, struct store_rows *out);

        int (*sandbox_get)(struct store *s, const char *id, struct sandbox_row *ret);
        int (*sandbox_put)(struct store *s, const struct sandbox_row *row);
        int (*sandbox_touch)(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at);
        int (*sandbox_set_env)(struct store *s, const char *id, const char *env_json);
        int (*sandbox_delete)(struct store *s, const char *id);   /* cascades */
        /* Pushes struct store_id items ordered by expires_at, then id. */
        int (*sandbox_list_expired)(struct store *s, uint64_t now, struct store_rows *out);
        int (*sandbox_count)(struct store *s, uint64_t *ret);
        /* Pushes struct store_id items of one org, ordered by id. */
        int (*sandbox_ids_in_org)(struct store *s, const char *org_id, struct store_rows *out);
        int (*sandbox_ids_in_class)(struct store *s, const char *org_id, const char *warm_class,
                                    struct store_rows *out);
        /* Pushes struct sandbox_row items of one page; ret_total: the org's count. */
        int (*sandbox_list_org)(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                                struct store_rows *out, uint64_t *ret_total);
        int (*sandbox_disk_reserved)(struct store *s, uint64_t default_bytes, uint64_t *ret);
        int (*sandbox_free_host_id)(struct store *s, uint32_t first, uint32_t n, uint32_t *ret);
        int (*sandbox_claim)(struct store *s, const char *id, const char *node_id, uint64_t expected_epoch);
        int (*sandbox_owner)(struct store *s, const char *id, struct store_owner *ret);
        /* Pushes struct store_owner items. */
        int (*sandbox_list_on_node)(struct store *s, const char *node_id, struct store_rows *out);
        int (*sandbox_usage_on_node)(struct store *s, const char *node_id, uint64_t default_bytes,
                                     uint64_t *ret_count, uint64_t *ret_reserved);
        int (*node_heartbeat)(struct store *s, const struct node_row *row);
        int (*slot_take)(struct store *s, const struct slot_row *row, uint64_t limit);
        int (*slot_give)(struct store *s, const char *id);
        int (*slot_free_node)(struct store *s, const char *node_id, uint64_t *ret_n);
        int (*slot_count)(struct store *s, const char *org_id, const char *kind, uint64_t *ret);
        /* Pushes struct node_row items. */
        int (*node_list)(struct store *s, struct store_rows *out);

        int (*context_insert)(struct store *s, const struct context_row *row);
        int (*context_update)(struct store *s, const struct context_row *row);
        int (*context_get)(struct store *s, const char *id, struct context_row *ret);
        int (*context_delete)(struct store *s, const char *id);   /* cascades */
        /* Pushes struct context_row items ordered by created_at, then id. */
        int (*context_list)(struct store *s, const char *sandbox_id, struct store_rows *out);
        int (*context_count)(struct store *s, const char *sandbox_id, uint64_t *ret);

        /* Must refuse (-EINVAL) any seq but MAX(seq) + 1, atomically. */
        int (*cell_append)(struct store *s, const char *context_id, const struct cell_row *cell);
        /* cell_append and context_update (of row->id) in one transaction:
         * both or neither. */
        int (*cell_append_row)(struct store *s, const struct cell_row *cell, const struct context_row *row);
        /* Pushes struct store_cell items ordered by seq. */
        int (*cell_list)(struct store *s, const char *context_id, struct store_rows *out);
        int (*cells_delete)(struct store *s, const char *context_id);
        int (*cell_stats)(struct store *s, const char *context_id, uint64_t *ret_count,
                          uint64_t *ret_bytes);
};

/* The part of every backend handle the core owns. */
struct store {
        const struct store_ops *ops;
        pthread_mutex_t lock;   /* used when ops->serialize */
        bool journal_lazy;      /* store_set_journal_lazy */
        bool lazy_left;         /* serialized: still committing lazily after a journal write (journal_mode.c) */
        void (*lazy_written)(void *userdata);
        void *lazy_userdata;
};

/* Backends, listed by scheme in store.c. */
extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_pg_ops;   /* store/pg/db.c */

/* Evaluates call (an int) with ap_ holding the variadic arguments after
 * last: the statement helpers of every backend bind "types, ..." so. */
#define STORE_WITH_ARGS(last, call)                                          \
        ({                                                                   \
                va_list ap_;                                                 \
                va_start(ap_, last);                                         \
                int r_ = (call);                                             \
                va_end(ap_);                                                 \
                r_;                                                          \
        })

/* snprintf into an optional message buffer (NULL or 0 length: no-op). */
void store_set_msg(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

