/* Schema migrations of the SQLite backend. Migration N is migrations[N-1];
 * each runs once, in its own transaction, recorded in schema_migrations. */
#include <errno.h>

#include "store/sqlite/sqlite.h"

/* Append only: an applied migration is never edited, because databases in
 * the field already ran it. */
static const char *const migrations[] = {
        /* 1: initial schema. */
        "CREATE TABLE orgs("
        "  id TEXT PRIMARY KEY,"
        "  name TEXT,"
        "  created_at INTEGER);"
        "CREATE TABLE sandboxes("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id),"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  last_used INTEGER NOT NULL DEFAULT 0,"
        "  expires_at INTEGER NOT NULL DEFAULT 0," /* 0 = never */
        "  env_json TEXT NOT NULL DEFAULT '{}');"
        "CREATE TABLE contexts("
        "  id TEXT PRIMARY KEY,"
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  binding TEXT NOT NULL DEFAULT '',"
        "  language TEXT NOT NULL DEFAULT '',"
        "  cwd TEXT NOT NULL DEFAULT '',"
        "  env_json TEXT NOT NULL DEFAULT '{}',"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  last_used INTEGER NOT NULL DEFAULT 0,"
        "  executions INTEGER NOT NULL DEFAULT 0,"
        "  snap_taken_at INTEGER NOT NULL DEFAULT 0,"
        "  snap_cells INTEGER NOT NULL DEFAULT 0,"
        "  snap_bytes INTEGER NOT NULL DEFAULT 0,"
        "  snap_stale INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE cells("
        "  context_id TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL,"
        "  code TEXT NOT NULL,"
        "  env_json TEXT NOT NULL,"
        "  cwd TEXT NOT NULL,"
        "  typescript INTEGER NOT NULL,"
        "  PRIMARY KEY(context_id, seq));"
        "CREATE INDEX sandboxes_expires_at ON sandboxes(expires_at);"
        /* Also serves the ON DELETE CASCADE lookup from sandboxes, which
         * would otherwise scan every context on each sandbox delete. */
        "CREATE INDEX contexts_sandbox_created ON contexts(sandbox_id, created_at);",

        /* 2: the journal's provenance (issue 9): which kernel and
         * interpreter build wrote a context's cells. Existing journals get
         * '' (unknown build). */
        "ALTER TABLE contexts ADD COLUMN build TEXT NOT NULL DEFAULT '';",

        /* 3: one host identity per sandbox (issue 10): the uid/gid its jails
         * run as on the host. Existing sandboxes get 0 (none yet: given one
         * when next loaded). */
        "ALTER TABLE sandboxes ADD COLUMN host_id INTEGER NOT NULL DEFAULT 0;"
        "CREATE INDEX sandboxes_host_id ON sandboxes(host_id);",

        /* 4: limits of one's own (issue 11): a bridge sandbox's workspace
         * holds what a container's disk would, far beyond the runtime API's
         * 16 MiB. Existing sandboxes get 0 (the service's defaults). */
        "ALTER TABLE sandboxes ADD COLUMN workspace_bytes INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN workspace_inodes INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN file_bytes INTEGER NOT NULL DEFAULT 0;",

        /* 5: tenants (issue 12): an org's slug and plan, its users, API
         * keys (only their SHA-256) and login sessions (revocable). Existing
         * orgs ("default") get no slug and the hobby plan. A NULL slug is
         * not a duplicate (UNIQUE allows many NULLs). */
        "ALTER TABLE orgs ADD COLUMN slug TEXT;"
        "ALTER TABLE orgs ADD COLUMN plan TEXT NOT NULL DEFAULT 'hobby';"
        "CREATE UNIQUE INDEX orgs_slug ON orgs(slug);"
        "CREATE TABLE users("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  email TEXT NOT NULL UNIQUE,"
        "  first_name TEXT NOT NULL DEFAULT '',"
        "  last_name TEXT NOT NULL DEFAULT '',"
        "  role TEXT NOT NULL DEFAULT 'member',"
        "  password_hash TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE api_keys("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  user_id TEXT NOT NULL DEFAULT '',"
        "  name TEXT NOT NULL DEFAULT '',"
        "  prefix TEXT NOT NULL DEFAULT '',"
        "  hash TEXT NOT NULL UNIQUE,"
        "  created_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX api_keys_org_created ON api_keys(org_id, created_at, id);"
        "CREATE TABLE sessions("
        "  id TEXT PRIMARY KEY,"
        "  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  expires_at INTEGER NOT NULL DEFAULT 0,"
        "  revoked INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX sessions_user ON sessions(user_id);"
        /* Idempotency-Key replies: one per (org, key, route) for 24 h. */
        "CREATE TABLE idempotency("
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  key TEXT NOT NULL,"
        "  route TEXT NOT NULL,"
        "  body_hash TEXT NOT NULL,"
        "  status INTEGER NOT NULL,"
        "  response TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL,"
        "  PRIMARY KEY(org_id, key, route));"
        "CREATE INDEX idempotency_created ON idempotency(created_at);",

        /* 6: controller sandboxes (issue 12): a CPU quota and memory limit
         * of their own for the sandbox's parent cgroup, and an absolute
         * deadline (expiry_fixed 1: expires_at is not renewed by activity).
         * Existing sandboxes get 0 (the service's defaults, idle expiry). */
        "ALTER TABLE sandboxes ADD COLUMN cpu_millis INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN memory_bytes INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN expiry_fixed INTEGER NOT NULL DEFAULT 0;"
        "CREATE INDEX sandboxes_org_created ON sandboxes(org_id, created_at, id);",

        /* 7: secrets (issue 12):
         * an org's secrets, sealed by the tenant layer (AES-256-GCM; the
         * store never sees a value), with the fingerprint of the key that
         * sealed each one. */
        "CREATE TABLE secrets("
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  name TEXT NOT NULL,"
        "  sealed TEXT NOT NULL,"
        "  key_id TEXT NOT NULL DEFAULT '',"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  updated_at INTEGER NOT NULL DEFAULT 0,"
        "  PRIMARY KEY(org_id, name));",

        /* 8: queue mode (issue 15): controller requests waiting for their
         * org's concurrency budget, in seq order per org, and their
         * answers once run (kept a day for GET /requests/:id). */
        "CREATE TABLE queued_requests("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  kind TEXT NOT NULL,"
        "  route TEXT NOT NULL,"
        "  sandbox_id TEXT NOT NULL DEFAULT '',"
        "  body TEXT NOT NULL,"
        "  caller TEXT NOT NULL,"
        "  status TEXT NOT NULL,"
        "  response_status INTEGER NOT NULL DEFAULT 0,"
        "  response_body TEXT,"
        "  created_at INTEGER NOT NULL,"
        "  started_at INTEGER NOT NULL DEFAULT 0,"
        "  finished_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX queued_requests_org ON queued_requests(org_id, status, seq);",

        /* 9 (issue 15): checkpoints, their
         * tar files in <data_dir>/checkpoints/<org>/<id>.tar. No foreign
         * key to sandboxes: a checkpoint outlives its sandbox. */
        "CREATE TABLE checkpoints("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL,"
        "  sandbox_id TEXT NOT NULL,"
        "  name TEXT NOT NULL,"
        "  description TEXT NOT NULL DEFAULT '',"
        "  checksum TEXT NOT NULL,"
        "  size_bytes INTEGER NOT NULL DEFAULT 0,"
        "  file_count INTEGER NOT NULL DEFAULT 0,"
        "  meta_json TEXT NOT NULL DEFAULT '{}',"
        "  created_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX checkpoints_org_created ON checkpoints(org_id, created_at, id);"
        "CREATE INDEX checkpoints_org_sandbox ON checkpoints(org_id, sandbox_id, created_at);",

        /* 10: the event log (issue 15): what happened to an org's sandboxes,
         * replayed to SSE clients after their Last-Event-ID. AUTOINCREMENT:
         * an id is never reused, even after the retention cap trimmed the
         * newest row, so a client's Last-Event-ID never names another event. */
        "CREATE TABLE events("
        "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  org_id TEXT NOT NULL,"
        "  name TEXT NOT NULL,"
        "  sandbox_id TEXT NOT NULL DEFAULT '',"
        "  payload TEXT NOT NULL DEFAULT '{}',"
        "  created_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX events_org_id ON events(org_id, id);"
        /* The age trim on every insert must not scan the table. */
        "CREATE INDEX events_created ON events(created_at);",

        /* 11: the audit log (issue 15): one row per authenticated write of
         * the controller API; no bodies, no secrets. */
        "CREATE TABLE audit("
        "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  org_id TEXT NOT NULL,"
        "  user_id TEXT NOT NULL DEFAULT '',"
        "  key_id TEXT NOT NULL DEFAULT '',"
        "  action TEXT NOT NULL,"
        "  method TEXT NOT NULL,"
        "  path TEXT NOT NULL,"
        "  status INTEGER NOT NULL,"
        "  sandbox_id TEXT NOT NULL DEFAULT '',"
        "  ip TEXT NOT NULL DEFAULT '',"
        "  request_id TEXT NOT NULL DEFAULT '',"
        "  created_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX audit_org_created ON audit(org_id, created_at, id);"
        "CREATE INDEX audit_org_sandbox ON audit(org_id, sandbox_id, created_at);"
        "CREATE INDEX audit_created ON audit(created_at);",
        /* 12: artifacts (issue 15): an org's durable objects (bytes on disk
         * or in a bucket, named by id) and its multipart uploads in
         * progress (state 'uploading'). */
        "CREATE TABLE artifacts("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  sandbox_id TEXT NOT NULL DEFAULT '',"
        "  state TEXT NOT NULL,"
        "  name TEXT NOT NULL,"
        "  path TEXT NOT NULL DEFAULT '',"
        "  content_type TEXT NOT NULL,"
        "  checksum TEXT NOT NULL DEFAULT '',"
        "  metadata TEXT NOT NULL DEFAULT '{}',"
        "  size INTEGER NOT NULL DEFAULT 0,"
        "  created_at INTEGER NOT NULL,"
        "  expires_at INTEGER NOT NULL DEFAULT 0,"
        "  ttl_s INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX artifacts_org ON artifacts(org_id, state, created_at, id);"
        "CREATE INDEX artifacts_expiry ON artifacts(expires_at) WHERE expires_at > 0;",
        /* 13 (issue 15): the controller's internal snapshot profiles (a
         * class of warm sandboxes with limits of its own), and the class a
         * warm sandbox was prepared for ('' the default pool's; existing
         * rows get ''). kernel_path and rootfs_path are kept for the seed's
         * clients, never used. */
        "CREATE TABLE snapshot_profiles("
        "  key TEXT PRIMARY KEY,"
        "  vcpu_count INTEGER NOT NULL,"
        "  mem_size_mib INTEGER NOT NULL,"
        "  kernel_path TEXT NOT NULL DEFAULT '',"
        "  rootfs_path TEXT NOT NULL DEFAULT '',"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  version INTEGER NOT NULL DEFAULT 1);"
        "ALTER TABLE sandboxes ADD COLUMN warm_class TEXT NOT NULL DEFAULT '';"
        "CREATE INDEX sandboxes_org_class ON sandboxes(org_id, warm_class, created_at);",
        /* 14 (issue 15): the GitHub
         * integration. Installations arrive by webhook, pending (org_id
         * '') until an org connects one; deliveries are kept as events
         * (unverified ones with no delivery id, so a forged delivery
         * cannot block the real one's id); settings are one JSON object
         * per org. */
        "CREATE TABLE github_installations("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL DEFAULT '',"
        "  account_login TEXT NOT NULL DEFAULT '',"
        "  account_type TEXT NOT NULL DEFAULT '',"
        "  status TEXT NOT NULL DEFAULT 'active',"
        "  repos_json TEXT NOT NULL DEFAULT '[]',"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  updated_at INTEGER NOT NULL DEFAULT 0,"
        "  connected_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX github_installations_org ON github_installations(org_id, created_at);"
        "CREATE TABLE github_settings("
        "  org_id TEXT PRIMARY KEY,"
        "  settings_json TEXT NOT NULL DEFAULT '{}',"
        "  updated_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE github_events("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  delivery_id TEXT NOT NULL DEFAULT '',"
        "  org_id TEXT NOT NULL DEFAULT '',"
        "  installation_id TEXT NOT NULL DEFAULT '',"
        "  event TEXT NOT NULL DEFAULT '',"
        "  action TEXT NOT NULL DEFAULT '',"
        "  repo TEXT NOT NULL DEFAULT '',"
        "  pr_number INTEGER NOT NULL DEFAULT 0,"
        "  status TEXT NOT NULL DEFAULT '',"
        "  error TEXT NOT NULL DEFAULT '',"
        "  detail TEXT NOT NULL DEFAULT '',"
        "  sandbox_id TEXT NOT NULL DEFAULT '',"
        "  received_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE UNIQUE INDEX github_events_delivery ON github_events(delivery_id) WHERE delivery_id != '';"
        "CREATE INDEX github_events_org ON github_events(org_id, seq);"
        "CREATE INDEX github_events_pr ON github_events(org_id, repo, pr_number) WHERE sandbox_id != '';",
        /* 15 (issue 15): egress policies and their audit. */
        "CREATE TABLE egress_policies("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  doc TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL,"
        "  updated_at INTEGER NOT NULL);"
        "CREATE INDEX egress_policies_org ON egress_policies(org_id, created_at);"
        "CREATE TABLE egress_audit("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  org_id TEXT NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  sandbox_id TEXT NOT NULL,"
        "  at INTEGER NOT NULL,"
        "  host TEXT NOT NULL,"
        "  port INTEGER NOT NULL,"
        "  protocol TEXT NOT NULL,"
        "  decision TEXT NOT NULL,"
        "  mode TEXT NOT NULL,"
        "  violation INTEGER NOT NULL,"
        "  reason TEXT NOT NULL,"
        "  bytes_out INTEGER NOT NULL,"
        "  bytes_in INTEGER NOT NULL);"
        "CREATE INDEX egress_audit_org ON egress_audit(org_id, seq);"
        "CREATE INDEX egress_audit_at ON egress_audit(at);",
        /* 16 (issue 15, single sign-on): who
         * an OpenID Connect login is — (issuer, subject) → user — and
         * which org a provider organization or an email domain joins.
         * Empty link values are stored as NULL so UNIQUE ignores them. */
        "CREATE TABLE sso_identities("
        "  issuer TEXT NOT NULL,"
        "  subject TEXT NOT NULL,"
        "  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
        "  org_id TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  PRIMARY KEY(issuer, subject));"
        "CREATE TABLE sso_links("
        "  org_id TEXT PRIMARY KEY REFERENCES orgs(id) ON DELETE CASCADE,"
        "  provider_org_id TEXT UNIQUE,"
        "  domain TEXT UNIQUE,"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  updated_at INTEGER NOT NULL DEFAULT 0);",

        /* 17 (issue 15): webhooks. The
         * cursor is the last event the dispatcher looked at; a delivery
         * row is queued in the same transaction that moves it, and the
         * unique index refuses a second row for one event, so a restart
         * neither loses nor repeats a delivery. */
        "CREATE TABLE webhooks("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL,"
        "  url TEXT NOT NULL,"
        "  events_json TEXT NOT NULL DEFAULT '[\"*\"]',"
        "  description TEXT NOT NULL DEFAULT '',"
        "  active INTEGER NOT NULL DEFAULT 1,"
        "  sealed_secret TEXT NOT NULL,"
        "  key_id TEXT NOT NULL DEFAULT '',"
        "  cursor INTEGER NOT NULL DEFAULT 0,"
        "  failing_since INTEGER NOT NULL DEFAULT 0,"
        "  disabled_reason TEXT NOT NULL DEFAULT '',"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  updated_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX webhooks_org ON webhooks(org_id, created_at, id);"
        "CREATE TABLE webhook_deliveries("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,"
        "  org_id TEXT NOT NULL,"
        "  origin TEXT NOT NULL DEFAULT 'event',"
        "  event_id INTEGER NOT NULL DEFAULT 0,"
        "  event TEXT NOT NULL DEFAULT '',"
        "  payload TEXT NOT NULL,"
        "  status TEXT NOT NULL DEFAULT 'pending',"
        "  attempts INTEGER NOT NULL DEFAULT 0,"
        "  last_status INTEGER NOT NULL DEFAULT 0,"
        "  last_error TEXT NOT NULL DEFAULT '',"
        "  last_duration_ms INTEGER NOT NULL DEFAULT 0,"
        "  log_json TEXT NOT NULL DEFAULT '[]',"
        "  next_attempt_at INTEGER NOT NULL DEFAULT 0,"
        "  created_at INTEGER NOT NULL DEFAULT 0,"
        "  delivered_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries(webhook_id, event_id) "
        "  WHERE origin = 'event';"
        "CREATE INDEX webhook_deliveries_queue ON webhook_deliveries(webhook_id, status, seq);",

        /* 18 (issue 16, scale-out): the nodes of a cluster and which node
         * serves each sandbox. lease_epoch is the compare-and-set counter
         * store_sandbox_claim moves; node_id '' = unowned (every sandbox of
         * a single daemon). */
        "ALTER TABLE sandboxes ADD COLUMN node_id TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE sandboxes ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;"
        "CREATE INDEX sandboxes_node ON sandboxes(node_id);"
        "CREATE TABLE cluster_nodes("
        "  id TEXT PRIMARY KEY,"
        "  url TEXT NOT NULL DEFAULT '',"
        "  epoch INTEGER NOT NULL DEFAULT 0,"
        "  started_at INTEGER NOT NULL DEFAULT 0,"
        "  heartbeat_at INTEGER NOT NULL DEFAULT 0,"
        "  cpu_millis INTEGER NOT NULL DEFAULT 0,"
        "  mem_bytes INTEGER NOT NULL DEFAULT 0,"
        "  contexts INTEGER NOT NULL DEFAULT 0,"
        "  sandboxes INTEGER NOT NULL DEFAULT 0,"
        "  state TEXT NOT NULL DEFAULT 'up');",
        /* 19 (issue 16): the concurrency slots orgs hold while something
         * runs, per node, so the controller's execution budget is counted
         * over every node (store_slot_take); a dead node's are deleted.
         * queued_requests.node_id: who runs a processing request, so a
         * dead or restarted node's runs are failed, not every node's. */
        "CREATE TABLE exec_slots("
        "  id TEXT PRIMARY KEY,"
        "  org_id TEXT NOT NULL,"
        "  node_id TEXT NOT NULL DEFAULT '',"
        "  kind TEXT NOT NULL,"
        "  started_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE INDEX exec_slots_org ON exec_slots(org_id, kind);"
        "CREATE INDEX exec_slots_node ON exec_slots(node_id);"
        "ALTER TABLE queued_requests ADD COLUMN node_id TEXT NOT NULL DEFAULT '';",

        /* 20 (issue 13): the journal keyed by its primary key alone
         * (WITHOUT ROWID). A rowid table kept (context_id, seq) in a second
         * b-tree, so every executed cell wrote three pages to the WAL (the
         * context row, the cell, its index entry); now it writes two, and
         * a warm cell's commit costs a quarter less. Same columns, same
         * order of replay (by the key). */
        "CREATE TABLE cells_v20("
        "  context_id TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL,"
        "  code TEXT NOT NULL,"
        "  env_json TEXT NOT NULL,"
        "  cwd TEXT NOT NULL,"
        "  typescript INTEGER NOT NULL,"
        "  PRIMARY KEY(context_id, seq)) WITHOUT ROWID;"
        "INSERT INTO cells_v20(context_id, seq, code, env_json, cwd, typescript) "
        "  SELECT context_id, seq, code, env_json, cwd, typescript FROM cells;"
        "DROP TABLE cells;"
        "ALTER TABLE cells_v20 RENAME TO cells;",
};

int sq_schema_latest(void)
{
        return (int)ARRAY_SIZE(migrations);
}

static int schema_version(sqlite3 *db)
{
        uint64_t v;
        int r;

        r = sq_query_u64(db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", NULL, &v);
        if (r < 0)
                return r;
        return v > INT32_MAX ? -ERANGE : (int)v;
}

int sq_schema_version(struct store *s)
{
        return schema_version(sq_db(s));
}

/* 1 when applied, 0 when not, -errno. */
static int migration_applied(sqlite3 *db, int version)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sq_query_row(db, "SELECT 1 FROM schema_migrations WHERE version = ?", &st, "u", (uint64_t)version);

        return r == -ENOENT ? 0 : r < 0 ? r : 1;
}

static int migration_record(sqlite3 *db, int version)
{
        return sq_run(db, "INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)", "uu",
                      (uint64_t)version, wall_ms());
}

/* The applied check runs inside the migration's own transaction so two
 * processes opening a fresh database cannot both apply it. */
static int migration_apply(sqlite3 *db, int version, const char *sql, struct err *err)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r;

        r = sq_tx_begin(db, &tx);
        if (r < 0)
                return sq_fail(db, r, err, "begin migration");
        r = migration_applied(db, version);
        if (r < 0)
                return sq_fail(db, r, err, "read schema_migrations");
        if (r > 0)
                return 0;
        r = sq_exec(db, sql, err);
        if (r < 0)
                return r;
        r = migration_record(db, version);
        if (r < 0)
                return sq_fail(db, r, err, "record migration");
        r = sq_tx_commit(&tx);
        if (r < 0)
                return sq_fail(db, r, err, "commit migration");
        return 0;
}

int sq_migrate(sqlite3 *db, struct err *err)
{
        int r, current;

        r = sq_exec(db,
                    "CREATE TABLE IF NOT EXISTS schema_migrations("
                    "version INTEGER PRIMARY KEY, applied_at INTEGER)",
                    err);
        if (r < 0)
                return r;
        current = schema_version(db);
        if (current < 0)
                return sq_fail(db, current, err, "read schema version");
        /* A newer daemon migrated this file; an older one would misread the
         * tables it does not know about, so refuse rather than guess. */
        if (current > sq_schema_latest()) {
                return err_set(err, ERR_INTERNAL, EPROTO, "database schema version %d is newer than supported (%d)",
                               current, sq_schema_latest());
        }
        for (size_t i = 0; i < ARRAY_SIZE(migrations); i++) {
                r = migration_apply(db, (int)i + 1, migrations[i], err);
                if (r < 0)
                        return r;
        }
        return 0;
}
