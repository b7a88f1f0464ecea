/* Metadata store: orgs, sandboxes, code contexts and the context cell
 * journal. The public functions below check their arguments and dispatch
 * to a backend through an ops table (store/backend.h): an embedded SQLite
 * database (the default; WAL, synchronous=FULL) or a PostgreSQL server
 * (libpq, for nodes that share their state), each with its own schema
 * migrations; docs/store.md.
 * Every call is atomic and may be made from any thread. No HTTP, no JSON
 * parsing: JSON columns are stored as opaque text. Nothing outside
 * src/store/ knows which backend is in use, nor any SQL. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct store;

/* Opens (creating if needed) the store named by url and applies schema
 * migrations. url is "sqlite:PATH" or a plain PATH (SQLite; "sqlite:///abs"
 * also works); a PATH whose first ':' comes before any '/' must be written
 * "sqlite:PATH" or "./PATH". Other schemes ("postgres://...") select other
 * backends ("postgres://" and "postgresql://": PostgreSQL, the URI as
 * libpq takes it); an unknown scheme fails with -EPROTONOSUPPORT. Returns 0 or
 * -errno (-EIO for database errors, -EPROTO for a schema newer than this
 * build); err gets ERR_INVALID for a bad url or an unknown scheme and
 * ERR_INTERNAL for a database that cannot be opened, with a message. */
int store_open(const char *url, struct store **ret, struct err *err);
void store_close(struct store *s);   /* NULL-safe */
/* The backend's name ("sqlite"), for logs. */
const char *store_backend_name(const struct store *s);
/* The backend's own consistency check; 0 when sound, -EIO otherwise (msg
 * gets the first problem, or "ok"). */
int store_integrity_check(struct store *s, char *msg, size_t len);
/* Highest applied schema migration (>= 1), or -errno. */
int store_schema_version(struct store *s);

#define STORE_ID_MAX 130

struct org_row {
        char id[STORE_ID_MAX];
        char name[256];
        uint64_t created_at;  /* epoch ms */
        char slug[STORE_ID_MAX]; /* unique when set; "" for orgs made by store_org_ensure */
        char plan[32];        /* "hobby" unless set */
};
/* Inserts the org if missing (name kept if present). */
int store_org_ensure(struct store *s, const char *id, const char *name);
int store_org_get(struct store *s, const char *id, struct org_row *ret);

/* ---- tenants (issue 12): users, API keys, login sessions ---- */

struct user_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char email[256];          /* unique across the store, as given (the caller folds case) */
        char first_name[128], last_name[128];
        char role[32];            /* "owner", … */
        char password_hash[256];  /* an encoded hash, opaque to the store */
        uint64_t created_at;
};
/* A new org and its first user, atomically: -EEXIST when the org id, the
 * slug or the email is taken (nothing is written then). */
int store_account_create(struct store *s, const struct org_row *org, const struct user_row *user);
int store_user_get(struct store *s, const char *id, struct user_row *ret);
/* -ENOENT when no user has that email. */
int store_user_get_by_email(struct store *s, const char *email, struct user_row *ret);

struct apikey_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char user_id[STORE_ID_MAX];   /* who made it; "" when none */
        char name[128];
        char prefix[32];              /* the first characters, for display */
        char hash[65];                /* hex SHA-256 of the key: the key itself is never stored */
        uint64_t created_at;
};
/* -EEXIST when the id or the hash exists. */
int store_apikey_create(struct store *s, const struct apikey_row *row);
/* -ENOENT when no key has that hash. */
int store_apikey_get_by_hash(struct store *s, const char *hash, struct apikey_row *ret);
/* The org's keys ordered by created_at then id, from offset, at most limit;
 * *ret_total gets how many the org has. fn gets a borrowed row. */
int store_apikey_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                      void (*fn)(const struct apikey_row *row, void *userdata), void *userdata,
                      uint64_t *ret_total);
int store_apikey_get(struct store *s, const char *org_id, const char *id, struct apikey_row *ret);
/* Both scoped by org: another org's key is -ENOENT, as a missing one. */
int store_apikey_delete(struct store *s, const char *org_id, const char *id);
int store_apikey_rehash(struct store *s, const char *org_id, const char *id, const char *hash, const char *prefix);

struct session_row {
        char id[STORE_ID_MAX];
        char user_id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        uint64_t created_at, expires_at;   /* epoch ms */
        bool revoked;
};
int store_session_create(struct store *s, const struct session_row *row);
int store_session_get(struct store *s, const char *id, struct session_row *ret);
/* Marks it revoked (0 when it already was); -ENOENT when absent. */
int store_session_revoke(struct store *s, const char *id);

/* A stored reply of an Idempotency-Key request. */
struct idem_row {
        char org_id[STORE_ID_MAX];
        char key[256];
        char route[512];
        char body_hash[65];
        int status;
        char *response;        /* owned (malloc) */
        uint64_t created_at;   /* epoch ms */
};
void idem_row_done(struct idem_row *r);   /* frees response */
/* -ENOENT when none, or when it was made before not_before (then it is
 * deleted). */
int store_idem_get(struct store *s, const char *org_id, const char *key, const char *route, uint64_t not_before,
                   struct idem_row *ret);
/* -EEXIST when (org, key, route) is stored already. Also drops every row
 * made before not_before. */
int store_idem_put(struct store *s, const struct idem_row *row, uint64_t not_before);

/* An org's secret (issue 12): the value only ever sealed (AES-256-GCM,
 * by the tenant layer); the store keeps opaque text. */
struct secret_row {
        char org_id[STORE_ID_MAX];
        char name[STORE_ID_MAX];
        char *sealed;             /* owned (malloc): the sealed value as text */
        char key_id[32];          /* which key sealed it (a fingerprint) */
        uint64_t created_at, updated_at;   /* epoch ms */
};
void secret_row_done(struct secret_row *r);   /* frees sealed */
/* -EEXIST when the org has a secret of that name. */
int store_secret_create(struct store *s, const struct secret_row *row);
/* Replaces sealed, key_id and updated_at; -ENOENT when absent. */
int store_secret_update(struct store *s, const struct secret_row *row);
/* Scoped by org: another org's secret is -ENOENT, as a missing one. */
int store_secret_delete(struct store *s, const char *org_id, const char *name);
/* The org's secrets ordered by name, from offset, at most limit (sealed
 * included); *ret_total gets how many the org has. fn gets a borrowed row. */
int store_secret_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                      void (*fn)(const struct secret_row *row, void *userdata), void *userdata,
                      uint64_t *ret_total);

/* An org's egress policy (issue 15, seed "Egress Policies"): the policy
 * itself (policyName, allowAll, allowedDomains, deniedDomains,
 * allowedPorts, logAllRequests) is opaque JSON text to the store. */
struct egress_policy_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char *doc;                /* owned (malloc): the policy's JSON object */
        uint64_t created_at, updated_at;   /* epoch ms */
};
void egress_policy_row_done(struct egress_policy_row *r);   /* frees doc */
/* -EEXIST on a taken id. */
int store_egress_policy_create(struct store *s, const struct egress_policy_row *row);
/* Replaces doc and updated_at; -ENOENT when absent (or another org's). */
int store_egress_policy_update(struct store *s, const struct egress_policy_row *row);
int store_egress_policy_delete(struct store *s, const char *org_id, const char *id);
/* The policies of org_id (NULL: of every org), oldest first, at most
 * STORE_EGRESS_POLICIES_MAX; fn gets a borrowed row. */
#define STORE_EGRESS_POLICIES_MAX 10000
int store_egress_policy_each(struct store *s, const char *org_id,
                             void (*fn)(const struct egress_policy_row *row, void *userdata), void *userdata);

/* One egress decision of a sandbox's proxy (a DNS query, an HTTP request,
 * a CONNECT tunnel), as the audit keeps it. */
struct egress_audit_row {
        uint64_t seq;             /* set by the store, increasing */
        char org_id[STORE_ID_MAX];
        char sandbox_id[STORE_ID_MAX];
        uint64_t at;              /* epoch ms */
        char host[256];
        uint32_t port;
        char protocol[16];        /* dns, http, connect */
        char decision[16];        /* allowed, denied */
        char mode[16];            /* monitor, enforce */
        bool violation;           /* against the policy (allowed only in monitor mode) */
        char reason[128];
        uint64_t bytes_out, bytes_in;
};
int store_egress_audit_insert(struct store *s, const struct egress_audit_row *row);
/* The org's records, newest first, one page; *ret_total: the org's count. */
int store_egress_audit_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                            void (*fn)(const struct egress_audit_row *row, void *userdata), void *userdata,
                            uint64_t *ret_total);
/* Drops the records made before `before` (epoch ms). */
int store_egress_audit_prune(struct store *s, uint64_t before);

/* A request of the controller API waiting for its org's concurrency budget
 * (issue 15, queue mode): what to run, as whom, and once run, its answer.
 * Queue order is insertion order, per org. */
struct queue_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char kind[16];              /* "sandbox" (a create) or "execute" */
        char route[512];            /* the request path */
        char sandbox_id[STORE_ID_MAX];  /* the route's :id, "" for a create */
        char *body;                 /* owned: the request body (JSON text) */
        char *caller;               /* owned: who asked (JSON text, the facade's) */
        char status[16];            /* queued, processing, completed, failed, expired */
        uint32_t response_status;   /* once run */
        char *response_body;        /* owned, once run; may be NULL */
        uint64_t created_at, started_at, finished_at;   /* epoch ms; 0 = not yet */
};
void queue_row_done(struct queue_row *r);   /* frees the owned texts */
int store_queue_insert(struct store *s, const struct queue_row *row);
/* Scoped by org: another org's request is -ENOENT. */
int store_queue_get(struct store *s, const char *org_id, const char *id, struct queue_row *ret);
/* Writes status, response_status, response_body, started_at, finished_at. */
int store_queue_update(struct store *s, const struct queue_row *row);
/* Moves queued request id to processing (started_at, run by node_id: ""
 * outside a cluster) only if it is still queued: of several runners (nodes
 * of a cluster) exactly one starts it. 0 = started, -EBUSY = not queued
 * any more, -ENOENT = no such request. */
int store_queue_start(struct store *s, const char *id, const char *node_id, uint64_t started_at);
/* The requests node_id was running (its processing ones) become failed
 * with failed_status/body at now: the node died, or restarted. */
int store_queue_fail_node(struct store *s, const char *node_id, uint32_t failed_status, const char *failed_body,
                          uint64_t now);
/* One page of the org's requests, newest first (fn gets a borrowed row);
 * *ret_total: how many it has. */
int store_queue_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                     void (*fn)(const struct queue_row *row, void *userdata), void *userdata, uint64_t *ret_total);
/* The oldest queued request of every org that has one (fn gets a borrowed row). */
int store_queue_heads(struct store *s, void (*fn)(const struct queue_row *row, void *userdata), void *userdata);
/* How many of the org's queued requests are ahead of id, and how many it
 * has queued in all. */
int store_queue_position(struct store *s, const char *org_id, const char *id, uint64_t *ret_ahead,
                         uint64_t *ret_depth);
struct queue_stats {
        uint64_t depth, processing;     /* now */
        uint64_t oldest_created_at;     /* of the queued ones; 0 when none */
        uint64_t completed, failed, expired;   /* finished since `since` */
        uint64_t started, avg_wait_ms, p95_wait_ms;  /* of those started since `since` */
};
int store_queue_stats(struct store *s, const char *org_id, uint64_t since, struct queue_stats *ret);
/* Housekeeping: requests still "processing" (a daemon that died while
 * running them; at start only) become failed with failed_status/body; queued
 * ones created before expire_before become expired; finished ones before
 * forget_before are dropped. */
int store_queue_settle(struct store *s, bool at_start, uint32_t failed_status, const char *failed_body, uint64_t now,
                       uint64_t expire_before, uint64_t forget_before);
/* A checkpoint (issue 15): a tar of a sandbox's workspace kept in the
 * data dir; the row holds what describes it. Checkpoints outlive their
 * sandbox (sandbox_id is a plain reference, no cascade). */
struct checkpoint_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char sandbox_id[STORE_ID_MAX];
        char *name;               /* owned (malloc) */
        char *description;        /* owned; "" when none */
        char checksum[72];        /* "sha256:" + hex of the tar file */
        uint64_t size_bytes, file_count, created_at;   /* created_at: epoch ms */
        char *meta_json;          /* owned: the filters, env, … ("{}" when none) */
};
void checkpoint_row_done(struct checkpoint_row *r);
/* -EEXIST when the id is taken. */
int store_checkpoint_create(struct store *s, const struct checkpoint_row *row);
/* Scoped by org: another org's checkpoint is -ENOENT, as a missing one. */
int store_checkpoint_get(struct store *s, const char *org_id, const char *id, struct checkpoint_row *ret);
int store_checkpoint_delete(struct store *s, const char *org_id, const char *id);
/* The org's checkpoints (sandbox_id NULL: all, else that sandbox's) newest
 * first, one page; *ret_total: how many match. fn gets a borrowed row. */
int store_checkpoint_each(struct store *s, const char *org_id, const char *sandbox_id, uint64_t limit,
                          uint64_t offset, void (*fn)(const struct checkpoint_row *row, void *userdata),
                          void *userdata, uint64_t *ret_total);
/* How many checkpoints the org keeps and their bytes together. */
int store_checkpoint_usage(struct store *s, const char *org_id, uint64_t *ret_count, uint64_t *ret_bytes);

/* An org's artifact (issue 15): a durable object kept outside sandboxes
 * (its bytes are the facade's, on disk), or a multipart upload that will
 * become one (state "uploading": size is the bytes of its parts so far,
 * expires_at the upload's deadline, ttl_s the artifact's ttl to come). */
struct artifact_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char sandbox_id[STORE_ID_MAX];  /* where it came from; "" for a direct upload */
        char state[16];             /* "ready" or "uploading" */
        char name[1024];
        char path[4096];            /* the source path in the sandbox; "" when none */
        char content_type[256];
        char checksum[72];          /* SHA-256, lowercase hex; "" while uploading */
        char *metadata;             /* owned: a JSON object as text */
        uint64_t size, created_at, expires_at, ttl_s;   /* expires_at 0: never */
};
void artifact_row_done(struct artifact_row *r);   /* frees metadata */
/* Inserts or replaces every column. */
int store_artifact_put(struct store *s, const struct artifact_row *row);
/* Scoped by org: another org's artifact is -ENOENT, as a missing one. */
int store_artifact_get(struct store *s, const char *org_id, const char *id, struct artifact_row *ret);
int store_artifact_delete(struct store *s, const char *org_id, const char *id);
/* Which of an org's rows a page shows ("" fields: any). Rows whose
 * 0 < expires_at <= now are never shown. */
struct artifact_filter {
        const char *org_id, *state, *sandbox_id, *name_prefix;
        uint64_t now;
};
/* One page by created_at then id, newest first (fn gets a borrowed row);
 * *ret_total: how many match. */
int store_artifact_each(struct store *s, const struct artifact_filter *f, uint64_t limit, uint64_t offset,
                        void (*fn)(const struct artifact_row *row, void *userdata), void *userdata,
                        uint64_t *ret_total);
/* Every row (any org, any state) with 0 < expires_at <= now. */
int store_artifact_each_expired(struct store *s, uint64_t now,
                                void (*fn)(const struct artifact_row *row, void *userdata), void *userdata);
/* The bytes an org's rows hold (artifacts and parts uploaded so far). */
int store_artifact_bytes(struct store *s, const char *org_id, uint64_t *ret);
/* A snapshot profile of the controller's internal snapshot API (issue 15):
 * a class of warm sandboxes with their own CPUs and memory. kernel_path
 * and rootfs_path are the seed's Firecracker inputs, stored, never used. */
#define STORE_PATH_MAX 1024
struct snapshot_profile_row {
        char key[STORE_ID_MAX];
        uint64_t vcpu_count, mem_size_mib;
        char kernel_path[STORE_PATH_MAX], rootfs_path[STORE_PATH_MAX];
        uint64_t created_at;      /* epoch ms */
        uint64_t version;         /* 1, then +1 each time the key is put again */
};
/* Inserts the profile (version 1), or replaces the one of that key
 * (version + 1; created_at, paths and sizes from row). *ret: the stored
 * row (may be NULL). */
int store_snapshot_profile_put(struct store *s, const struct snapshot_profile_row *row,
                               struct snapshot_profile_row *ret);
/* -ENOENT when absent. */
int store_snapshot_profile_get(struct store *s, const char *key, struct snapshot_profile_row *ret);
int store_snapshot_profile_delete(struct store *s, const char *key);
/* Every profile, newest first (created_at, then key, descending). fn gets
 * a borrowed row. */
int store_snapshot_profile_each(struct store *s, void (*fn)(const struct snapshot_profile_row *row, void *userdata),
                                void *userdata);
/* Single sign-on (issue 15): an OpenID Connect identity — the provider's
 * (issuer, subject) — belongs to one user; an org may be linked to one
 * provider organization id and/or one email domain (each unique across
 * orgs), which decides where a new SSO user lands. */
#define STORE_SSO_TEXT_MAX 512
struct sso_identity_row {
        char issuer[STORE_SSO_TEXT_MAX];
        char subject[STORE_SSO_TEXT_MAX];
        char user_id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        uint64_t created_at;
};
struct sso_link_row {
        char org_id[STORE_ID_MAX];
        char provider_org_id[STORE_SSO_TEXT_MAX];   /* "" = none */
        char domain[256];                           /* lower case; "" = none */
        uint64_t created_at, updated_at;
};
/* -ENOENT when no user has that identity. */
int store_sso_identity_get(struct store *s, const char *issuer, const char *subject, struct sso_identity_row *ret);
/* The identity of an existing user. -EEXIST when taken. */
int store_sso_identity_create(struct store *s, const struct sso_identity_row *row);
/* A new user and its identity, atomically; new_org (may be NULL) is
 * created first for a user who founds an org. -EEXIST when the email, the
 * identity, the org id or the slug is taken (nothing written then). */
int store_sso_user_create(struct store *s, const struct org_row *new_org, const struct user_row *user,
                          const struct sso_identity_row *ident);
/* The org's link; -ENOENT when none. */
int store_sso_link_get(struct store *s, const char *org_id, struct sso_link_row *ret);
/* The link holding that provider organization id (by_domain false) or
 * that email domain (true); -ENOENT when none. */
int store_sso_link_find(struct store *s, const char *value, bool by_domain, struct sso_link_row *ret);
/* Inserts or replaces the org's link; -EEXIST when another org holds the
 * provider organization id or the domain. */
int store_sso_link_put(struct store *s, const struct sso_link_row *row);
/* -ENOENT when the org has no link. */
int store_sso_link_delete(struct store *s, const char *org_id);

struct sandbox_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        uint64_t created_at;  /* epoch ms */
        uint64_t last_used;   /* epoch ms */
        uint64_t expires_at;  /* epoch ms; 0 = never */
        char *env_json;       /* owned (malloc); "{}" by default */
        uint32_t host_id;     /* host uid/gid of its jails; 0 = none given */
        /* Its own workspace quota and largest file; 0 = the service's
         * defaults (limits.workspace_bytes, …) of the run that reads it. */
        uint64_t workspace_bytes, workspace_inodes, file_bytes;
        /* Its parent cgroup's CPU quota (thousandths of a CPU) and memory
         * limit; 0 = the service's. */
        uint64_t cpu_millis, memory_bytes;
        bool expiry_fixed;    /* expires_at is absolute: activity does not renew it */
        /* A warm sandbox's class: "" the default pool's, else the name of
         * the class it was prepared for (a snapshot profile's key). */
        char warm_class[STORE_ID_MAX];
        /* Cluster mode (issue 16): the node that serves it ("" = none yet)
         * and how many times ownership moved. A put of a new row stores
         * both; on an existing row put leaves them alone: ownership moves
         * only through store_sandbox_claim, so a stale writer cannot
         * re-own a sandbox another node took over. */
        char node_id[STORE_ID_MAX];
        uint64_t lease_epoch;
};
void sandbox_row_done(struct sandbox_row *r);   /* frees env_json */
/* -ENOENT when absent. */
int store_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret);
/* Insert or replace every column. */
int store_sandbox_put(struct store *s, const struct sandbox_row *row);
int store_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at);
int store_sandbox_set_env(struct store *s, const char *id, const char *env_json);
/* Deletes the sandbox and (ON DELETE CASCADE) its contexts and cells. */
int store_sandbox_delete(struct store *s, const char *id);
/* Stores row under its id in place of old_id's row (a warm sandbox taken
 * under a tenant's id: same host id, no contexts yet). Written like a
 * journal write (store_set_journal_lazy): it is on a request path. */
int store_sandbox_rekey(struct store *s, const char *old_id, const struct sandbox_row *row);
/* Calls fn for each sandbox with 0 < expires_at <= now (ids only), ordered
 * by expires_at then id. Like every *_each below, the rows are read first
 * and fn runs afterwards, outside any store lock: fn may call the store
 * (the reaper deletes from it) and a slow fn blocks no other thread. */
int store_sandbox_each_expired(struct store *s, uint64_t now,
                               void (*fn)(const char *id, void *userdata), void *userdata);
int store_sandbox_count(struct store *s, uint64_t *ret);
/* Calls fn for each sandbox of org org_id (ids only, ordered by id); rows
 * read first, fn run afterwards, as above. */
int store_sandbox_each_in_org(struct store *s, const char *org_id,
                              void (*fn)(const char *id, void *userdata), void *userdata);
/* The same for org_id's sandboxes of warm class warm_class ("" the default
 * pool's), oldest first (created_at, then id). */
int store_sandbox_each_in_class(struct store *s, const char *org_id, const char *warm_class,
                                void (*fn)(const char *id, void *userdata), void *userdata);
/* One page of org_id's sandboxes by created_at then id (fn gets a borrowed
 * row); *ret_total: how many the org has. */
int store_sandbox_each_org(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                           void (*fn)(const struct sandbox_row *row, void *userdata), void *userdata,
                           uint64_t *ret_total);
/* The workspace bytes every sandbox may fill (its own quota, or
 * default_bytes where it has none): the disk reserved for them all. */
int store_sandbox_disk_reserved(struct store *s, uint64_t default_bytes, uint64_t *ret);
/* The lowest id in [first, first + n) that no sandbox row holds as its
 * host_id; -ENOSPC when every one is taken. The caller serialises the
 * choice with the put that stores it. */
int store_sandbox_free_host_id(struct store *s, uint32_t first, uint32_t n, uint32_t *ret);

/* A daemon of a cluster (issue 16), as its last heartbeat left it. */
struct node_row {
        char id[STORE_ID_MAX];
        char url[256];            /* base URL other nodes forward to */
        uint64_t epoch;           /* bumped by every start of the node */
        uint64_t started_at;      /* epoch ms */
        uint64_t heartbeat_at;    /* epoch ms of the writer's clock */
        uint64_t cpu_millis;      /* load: thousandths of a CPU busy */
        uint64_t mem_bytes;       /* memory in use */
        uint64_t contexts;        /* live code contexts */
        uint64_t sandboxes;       /* sandboxes it serves */
        char state[16];           /* "up", "draining", "down" */
};
/* Insert or update every column of row->id's node. */
int store_node_heartbeat(struct store *s, const struct node_row *row);
/* Calls fn for every node ordered by id (borrowed rows; read first, fn run
 * afterwards, as for every *_each). */
int store_node_each(struct store *s, void (*fn)(const struct node_row *row, void *userdata), void *userdata);
/* Moves sandbox id to node_id if its lease_epoch is still expected_epoch:
 * one conditional UPDATE, so of several nodes claiming with the same
 * expected epoch exactly one wins. 0 = won (*ret_epoch = the new epoch,
 * expected_epoch + 1), -EBUSY = its epoch moved first, -ENOENT = no row. */
int store_sandbox_claim(struct store *s, const char *id, const char *node_id, uint64_t expected_epoch,
                        uint64_t *ret_epoch);
/* Who owns sandbox id: *ret_node ("" = nobody) and its epoch; -ENOENT. */
int store_sandbox_owner(struct store *s, const char *id, char ret_node[static STORE_ID_MAX], uint64_t *ret_epoch);
/* How many sandboxes node_id owns and the workspace bytes they may fill
 * (store_sandbox_count and store_sandbox_disk_reserved for one node: its
 * own disk and caps in cluster mode). */
int store_sandbox_usage_on_node(struct store *s, const char *node_id, uint64_t default_bytes, uint64_t *ret_count,
                                uint64_t *ret_reserved);
/* Calls fn for each sandbox owned by node_id (its id and lease epoch),
 * ordered by id; rows read first, fn run afterwards. */
int store_sandbox_each_on_node(struct store *s, const char *node_id,
                               void (*fn)(const char *id, uint64_t lease_epoch, void *userdata), void *userdata);

/* A concurrency slot an org holds while something of kind runs on node_id
 * (issue 16: the controller's execution budget counted across a cluster;
 * table exec_slots). */
struct slot_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char node_id[STORE_ID_MAX];
        char kind[16];            /* "execute" */
        uint64_t started_at;      /* epoch ms */
};
/* Inserts row unless the org already holds limit slots of row->kind:
 * atomic against every other taker of the store (one statement in a
 * transaction; on PostgreSQL under a per-org advisory lock). 0 = taken,
 * -EBUSY = at the limit, -EEXIST = row->id is taken. */
int store_slot_take(struct store *s, const struct slot_row *row, uint64_t limit);
/* Deletes slot id; -ENOENT when it is gone (e.g. freed with its node). */
int store_slot_give(struct store *s, const char *id);
/* Deletes every slot node_id holds (a dead node's, or this node's own
 * left over from a previous run); *ret_n (may be NULL): how many. */
int store_slot_free_node(struct store *s, const char *node_id, uint64_t *ret_n);
/* How many slots of kind org_id holds on every node. */
int store_slot_count(struct store *s, const char *org_id, const char *kind, uint64_t *ret);

struct context_row {
        char id[STORE_ID_MAX];
        char sandbox_id[STORE_ID_MAX];
        char binding[64];      /* e.g. "PYTHON" */
        char language[32];     /* runtime id */
        char cwd[4096];
        char *env_json;        /* owned; "{}" by default */
        uint64_t created_at, last_used, executions;
        /* Restore point: the journal of cells that built the state. */
        uint64_t snap_taken_at;   /* epoch ms of the last good cell; 0 = none */
        uint64_t snap_cells;      /* cells in the journal */
        uint64_t snap_bytes;      /* bytes of code in the journal */
        bool snap_stale;          /* journal cannot reproduce the live state */
        /* Which kernel and interpreter build wrote the journal (e.g.
         * "python:CPython 3.11.2:kernel-<hash>"), so a journal replayed by
         * another build is known. Opaque to the store; "" = unknown (rows
         * written before schema 2). */
        char build[128];
};
void context_row_done(struct context_row *r);
int store_context_insert(struct store *s, const struct context_row *row);
/* Updates cwd, env, last_used, executions, the snap_* columns and build. */
int store_context_update(struct store *s, const struct context_row *row);
int store_context_get(struct store *s, const char *id, struct context_row *ret);
int store_context_delete(struct store *s, const char *id);
/* Contexts of a sandbox ordered by created_at (then id). fn gets a borrowed row. */
int store_context_each(struct store *s, const char *sandbox_id,
                       void (*fn)(const struct context_row *row, void *userdata), void *userdata);
int store_context_count(struct store *s, const char *sandbox_id, uint64_t *ret);

struct cell_row {
        uint64_t seq;          /* 1, 2, 3… per context */
        const char *code;
        const char *env_json;  /* effective env of that run */
        const char *cwd;       /* cwd before the run */
        bool typescript;
};
/* Appends a cell to a context's journal. seq must be the next number
 * (-EINVAL otherwise: the journal must replay exactly, so a gap or a repeat
 * is refused); -ENOENT when the context does not exist. */
int store_cell_append(struct store *s, const char *context_id, const struct cell_row *cell);
/* The same, and the context's row written as store_context_update would
 * (row->id names the context; row->snap_cells is normally cell->seq), in
 * ONE transaction: both land, or neither (a refused seq, a missing
 * context: then the row is not written either). One commit per executed
 * cell instead of two. */
int store_cell_append_row(struct store *s, const struct cell_row *cell, const struct context_row *row);
/* Cells of a context in seq order; fn gets borrowed strings. */
int store_cell_each(struct store *s, const char *context_id,
                    void (*fn)(const struct cell_row *cell, void *userdata), void *userdata);
/* Empties a journal (0 when already empty); -ENOENT for a missing context. */
int store_cells_delete(struct store *s, const char *context_id);
/* The journal as it really is: highest seq and total code bytes. The cell
 * rows, not the context row's snap_* copy, are the source of truth (a crash
 * can fall between appending a cell and updating the context row). */
int store_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes);
/* Lazy journal (sandbox.journal_sync none | group): a cell append and a
 * context update then return once the commit is in the OS (it survives a
 * kill -9 of the daemon: the page cache outlives the process) without
 * waiting for the disk; every other write still waits. Set it before the
 * first request. written (may be NULL) is called after each such write,
 * under the store's lock (it must not call the store): the caller's cue to
 * store_sync soon. */
void store_set_journal_lazy(struct store *s, bool lazy, void (*written)(void *userdata), void *userdata);
/* On (until off): this thread's context inserts and event appends are
 * written like journal writes (lazily when the journal is lazy): a request
 * whose own rows are (a new sandbox's first execute: its context, and the
 * sandbox.created of a warm sandbox taken) writes them as its cells. */
void store_journal_scope(bool on);
/* Makes every commit so far durable (SQLite: fdatasync of the WAL). Takes
 * no store lock, so a background flusher never stalls the writers. */
int store_sync(struct store *s);

/* ---- events (issue 15): an org's durable event log ---- */

struct event_row {
        uint64_t id;                   /* the store's: increasing, never reused */
        char org_id[STORE_ID_MAX];
        char name[64];                 /* "sandbox.created", … */
        char sandbox_id[STORE_ID_MAX]; /* "" when none */
        char *payload;                 /* owned (malloc): JSON object text, opaque here */
        uint64_t created_at;           /* epoch ms */
};
void event_row_done(struct event_row *r);   /* frees payload */
/* Appends row (its id is ignored) and puts the new id in *ret_id; then,
 * in the same transaction, drops the org's oldest rows beyond keep (0:
 * keep all) and every row made before not_before (0: none). */
int store_event_append(struct store *s, const struct event_row *row, uint64_t keep, uint64_t not_before,
                       uint64_t *ret_id);
/* The highest id ever given to an event of any org (0: none). */
int store_event_last(struct store *s, uint64_t *ret);
/* The org's events with an id above after, by id, at most limit. fn gets
 * a borrowed row. */
int store_event_each(struct store *s, const char *org_id, uint64_t after, uint64_t limit,
                     void (*fn)(const struct event_row *row, void *userdata), void *userdata);

/* ---- audit (issue 15): who did what to an org, when, from where ---- */

struct audit_row {
        uint64_t id;                   /* the store's */
        char org_id[STORE_ID_MAX];
        char user_id[STORE_ID_MAX];    /* "" when none */
        char key_id[STORE_ID_MAX];     /* "" unless an API key */
        char action[64];               /* "sandbox.create", … */
        char method[16];
        char path[512];
        int status;
        char sandbox_id[STORE_ID_MAX]; /* "" when none */
        char ip[64];
        char request_id[STORE_ID_MAX];
        uint64_t created_at;           /* epoch ms */
};
/* Which rows: NULL/"" strings and 0 times mean any; from ≤ created_at < to. */
struct audit_filter {
        const char *action, *sandbox_id, *user_id, *key_id;
        uint64_t from, to;
};
/* Appends row; also drops every row (any org) made before not_before (0: none). */
int store_audit_append(struct store *s, const struct audit_row *row, uint64_t not_before);
/* One page of the org's rows matching f, newest first (created_at, then
 * id); *ret_total: how many match. fn gets a borrowed row. */
int store_audit_each(struct store *s, const char *org_id, const struct audit_filter *f, uint64_t limit,
                     uint64_t offset, void (*fn)(const struct audit_row *row, void *userdata), void *userdata,
                     uint64_t *ret_total);
/* Per action of the org's rows about sandbox_id: how many, first and last
 * created_at, by action. */
struct audit_count {
        char action[64];
        uint64_t count, first_at, last_at;
};
int store_audit_summary(struct store *s, const char *org_id, const char *sandbox_id,
                        void (*fn)(const struct audit_count *c, void *userdata), void *userdata);
/* ---- GitHub integration (issue 15) ---------------------------------- */

/* A GitHub App installation, as its webhooks describe it: pending (org_id
 * "") until an org connects it. */
struct gh_install_row {
        char id[STORE_ID_MAX];          /* GitHub's installation id, decimal */
        char org_id[STORE_ID_MAX];      /* "" while pending */
        char account_login[256];
        char account_type[32];          /* "User", "Organization" */
        char status[16];                /* "active", "suspended" */
        char *repos_json;               /* owned: a JSON array of "owner/name" */
        uint64_t created_at, updated_at, connected_at;   /* epoch ms; connected_at 0 while pending */
};
void gh_install_row_done(struct gh_install_row *r);   /* frees repos_json */
/* Inserts or updates id's account, status and repos; its org link and
 * connected_at are kept. */
int store_gh_install_put(struct store *s, const struct gh_install_row *row);
int store_gh_install_get(struct store *s, const char *id, struct gh_install_row *ret);
/* -ENOENT when absent. */
int store_gh_install_delete(struct store *s, const char *id);
/* Moves id from org from_org to org to_org ("" = pending) atomically:
 * -ENOENT unless it is linked to from_org now. Connecting (from "") also
 * gives to_org the installation's deliveries that no org had yet. */
int store_gh_install_link(struct store *s, const char *id, const char *from_org, const char *to_org, uint64_t at);
/* The installations linked to org_id, then (pending true) every pending
 * one, each group by created_at. */
int store_gh_install_each(struct store *s, const char *org_id, bool pending,
                          void (*fn)(const struct gh_install_row *row, void *userdata), void *userdata);

/* An org's GitHub automation settings, a JSON object opaque to the store. */
int store_gh_settings_get(struct store *s, const char *org_id, char **ret_json, uint64_t *ret_updated_at);
int store_gh_settings_put(struct store *s, const char *org_id, const char *json, uint64_t updated_at);

/* One webhook delivery as received and processed. */
struct gh_event_row {
        char id[STORE_ID_MAX];          /* "ghe_…" */
        char delivery_id[STORE_ID_MAX]; /* X-GitHub-Delivery; unique when set, "" for unverified ones */
        char org_id[STORE_ID_MAX];      /* the installation's org at delivery; "" none */
        char installation_id[STORE_ID_MAX];
        char event[64], action[64];
        char repo[256];                 /* "owner/name" or "" */
        uint64_t pr_number;             /* 0 when none */
        char status[16];                /* "processing", "success", "failure" */
        char error[512];
        char detail[512];               /* what was done */
        char sandbox_id[STORE_ID_MAX];  /* a sandbox this delivery made */
        uint64_t received_at;           /* epoch ms */
};
/* -EEXIST when delivery_id was recorded already. Keeps at most keep rows
 * (the oldest go). */
int store_gh_event_insert(struct store *s, const struct gh_event_row *row, uint64_t keep);
/* Rewrites the org, status, error, detail and sandbox of row->id. */
int store_gh_event_update(struct store *s, const struct gh_event_row *row);
/* The org's deliveries newest first. */
int store_gh_event_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                        void (*fn)(const struct gh_event_row *row, void *userdata), void *userdata,
                        uint64_t *ret_total);
struct gh_event_stats {
        uint64_t success, failure;      /* received at or after since */
        bool has_latest, has_failure;
        struct gh_event_row latest, latest_failure;   /* ever */
};
int store_gh_event_stats(struct store *s, const char *org_id, uint64_t since, struct gh_event_stats *ret);
/* The sandboxes the org's deliveries for pull request repo#pr_number made. */
int store_gh_event_sandboxes(struct store *s, const char *org_id, const char *repo, uint64_t pr_number,
                             void (*fn)(const struct gh_event_row *row, void *userdata), void *userdata);

/* ---- webhooks (issue 15): an org's endpoints and their delivery queue ---- */

struct webhook_row {
        char id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        char *url;                     /* owned */
        char *events_json;             /* owned: JSON array of names ("*": all), opaque here */
        char *description;             /* owned; "" when none */
        bool active;
        char *sealed_secret;           /* owned: the signing secret, sealed by the tenant layer */
        char key_id[32];               /* which key sealed it */
        uint64_t cursor;               /* the last event id the dispatcher has looked at */
        uint64_t failing_since;        /* epoch ms of the first failure in a row; 0: healthy */
        char disabled_reason[128];     /* why the dispatcher turned it off; "" otherwise */
        uint64_t created_at, updated_at;   /* epoch ms */
};
void webhook_row_done(struct webhook_row *r);
/* -EEXIST when the id is taken. */
int store_webhook_create(struct store *s, const struct webhook_row *row);
/* Scoped by org: another org's webhook is -ENOENT, as a missing one. */
int store_webhook_get(struct store *s, const char *org_id, const char *id, struct webhook_row *ret);
/* Writes url, events_json, description, sealed_secret, key_id and
 * updated_at: never what the dispatcher writes (cursor, health, active). */
int store_webhook_update(struct store *s, const struct webhook_row *row);
/* Switches it on or off; switched on from off, its failure streak and
 * disabled_reason are cleared in the same statement. */
int store_webhook_set_active(struct store *s, const char *org_id, const char *id, bool active);
/* Deletes it and its deliveries. */
int store_webhook_delete(struct store *s, const char *org_id, const char *id);
/* The org's webhooks (org_id NULL: every org's) by created_at then id, one
 * page; *ret_total: how many match. fn gets a borrowed row. */
int store_webhook_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                       void (*fn)(const struct webhook_row *row, void *userdata), void *userdata,
                       uint64_t *ret_total);
/* The dispatcher's verdict on its health: failing_since, and when disable
 * is true, active off with reason. */
int store_webhook_health(struct store *s, const char *id, uint64_t failing_since, bool disable, const char *reason);

/* One message to one webhook and the record of its attempts. */
struct webhook_delivery_row {
        char id[STORE_ID_MAX];
        char webhook_id[STORE_ID_MAX];
        char org_id[STORE_ID_MAX];
        uint64_t seq;                  /* the store's: queue order, increasing */
        char origin[16];               /* "event" (unique per webhook and event), "test", "redeliver" */
        uint64_t event_id;             /* 0 for a test */
        char event[64];                /* the event's name */
        char *payload;                 /* owned: the body sent (JSON text) */
        char status[16];               /* pending, succeeded, failed */
        uint32_t attempts;
        uint32_t last_status;          /* HTTP status of the last attempt; 0: none */
        char *last_error;              /* owned; "" when none */
        uint64_t last_duration_ms;
        char *log_json;                /* owned: JSON array, one object per attempt, opaque here */
        uint64_t next_attempt_at, created_at, delivered_at;   /* epoch ms; 0 = none */
};
void webhook_delivery_row_done(struct webhook_delivery_row *r);
/* In one transaction: row (NULL: none) is queued unless an "event" row of
 * that webhook and event exists (then nothing, 0), the webhook's cursor
 * rises to cursor (never falls), and its finished deliveries beyond the
 * newest keep are dropped (0: keep all). -ENOENT: no such webhook. */
int store_webhook_enqueue(struct store *s, const char *webhook_id, uint64_t cursor,
                          const struct webhook_delivery_row *row, uint64_t keep);
int store_webhook_delivery_get(struct store *s, const char *org_id, const char *webhook_id, const char *id,
                               struct webhook_delivery_row *ret);
/* Writes status, attempts, last_status, last_error, last_duration_ms,
 * log_json, next_attempt_at and delivered_at. */
int store_webhook_delivery_update(struct store *s, const struct webhook_delivery_row *row);
/* One page of a webhook's deliveries, newest first. */
int store_webhook_delivery_each(struct store *s, const char *org_id, const char *webhook_id, uint64_t limit,
                                uint64_t offset, void (*fn)(const struct webhook_delivery_row *row, void *userdata),
                                void *userdata, uint64_t *ret_total);
/* The oldest pending delivery of every active webhook (what may be sent
 * next: a webhook's deliveries go out in queue order). */
int store_webhook_delivery_heads(struct store *s, void (*fn)(const struct webhook_delivery_row *row, void *userdata),
                                 void *userdata);
