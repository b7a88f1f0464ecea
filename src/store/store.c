/* Metadata store on SQLite. One connection, opened without SQLite's own
 * mutexes, serialised by s->lock: every public call takes the lock for its
 * whole duration, so each call is atomic with respect to the others, and
 * multi-statement calls additionally run in one transaction so they are
 * atomic on disk too. Statements are prepared per call; all user data goes
 * through sqlite3_bind_*, never into SQL text. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"

struct store {
        sqlite3 *db;
        pthread_mutex_t lock;
        bool lock_init;
};

/* Migration N is migrations[N - 1]. Append only: an applied migration is
 * never edited, because databases in the field already ran it. */
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
};

/* ---- error mapping ---------------------------------------------------- */

/* rc is an extended result code (enabled at open). */
static int errno_from_sqlite(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_DONE:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_CONSTRAINT:
                switch (rc) {
                case SQLITE_CONSTRAINT_PRIMARYKEY:
                case SQLITE_CONSTRAINT_UNIQUE:
                        return -EEXIST;
                case SQLITE_CONSTRAINT_FOREIGNKEY:
                        /* The referenced org/sandbox/context does not exist. */
                        return -ENOENT;
                default:
                        return -EINVAL;
                }
        default:
                return -EIO;
        }
}

static void set_msg(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_msg(char *buf, size_t len, const char *fmt, ...)
{
        va_list ap;

        if (!buf || len == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
}

/* Fills buf with "what: <sqlite message>" and returns r. Must be called
 * before anything else runs on db, since a later ROLLBACK resets the
 * message. */
static int db_err(sqlite3 *db, int r, char *buf, size_t len, const char *what)
{
        set_msg(buf, len, "%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
        return r;
}

/* ---- scope-bound helpers ---------------------------------------------- */

static void finalizep(sqlite3_stmt **st)
{
        if (*st)
                sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(finalizep)

static pthread_mutex_t *lock_store(struct store *s)
{
        pthread_mutex_lock(&s->lock);
        return &s->lock;
}

static void unlockp(pthread_mutex_t **m)
{
        if (*m)
                pthread_mutex_unlock(*m);
}

/* Public functions validate their arguments, take the lock, then call a
 * static worker on s->db that owns the statements: the worker's cleanups
 * (finalize, rollback) have all run by the time the guard unlocks. */
#define STORE_LOCKED(s) _cleanup_(unlockp) UNUSED pthread_mutex_t *store_guard_ = lock_store(s)

/* A transaction is represented by its connection; the cleanup rolls back
 * unless tx_commit() cleared it. Statements live in helpers called under
 * the transaction, so none is pending when it rolls back. */
static void rollbackp(sqlite3 **tx)
{
        /* A failed COMMIT may already have rolled back on its own. */
        if (*tx && !sqlite3_get_autocommit(*tx))
                sqlite3_exec(*tx, "ROLLBACK", NULL, NULL, NULL);
}
#define _cleanup_tx_ _cleanup_(rollbackp)

/* IMMEDIATE takes the write lock up front: a deferred transaction that
 * reads and then writes can fail with SQLITE_BUSY on the upgrade in WAL
 * mode without the busy handler ever retrying, and the read-check-write
 * sequences below must not interleave with another writer. */
static int tx_begin(sqlite3 *db, sqlite3 **ret_tx)
{
        int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return errno_from_sqlite(rc);
        *ret_tx = db;
        return 0;
}

static int tx_commit(sqlite3 **tx)
{
        int rc = sqlite3_exec(*tx, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return errno_from_sqlite(rc);   /* *tx kept: cleanup rolls back */
        *tx = NULL;
        return 0;
}

/* ---- statements ------------------------------------------------------- */

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v3(db, sql, -1, 0, &st, NULL);
        if (rc != SQLITE_OK) {
                sqlite3_finalize(st);
                return errno_from_sqlite(rc);
        }
        *ret = st;
        return 0;
}

static int bind_text(sqlite3_stmt *st, int idx, const char *v)
{
        return errno_from_sqlite(sqlite3_bind_text(st, idx, v, -1, SQLITE_TRANSIENT));
}

/* SQLite integers are signed 64-bit; refuse what would come back negative
 * and break ordering and the expiry comparison. */
static int bind_u64(sqlite3_stmt *st, int idx, uint64_t v)
{
        if (v > (uint64_t)INT64_MAX)
                return -ERANGE;
        return errno_from_sqlite(sqlite3_bind_int64(st, idx, (sqlite3_int64)v));
}

/* Returns 1 for a row, 0 when done, -errno on error. */
static int step(sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        return errno_from_sqlite(rc);
}

/* Runs a statement that returns no rows. */
static int step_done(sqlite3_stmt *st)
{
        int r = step(st);
        return r > 0 ? -EIO : r;
}

/* For UPDATE/DELETE by primary key: no row touched means no such row. */
static int step_changed(sqlite3_stmt *st)
{
        int r = step_done(st);
        if (r < 0)
                return r;
        return sqlite3_changes(sqlite3_db_handle(st)) > 0 ? 0 : -ENOENT;
}

static uint64_t column_u64(sqlite3_stmt *st, int col)
{
        return (uint64_t)sqlite3_column_int64(st, col);
}

/* Copies a text column into a fixed-size field; never truncates. NULL
 * reads as "". */
static int column_copy(sqlite3_stmt *st, int col, char *dst, size_t size)
{
        const unsigned char *t = sqlite3_column_text(st, col);
        size_t n;

        if (!t) {
                if (sqlite3_column_type(st, col) != SQLITE_NULL)
                        return -ENOMEM;
                dst[0] = '\0';
                return 0;
        }
        n = (size_t)sqlite3_column_bytes(st, col);
        if (n >= size)
                return -ENAMETOOLONG;
        memcpy(dst, t, n);
        dst[n] = '\0';
        return 0;
}

/* Returns a malloc'd copy of a text column, or of dflt when NULL. */
static int column_dup(sqlite3_stmt *st, int col, const char *dflt, char **ret)
{
        const unsigned char *t = sqlite3_column_text(st, col);
        char *p;

        if (!t && sqlite3_column_type(st, col) != SQLITE_NULL)
                return -ENOMEM;
        p = strdup(t ? (const char *)t : dflt);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* ---- input checks ----------------------------------------------------- */

/* A value that will be read back into a char[size] field must fit with its
 * NUL; strnlen keeps this safe for unterminated fixed-size inputs. */
static int check_str(const char *v, size_t size)
{
        if (!v)
                return -EINVAL;
        if (strnlen(v, size) >= size)
                return -ENAMETOOLONG;
        return 0;
}

static int check_id(const char *id)
{
        int r = check_str(id, STORE_ID_MAX);
        if (r < 0)
                return r;
        return id[0] ? 0 : -EINVAL;
}

static const char *env_or_default(const char *env_json)
{
        return env_json ? env_json : "{}";
}

/* ---- open / close / migrations ---------------------------------------- */

static int exec_sql(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return db_err(db, errno_from_sqlite(rc), err, errlen, sql);
        return 0;
}

static int schema_version(sqlite3 *db)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &st);
        if (r < 0)
                return r;
        r = step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EIO;
        return sqlite3_column_int(st, 0);
}

static int migration_applied(sqlite3 *db, int version)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, "SELECT 1 FROM schema_migrations WHERE version = ?", &st);
        if (r < 0)
                return r;
        r = sqlite3_bind_int(st, 1, version);
        if (r != SQLITE_OK)
                return errno_from_sqlite(r);
        return step(st);
}

static int migration_record(sqlite3 *db, int version)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, "INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)", &st);
        if (r < 0)
                return r;
        if ((r = errno_from_sqlite(sqlite3_bind_int(st, 1, version))) < 0 ||
            (r = bind_u64(st, 2, wall_ms())) < 0)
                return r;
        return step_done(st);
}

/* The applied check runs inside the migration's own transaction so two
 * processes opening a fresh database cannot both apply it. */
static int migration_apply(sqlite3 *db, int version, const char *sql, char *err, size_t errlen)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r;

        r = tx_begin(db, &tx);
        if (r < 0)
                return db_err(db, r, err, errlen, "begin migration");
        r = migration_applied(db, version);
        if (r < 0)
                return db_err(db, r, err, errlen, "read schema_migrations");
        if (r > 0)
                return 0;
        r = exec_sql(db, sql, err, errlen);
        if (r < 0)
                return r;
        r = migration_record(db, version);
        if (r < 0)
                return db_err(db, r, err, errlen, "record migration");
        r = tx_commit(&tx);
        if (r < 0)
                return db_err(db, r, err, errlen, "commit migration");
        return 0;
}

static int migrate(sqlite3 *db, char *err, size_t errlen)
{
        int r, current;

        r = exec_sql(db,
                     "CREATE TABLE IF NOT EXISTS schema_migrations("
                     "version INTEGER PRIMARY KEY, applied_at INTEGER)",
                     err, errlen);
        if (r < 0)
                return r;
        current = schema_version(db);
        if (current < 0)
                return db_err(db, current, err, errlen, "read schema version");
        /* A newer daemon migrated this file; an older one would misread the
         * tables it does not know about, so refuse rather than guess. */
        if ((size_t)current > ARRAY_SIZE(migrations)) {
                set_msg(err, errlen, "database schema version %d is newer than supported (%zu)",
                        current, ARRAY_SIZE(migrations));
                return -EPROTO;
        }
        for (size_t i = 0; i < ARRAY_SIZE(migrations); i++) {
                r = migration_apply(db, (int)i + 1, migrations[i], err, errlen);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Runs a PRAGMA that reports its effective value and returns it as text. */
static int pragma_text(sqlite3 *db, const char *sql, char *buf, size_t len)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, sql, &st);
        if (r < 0)
                return r;
        r = step(st);
        if (r < 0)
                return r;
        if (r == 0)   /* pragma unknown to this SQLite build */
                return -EOPNOTSUPP;
        return column_copy(st, 0, buf, len);
}

static int configure(sqlite3 *db, char *err, size_t errlen)
{
        char val[32];
        int r;

        /* Before journal_mode: switching to WAL needs a lock another
         * process may briefly hold. */
        r = exec_sql(db, "PRAGMA busy_timeout=5000", err, errlen);
        if (r < 0)
                return r;
        /* WAL lets readers proceed during a write and makes each commit one
         * sequential append. The setting is persistent in the file. */
        r = pragma_text(db, "PRAGMA journal_mode=WAL", val, sizeof(val));
        if (r < 0)
                return db_err(db, r, err, errlen, "PRAGMA journal_mode=WAL");
        /* In-memory databases (empty filename) cannot do WAL; anything else
         * that refuses it would silently lose the durability we promise. */
        if (strcmp(val, "wal") != 0 && sqlite3_db_filename(db, "main")[0] != '\0') {
                set_msg(err, errlen, "journal_mode is '%s', wanted 'wal'", val);
                return -EIO;
        }
        /* FULL fsyncs the WAL on every commit. NORMAL (the usual WAL
         * pairing) only survives process crashes: a power loss can drop
         * commits that were already acknowledged to clients. Per
         * connection, so it must be set on every open. */
        r = exec_sql(db, "PRAGMA synchronous=FULL", err, errlen);
        if (r < 0)
                return r;
        /* Per connection and off by default; the cascades from sandboxes to
         * contexts to cells depend on it. It is a no-op inside a
         * transaction, hence here before any. */
        r = exec_sql(db, "PRAGMA foreign_keys=ON", err, errlen);
        if (r < 0)
                return r;
        r = pragma_text(db, "PRAGMA foreign_keys", val, sizeof(val));
        if (r < 0 || strcmp(val, "1") != 0) {
                set_msg(err, errlen, "foreign keys unavailable in this SQLite build");
                return -EOPNOTSUPP;
        }
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

static void store_closep(struct store **s)
{
        store_close(*s);
}

int store_open(const char *path, struct store **ret, char *ret_err, size_t errlen)
{
        _cleanup_(store_closep) struct store *s = NULL;
        int rc, r;

        if (!path || !ret) {
                set_msg(ret_err, errlen, "invalid arguments");
                return -EINVAL;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                set_msg(ret_err, errlen, "out of memory");
                return -ENOMEM;
        }
        r = -pthread_mutex_init(&s->lock, NULL);
        if (r < 0) {
                set_msg(ret_err, errlen, "mutex init: %s", strerror(-r));
                return r;
        }
        s->lock_init = true;

        r = precreate(path);
        if (r < 0) {
                set_msg(ret_err, errlen, "create '%s': %s", path, strerror(-r));
                return r;
        }
        /* NOMUTEX: s->lock already serialises every use of the connection,
         * so SQLite's per-call mutex would be pure overhead. The unix VFS
         * opens its files O_CLOEXEC, so jailed children never inherit them. */
        rc = sqlite3_open_v2(path, &s->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) {
                if (s->db)
                        return db_err(s->db, errno_from_sqlite(rc), ret_err, errlen, "open");
                set_msg(ret_err, errlen, "open: %s", sqlite3_errstr(rc));
                return errno_from_sqlite(rc);
        }
        /* Extended codes let errno_from_sqlite tell a duplicate key from a
         * missing foreign-key parent. */
        sqlite3_extended_result_codes(s->db, 1);

        r = configure(s->db, ret_err, errlen);
        if (r < 0)
                return r;
        r = migrate(s->db, ret_err, errlen);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(s);
        return 0;
}

void store_close(struct store *s)
{
        if (!s)
                return;
        /* Statements are per call, so none are outstanding here and the
         * plain close cannot fail with SQLITE_BUSY. */
        sqlite3_close(s->db);
        if (s->lock_init)
                pthread_mutex_destroy(&s->lock);
        free(s);
}

static int integrity_check(sqlite3 *db, char *msg, size_t len)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        char first[512];
        int r;

        r = prepare(db, "PRAGMA integrity_check", &st);
        if (r < 0)
                return db_err(db, r, msg, len, "integrity_check");
        r = step(st);
        if (r < 0)
                return db_err(db, r, msg, len, "integrity_check");
        if (r == 0) {
                set_msg(msg, len, "integrity_check returned nothing");
                return -EIO;
        }
        /* Problems may be longer than our buffer; any prefix will do. */
        snprintf(first, sizeof(first), "%s", (const char *)sqlite3_column_text(st, 0) ?: "");
        set_msg(msg, len, "%s", first);
        return strcmp(first, "ok") == 0 ? 0 : -EIO;
}

int store_integrity_check(struct store *s, char *msg, size_t len)
{
        if (!s)
                return -EINVAL;
        STORE_LOCKED(s);
        return integrity_check(s->db, msg, len);
}

int store_schema_version(struct store *s)
{
        if (!s)
                return -EINVAL;
        STORE_LOCKED(s);
        return schema_version(s->db);
}

/* ---- orgs ------------------------------------------------------------- */

static int org_ensure(sqlite3 *db, const char *id, const char *name)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        /* DO NOTHING keeps the first name and created_at. */
        r = prepare(db,
                    "INSERT INTO orgs(id, name, created_at) VALUES(?, ?, ?) "
                    "ON CONFLICT(id) DO NOTHING",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, id)) < 0 ||
            (r = bind_text(st, 2, name)) < 0 ||
            (r = bind_u64(st, 3, wall_ms())) < 0)
                return r;
        return step_done(st);
}

int store_org_ensure(struct store *s, const char *id, const char *name)
{
        int r;

        if (!s)
                return -EINVAL;
        if (!name)
                name = "";
        if ((r = check_id(id)) < 0 ||
            (r = check_str(name, sizeof(((struct org_row *)NULL)->name))) < 0)
                return r;
        STORE_LOCKED(s);
        return org_ensure(s->db, id, name);
}

static int org_get(sqlite3 *db, const char *id, struct org_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct org_row row = {};
        int r;

        r = prepare(db, "SELECT id, name, created_at FROM orgs WHERE id = ?", &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, id)) < 0)
                return r;
        r = step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        if ((r = column_copy(st, 0, row.id, sizeof(row.id))) < 0 ||
            (r = column_copy(st, 1, row.name, sizeof(row.name))) < 0)
                return r;
        row.created_at = column_u64(st, 2);
        *ret = row;
        return 0;
}

int store_org_get(struct store *s, const char *id, struct org_row *ret)
{
        int r;

        if (!s || !ret)
                return -EINVAL;
        if ((r = check_id(id)) < 0)
                return r;
        STORE_LOCKED(s);
        return org_get(s->db, id, ret);
}

/* ---- shared row helpers ----------------------------------------------- */

/* For UPDATE/DELETE statements keyed by one id bound last. */
static int exec_by_id(sqlite3_stmt *st, int idx, const char *id)
{
        int r = bind_text(st, idx, id);
        if (r < 0)
                return r;
        return step_changed(st);
}

/* Runs a one-row, one-integer query with an optional text parameter. */
static int query_u64(sqlite3 *db, const char *sql, const char *arg, uint64_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, sql, &st);
        if (r < 0)
                return r;
        if (arg && (r = bind_text(st, 1, arg)) < 0)
                return r;
        r = step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EIO;
        *ret = column_u64(st, 0);
        return 0;
}

/* Makes room for element n of the array *p (*cap allocated). */
static int grow(void **p, size_t *cap, size_t n, size_t elem)
{
        size_t ncap;
        void *np;

        if (n < *cap)
                return 0;
        ncap = *cap ? *cap * 2 : 16;
        np = reallocarray(*p, ncap, elem);
        if (!np)
                return -ENOMEM;
        *p = np;
        *cap = ncap;
        return 0;
}

/* ---- sandboxes -------------------------------------------------------- */

void sandbox_row_done(struct sandbox_row *r)
{
        if (!r)
                return;
        free(r->env_json);
        r->env_json = NULL;
}

static int sandbox_get(sqlite3 *db, const char *id, struct sandbox_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_(sandbox_row_done) struct sandbox_row row = {};
        int r;

        r = prepare(db,
                    "SELECT id, org_id, created_at, last_used, expires_at, env_json "
                    "FROM sandboxes WHERE id = ?",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, id)) < 0)
                return r;
        r = step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        if ((r = column_copy(st, 0, row.id, sizeof(row.id))) < 0 ||
            (r = column_copy(st, 1, row.org_id, sizeof(row.org_id))) < 0 ||
            (r = column_dup(st, 5, "{}", &row.env_json)) < 0)
                return r;
        row.created_at = column_u64(st, 2);
        row.last_used = column_u64(st, 3);
        row.expires_at = column_u64(st, 4);
        *ret = row;
        row.env_json = NULL;
        return 0;
}

int store_sandbox_get(struct store *s, const char *id, struct sandbox_row *ret)
{
        int r;

        if (!s || !ret)
                return -EINVAL;
        if ((r = check_id(id)) < 0)
                return r;
        STORE_LOCKED(s);
        return sandbox_get(s->db, id, ret);
}

static int sandbox_put(sqlite3 *db, const struct sandbox_row *row)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        /* An upsert, not INSERT OR REPLACE: REPLACE deletes the old row
         * first, and with foreign keys on that cascades and wipes the
         * sandbox's contexts and cells. */
        r = prepare(db,
                    "INSERT INTO sandboxes(id, org_id, created_at, last_used, expires_at, env_json) "
                    "VALUES(?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(id) DO UPDATE SET org_id = excluded.org_id, "
                    "created_at = excluded.created_at, last_used = excluded.last_used, "
                    "expires_at = excluded.expires_at, env_json = excluded.env_json",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, row->id)) < 0 ||
            (r = bind_text(st, 2, row->org_id)) < 0 ||
            (r = bind_u64(st, 3, row->created_at)) < 0 ||
            (r = bind_u64(st, 4, row->last_used)) < 0 ||
            (r = bind_u64(st, 5, row->expires_at)) < 0 ||
            (r = bind_text(st, 6, env_or_default(row->env_json))) < 0)
                return r;
        return step_done(st);
}

int store_sandbox_put(struct store *s, const struct sandbox_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = check_id(row->org_id)) < 0)
                return r;
        STORE_LOCKED(s);
        return sandbox_put(s->db, row);
}

static int sandbox_touch(sqlite3 *db, const char *id, uint64_t last_used, uint64_t expires_at)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, "UPDATE sandboxes SET last_used = ?, expires_at = ? WHERE id = ?", &st);
        if (r < 0)
                return r;
        if ((r = bind_u64(st, 1, last_used)) < 0 || (r = bind_u64(st, 2, expires_at)) < 0)
                return r;
        return exec_by_id(st, 3, id);
}

int store_sandbox_touch(struct store *s, const char *id, uint64_t last_used, uint64_t expires_at)
{
        int r;

        if (!s)
                return -EINVAL;
        if ((r = check_id(id)) < 0)
                return r;
        STORE_LOCKED(s);
        return sandbox_touch(s->db, id, last_used, expires_at);
}

static int sandbox_set_env(sqlite3 *db, const char *id, const char *env_json)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, "UPDATE sandboxes SET env_json = ? WHERE id = ?", &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, env_or_default(env_json))) < 0)
                return r;
        return exec_by_id(st, 2, id);
}

int store_sandbox_set_env(struct store *s, const char *id, const char *env_json)
{
        int r;

        if (!s)
                return -EINVAL;
        if ((r = check_id(id)) < 0)
                return r;
        STORE_LOCKED(s);
        return sandbox_set_env(s->db, id, env_json);
}

/* One statement, so the cascade to contexts and cells is atomic without
 * an explicit transaction. */
static int delete_by_id(sqlite3 *db, const char *sql, const char *id)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, sql, &st);
        if (r < 0)
                return r;
        return exec_by_id(st, 1, id);
}

int store_sandbox_delete(struct store *s, const char *id)
{
        int r;

        if (!s)
                return -EINVAL;
        if ((r = check_id(id)) < 0)
                return r;
        STORE_LOCKED(s);
        return delete_by_id(s->db, "DELETE FROM sandboxes WHERE id = ?", id);
}

struct id_list {
        char (*ids)[STORE_ID_MAX];
        size_t n, cap;
};

static void id_list_done(struct id_list *l)
{
        free(l->ids);
        l->ids = NULL;
        l->n = l->cap = 0;
}

static int collect_expired(sqlite3 *db, uint64_t now, struct id_list *l)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        void *p;
        int r;

        r = prepare(db,
                    "SELECT id FROM sandboxes WHERE expires_at > 0 AND expires_at <= ? "
                    "ORDER BY expires_at, id",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_u64(st, 1, now)) < 0)
                return r;
        while ((r = step(st)) > 0) {
                p = l->ids;
                r = grow(&p, &l->cap, l->n, sizeof(*l->ids));
                l->ids = p;
                if (r < 0)
                        return r;
                r = column_copy(st, 0, l->ids[l->n], sizeof(l->ids[0]));
                if (r < 0)
                        return r;
                l->n++;
        }
        return r;
}

/* The ids are collected under the lock and fn runs after it is released,
 * so fn may call back into the store (the reaper deletes each expired
 * sandbox from its callback). */
int store_sandbox_each_expired(struct store *s, uint64_t now,
                               void (*fn)(const char *id, void *userdata), void *userdata)
{
        _cleanup_(id_list_done) struct id_list l = {};
        int r;

        if (!s || !fn)
                return -EINVAL;
        {
                STORE_LOCKED(s);
                r = collect_expired(s->db, now, &l);
        }
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++)
                fn(l.ids[i], userdata);
        return 0;
}

int store_sandbox_count(struct store *s, uint64_t *ret)
{
        if (!s || !ret)
                return -EINVAL;
        STORE_LOCKED(s);
        return query_u64(s->db, "SELECT COUNT(*) FROM sandboxes", NULL, ret);
}

/* ---- contexts --------------------------------------------------------- */

#define CONTEXT_COLUMNS                                                      \
        "id, sandbox_id, binding, language, cwd, env_json, created_at, "     \
        "last_used, executions, snap_taken_at, snap_cells, snap_bytes, "     \
        "snap_stale"

void context_row_done(struct context_row *r)
{
        if (!r)
                return;
        free(r->env_json);
        r->env_json = NULL;
}

/* Fills r from a CONTEXT_COLUMNS row. env_json is dup'd last, so on
 * failure r owns nothing. */
static int context_from_stmt(sqlite3_stmt *st, struct context_row *r)
{
        int q;

        if ((q = column_copy(st, 0, r->id, sizeof(r->id))) < 0 ||
            (q = column_copy(st, 1, r->sandbox_id, sizeof(r->sandbox_id))) < 0 ||
            (q = column_copy(st, 2, r->binding, sizeof(r->binding))) < 0 ||
            (q = column_copy(st, 3, r->language, sizeof(r->language))) < 0 ||
            (q = column_copy(st, 4, r->cwd, sizeof(r->cwd))) < 0 ||
            (q = column_dup(st, 5, "{}", &r->env_json)) < 0)
                return q;
        r->created_at = column_u64(st, 6);
        r->last_used = column_u64(st, 7);
        r->executions = column_u64(st, 8);
        r->snap_taken_at = column_u64(st, 9);
        r->snap_cells = column_u64(st, 10);
        r->snap_bytes = column_u64(st, 11);
        r->snap_stale = sqlite3_column_int64(st, 12) != 0;
        return 0;
}

/* Binds cwd, env_json, last_used, executions and the snap_* columns, the
 * part of a row that both insert and update write, from index idx on. */
static int bind_context_state(sqlite3_stmt *st, int idx, const struct context_row *row)
{
        int r;

        if ((r = bind_text(st, idx, row->cwd)) < 0 ||
            (r = bind_text(st, idx + 1, env_or_default(row->env_json))) < 0 ||
            (r = bind_u64(st, idx + 2, row->last_used)) < 0 ||
            (r = bind_u64(st, idx + 3, row->executions)) < 0 ||
            (r = bind_u64(st, idx + 4, row->snap_taken_at)) < 0 ||
            (r = bind_u64(st, idx + 5, row->snap_cells)) < 0 ||
            (r = bind_u64(st, idx + 6, row->snap_bytes)) < 0)
                return r;
        return errno_from_sqlite(sqlite3_bind_int(st, idx + 7, row->snap_stale));
}

static int context_insert(sqlite3 *db, const struct context_row *row)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db,
                    "INSERT INTO contexts(id, sandbox_id, binding, language, created_at, "
                    "cwd, env_json, last_used, executions, snap_taken_at, snap_cells, "
                    "snap_bytes, snap_stale) "
                    "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, row->id)) < 0 ||
            (r = bind_text(st, 2, row->sandbox_id)) < 0 ||
            (r = bind_text(st, 3, row->binding)) < 0 ||
            (r = bind_text(st, 4, row->language)) < 0 ||
            (r = bind_u64(st, 5, row->created_at)) < 0 ||
            (r = bind_context_state(st, 6, row)) < 0)
                return r;
        return step_done(st);
}

int store_context_insert(struct store *s, const struct context_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 ||
            (r = check_id(row->sandbox_id)) < 0 ||
            (r = check_str(row->binding, sizeof(row->binding))) < 0 ||
            (r = check_str(row->language, sizeof(row->language))) < 0 ||
            (r = check_str(row->cwd, sizeof(row->cwd))) < 0)
                return r;
        STORE_LOCKED(s);
        return context_insert(s->db, row);
}

static int context_update(sqlite3 *db, const struct context_row *row)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db,
                    "UPDATE contexts SET cwd = ?, env_json = ?, last_used = ?, executions = ?, "
                    "snap_taken_at = ?, snap_cells = ?, snap_bytes = ?, snap_stale = ? "
                    "WHERE id = ?",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_context_state(st, 1, row)) < 0)
                return r;
        return exec_by_id(st, 9, row->id);
}

int store_context_update(struct store *s, const struct context_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_id(row->id)) < 0 || (r = check_str(row->cwd, sizeof(row->cwd))) < 0)
                return r;
        STORE_LOCKED(s);
        return context_update(s->db, row);
}

static int context_get(sqlite3 *db, const char *id, struct context_row *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_(context_row_done) struct context_row row = {};
        int r;

        r = prepare(db, "SELECT " CONTEXT_COLUMNS " FROM contexts WHERE id = ?", &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, id)) < 0)
                return r;
        r = step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        r = context_from_stmt(st, &row);
        if (r < 0)
                return r;
        *ret = row;
        row.env_json = NULL;
        return 0;
}

int store_context_get(struct store *s, const char *id, struct context_row *ret)
{
        int r;

        if (!s || !ret)
                return -EINVAL;
        if ((r = check_id(id)) < 0)
                return r;
        STORE_LOCKED(s);
        return context_get(s->db, id, ret);
}

int store_context_delete(struct store *s, const char *id)
{
        int r;

        if (!s)
                return -EINVAL;
        if ((r = check_id(id)) < 0)
                return r;
        STORE_LOCKED(s);
        return delete_by_id(s->db, "DELETE FROM contexts WHERE id = ?", id);
}

struct context_list {
        struct context_row *rows;
        size_t n, cap;
};

static void context_list_done(struct context_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                context_row_done(&l->rows[i]);
        free(l->rows);
        l->rows = NULL;
        l->n = l->cap = 0;
}

static int collect_contexts(sqlite3 *db, const char *sandbox_id, struct context_list *l)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        void *p;
        int r;

        r = prepare(db,
                    "SELECT " CONTEXT_COLUMNS " FROM contexts WHERE sandbox_id = ? "
                    "ORDER BY created_at, id",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, sandbox_id)) < 0)
                return r;
        while ((r = step(st)) > 0) {
                p = l->rows;
                r = grow(&p, &l->cap, l->n, sizeof(*l->rows));
                l->rows = p;
                if (r < 0)
                        return r;
                l->rows[l->n] = (struct context_row){};
                r = context_from_stmt(st, &l->rows[l->n]);
                if (r < 0)
                        return r;
                l->n++;
        }
        return r;
}

/* Snapshot under the lock, callbacks after it: fn may re-enter the store,
 * and a slow fn does not stall other threads. */
int store_context_each(struct store *s, const char *sandbox_id,
                       void (*fn)(const struct context_row *row, void *userdata), void *userdata)
{
        _cleanup_(context_list_done) struct context_list l = {};
        int r;

        if (!s || !fn)
                return -EINVAL;
        if ((r = check_id(sandbox_id)) < 0)
                return r;
        {
                STORE_LOCKED(s);
                r = collect_contexts(s->db, sandbox_id, &l);
        }
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++)
                fn(&l.rows[i], userdata);
        return 0;
}

int store_context_count(struct store *s, const char *sandbox_id, uint64_t *ret)
{
        int r;

        if (!s || !ret)
                return -EINVAL;
        if ((r = check_id(sandbox_id)) < 0)
                return r;
        STORE_LOCKED(s);
        return query_u64(s->db, "SELECT COUNT(*) FROM contexts WHERE sandbox_id = ?", sandbox_id, ret);
}

/* ---- cells ------------------------------------------------------------ */

static int context_exists(sqlite3 *db, const char *id)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, "SELECT 1 FROM contexts WHERE id = ?", &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, id)) < 0)
                return r;
        r = step(st);
        if (r < 0)
                return r;
        return r > 0 ? 0 : -ENOENT;
}

static int cell_max_seq(sqlite3 *db, const char *context_id, uint64_t *ret)
{
        uint64_t n;
        int r;

        r = query_u64(db, "SELECT COALESCE(MAX(seq), 0) FROM cells WHERE context_id = ?",
                       context_id, &n);
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

static int cell_insert(sqlite3 *db, const char *context_id, const struct cell_row *cell)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db,
                    "INSERT INTO cells(context_id, seq, code, env_json, cwd, typescript) "
                    "VALUES(?, ?, ?, ?, ?, ?)",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, context_id)) < 0 ||
            (r = bind_u64(st, 2, cell->seq)) < 0 ||
            (r = bind_text(st, 3, cell->code)) < 0 ||
            (r = bind_text(st, 4, env_or_default(cell->env_json))) < 0 ||
            (r = bind_text(st, 5, cell->cwd)) < 0 ||
            (r = errno_from_sqlite(sqlite3_bind_int(st, 6, cell->typescript))) < 0)
                return r;
        return step_done(st);
}

/* The journal must replay exactly, so a gap or a repeat is refused rather
 * than stored; reading MAX(seq) and inserting share one transaction. */
static int cell_append(sqlite3 *db, const char *context_id, const struct cell_row *cell)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        uint64_t max;
        int r;

        r = tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = context_exists(db, context_id);
        if (r < 0)
                return r;
        r = cell_max_seq(db, context_id, &max);
        if (r < 0)
                return r;
        if (cell->seq != max + 1)
                return -EINVAL;
        r = cell_insert(db, context_id, cell);
        if (r < 0)
                return r;
        return tx_commit(&tx);
}

int store_cell_append(struct store *s, const char *context_id, const struct cell_row *cell)
{
        int r;

        if (!s || !cell || !cell->code || !cell->cwd)
                return -EINVAL;
        if ((r = check_id(context_id)) < 0)
                return r;
        STORE_LOCKED(s);
        return cell_append(s->db, context_id, cell);
}

/* One allocation holds the three strings the row points into. */
struct owned_cell {
        struct cell_row row;
        char *buf;
};

struct cell_list {
        struct owned_cell *cells;
        size_t n, cap;
};

static void cell_list_done(struct cell_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->cells[i].buf);
        free(l->cells);
        l->cells = NULL;
        l->n = l->cap = 0;
}

/* Columns: seq, code, env_json, cwd, typescript. */
static int cell_from_stmt(sqlite3_stmt *st, struct owned_cell *c)
{
        const char *txt[3];
        const char **dst[3] = { &c->row.code, &c->row.env_json, &c->row.cwd };
        size_t len[3], total = 0;
        char *p;

        for (int i = 0; i < 3; i++) {
                txt[i] = (const char *)sqlite3_column_text(st, 1 + i);
                if (!txt[i] && sqlite3_column_type(st, 1 + i) != SQLITE_NULL)
                        return -ENOMEM;
                len[i] = txt[i] ? (size_t)sqlite3_column_bytes(st, 1 + i) : 0;
                total += len[i] + 1;
        }
        c->buf = p = malloc(total);
        if (!p)
                return -ENOMEM;
        for (int i = 0; i < 3; i++) {
                memcpy(p, txt[i] ?: "", len[i]);
                p[len[i]] = '\0';
                *dst[i] = p;
                p += len[i] + 1;
        }
        c->row.seq = column_u64(st, 0);
        c->row.typescript = sqlite3_column_int64(st, 4) != 0;
        return 0;
}

static int collect_cells(sqlite3 *db, const char *context_id, struct cell_list *l)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        void *p;
        int r;

        r = prepare(db,
                    "SELECT seq, code, env_json, cwd, typescript FROM cells "
                    "WHERE context_id = ? ORDER BY seq",
                    &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, context_id)) < 0)
                return r;
        while ((r = step(st)) > 0) {
                p = l->cells;
                r = grow(&p, &l->cap, l->n, sizeof(*l->cells));
                l->cells = p;
                if (r < 0)
                        return r;
                r = cell_from_stmt(st, &l->cells[l->n]);
                if (r < 0)
                        return r;
                l->n++;
        }
        return r;
}

/* Snapshot under the lock, callbacks after it: replaying a journal runs
 * user code for a long time and must not block every other store user. */
int store_cell_each(struct store *s, const char *context_id,
                    void (*fn)(const struct cell_row *cell, void *userdata), void *userdata)
{
        _cleanup_(cell_list_done) struct cell_list l = {};
        int r;

        if (!s || !fn)
                return -EINVAL;
        if ((r = check_id(context_id)) < 0)
                return r;
        {
                STORE_LOCKED(s);
                r = collect_cells(s->db, context_id, &l);
        }
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++)
                fn(&l.cells[i].row, userdata);
        return 0;
}

static int cells_delete_rows(sqlite3 *db, const char *context_id)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(db, "DELETE FROM cells WHERE context_id = ?", &st);
        if (r < 0)
                return r;
        if ((r = bind_text(st, 1, context_id)) < 0)
                return r;
        return step_done(st);
}

/* -ENOENT names a missing context; an empty journal is not an error. */
static int cells_delete(sqlite3 *db, const char *context_id)
{
        _cleanup_tx_ sqlite3 *tx = NULL;
        int r;

        r = tx_begin(db, &tx);
        if (r < 0)
                return r;
        r = context_exists(db, context_id);
        if (r < 0)
                return r;
        r = cells_delete_rows(db, context_id);
        if (r < 0)
                return r;
        return tx_commit(&tx);
}

int store_cells_delete(struct store *s, const char *context_id)
{
        int r;

        if (!s)
                return -EINVAL;
        if ((r = check_id(context_id)) < 0)
                return r;
        STORE_LOCKED(s);
        return cells_delete(s->db, context_id);
}

int store_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        uint64_t count, bytes;
        int r;

        if (!s || !ret_count || !ret_bytes)
                return -EINVAL;
        if ((r = check_id(context_id)) < 0)
                return r;
        STORE_LOCKED(s);
        if ((r = cell_max_seq(s->db, context_id, &count)) < 0)
                return r;
        r = query_u64(s->db, "SELECT COALESCE(SUM(length(CAST(code AS BLOB))), 0) FROM cells WHERE context_id = ?",
                      context_id, &bytes);
        if (r < 0)
                return r;
        *ret_count = count;
        *ret_bytes = bytes;
        return 0;
}
