/* The SQLite backend's connection: open (file mode, pragmas, migrations),
 * close, integrity check, and the ops table the store core dispatches to. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/sqlite/sqlite.h"

/* Runs a PRAGMA that reports its effective value and returns it as text. */
static int pragma_text(sqlite3 *db, const char *sql, char *buf, size_t len)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sq_prepare(db, sql, &st);
        if (r < 0)
                return r;
        r = sq_step(st);
        if (r < 0)
                return r;
        if (r == 0)   /* pragma unknown to this SQLite build */
                return -EOPNOTSUPP;
        return sq_column_copy(st, 0, buf, len);
}

static int configure(sqlite3 *db, struct err *err)
{
        char val[32];
        int r;

        /* Before journal_mode: switching to WAL needs a lock another
         * process may briefly hold. */
        r = sq_exec(db, "PRAGMA busy_timeout=5000", err);
        if (r < 0)
                return r;
        /* WAL lets readers proceed during a write and makes each commit one
         * sequential append. The setting is persistent in the file. */
        r = pragma_text(db, "PRAGMA journal_mode=WAL", val, sizeof(val));
        if (r < 0)
                return sq_fail(db, r, err, "PRAGMA journal_mode=WAL");
        /* In-memory databases (empty filename) cannot do WAL; anything else
         * that refuses it would silently lose the durability we promise. */
        if (strcmp(val, "wal") != 0 && sqlite3_db_filename(db, "main")[0] != '\0')
                return err_set(err, ERR_INTERNAL, EIO, "journal_mode is '%s', wanted 'wal'", val);
        /* FULL fsyncs the WAL on every commit. NORMAL (the usual WAL
         * pairing) only survives process crashes: a power loss can drop
         * commits that were already acknowledged to clients. Per
         * connection, so it must be set on every open. */
        r = sq_exec(db, "PRAGMA synchronous=FULL", err);
        if (r < 0)
                return r;
        /* Per connection and off by default; the cascades from sandboxes to
         * contexts to cells depend on it. It is a no-op inside a
         * transaction, hence here before any. */
        r = sq_exec(db, "PRAGMA foreign_keys=ON", err);
        if (r < 0)
                return r;
        r = pragma_text(db, "PRAGMA foreign_keys", val, sizeof(val));
        if (r < 0 || strcmp(val, "1") != 0)
                return err_set(err, ERR_INTERNAL, EOPNOTSUPP, "foreign keys unavailable in this SQLite build");
        return 0;
}

/* SQLite creates new files 0644 (minus umask); env_json may hold secrets,
 * so create the file 0600 first. SQLite gives the -wal and -shm files the
 * mode of the main file. ":memory:" and "" are not files. */
static int precreate(const char *path)
{
        _cleanup_close_ int fd = -1;

        if (path[0] == '\0' || strcmp(path, ":memory:") == 0)
                return 0;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        return 0;
}

/* The WAL is "<database file>-wal" (SQLite's own naming, also for a
 * database opened through a symlink: it uses the name it was given). */
static int wal_path(struct sq_store *q)
{
        const char *main = sqlite3_db_filename(q->db, "main");
        if (!main || !main[0])
                return 0;
        if (asprintf(&q->wal, "%s-wal", main) < 0) {
                q->wal = NULL;
                return -ENOMEM;
        }
        return 0;
}

static void sq_close(struct store *s)
{
        struct sq_store *q = (struct sq_store *)s;

        /* Statements are per call but the kept ones (finalized here), so
         * none are outstanding and the plain close cannot fail with
         * SQLITE_BUSY. */
        sq_hot_done(q);
        sqlite3_close(q->db);
        free(q->wal);
        free(q);
}

static void sq_closep(struct sq_store **q)
{
        if (*q)
                sq_close(&(*q)->base);
}

/* "sqlite:///abs/path" (the SQLAlchemy spelling) names "/abs/path". */
static const char *path_of(const char *rest)
{
        return strncmp(rest, "//", 2) == 0 ? rest + 2 : rest;
}

static int sq_open(const char *url, const char *rest, struct store **ret, struct err *err)
{
        _cleanup_(sq_closep) struct sq_store *q = NULL;
        const char *path = path_of(rest);
        int rc, r;

        (void)url;
        q = calloc(1, sizeof(*q));
        if (!q)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        r = precreate(path);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "create '%s': %s", path, strerror(-r));
        /* NOMUTEX: the store core already serialises every use of the
         * connection, so SQLite's per-call mutex would be pure overhead.
         * The unix VFS opens its files O_CLOEXEC, so jailed children never
         * inherit them. */
        rc = sqlite3_open_v2(path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
        if (rc != SQLITE_OK) {
                if (q->db)
                        return sq_fail(q->db, sq_errno(rc), err, "open");
                return err_set(err, ERR_INTERNAL, -sq_errno(rc), "open: %s", sqlite3_errstr(rc));
        }
        /* Extended codes let sq_errno tell a duplicate key from a missing
         * foreign-key parent. */
        sqlite3_extended_result_codes(q->db, 1);

        r = configure(q->db, err);
        if (r < 0)
                return r;
        r = sq_migrate(q->db, err);
        if (r < 0)
                return r;
        r = wal_path(q);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "out of memory");
        *ret = &TAKE_PTR(q)->base;
        return 0;
}

/* synchronous=NORMAL in WAL mode: a commit is written to the WAL (the OS
 * has it: a killed daemon loses nothing) but not fsynced; a power loss may
 * drop it. Per connection, so it is switched back after the write. */
static int sq_lazy_commit(struct store *s, bool on)
{
        /* Not a kept statement: this PRAGMA takes effect when it is
         * prepared, not when it is stepped. */
        int rc = sqlite3_exec(sq_db(s), on ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL", NULL, NULL,
                              NULL);
        return rc == SQLITE_OK ? 0 : sq_errno(rc);
}

/* fdatasync through a descriptor of our own flushes the pages every
 * descriptor wrote: the commits the connection made lazily. Frames SQLite
 * already checkpointed into the database file were synced by that
 * checkpoint (NORMAL syncs the WAL before and the file after one). */
static int sq_sync(struct store *s)
{
        struct sq_store *q = (struct sq_store *)s;
        if (!q->wal)
                return 0;
        _cleanup_close_ int fd = open(q->wal, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        return fdatasync(fd) < 0 ? -errno : 0;
}

static int sq_integrity_check(struct store *s, char *msg, size_t len)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        sqlite3 *db = sq_db(s);
        char first[512];
        int r;

        r = sq_prepare(db, "PRAGMA integrity_check", &st);
        if (r < 0)
                return sq_err(db, r, msg, len, "integrity_check");
        r = sq_step(st);
        if (r < 0)
                return sq_err(db, r, msg, len, "integrity_check");
        if (r == 0) {
                store_set_msg(msg, len, "integrity_check returned nothing");
                return -EIO;
        }
        /* Problems may be longer than our buffer; any prefix will do. */
        snprintf(first, sizeof(first), "%s", (const char *)sqlite3_column_text(st, 0) ?: "");
        store_set_msg(msg, len, "%s", first);
        return strcmp(first, "ok") == 0 ? 0 : -EIO;
}

const struct store_ops store_sqlite_ops = {
        .name = "sqlite",
        .serialize = true,
        .open = sq_open,
        .close = sq_close,
        .integrity_check = sq_integrity_check,
        .lazy_commit = sq_lazy_commit,
        .sync = sq_sync,
        .schema_version = sq_schema_version,
        .org_ensure = sq_org_ensure,
        .org_get = sq_org_get,
        .account_create = sq_account_create,
        .user_get = sq_user_get,
        .user_get_by_email = sq_user_get_by_email,
        .apikey_create = sq_apikey_create,
        .apikey_get_by_hash = sq_apikey_get_by_hash,
        .apikey_get = sq_apikey_get,
        .apikey_list = sq_apikey_list,
        .apikey_delete = sq_apikey_delete,
        .apikey_rehash = sq_apikey_rehash,
        .session_create = sq_session_create,
        .session_get = sq_session_get,
        .session_revoke = sq_session_revoke,
        .idem_get = sq_idem_get,
        .idem_put = sq_idem_put,
        .gh_install_put = sq_gh_install_put,
        .gh_install_get = sq_gh_install_get,
        .gh_install_delete = sq_gh_install_delete,
        .gh_install_link = sq_gh_install_link,
        .gh_install_list = sq_gh_install_list,
        .gh_settings_get = sq_gh_settings_get,
        .gh_settings_put = sq_gh_settings_put,
        .gh_event_insert = sq_gh_event_insert,
        .gh_event_update = sq_gh_event_update,
        .gh_event_list = sq_gh_event_list,
        .gh_event_stats = sq_gh_event_stats,
        .gh_event_sandboxes = sq_gh_event_sandboxes,
        .queue_insert = sq_queue_insert,
        .queue_get = sq_queue_get,
        .queue_update = sq_queue_update,
        .queue_start = sq_queue_start,
        .queue_fail_node = sq_queue_fail_node,
        .queue_list = sq_queue_list,
        .queue_heads = sq_queue_heads,
        .queue_position = sq_queue_position,
        .queue_stats = sq_queue_stats,
        .queue_settle = sq_queue_settle,
        .egress_policy_create = sq_egress_policy_create,
        .egress_policy_update = sq_egress_policy_update,
        .egress_policy_delete = sq_egress_policy_delete,
        .egress_policy_list = sq_egress_policy_list,
        .egress_audit_insert = sq_egress_audit_insert,
        .egress_audit_list = sq_egress_audit_list,
        .egress_audit_prune = sq_egress_audit_prune,
        .secret_create = sq_secret_create,
        .secret_update = sq_secret_update,
        .secret_delete = sq_secret_delete,
        .secret_list = sq_secret_list,
        .checkpoint_create = sq_checkpoint_create,
        .checkpoint_get = sq_checkpoint_get,
        .checkpoint_delete = sq_checkpoint_delete,
        .checkpoint_list = sq_checkpoint_list,
        .checkpoint_usage = sq_checkpoint_usage,
        .event_append = sq_event_append,
        .event_last = sq_event_last,
        .event_list = sq_event_list,
        .audit_append = sq_audit_append,
        .audit_list = sq_audit_list,
        .audit_summary = sq_audit_summary,
        .artifact_put = sq_artifact_put,
        .artifact_get = sq_artifact_get,
        .artifact_delete = sq_artifact_delete,
        .artifact_list = sq_artifact_list,
        .artifact_list_expired = sq_artifact_list_expired,
        .artifact_bytes = sq_artifact_bytes,
        .snapshot_profile_put = sq_snapshot_profile_put,
        .snapshot_profile_get = sq_snapshot_profile_get,
        .snapshot_profile_delete = sq_snapshot_profile_delete,
        .snapshot_profile_list = sq_snapshot_profile_list,
        .sso_identity_get = sq_sso_identity_get,
        .sso_identity_create = sq_sso_identity_create,
        .sso_user_create = sq_sso_user_create,
        .sso_link_get = sq_sso_link_get,
        .sso_link_find = sq_sso_link_find,
        .sso_link_put = sq_sso_link_put,
        .sso_link_delete = sq_sso_link_delete,
        .webhook_create = sq_webhook_create,
        .webhook_get = sq_webhook_get,
        .webhook_update = sq_webhook_update,
        .webhook_set_active = sq_webhook_set_active,
        .webhook_delete = sq_webhook_delete,
        .webhook_list = sq_webhook_list,
        .webhook_health = sq_webhook_health,
        .webhook_enqueue = sq_webhook_enqueue,
        .webhook_delivery_get = sq_webhook_delivery_get,
        .webhook_delivery_update = sq_webhook_delivery_update,
        .webhook_delivery_list = sq_webhook_delivery_list,
        .webhook_delivery_heads = sq_webhook_delivery_heads,
        .sandbox_get = sq_sandbox_get,
        .sandbox_put = sq_sandbox_put,
        .sandbox_touch = sq_sandbox_touch,
        .sandbox_set_env = sq_sandbox_set_env,
        .sandbox_delete = sq_sandbox_delete,
        .sandbox_list_expired = sq_sandbox_list_expired,
        .sandbox_count = sq_sandbox_count,
        .sandbox_list_org = sq_sandbox_list_org,
        .sandbox_ids_in_org = sq_sandbox_ids_in_org,
        .sandbox_ids_in_class = sq_sandbox_ids_in_class,
        .sandbox_disk_reserved = sq_sandbox_disk_reserved,
        .sandbox_free_host_id = sq_sandbox_free_host_id,
        .sandbox_claim = sq_sandbox_claim,
        .sandbox_owner = sq_sandbox_owner,
        .sandbox_list_on_node = sq_sandbox_list_on_node,
        .sandbox_usage_on_node = sq_sandbox_usage_on_node,
        .node_heartbeat = sq_node_heartbeat,
        .slot_take = sq_slot_take,
        .slot_give = sq_slot_give,
        .slot_free_node = sq_slot_free_node,
        .slot_count = sq_slot_count,
        .node_list = sq_node_list,
        .context_insert = sq_context_insert,
        .context_update = sq_context_update,
        .context_get = sq_context_get,
        .context_delete = sq_context_delete,
        .context_list = sq_context_list,
        .context_count = sq_context_count,
        .cell_append = sq_cell_append,
        .cell_append_row = sq_cell_append_row,
        .cell_list = sq_cell_list,
        .cells_delete = sq_cells_delete,
        .cell_stats = sq_cell_stats,
};
