/* Includes the module to reach the connection behind struct store, so the
 * per-connection PRAGMAs can be checked (house style R11). Every test gets
 * its own mkdtemp directory, removed by an atexit hook even when an ASSERT
 * exits early; the runner forks per test, so the hook is per test. */
#include "store/store.c"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tap.h"

static char g_dir[PATH_MAX - 64];

static void remove_dir(void)
{
        if (g_dir[0])
                rm_rf(g_dir);
}

/* Creates the per-test directory and returns the database path in it. */
static const char *db_path(void)
{
        static char path[PATH_MAX];
        const char *tmp = getenv("TMPDIR");

        if (!g_dir[0]) {
                snprintf(g_dir, sizeof(g_dir), "%s/sbx-store-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
                ASSERT_TRUE(mkdtemp(g_dir) != NULL);
                atexit(remove_dir);
        }
        snprintf(path, sizeof(path), "%s/store.db", g_dir);
        return path;
}

static struct store *open_store(void)
{
        struct store *s = NULL;
        char err[256] = "";
        int r = store_open(db_path(), &s, err, sizeof(err));
        if (r < 0)
                TAP_FAIL("store_open: %d %s", r, err);
        return s;
}

static sqlite3 *open_raw(void)
{
        sqlite3 *db = NULL;
        ASSERT_EQ(sqlite3_open_v2(db_path(), &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        return db;
}

static void raw_exec(const char *sql)
{
        sqlite3 *db = open_raw();
        ASSERT_EQ(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
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

static void put_sandbox(struct store *s, const char *id, uint64_t created, uint64_t expires)
{
        struct sandbox_row row = { .created_at = created, .last_used = created, .expires_at = expires };
        snprintf(row.id, sizeof(row.id), "%s", id);
        snprintf(row.org_id, sizeof(row.org_id), "o1");
        ASSERT_OK(store_org_ensure(s, "o1", "Org One"));
        ASSERT_OK(store_sandbox_put(s, &row));
}

static void make_context(struct context_row *c, const char *id, const char *sandbox, uint64_t created)
{
        *c = (struct context_row){ .created_at = created, .last_used = created };
        snprintf(c->id, sizeof(c->id), "%s", id);
        snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", sandbox);
        snprintf(c->binding, sizeof(c->binding), "PYTHON");
        snprintf(c->language, sizeof(c->language), "python3");
        snprintf(c->cwd, sizeof(c->cwd), "/workspace");
}

static void put_context(struct store *s, const char *id, const char *sandbox, uint64_t created)
{
        struct context_row c;
        make_context(&c, id, sandbox, created);
        ASSERT_OK(store_context_insert(s, &c));
}

static int append_cell(struct store *s, const char *ctx, uint64_t seq, const char *code)
{
        struct cell_row c = { .seq = seq, .code = code, .env_json = "{\"A\":\"1\"}", .cwd = "/w" };
        return store_cell_append(s, ctx, &c);
}

/* Collects callback output as "a,b,c". */
struct seen {
        char buf[1024];
        int n;
};

static void seen_add(struct seen *v, const char *s)
{
        size_t len = strlen(v->buf);
        snprintf(v->buf + len, sizeof(v->buf) - len, "%s%s", v->n++ ? "," : "", s);
}

static void on_id(const char *id, void *userdata)
{
        seen_add(userdata, id);
}

static void on_context(const struct context_row *row, void *userdata)
{
        seen_add(userdata, row->id);
}

static void on_cell(const struct cell_row *cell, void *userdata)
{
        char item[128];
        snprintf(item, sizeof(item), "%" PRIu64 ":%s:%s:%s:%d", cell->seq, cell->code, cell->env_json,
                 cell->cwd, cell->typescript);
        seen_add(userdata, item);
}

static uint64_t cell_count(const char *ctx)
{
        sqlite3 *db = open_raw();
        sqlite3_stmt *st = NULL;
        uint64_t n;

        ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM cells WHERE context_id = ?", -1, &st, NULL),
                  SQLITE_OK);
        sqlite3_bind_text(st, 1, ctx, -1, SQLITE_TRANSIENT);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        n = (uint64_t)sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return n;
}

TEST(store_open_creates_schema_and_reopen_keeps_data)
{
        struct store *s = open_store();
        struct sandbox_row sb = {};
        struct context_row ctx = {};
        struct seen cells = {};
        struct stat st;
        sqlite3 *db;

        ASSERT_EQ(store_schema_version(s), 1);
        put_sandbox(s, "sb1", 1000, 0);
        put_context(s, "c1", "sb1", 1000);
        ASSERT_OK(append_cell(s, "c1", 1, "x = 1"));
        store_close(s);

        /* env_json may hold secrets: the file must not be world-readable. */
        ASSERT_EQ(stat(db_path(), &st), 0);
        ASSERT_EQ(st.st_mode & 0777, 0600);

        s = open_store();
        ASSERT_EQ(store_schema_version(s), 1);
        ASSERT_OK(store_sandbox_get(s, "sb1", &sb));
        ASSERT_STREQ(sb.org_id, "o1");
        ASSERT_OK(store_context_get(s, "c1", &ctx));
        ASSERT_OK(store_cell_each(s, "c1", on_cell, &cells));
        ASSERT_STREQ(cells.buf, "1:x = 1:{\"A\":\"1\"}:/w:0");
        sandbox_row_done(&sb);
        context_row_done(&ctx);
        store_close(s);

        /* Reopening must not re-run migration 1. */
        db = open_raw();
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM schema_migrations"), 1);
        ASSERT_TRUE(raw_int(db, "SELECT applied_at FROM schema_migrations WHERE version = 1") > 0);
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                              "('sandboxes_expires_at', 'contexts_sandbox_created')"),
                  2);
        sqlite3_close(db);
}

TEST(store_pragmas)
{
        struct store *s = open_store();
        sqlite3 *db = open_raw();
        sqlite3_stmt *st = NULL;

        /* journal_mode is a property of the file: visible from another handle. */
        ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        ASSERT_STREQ((const char *)sqlite3_column_text(st, 0), "wal");
        sqlite3_finalize(st);
        sqlite3_close(db);

        /* The others are per connection: ask the store's own. */
        ASSERT_EQ(raw_int(s->db, "PRAGMA synchronous"), 2);   /* FULL */
        ASSERT_EQ(raw_int(s->db, "PRAGMA foreign_keys"), 1);
        ASSERT_EQ(raw_int(s->db, "PRAGMA busy_timeout"), 5000);
        store_close(s);
}

TEST(store_integrity_check_ok)
{
        struct store *s = open_store();
        char msg[64] = "";

        put_sandbox(s, "sb1", 1, 0);
        ASSERT_EQ(store_integrity_check(s, msg, sizeof(msg)), 0);
        ASSERT_STREQ(msg, "ok");
        ASSERT_EQ(store_integrity_check(s, NULL, 0), 0);
        store_close(s);
}

TEST(store_open_errors)
{
        struct store *s = NULL;
        char err[256] = "";
        const char *path = db_path();
        FILE *f;

        /* Not a database: SQLite's own message must reach the caller. */
        f = fopen(path, "w");
        ASSERT_TRUE(f != NULL);
        for (int i = 0; i < 1024; i++)
                fputs("garbage!", f);
        fclose(f);
        ASSERT_EQ(store_open(path, &s, err, sizeof(err)), -EIO);
        ASSERT_TRUE(s == NULL);
        ASSERT_TRUE(strstr(err, "not a database") != NULL);

        err[0] = '\0';
        ASSERT_EQ(store_open("/nonexistent-dir/x/store.db", &s, err, sizeof(err)), -ENOENT);
        ASSERT_TRUE(err[0] != '\0');
        ASSERT_TRUE(s == NULL);
        ASSERT_EQ(store_open(NULL, &s, NULL, 0), -EINVAL);
}

TEST(store_refuses_newer_schema)
{
        struct store *s = open_store();
        char err[256] = "";

        store_close(s);
        raw_exec("INSERT INTO schema_migrations(version, applied_at) VALUES(99, 0)");
        s = NULL;
        ASSERT_EQ(store_open(db_path(), &s, err, sizeof(err)), -EPROTO);
        ASSERT_TRUE(s == NULL);
        ASSERT_TRUE(strstr(err, "newer") != NULL);
}

TEST(store_org_ensure_idempotent)
{
        struct store *s = open_store();
        struct org_row org = {};
        char name[300];

        ASSERT_OK(store_org_ensure(s, "o1", "First"));
        ASSERT_OK(store_org_ensure(s, "o1", "Second"));
        ASSERT_OK(store_org_get(s, "o1", &org));
        ASSERT_STREQ(org.id, "o1");
        ASSERT_STREQ(org.name, "First");
        ASSERT_TRUE(org.created_at > 0);

        ASSERT_OK(store_org_ensure(s, "o2", NULL));
        ASSERT_OK(store_org_get(s, "o2", &org));
        ASSERT_STREQ(org.name, "");

        ASSERT_EQ(store_org_get(s, "nope", &org), -ENOENT);
        ASSERT_STREQ(org.id, "o2");   /* out-param untouched on failure */

        memset(name, 'n', sizeof(name));
        name[256] = '\0';
        ASSERT_EQ(store_org_ensure(s, "o3", name), -ENAMETOOLONG);
        name[255] = '\0';
        ASSERT_OK(store_org_ensure(s, "o3", name));
        store_close(s);
}

TEST(store_sandbox_crud)
{
        struct store *s = open_store();
        struct sandbox_row row = { .id = "sb1", .org_id = "o1", .created_at = 10, .last_used = 11,
                                   .expires_at = 0 };
        struct sandbox_row got = {};
        uint64_t n = 99;

        /* The org must exist first (foreign key). */
        ASSERT_EQ(store_sandbox_put(s, &row), -ENOENT);
        ASSERT_OK(store_org_ensure(s, "o1", "Org"));
        ASSERT_OK(store_sandbox_count(s, &n));
        ASSERT_EQ(n, 0);
        ASSERT_OK(store_sandbox_put(s, &row));

        ASSERT_OK(store_sandbox_get(s, "sb1", &got));
        ASSERT_STREQ(got.id, "sb1");
        ASSERT_STREQ(got.org_id, "o1");
        ASSERT_EQ(got.created_at, 10);
        ASSERT_EQ(got.last_used, 11);
        ASSERT_EQ(got.expires_at, 0);
        ASSERT_STREQ(got.env_json, "{}");
        sandbox_row_done(&got);
        ASSERT_TRUE(got.env_json == NULL);
        sandbox_row_done(&got);   /* idempotent */
        sandbox_row_done(NULL);

        /* put replaces every column. */
        row.created_at = 20;
        row.expires_at = 500;
        row.env_json = (char *)"{\"K\":\"V\"}";
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_OK(store_sandbox_get(s, "sb1", &got));
        ASSERT_EQ(got.created_at, 20);
        ASSERT_EQ(got.expires_at, 500);
        ASSERT_STREQ(got.env_json, "{\"K\":\"V\"}");
        sandbox_row_done(&got);

        ASSERT_OK(store_sandbox_touch(s, "sb1", 30, 600));
        ASSERT_OK(store_sandbox_set_env(s, "sb1", "{\"X\":\"'; DROP TABLE sandboxes; --\"}"));
        ASSERT_OK(store_sandbox_get(s, "sb1", &got));
        ASSERT_EQ(got.last_used, 30);
        ASSERT_EQ(got.expires_at, 600);
        ASSERT_EQ(got.created_at, 20);
        ASSERT_STREQ(got.env_json, "{\"X\":\"'; DROP TABLE sandboxes; --\"}");
        sandbox_row_done(&got);

        /* Values SQLite would store as negative integers are refused. */
        ASSERT_EQ(store_sandbox_touch(s, "sb1", 1, UINT64_MAX), -ERANGE);

        ASSERT_OK(store_sandbox_count(s, &n));
        ASSERT_EQ(n, 1);
        ASSERT_OK(store_sandbox_delete(s, "sb1"));
        ASSERT_OK(store_sandbox_count(s, &n));
        ASSERT_EQ(n, 0);

        ASSERT_EQ(store_sandbox_get(s, "sb1", &got), -ENOENT);
        ASSERT_TRUE(got.env_json == NULL);
        ASSERT_EQ(store_sandbox_touch(s, "sb1", 1, 1), -ENOENT);
        ASSERT_EQ(store_sandbox_set_env(s, "sb1", "{}"), -ENOENT);
        ASSERT_EQ(store_sandbox_delete(s, "sb1"), -ENOENT);
        store_close(s);
}

TEST(store_sandbox_put_keeps_contexts)
{
        struct store *s = open_store();
        uint64_t n = 0;

        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        ASSERT_OK(append_cell(s, "c1", 1, "a"));
        /* Re-putting an existing sandbox must update in place; a delete +
         * insert would cascade away its contexts and journal. */
        put_sandbox(s, "sb1", 2, 0);
        ASSERT_OK(store_context_count(s, "sb1", &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(cell_count("c1"), 1);
        store_close(s);
}

static struct store *g_reaper_store;

/* Deletes from inside the callback, as the expiry reaper will. */
static void reap(const char *id, void *userdata)
{
        seen_add(userdata, id);
        ASSERT_OK(store_sandbox_delete(g_reaper_store, id));
}

TEST(store_sandbox_each_expired)
{
        struct store *s = open_store();
        struct seen v = {};
        uint64_t n = 0;

        put_sandbox(s, "never", 1, 0);
        put_sandbox(s, "late", 1, 300);
        put_sandbox(s, "b-at-200", 1, 200);
        put_sandbox(s, "a-at-200", 1, 200);
        put_sandbox(s, "early", 1, 100);

        ASSERT_OK(store_sandbox_each_expired(s, 99, on_id, &v));
        ASSERT_EQ(v.n, 0);
        ASSERT_OK(store_sandbox_each_expired(s, 200, on_id, &v));
        ASSERT_STREQ(v.buf, "early,a-at-200,b-at-200");

        g_reaper_store = s;
        v = (struct seen){};
        ASSERT_OK(store_sandbox_each_expired(s, 1000, reap, &v));
        ASSERT_STREQ(v.buf, "early,a-at-200,b-at-200,late");
        ASSERT_OK(store_sandbox_count(s, &n));
        ASSERT_EQ(n, 1);
        store_close(s);
}

TEST(store_context_crud)
{
        struct store *s = open_store();
        struct context_row c, got = {};
        uint64_t n = 0;

        put_sandbox(s, "sb1", 1, 0);
        make_context(&c, "c1", "sb1", 100);
        c.env_json = (char *)"{\"A\":\"1\"}";
        ASSERT_OK(store_context_insert(s, &c));
        ASSERT_EQ(store_context_insert(s, &c), -EEXIST);

        make_context(&c, "c2", "no-such-sandbox", 100);
        ASSERT_EQ(store_context_insert(s, &c), -ENOENT);

        ASSERT_OK(store_context_get(s, "c1", &got));
        ASSERT_STREQ(got.id, "c1");
        ASSERT_STREQ(got.sandbox_id, "sb1");
        ASSERT_STREQ(got.binding, "PYTHON");
        ASSERT_STREQ(got.language, "python3");
        ASSERT_STREQ(got.cwd, "/workspace");
        ASSERT_STREQ(got.env_json, "{\"A\":\"1\"}");
        ASSERT_EQ(got.created_at, 100);
        ASSERT_EQ(got.last_used, 100);
        ASSERT_EQ(got.executions, 0);
        ASSERT_EQ(got.snap_taken_at, 0);
        ASSERT_TRUE(!got.snap_stale);
        context_row_done(&got);
        context_row_done(&got);
        context_row_done(NULL);

        /* update writes only the mutable columns. */
        make_context(&c, "c1", "ignored", 999);
        snprintf(c.binding, sizeof(c.binding), "IGNORED");
        snprintf(c.cwd, sizeof(c.cwd), "/workspace/sub");
        c.env_json = NULL;
        c.last_used = 200;
        c.executions = 7;
        c.snap_taken_at = 190;
        c.snap_cells = 3;
        c.snap_bytes = 42;
        c.snap_stale = true;
        ASSERT_OK(store_context_update(s, &c));
        ASSERT_OK(store_context_get(s, "c1", &got));
        ASSERT_STREQ(got.sandbox_id, "sb1");
        ASSERT_STREQ(got.binding, "PYTHON");
        ASSERT_EQ(got.created_at, 100);
        ASSERT_STREQ(got.cwd, "/workspace/sub");
        ASSERT_STREQ(got.env_json, "{}");
        ASSERT_EQ(got.last_used, 200);
        ASSERT_EQ(got.executions, 7);
        ASSERT_EQ(got.snap_taken_at, 190);
        ASSERT_EQ(got.snap_cells, 3);
        ASSERT_EQ(got.snap_bytes, 42);
        ASSERT_TRUE(got.snap_stale);
        context_row_done(&got);

        ASSERT_OK(store_context_count(s, "sb1", &n));
        ASSERT_EQ(n, 1);
        ASSERT_OK(store_context_delete(s, "c1"));
        ASSERT_OK(store_context_count(s, "sb1", &n));
        ASSERT_EQ(n, 0);
        ASSERT_EQ(store_context_get(s, "c1", &got), -ENOENT);
        ASSERT_EQ(store_context_delete(s, "c1"), -ENOENT);
        make_context(&c, "c1", "sb1", 1);
        ASSERT_EQ(store_context_update(s, &c), -ENOENT);
        store_close(s);
}

TEST(store_context_each_order)
{
        struct store *s = open_store();
        struct seen v = {};
        uint64_t n = 0;

        put_sandbox(s, "sb1", 1, 0);
        put_sandbox(s, "sb2", 1, 0);
        put_context(s, "c3", "sb1", 10);
        put_context(s, "b", "sb1", 5);
        put_context(s, "a2", "sb1", 10);
        put_context(s, "a1", "sb1", 10);
        put_context(s, "other", "sb2", 1);

        ASSERT_OK(store_context_each(s, "sb1", on_context, &v));
        ASSERT_STREQ(v.buf, "b,a1,a2,c3");
        ASSERT_OK(store_context_count(s, "sb1", &n));
        ASSERT_EQ(n, 4);

        /* An unknown sandbox simply has no contexts. */
        v = (struct seen){};
        ASSERT_OK(store_context_each(s, "nope", on_context, &v));
        ASSERT_EQ(v.n, 0);
        ASSERT_OK(store_context_count(s, "nope", &n));
        ASSERT_EQ(n, 0);
        store_close(s);
}

TEST(store_cell_journal)
{
        struct store *s = open_store();
        struct cell_row ts = { .seq = 3, .code = "let x: number = 1", .env_json = NULL, .cwd = "/t",
                               .typescript = true };
        struct seen v = {};

        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        put_context(s, "c2", "sb1", 2);

        ASSERT_EQ(append_cell(s, "c1", 0, "zero"), -EINVAL);
        ASSERT_EQ(append_cell(s, "c1", 2, "gap"), -EINVAL);
        ASSERT_OK(append_cell(s, "c1", 1, "one"));
        ASSERT_OK(append_cell(s, "c1", 2, "two"));
        ASSERT_EQ(append_cell(s, "c1", 2, "repeat"), -EINVAL);
        ASSERT_EQ(append_cell(s, "c1", 5, "gap"), -EINVAL);
        ASSERT_OK(store_cell_append(s, "c1", &ts));
        ASSERT_OK(append_cell(s, "c2", 1, "other"));   /* seq is per context */
        ASSERT_EQ(append_cell(s, "missing", 1, "x"), -ENOENT);

        ASSERT_OK(store_cell_each(s, "c1", on_cell, &v));
        ASSERT_STREQ(v.buf, "1:one:{\"A\":\"1\"}:/w:0,"
                            "2:two:{\"A\":\"1\"}:/w:0,"
                            "3:let x: number = 1:{}:/t:1");

        /* Rejected appends left nothing behind. */
        ASSERT_EQ(cell_count("c1"), 3);

        ASSERT_OK(store_cells_delete(s, "c1"));
        ASSERT_EQ(cell_count("c1"), 0);
        ASSERT_EQ(cell_count("c2"), 1);
        ASSERT_OK(store_cells_delete(s, "c1"));   /* empty journal is fine */
        ASSERT_EQ(store_cells_delete(s, "missing"), -ENOENT);
        ASSERT_OK(append_cell(s, "c1", 1, "restart"));

        v = (struct seen){};
        ASSERT_OK(store_cell_each(s, "missing", on_cell, &v));
        ASSERT_EQ(v.n, 0);

        /* Deleting a context drops its journal. */
        ASSERT_OK(store_context_delete(s, "c2"));
        ASSERT_EQ(cell_count("c2"), 0);
        store_close(s);
}

TEST(store_sandbox_delete_cascades)
{
        struct store *s = open_store();
        struct context_row got = {};
        uint64_t n = 0;
        sqlite3 *db;

        put_sandbox(s, "sb1", 1, 0);
        put_sandbox(s, "sb2", 1, 0);
        put_context(s, "c1", "sb1", 1);
        put_context(s, "c2", "sb1", 2);
        put_context(s, "k1", "sb2", 1);
        ASSERT_OK(append_cell(s, "c1", 1, "a"));
        ASSERT_OK(append_cell(s, "c1", 2, "b"));
        ASSERT_OK(append_cell(s, "c2", 1, "c"));
        ASSERT_OK(append_cell(s, "k1", 1, "d"));

        ASSERT_OK(store_sandbox_delete(s, "sb1"));
        ASSERT_EQ(store_context_get(s, "c1", &got), -ENOENT);
        ASSERT_EQ(store_context_get(s, "c2", &got), -ENOENT);
        ASSERT_OK(store_context_count(s, "sb1", &n));
        ASSERT_EQ(n, 0);
        ASSERT_EQ(cell_count("c1"), 0);
        ASSERT_EQ(cell_count("c2"), 0);

        ASSERT_OK(store_context_count(s, "sb2", &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(cell_count("k1"), 1);

        db = open_raw();
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM contexts"), 1);
        ASSERT_EQ(raw_int(db, "SELECT COUNT(*) FROM cells"), 1);
        sqlite3_close(db);
        store_close(s);
}

TEST(store_rejects_too_long_strings)
{
        struct store *s = open_store();
        struct sandbox_row row = {}, got = {};
        struct context_row c;
        char id[STORE_ID_MAX + 1];

        memset(id, 'a', sizeof(id));
        id[STORE_ID_MAX] = '\0';   /* 130 chars: one too many */
        ASSERT_EQ(store_org_ensure(s, id, "x"), -ENAMETOOLONG);
        ASSERT_EQ(store_org_get(s, id, &(struct org_row){}), -ENAMETOOLONG);
        ASSERT_EQ(store_sandbox_get(s, id, &got), -ENAMETOOLONG);
        ASSERT_EQ(store_sandbox_delete(s, id), -ENAMETOOLONG);
        ASSERT_EQ(store_cell_append(s, id, &(struct cell_row){ .seq = 1, .code = "", .cwd = "" }),
                  -ENAMETOOLONG);
        ASSERT_EQ(store_org_ensure(s, "", "x"), -EINVAL);

        id[STORE_ID_MAX - 1] = '\0';   /* 129 chars: the longest that fits */
        put_sandbox(s, id, 1, 0);
        ASSERT_OK(store_sandbox_get(s, id, &got));
        ASSERT_STREQ(got.id, id);
        sandbox_row_done(&got);

        /* A fixed-size field without its NUL is too long, not read past. */
        memset(row.id, 'b', sizeof(row.id));
        snprintf(row.org_id, sizeof(row.org_id), "o1");
        ASSERT_EQ(store_sandbox_put(s, &row), -ENAMETOOLONG);

        make_context(&c, "c1", id, 1);
        memset(c.binding, 'B', sizeof(c.binding));
        ASSERT_EQ(store_context_insert(s, &c), -ENAMETOOLONG);
        make_context(&c, "c1", id, 1);
        memset(c.cwd, '/', sizeof(c.cwd));
        ASSERT_EQ(store_context_insert(s, &c), -ENAMETOOLONG);
        ASSERT_EQ(store_context_update(s, &c), -ENAMETOOLONG);
        store_close(s);
}

TEST(store_too_long_stored_value_not_truncated)
{
        struct store *s = open_store();
        struct context_row got = {};

        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        /* Written behind the store's back, longer than binding[64]. */
        raw_exec("UPDATE contexts SET binding = printf('%.100c', 'X') WHERE id = 'c1'");
        ASSERT_EQ(store_context_get(s, "c1", &got), -ENAMETOOLONG);
        ASSERT_TRUE(got.env_json == NULL);
        ASSERT_STREQ(got.id, "");
        /* Exactly at the boundary: 64 bytes leave no room for the NUL. */
        raw_exec("UPDATE contexts SET binding = printf('%.64c', 'X') WHERE id = 'c1'");
        ASSERT_EQ(store_context_get(s, "c1", &got), -ENAMETOOLONG);
        raw_exec("UPDATE contexts SET binding = printf('%.63c', 'X') WHERE id = 'c1'");
        ASSERT_OK(store_context_get(s, "c1", &got));
        ASSERT_EQ(strlen(got.binding), 63);
        context_row_done(&got);
        store_close(s);
}

TEST(store_write_survives_kill9)
{
        struct store *s;
        struct sandbox_row got = {};
        char msg[64];
        int status, acked[2];
        pid_t pid;
        char c;

        db_path();
        ASSERT_EQ(pipe2(acked, O_CLOEXEC), 0);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                s = open_store();
                put_sandbox(s, "acked", 1, 0);
                put_context(s, "c1", "acked", 1);
                ASSERT_OK(append_cell(s, "c1", 1, "print(1)"));
                /* Acknowledge, then wait to be killed: no close, no checkpoint. */
                ASSERT_EQ(write(acked[1], "k", 1), 1);
                for (;;)
                        pause();
        }
        close(acked[1]);
        ASSERT_EQ(read(acked[0], &c, 1), 1);
        close(acked[0]);
        ASSERT_EQ(kill(pid, SIGKILL), 0);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        s = open_store();
        ASSERT_OK(store_sandbox_get(s, "acked", &got));
        sandbox_row_done(&got);
        ASSERT_EQ(cell_count("c1"), 1);
        ASSERT_EQ(store_integrity_check(s, msg, sizeof(msg)), 0);
        store_close(s);
}

#define TOUCH_THREADS 4
#define TOUCHES 200

struct toucher {
        struct store *s;
        int idx;
        int failures;
};

static void *touch_loop(void *arg)
{
        struct toucher *t = arg;
        for (int i = 1; i <= TOUCHES; i++)
                if (store_sandbox_touch(t->s, "sb1", (uint64_t)i, (uint64_t)(t->idx * 1000 + i)) < 0)
                        t->failures++;
        return NULL;
}

TEST(store_concurrent_touches)
{
        struct store *s = open_store();
        struct toucher t[TOUCH_THREADS];
        pthread_t th[TOUCH_THREADS];
        struct sandbox_row got = {};
        char msg[64];

        put_sandbox(s, "sb1", 1, 0);
        for (int i = 0; i < TOUCH_THREADS; i++) {
                t[i] = (struct toucher){ .s = s, .idx = i + 1 };
                ASSERT_EQ(pthread_create(&th[i], NULL, touch_loop, &t[i]), 0);
        }
        for (int i = 0; i < TOUCH_THREADS; i++) {
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
                ASSERT_EQ(t[i].failures, 0);
        }
        ASSERT_OK(store_sandbox_get(s, "sb1", &got));
        ASSERT_EQ(got.last_used, TOUCHES);   /* every thread ends on its last touch */
        sandbox_row_done(&got);
        ASSERT_EQ(store_integrity_check(s, msg, sizeof(msg)), 0);
        store_close(s);
}
