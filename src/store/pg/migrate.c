/* Schema migrations of the PostgreSQL backend. Migration N is
 * migrations[N-1] and means the same schema change as the SQLite backend's
 * migration N (src/store/sqlite/migrate.c), in PostgreSQL's dialect:
 * BIGINT for INTEGER, BOOLEAN for 0/1 flags, BIGSERIAL for AUTOINCREMENT,
 * and text that sorts and compares bytewise (COLLATE "C", as SQLite's
 * BINARY) whatever the database's locale. Each runs once, in its own
 * transaction (PostgreSQL's DDL is transactional), under an advisory lock
 * so nodes starting together against a fresh database apply it once. */
#include <errno.h>

#include "store/pg/pg.h"

#define T "TEXT COLLATE \"C\""

/* Append only: an applied migration is never edited. */
static const char *const migrations[] = {
        /* 1: initial schema. */
        "CREATE TABLE orgs("
        "  id " T " PRIMARY KEY,"
        "  name " T ","
        "  created_at BIGINT);"
        "CREATE TABLE sandboxes("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL REFERENCES orgs(id),"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  last_used BIGINT NOT NULL DEFAULT 0,"
        "  expires_at BIGINT NOT NULL DEFAULT 0,"
        "  env_json " T " NOT NULL DEFAULT '{}');"
        "CREATE TABLE contexts("
        "  id " T " PRIMARY KEY,"
        "  sandbox_id " T " NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  binding " T " NOT NULL DEFAULT '',"
        "  language " T " NOT NULL DEFAULT '',"
        "  cwd " T " NOT NULL DEFAULT '',"
        "  env_json " T " NOT NULL DEFAULT '{}',"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  last_used BIGINT NOT NULL DEFAULT 0,"
        "  executions BIGINT NOT NULL DEFAULT 0,"
        "  snap_taken_at BIGINT NOT NULL DEFAULT 0,"
        "  snap_cells BIGINT NOT NULL DEFAULT 0,"
        "  snap_bytes BIGINT NOT NULL DEFAULT 0,"
        "  snap_stale BOOLEAN NOT NULL DEFAULT FALSE);"
        "CREATE TABLE cells("
        "  context_id " T " NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,"
        "  seq BIGINT NOT NULL,"
        "  code " T " NOT NULL,"
        "  env_json " T " NOT NULL,"
        "  cwd " T " NOT NULL,"
        "  typescript BOOLEAN NOT NULL,"
        "  PRIMARY KEY(context_id, seq));"
        "CREATE INDEX sandboxes_expires_at ON sandboxes(expires_at);"
        "CREATE INDEX contexts_sandbox_created ON contexts(sandbox_id, created_at);",

        /* 2: the journal's provenance (issue 9). */
        "ALTER TABLE contexts ADD COLUMN build " T " NOT NULL DEFAULT '';",

        /* 3: one host identity per sandbox (issue 10). */
        "ALTER TABLE sandboxes ADD COLUMN host_id BIGINT NOT NULL DEFAULT 0;"
        "CREATE INDEX sandboxes_host_id ON sandboxes(host_id);",

        /* 4: limits of one's own (issue 11). */
        "ALTER TABLE sandboxes ADD COLUMN workspace_bytes BIGINT NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN workspace_inodes BIGINT NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN file_bytes BIGINT NOT NULL DEFAULT 0;",

        /* 5: tenants (issue 12). A NULL slug is not a duplicate. */
        "ALTER TABLE orgs ADD COLUMN slug " T ";"
        "ALTER TABLE orgs ADD COLUMN plan " T " NOT NULL DEFAULT 'hobby';"
        "CREATE UNIQUE INDEX orgs_slug ON orgs(slug);"
        "CREATE TABLE users("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  email " T " NOT NULL UNIQUE,"
        "  first_name " T " NOT NULL DEFAULT '',"
        "  last_name " T " NOT NULL DEFAULT '',"
        "  role " T " NOT NULL DEFAULT 'member',"
        "  password_hash " T " NOT NULL,"
        "  created_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE TABLE api_keys("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  user_id " T " NOT NULL DEFAULT '',"
        "  name " T " NOT NULL DEFAULT '',"
        "  prefix " T " NOT NULL DEFAULT '',"
        "  hash " T " NOT NULL UNIQUE,"
        "  created_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX api_keys_org_created ON api_keys(org_id, created_at, id);"
        "CREATE TABLE sessions("
        "  id " T " PRIMARY KEY,"
        "  user_id " T " NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  expires_at BIGINT NOT NULL DEFAULT 0,"
        "  revoked BOOLEAN NOT NULL DEFAULT FALSE);"
        "CREATE INDEX sessions_user ON sessions(user_id);"
        "CREATE TABLE idempotency("
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  key " T " NOT NULL,"
        "  route " T " NOT NULL,"
        "  body_hash " T " NOT NULL,"
        "  status BIGINT NOT NULL,"
        "  response " T " NOT NULL,"
        "  created_at BIGINT NOT NULL,"
        "  PRIMARY KEY(org_id, key, route));"
        "CREATE INDEX idempotency_created ON idempotency(created_at);",

        /* 6: controller sandboxes (issue 12). */
        "ALTER TABLE sandboxes ADD COLUMN cpu_millis BIGINT NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN memory_bytes BIGINT NOT NULL DEFAULT 0;"
        "ALTER TABLE sandboxes ADD COLUMN expiry_fixed BOOLEAN NOT NULL DEFAULT FALSE;"
        "CREATE INDEX sandboxes_org_created ON sandboxes(org_id, created_at, id);",

        /* 7: secrets (issue 12). */
        "CREATE TABLE secrets("
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  name " T " NOT NULL,"
        "  sealed " T " NOT NULL,"
        "  key_id " T " NOT NULL DEFAULT '',"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  updated_at BIGINT NOT NULL DEFAULT 0,"
        "  PRIMARY KEY(org_id, name));",

        /* 8: queue mode (issue 15). */
        "CREATE TABLE queued_requests("
        "  seq BIGSERIAL PRIMARY KEY,"
        "  id " T " NOT NULL UNIQUE,"
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  kind " T " NOT NULL,"
        "  route " T " NOT NULL,"
        "  sandbox_id " T " NOT NULL DEFAULT '',"
        "  body " T " NOT NULL,"
        "  caller " T " NOT NULL,"
        "  status " T " NOT NULL,"
        "  response_status BIGINT NOT NULL DEFAULT 0,"
        "  response_body " T ","
        "  created_at BIGINT NOT NULL,"
        "  started_at BIGINT NOT NULL DEFAULT 0,"
        "  finished_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX queued_requests_org ON queued_requests(org_id, status, seq);",

        /* 9: checkpoints (issue 15); no foreign key: they outlive sandboxes. */
        "CREATE TABLE checkpoints("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL,"
        "  sandbox_id " T " NOT NULL,"
        "  name " T " NOT NULL,"
        "  description " T " NOT NULL DEFAULT '',"
        "  checksum " T " NOT NULL,"
        "  size_bytes BIGINT NOT NULL DEFAULT 0,"
        "  file_count BIGINT NOT NULL DEFAULT 0,"
        "  meta_json " T " NOT NULL DEFAULT '{}',"
        "  created_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX checkpoints_org_created ON checkpoints(org_id, created_at, id);"
        "CREATE INDEX checkpoints_org_sandbox ON checkpoints(org_id, sandbox_id, created_at);",

        /* 10: the event log (issue 15). A sequence never hands out an id
         * twice, even after a trim deleted the newest row. */
        "CREATE TABLE events("
        "  id BIGSERIAL PRIMARY KEY,"
        "  org_id " T " NOT NULL,"
        "  name " T " NOT NULL,"
        "  sandbox_id " T " NOT NULL DEFAULT '',"
        "  payload " T " NOT NULL DEFAULT '{}',"
        "  created_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX events_org_id ON events(org_id, id);"
        "CREATE INDEX events_created ON events(created_at);",

        /* 11: the audit log (issue 15). */
        "CREATE TABLE audit("
        "  id BIGSERIAL PRIMARY KEY,"
        "  org_id " T " NOT NULL,"
        "  user_id " T " NOT NULL DEFAULT '',"
        "  key_id " T " NOT NULL DEFAULT '',"
        "  action " T " NOT NULL,"
        "  method " T " NOT NULL,"
        "  path " T " NOT NULL,"
        "  status BIGINT NOT NULL,"
        "  sandbox_id " T " NOT NULL DEFAULT '',"
        "  ip " T " NOT NULL DEFAULT '',"
        "  request_id " T " NOT NULL DEFAULT '',"
        "  created_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX audit_org_created ON audit(org_id, created_at, id);"
        "CREATE INDEX audit_org_sandbox ON audit(org_id, sandbox_id, created_at);"
        "CREATE INDEX audit_created ON audit(created_at);",

        /* 12: artifacts (issue 15). */
        "CREATE TABLE artifacts("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  sandbox_id " T " NOT NULL DEFAULT '',"
        "  state " T " NOT NULL,"
        "  name " T " NOT NULL,"
        "  path " T " NOT NULL DEFAULT '',"
        "  content_type " T " NOT NULL,"
        "  checksum " T " NOT NULL DEFAULT '',"
        "  metadata " T " NOT NULL DEFAULT '{}',"
        "  size BIGINT NOT NULL DEFAULT 0,"
        "  created_at BIGINT NOT NULL,"
        "  expires_at BIGINT NOT NULL DEFAULT 0,"
        "  ttl_s BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX artifacts_org ON artifacts(org_id, state, created_at, id);"
        "CREATE INDEX artifacts_expiry ON artifacts(expires_at) WHERE expires_at > 0;",

        /* 13: snapshot profiles and the warm class of a sandbox (issue 15). */
        "CREATE TABLE snapshot_profiles("
        "  key " T " PRIMARY KEY,"
        "  vcpu_count BIGINT NOT NULL,"
        "  mem_size_mib BIGINT NOT NULL,"
        "  kernel_path " T " NOT NULL DEFAULT '',"
        "  rootfs_path " T " NOT NULL DEFAULT '',"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  version BIGINT NOT NULL DEFAULT 1);"
        "ALTER TABLE sandboxes ADD COLUMN warm_class " T " NOT NULL DEFAULT '';"
        "CREATE INDEX sandboxes_org_class ON sandboxes(org_id, warm_class, created_at);",

        /* 14: the GitHub integration (issue 15). */
        "CREATE TABLE github_installations("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL DEFAULT '',"
        "  account_login " T " NOT NULL DEFAULT '',"
        "  account_type " T " NOT NULL DEFAULT '',"
        "  status " T " NOT NULL DEFAULT 'active',"
        "  repos_json " T " NOT NULL DEFAULT '[]',"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  updated_at BIGINT NOT NULL DEFAULT 0,"
        "  connected_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX github_installations_org ON github_installations(org_id, created_at);"
        "CREATE TABLE github_settings("
        "  org_id " T " PRIMARY KEY,"
        "  settings_json " T " NOT NULL DEFAULT '{}',"
        "  updated_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE TABLE github_events("
        "  seq BIGSERIAL PRIMARY KEY,"
        "  id " T " NOT NULL UNIQUE,"
        "  delivery_id " T " NOT NULL DEFAULT '',"
        "  org_id " T " NOT NULL DEFAULT '',"
        "  installation_id " T " NOT NULL DEFAULT '',"
        "  event " T " NOT NULL DEFAULT '',"
        "  action " T " NOT NULL DEFAULT '',"
        "  repo " T " NOT NULL DEFAULT '',"
        "  pr_number BIGINT NOT NULL DEFAULT 0,"
        "  status " T " NOT NULL DEFAULT '',"
        "  error " T " NOT NULL DEFAULT '',"
        "  detail " T " NOT NULL DEFAULT '',"
        "  sandbox_id " T " NOT NULL DEFAULT '',"
        "  received_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE UNIQUE INDEX github_events_delivery ON github_events(delivery_id) WHERE delivery_id <> '';"
        "CREATE INDEX github_events_org ON github_events(org_id, seq);"
        "CREATE INDEX github_events_pr ON github_events(org_id, repo, pr_number) WHERE sandbox_id <> '';",

        /* 15: egress policies and their audit (issue 15). */
        "CREATE TABLE egress_policies("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  doc " T " NOT NULL,"
        "  created_at BIGINT NOT NULL,"
        "  updated_at BIGINT NOT NULL);"
        "CREATE INDEX egress_policies_org ON egress_policies(org_id, created_at);"
        "CREATE TABLE egress_audit("
        "  seq BIGSERIAL PRIMARY KEY,"
        "  org_id " T " NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,"
        "  sandbox_id " T " NOT NULL,"
        "  at BIGINT NOT NULL,"
        "  host " T " NOT NULL,"
        "  port BIGINT NOT NULL,"
        "  protocol " T " NOT NULL,"
        "  decision " T " NOT NULL,"
        "  mode " T " NOT NULL,"
        "  violation BOOLEAN NOT NULL,"
        "  reason " T " NOT NULL,"
        "  bytes_out BIGINT NOT NULL,"
        "  bytes_in BIGINT NOT NULL);"
        "CREATE INDEX egress_audit_org ON egress_audit(org_id, seq);"
        "CREATE INDEX egress_audit_at ON egress_audit(at);",

        /* 16: single sign-on (issue 15). Empty link values are stored as
         * NULL so UNIQUE ignores them. */
        "CREATE TABLE sso_identities("
        "  issuer " T " NOT NULL,"
        "  subject " T " NOT NULL,"
        "  user_id " T " NOT NULL REFERENCES users(id) ON DELETE CASCADE,"
        "  org_id " T " NOT NULL,"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  PRIMARY KEY(issuer, subject));"
        "CREATE TABLE sso_links("
        "  org_id " T " PRIMARY KEY REFERENCES orgs(id) ON DELETE CASCADE,"
        "  provider_org_id " T " UNIQUE,"
        "  domain " T " UNIQUE,"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  updated_at BIGINT NOT NULL DEFAULT 0);",

        /* 17 (issue 15): webhooks. The cursor is the last event the
         * dispatcher looked at; a delivery row is queued in the same
         * transaction that moves it, and the unique index refuses a second
         * row for one event, so a restart neither loses nor repeats a
         * delivery. */
        "CREATE TABLE webhooks("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL,"
        "  url " T " NOT NULL,"
        "  events_json " T " NOT NULL DEFAULT '[\"*\"]',"
        "  description " T " NOT NULL DEFAULT '',"
        "  active BOOLEAN NOT NULL DEFAULT TRUE,"
        "  sealed_secret " T " NOT NULL,"
        "  key_id " T " NOT NULL DEFAULT '',"
        "  cursor BIGINT NOT NULL DEFAULT 0,"
        "  failing_since BIGINT NOT NULL DEFAULT 0,"
        "  disabled_reason " T " NOT NULL DEFAULT '',"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  updated_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX webhooks_org ON webhooks(org_id, created_at, id);"
        "CREATE TABLE webhook_deliveries("
        "  seq BIGSERIAL PRIMARY KEY,"
        "  id " T " NOT NULL UNIQUE,"
        "  webhook_id " T " NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,"
        "  org_id " T " NOT NULL,"
        "  origin " T " NOT NULL DEFAULT 'event',"
        "  event_id BIGINT NOT NULL DEFAULT 0,"
        "  event " T " NOT NULL DEFAULT '',"
        "  payload " T " NOT NULL,"
        "  status " T " NOT NULL DEFAULT 'pending',"
        "  attempts BIGINT NOT NULL DEFAULT 0,"
        "  last_status BIGINT NOT NULL DEFAULT 0,"
        "  last_error " T " NOT NULL DEFAULT '',"
        "  last_duration_ms BIGINT NOT NULL DEFAULT 0,"
        "  log_json " T " NOT NULL DEFAULT '[]',"
        "  next_attempt_at BIGINT NOT NULL DEFAULT 0,"
        "  created_at BIGINT NOT NULL DEFAULT 0,"
        "  delivered_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries(webhook_id, event_id) "
        "  WHERE origin = 'event';"
        "CREATE INDEX webhook_deliveries_queue ON webhook_deliveries(webhook_id, status, seq);",

        /* 18 (issue 16, scale-out): the nodes of a cluster and which node
         * serves each sandbox. lease_epoch is the compare-and-set counter
         * store_sandbox_claim moves; node_id '' = unowned (every sandbox of
         * a single daemon). */
        "ALTER TABLE sandboxes ADD COLUMN node_id " T " NOT NULL DEFAULT '';"
        "ALTER TABLE sandboxes ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;"
        "CREATE INDEX sandboxes_node ON sandboxes(node_id);"
        "CREATE TABLE cluster_nodes("
        "  id " T " PRIMARY KEY,"
        "  url " T " NOT NULL DEFAULT '',"
        "  epoch BIGINT NOT NULL DEFAULT 0,"
        "  started_at BIGINT NOT NULL DEFAULT 0,"
        "  heartbeat_at BIGINT NOT NULL DEFAULT 0,"
        "  cpu_millis BIGINT NOT NULL DEFAULT 0,"
        "  mem_bytes BIGINT NOT NULL DEFAULT 0,"
        "  contexts BIGINT NOT NULL DEFAULT 0,"
        "  sandboxes BIGINT NOT NULL DEFAULT 0,"
        "  state " T " NOT NULL DEFAULT 'up');",
        /* 19 (issue 16): the concurrency slots orgs hold while something
         * runs, per node, so the controller's execution budget is counted
         * over every node (store_slot_take); a dead node's are deleted.
         * queued_requests.node_id: who runs a processing request, so a
         * dead or restarted node's runs are failed, not every node's. */
        "CREATE TABLE exec_slots("
        "  id " T " PRIMARY KEY,"
        "  org_id " T " NOT NULL,"
        "  node_id " T " NOT NULL DEFAULT '',"
        "  kind " T " NOT NULL,"
        "  started_at BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX exec_slots_org ON exec_slots(org_id, kind);"
        "CREATE INDEX exec_slots_node ON exec_slots(node_id);"
        "ALTER TABLE queued_requests ADD COLUMN node_id " T " NOT NULL DEFAULT '';",
};

int pgs_schema_latest(void)
{
        return (int)ARRAY_SIZE(migrations);
}

int pgs_schema_version_on(PGconn *db)
{
        uint64_t v;
        int r = pgs_query_u64(db, &v, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", "");

        if (r < 0)
                return r;
        return v > INT32_MAX ? -ERANGE : (int)v;
}

int pgs_schema_version(struct store *s)
{
        PGS_CONN(s, db);
        return pgs_schema_version_on(db);
}

static int fail(PGconn *db, int r, struct err *err, const char *what)
{
        return err_set(err, ERR_INTERNAL, -r, "%s: %s", what, PQerrorMessage(db));
}

/* The lock comes first, so the applied check sees what another node's
 * finished migration wrote; CREATE TABLE IF NOT EXISTS under it, so two
 * fresh starts do not race on the catalog. */
static int migration_apply(PGconn *db, int version, const char *sql, struct err *err)
{
        _cleanup_tx_ PGconn *tx = NULL;
        uint64_t applied;
        int r;

        if ((r = pgs_tx_begin(db, &tx)) < 0)
                return fail(db, r, err, "begin migration");
        if ((r = pgs_tx_lock(db, "sandboxd.migrate")) < 0)
                return fail(db, r, err, "lock migrations");
        if ((r = pgs_exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations("
                              "version BIGINT PRIMARY KEY, applied_at BIGINT)", err)) < 0)
                return r;
        if ((r = pgs_query_u64(db, &applied, "SELECT COUNT(*) FROM schema_migrations WHERE version = $1", "u",
                               (uint64_t)version)) < 0)
                return fail(db, r, err, "read schema_migrations");
        if (applied)
                return 0;
        if ((r = pgs_exec(db, sql, err)) < 0)
                return r;
        if ((r = pgs_run(db, "INSERT INTO schema_migrations(version, applied_at) VALUES($1, $2)", "uu",
                         (uint64_t)version, wall_ms())) < 0)
                return fail(db, r, err, "record migration");
        if ((r = pgs_tx_commit(&tx)) < 0)
                return fail(db, r, err, "commit migration");
        return 0;
}

int pgs_migrate(PGconn *db, struct err *err)
{
        int r = migration_apply(db, 1, migrations[0], err);
        int current;

        if (r < 0)
                return r;
        current = pgs_schema_version_on(db);
        if (current < 0)
                return fail(db, current, err, "read schema version");
        /* A newer daemon migrated this database; refuse rather than guess. */
        if (current > pgs_schema_latest())
                return err_set(err, ERR_INTERNAL, EPROTO, "database schema version %d is newer than supported (%d)",
                               current, pgs_schema_latest());
        for (size_t i = 1; i < ARRAY_SIZE(migrations); i++) {
                r = migration_apply(db, (int)i + 1, migrations[i], err);
                if (r < 0)
                        return r;
        }
        return 0;
}
