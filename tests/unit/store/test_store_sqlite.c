/* What only the SQLite backend promises, beyond the contract suite: the
 * file on disk (mode, WAL, pragmas, schema, migrations from older schemas),
 * its URL spellings, its integrity check and durability across kill -9.
 * Reaches the connection through store/sqlite/sqlite.h (house style R11). */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store/sqlite/sqlite.h"
#include "store_fixture.h"

static sqlite3 *open_raw(void)
{
        sqlite3 *db = NULL;
        ASSERT_EQ(sqlite3_open_v2(db_path(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
        return db;
}

static void raw_exec_on(sqlite3 *db, const char *sql)
{
        char *msg = NULL;
        if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
                TAP_FAIL("%s: %s", sql, msg ? msg : "?");
}

static void raw_exec(const char *sql)
{
        sqlite3 *db = open_raw();
        raw_exec_on(db, sql);
        sqlite3_close(db);
}

static long long raw_int(sqlite3 *db, const char *sql)
{
        sqlite3_stmt *st = NULL;
        long long v;

        ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

static struct store *open_url(const char *url)
{
        struct store *s = NULL;
        struct err err = { 0 };
        int r = store_open(url, &s, &err);
        if (r < 0)
                TAP_FAIL("store_open(%s): %d %s", url, r, err.msg);
        return s;
}

/* Every test here is about SQLite files: it ignores STORE_URL. */
static struct store *open_sqlite(void)
{
        return open_url(db_path());
}

/* Migration 20: the journal is one b-tree (a warm cell writes two pages,
 * not three): a WITHOUT ROWID table has no rowid to select and no
 * separate index for its key. */
static bool cells_without_rowid(sqlite3 *db)
{
        sqlite3_stmt *st = NULL;
        bool has_rowid = sqlite3_prepare_v2(db, "SELECT rowid FROM cells", -1, &st, NULL) == SQLITE_OK;
        sqlite3_finalize(st);
        return !has_rowid && raw_int(db, "SELECT COUNT(*) FROM pragma_index_list('cells')") == 1 &&
               raw_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'sqlite_autoindex_cells%'") == 0;
}

TEST(sqlite_schema_on_disk)
{
        struct store *s = open_sqlite();
        struct stat st;
        sqlite3 *db;

        ASSERT_STREQ(store_backend_name(s), "sqlite");
        ASSERT_EQ(store_schema_version(s), 20);
        store_close(s);

        /* env_json may hold secrets: the file must not be world-readable. */
        ASSERT_EQ(stat(db_path(), &st), 0);
        ASSERT_EQ(st.st_mode & 0777, 0600);

        s = open_sqlite();
        store_close(s);
        /* Reopening must not re-run a migration. */
        db = open_raw();
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM schema_migrations"), sq_schema_latest());
        ASSERT_TRUE(raw_int(db, "SELECT applied_at FROM schema_migrations WHERE version = 2") > 0);
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                              "('sandboxes_expires_at', 'contexts_sandbox_created')"),
                  2);
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM pragma_table_info('contexts') WHERE name = 'build'"), 1);
        ASSERT_TRUE(cells_without_rowid(db));
        sqlite3_close(db);
}

TEST(sqlite_url_spellings_name_one_file)
{
        char url[PATH_MAX + 32];
        struct store *s;
        struct org_row org;

        snprintf(url, sizeof(url), "sqlite:%s", db_path());
        s = open_url(url);
        ASSERT_OK(store_org_ensure(s, "o1", "via sqlite:"));
        store_close(s);

        /* sqlite:///abs/path (three slashes: an empty authority). */
        snprintf(url, sizeof(url), "sqlite://%s", db_path());
        s = open_url(url);
        ASSERT_OK(store_org_get(s, "o1", &org));
        ASSERT_STREQ(org.name, "via sqlite:");
        store_close(s);

        /* The scheme is case-insensitive; a plain path is SQLite too. */
        snprintf(url, sizeof(url), "SQLite:%s", db_path());
        s = open_url(url);
        store_close(s);
        s = open_url(db_path());
        ASSERT_OK(store_org_get(s, "o1", &org));
        store_close(s);
}

TEST(sqlite_relative_paths)
{
        struct store *s;
        struct stat st;

        ASSERT_EQ(chdir(test_dir()), 0);
        /* No scheme before the first '/' or with a leading '.': a path. */
        s = open_url("./a:b.db");
        store_close(s);
        ASSERT_EQ(stat("a:b.db", &st), 0);
        s = open_url("sqlite:c:d.db");
        store_close(s);
        ASSERT_EQ(stat("c:d.db", &st), 0);
        s = open_url("plain.db");
        store_close(s);
        ASSERT_EQ(stat("plain.db", &st), 0);
}

TEST(sqlite_pragmas)
{
        struct store *s = open_sqlite();
        sqlite3 *db = open_raw();
        sqlite3_stmt *st = NULL;

        /* journal_mode is a property of the file: visible from another handle. */
        ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        ASSERT_STREQ((const char *)sqlite3_column_text(st, 0), "wal");
        sqlite3_finalize(st);
        sqlite3_close(db);

        /* The others are per connection: ask the store's own. */
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA synchronous"), 2);   /* FULL */
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA foreign_keys"), 1);
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA busy_timeout"), 5000);
        store_close(s);
}

TEST(sqlite_integrity_check)
{
        struct store *s = open_sqlite();
        char msg[64] = "";

        put_sandbox(s, "sb1", 1, 0);
        ASSERT_EQ(store_integrity_check(s, msg, sizeof(msg)), 0);
        ASSERT_STREQ(msg, "ok");
        ASSERT_EQ(store_integrity_check(s, NULL, 0), 0);
        store_close(s);
}

TEST(sqlite_open_errors)
{
        struct store *s = NULL;
        struct err err = { 0 };
        const char *path = db_path();
        FILE *f;

        /* Not a database: SQLite's own message must reach the caller. */
        f = fopen(path, "w");
        ASSERT_TRUE(f != NULL);
        for (int i = 0; i < 1024; i++)
                fputs("garbage!", f);
        fclose(f);
        ASSERT_EQ(store_open(path, &s, &err), -EIO);
        ASSERT_TRUE(s == NULL);
        ASSERT_TRUE(strstr(err.msg, "not a database") != NULL);
        ASSERT_EQ(err.reason, ERR_INTERNAL);
        ASSERT_EQ(err.errnum, EIO);

        err_done(&err);
        ASSERT_EQ(store_open("/nonexistent-dir/x/store.db", &s, &err), -ENOENT);
        ASSERT_TRUE(strstr(err.msg, "/nonexistent-dir/x/store.db") != NULL);
        ASSERT_EQ(err.reason, ERR_INTERNAL);
        ASSERT_EQ(err.errnum, ENOENT);
        ASSERT_TRUE(s == NULL);
        err_done(&err);
}

TEST(sqlite_refuses_newer_schema)
{
        struct store *s = open_sqlite();
        struct err err = { 0 };

        store_close(s);
        raw_exec("INSERT INTO schema_migrations(version, applied_at) VALUES(99, 0)");
        s = NULL;
        ASSERT_EQ(store_open(db_path(), &s, &err), -EPROTO);
        ASSERT_TRUE(s == NULL);
        ASSERT_TRUE(strstr(err.msg, "newer") != NULL);
        ASSERT_EQ(err.reason, ERR_INTERNAL);
        err_done(&err);
}

/* The schema as schema version 1 created it, verbatim: migrations must
 * bring such a file forward without losing a row. */
static const char schema_v1[] =
        "CREATE TABLE schema_migrations(version INTEGER PRIMARY KEY, applied_at INTEGER);"
        "CREATE TABLE orgs(id TEXT PRIMARY KEY, name TEXT, created_at INTEGER);"
        "CREATE TABLE sandboxes(id TEXT PRIMARY KEY, org_id TEXT NOT NULL REFERENCES orgs(id),"
        "  created_at INTEGER NOT NULL DEFAULT 0, last_used INTEGER NOT NULL DEFAULT 0,"
        "  expires_at INTEGER NOT NULL DEFAULT 0, env_json TEXT NOT NULL DEFAULT '{}');"
        "CREATE TABLE contexts(id TEXT PRIMARY KEY,"
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  binding TEXT NOT NULL DEFAULT '', language TEXT NOT NULL DEFAULT '',"
        "  cwd TEXT NOT NULL DEFAULT '', env_json TEXT NOT NULL DEFAULT '{}',"
        "  created_at INTEGER NOT NULL DEFAULT 0, last_used INTEGER NOT NULL DEFAULT 0,"
        "  executions INTEGER NOT NULL DEFAULT 0, snap_taken_at INTEGER NOT NULL DEFAULT 0,"
        "  snap_cells INTEGER NOT NULL DEFAULT 0, snap_bytes INTEGER NOT NULL DEFAULT 0,"
        "  snap_stale INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE cells(context_id TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL, code TEXT NOT NULL, env_json TEXT NOT NULL, cwd TEXT NOT NULL,"
        "  typescript INTEGER NOT NULL, PRIMARY KEY(context_id, seq));"
        "CREATE INDEX sandboxes_expires_at ON sandboxes(expires_at);"
        "CREATE INDEX contexts_sandbox_created ON contexts(sandbox_id, created_at);"
        "INSERT INTO schema_migrations VALUES(1, 1700000000000);"
        "INSERT INTO orgs VALUES('o1', 'Old Org', 5);"
        "INSERT INTO sandboxes VALUES('sb1', 'o1', 10, 11, 12, '{\"K\":\"V\"}');"
        "INSERT INTO contexts VALUES('c1', 'sb1', 'PYTHON', 'python3', '/workspace', '{}',"
        "  20, 21, 2, 22, 2, 7, 0);"
        "INSERT INTO cells VALUES('c1', 1, 'x = 1', '{}', '/workspace', 0);"
        "INSERT INTO cells VALUES('c1', 2, 'y=2', '{}', '/workspace', 0);";

TEST(sqlite_migrates_a_version_1_database)
{
        struct store *s;
        struct context_row got = {};
        struct seen cells = {};
        uint64_t n, bytes;
        sqlite3 *db = open_raw();

        raw_exec_on(db, schema_v1);
        sqlite3_close(db);

        s = open_sqlite();
        ASSERT_EQ(store_schema_version(s), sq_schema_latest());
        /* Old sandboxes have no host id yet (given when next loaded). */
        struct sandbox_row sb = {};
        ASSERT_OK(store_sandbox_get(s, "sb1", &sb));
        ASSERT_EQ(sb.host_id, 0);
        /* … nor limits of their own (the service's defaults apply). */
        ASSERT_EQ(sb.workspace_bytes, 0);
        ASSERT_EQ(sb.file_bytes, 0);
        ASSERT_EQ(sb.cpu_millis, 0);
        ASSERT_EQ(sb.memory_bytes, 0);
        ASSERT_FALSE(sb.expiry_fixed);
        sandbox_row_done(&sb);
        /* Old rows read back whole, with the new column empty. */
        ASSERT_OK(store_context_get(s, "c1", &got));
        ASSERT_STREQ(got.build, "");
        ASSERT_STREQ(got.binding, "PYTHON");
        ASSERT_EQ(got.created_at, 20);
        ASSERT_EQ(got.executions, 2);
        ASSERT_EQ(got.snap_bytes, 7);
        ASSERT_OK(store_cell_each(s, "c1", on_cell, &cells));
        ASSERT_STREQ(cells.buf, "1:x = 1:{}:/workspace:0,2:y=2:{}:/workspace:0");
        ASSERT_OK(store_cell_stats(s, "c1", &n, &bytes));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(bytes, 8);

        /* The new column is writable, and the cascade still holds. */
        snprintf(got.build, sizeof(got.build), "python:CPython 3.11.2:kernel-abc");
        ASSERT_OK(store_context_update(s, &got));
        context_row_done(&got);
        ASSERT_OK(store_context_get(s, "c1", &got));
        ASSERT_STREQ(got.build, "python:CPython 3.11.2:kernel-abc");
        context_row_done(&got);
        store_close(s);

        s = open_sqlite();   /* a second open migrates nothing */
        ASSERT_EQ(store_schema_version(s), sq_schema_latest());
        ASSERT_OK(store_sandbox_delete(s, "sb1"));
        ASSERT_EQ(store_context_get(s, "c1", &got), -ENOENT);
        store_close(s);

        db = open_raw();
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM schema_migrations"), sq_schema_latest());
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM cells"), 0);
        ASSERT_TRUE(cells_without_rowid(db));
        sqlite3_close(db);
}

TEST(sqlite_too_long_stored_value_not_truncated)
{
        struct store *s = open_sqlite();
        struct context_row got = {};
        struct seen v = {};

        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        put_context(s, "c2", "sb1", 2);
        /* Written behind the store's back, longer than binding[64]. */
        raw_exec("UPDATE contexts SET binding = printf('%.100c', 'X') WHERE created_at = 2");
        ASSERT_EQ(store_context_get(s, id("c2"), &got), -ENAMETOOLONG);
        ASSERT_TRUE(got.env_json == NULL);
        ASSERT_STREQ(got.id, "");
        /* A list that fails half-way frees what it had read (ASan). */
        ASSERT_EQ(store_context_each(s, id("sb1"), on_context, &v), -ENAMETOOLONG);
        ASSERT_EQ(v.n, 0);
        /* Exactly at the boundary: 64 bytes leave no room for the NUL. */
        raw_exec("UPDATE contexts SET binding = printf('%.64c', 'X') WHERE created_at = 2");
        ASSERT_EQ(store_context_get(s, id("c2"), &got), -ENAMETOOLONG);
        raw_exec("UPDATE contexts SET binding = printf('%.63c', 'X') WHERE created_at = 2");
        ASSERT_OK(store_context_get(s, id("c2"), &got));
        ASSERT_EQ(strlen(got.binding), 63);
        context_row_done(&got);
        store_close(s);
}

static void acked_writes(void *arg)
{
        struct store *s = open_sqlite();
        store_set_journal_lazy(s, *(bool *)arg, NULL, NULL);
        put_sandbox(s, "acked", 1, 0);
        put_context(s, "c1", "acked", 1);
        ASSERT_OK(append_cell(s, "c1", 1, "print(1)"));
        ASSERT_OK(append_cell(s, "c1", 2, "print(2)"));
}

/* Writes, acknowledges, is killed (no close, no checkpoint); what was
 * acknowledged must be there. lazy: the journal writes of
 * sandbox.journal_sync=none|group, which do not wait for the disk. */
static void write_then_kill9(bool lazy)
{
        struct store *s;
        struct sandbox_row got = {};
        char msg[64];

        db_path();
        write_then_kill9_child(acked_writes, &lazy);

        s = open_sqlite();
        ASSERT_OK(store_sandbox_get(s, id("acked"), &got));
        sandbox_row_done(&got);
        ASSERT_EQ(cell_count(s, "c1"), 2);
        ASSERT_EQ(store_integrity_check(s, msg, sizeof(msg)), 0);
        store_close(s);
}

TEST(sqlite_write_survives_kill9)
{
        write_then_kill9(false);
}

TEST(sqlite_lazy_journal_survives_kill9)
{
        write_then_kill9(true);
}

/* A lazy journal write commits at NORMAL; every other write still waits
 * for the disk: the store is back at FULL before any other op runs (the
 * switch back waits for that op: journal_mode.c). store_sync flushes. */
static void count_write(void *userdata)
{
        (*(int *)userdata)++;
}

TEST(sqlite_lazy_journal_is_scoped)
{
        struct store *s = open_sqlite();
        int written = 0;
        store_set_journal_lazy(s, true, count_write, &written);
        put_sandbox(s, "sb", 1, 0);
        put_context(s, "c1", "sb", 1);
        ASSERT_EQ(written, 0);   /* not journal writes */
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA synchronous"), 2);
        ASSERT_OK(append_cell(s, "c1", 1, "x = 1"));
        ASSERT_EQ(written, 1);
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA synchronous"), 1);   /* left lazy... */
        ASSERT_EQ(cell_count(s, "c1"), 1);
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA synchronous"), 2);   /* ...until the next other op */
        ASSERT_OK(store_sync(s));
        /* A refused append (wrong seq) is a journal write too. */
        ASSERT_ERR(append_cell(s, "c1", 5, "y = 1"), EINVAL);
        put_sandbox(s, "sb2", 2, 0);
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA synchronous"), 2);
        /* The context row is journal state too. */
        struct context_row row;
        ASSERT_OK(store_context_get(s, id("c1"), &row));
        row.executions = 3;
        written = 0;
        ASSERT_OK(store_context_update(s, &row));
        context_row_done(&row);
        ASSERT_EQ(written, 1);
        /* Not lazy any more (the daemon stopping): the next journal write
         * waits for the disk. */
        store_set_journal_lazy(s, false, NULL, NULL);
        ASSERT_OK(append_cell(s, "c1", 2, "z = 1"));
        ASSERT_EQ(raw_int(sq_db(s), "PRAGMA synchronous"), 2);
        store_close(s);
}

/* The statements the connection ran, in order, one letter each: N and F
 * for the two PRAGMA synchronous settings, S for a write of a sandbox
 * row, C for a cell's. */
struct sync_trace {
        char seen[64];
        size_t n;
};

static int on_stmt(unsigned type, void *ctx, void *p, void *x)
{
        struct sync_trace *t = ctx;
        const char *sql = x;
        (void)type;
        (void)p;
        char c = strstr(sql, "synchronous=NORMAL") ? 'N' :
                 strstr(sql, "synchronous=FULL")   ? 'F' :
                 strstr(sql, "INTO sandboxes")     ? 'S' :
                 strstr(sql, "INTO cells")         ? 'C' : 0;
        if (c && t->n + 1 < sizeof(t->seen))
                t->seen[t->n++] = c;
        return 0;
}

/* A run of lazy cells switches the connection once, not twice a cell;
 * a sandbox write after them is at FULL before its statement runs. */
TEST(sqlite_lazy_journal_switches_once_per_run)
{
        struct store *s = open_sqlite();
        struct sync_trace t = {};
        store_set_journal_lazy(s, true, NULL, NULL);
        put_sandbox(s, "sb", 1, 0);
        put_context(s, "c1", "sb", 1);
        sqlite3_trace_v2(sq_db(s), SQLITE_TRACE_STMT, on_stmt, &t);
        for (uint64_t i = 1; i <= 4; i++)
                ASSERT_OK(append_cell(s, "c1", i, "x = 1"));
        put_sandbox(s, "sb2", 2, 0);
        ASSERT_OK(append_cell(s, "c1", 5, "x = 1"));
        put_sandbox(s, "sb3", 3, 0);
        sqlite3_trace_v2(sq_db(s), 0, NULL, NULL);
        ASSERT_STREQ(t.seen, "NCCCCFSNCFS");
        store_close(s);
}
