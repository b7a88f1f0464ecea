/* The store contract: what every backend must do, through the public
 * store.h functions only (no SQL, no backend internals). Run it against
 * another backend with STORE_URL=<url> build/unit/store/test_store_contract;
 * see store_fixture.h for how tests share a database then. */
#include "store_fixture.h"

static uint64_t context_count(struct store *s, const char *sandbox)
{
        uint64_t n = 99;
        ASSERT_OK(store_context_count(s, id(sandbox), &n));
        return n;
}

TEST(contract_reopen_keeps_data)
{
        struct store *s = open_store();
        struct sandbox_row sb = {};
        struct context_row ctx = {};
        struct org_row org = {};
        struct seen cells = {};
        int version = store_schema_version(s);

        ASSERT_TRUE(version >= 1);
        ASSERT_TRUE(strlen(store_backend_name(s)) > 0);
        put_sandbox(s, "sb1", 1000, 5000);
        put_context(s, "c1", "sb1", 1000);
        ASSERT_OK(append_cell(s, "c1", 1, "x = 1"));
        store_close(s);

        s = open_store();
        ASSERT_EQ(store_schema_version(s), version);
        ASSERT_OK(store_org_get(s, id("o1"), &org));
        ASSERT_STREQ(org.name, "Org One");
        ASSERT_OK(store_sandbox_get(s, id("sb1"), &sb));
        ASSERT_STREQ(sb.org_id, id("o1"));
        ASSERT_EQ(sb.expires_at, 5000);
        ASSERT_OK(store_context_get(s, id("c1"), &ctx));
        ASSERT_STREQ(ctx.build, "python:CPython 3.11.2:kernel-abc");
        ASSERT_OK(store_cell_each(s, id("c1"), on_cell, &cells));
        ASSERT_STREQ(cells.buf, "1:x = 1:{\"A\":\"1\"}:/w:0");
        sandbox_row_done(&sb);
        context_row_done(&ctx);
        store_close(s);
        store_close(NULL);
}

TEST(contract_open_bad_urls)
{
        struct store *s = NULL;
        struct err err = { 0 };

        ASSERT_EQ(store_open("nosuch-backend://host/db", &s, &err), -EPROTONOSUPPORT);
        ASSERT_TRUE(s == NULL);
        ASSERT_TRUE(strstr(err.msg, "nosuch-backend") != NULL);
        ASSERT_EQ(err.reason, ERR_INVALID);
        ASSERT_EQ(store_open("x:", &s, &err), -EPROTONOSUPPORT);
        ASSERT_EQ(store_open(NULL, &s, &err), -EINVAL);
        ASSERT_EQ(err.reason, ERR_INVALID);
        ASSERT_EQ(store_open(store_url(), NULL, &err), -EINVAL);
        ASSERT_TRUE(s == NULL);
        err_done(&err);
}

TEST(contract_null_arguments)
{
        struct store *s = open_store();
        uint64_t n;

        ASSERT_EQ(store_org_ensure(NULL, id("o"), "x"), -EINVAL);
        ASSERT_EQ(store_org_get(s, id("o"), NULL), -EINVAL);
        ASSERT_EQ(store_sandbox_put(s, NULL), -EINVAL);
        ASSERT_EQ(store_sandbox_get(s, NULL, &(struct sandbox_row){}), -EINVAL);
        ASSERT_EQ(store_sandbox_each_expired(s, 1, NULL, NULL), -EINVAL);
        ASSERT_EQ(store_sandbox_count(NULL, &n), -EINVAL);
        ASSERT_EQ(store_context_insert(s, NULL), -EINVAL);
        ASSERT_EQ(store_context_each(s, id("x"), NULL, NULL), -EINVAL);
        ASSERT_EQ(store_cell_append(s, id("c"), &(struct cell_row){ .seq = 1, .code = NULL, .cwd = "/" }),
                  -EINVAL);
        ASSERT_EQ(store_cell_stats(s, id("c"), &n, NULL), -EINVAL);
        ASSERT_EQ(store_integrity_check(NULL, NULL, 0), -EINVAL);
        ASSERT_EQ(store_schema_version(NULL), -EINVAL);
        store_close(s);
}

TEST(contract_org_ensure_idempotent)
{
        struct store *s = open_store();
        struct org_row org = {};

        ASSERT_OK(store_org_ensure(s, id("o1"), "First"));
        ASSERT_OK(store_org_ensure(s, id("o1"), "Second"));
        ASSERT_OK(store_org_get(s, id("o1"), &org));
        ASSERT_STREQ(org.id, id("o1"));
        ASSERT_STREQ(org.name, "First");
        ASSERT_TRUE(org.created_at > 0);

        ASSERT_OK(store_org_ensure(s, id("o2"), NULL));
        ASSERT_OK(store_org_get(s, id("o2"), &org));
        ASSERT_STREQ(org.name, "");

        ASSERT_EQ(store_org_get(s, id("nope"), &org), -ENOENT);
        ASSERT_STREQ(org.id, id("o2"));   /* out-param untouched on failure */
        store_close(s);
}

TEST(contract_sandbox_crud)
{
        struct store *s = open_store();
        struct sandbox_row row = { .created_at = 10, .last_used = 11, .expires_at = 0 };
        struct sandbox_row got = {};
        uint64_t before;

        snprintf(row.id, sizeof(row.id), "%s", id("sb1"));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o1"));
        /* The org must exist first. */
        ASSERT_EQ(store_sandbox_put(s, &row), -ENOENT);
        ASSERT_OK(store_org_ensure(s, id("o1"), "Org"));
        before = sandbox_count(s);
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_EQ(sandbox_count(s), before + 1);

        ASSERT_OK(store_sandbox_get(s, id("sb1"), &got));
        ASSERT_STREQ(got.id, id("sb1"));
        ASSERT_STREQ(got.org_id, id("o1"));
        ASSERT_EQ(got.created_at, 10);
        ASSERT_EQ(got.last_used, 11);
        ASSERT_EQ(got.expires_at, 0);
        ASSERT_STREQ(got.env_json, "{}");
        sandbox_row_done(&got);
        ASSERT_TRUE(got.env_json == NULL);
        sandbox_row_done(&got);   /* idempotent */
        sandbox_row_done(NULL);

        /* put replaces every column, and does not add a second row. */
        uint64_t reserved0, reserved1;
        ASSERT_OK(store_sandbox_disk_reserved(s, 1000, &reserved0));
        row.created_at = 20;
        row.expires_at = 500;
        row.env_json = (char *)"{\"K\":\"V\"}";
        row.workspace_bytes = 1 << 20;
        row.workspace_inodes = 77;
        row.file_bytes = 4096;
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_EQ(sandbox_count(s), before + 1);
        /* Its own quota replaces the default in the reserved total. */
        ASSERT_OK(store_sandbox_disk_reserved(s, 1000, &reserved1));
        ASSERT_EQ(reserved1, reserved0 - 1000 + (1 << 20));
        ASSERT_OK(store_sandbox_get(s, id("sb1"), &got));
        ASSERT_EQ(got.created_at, 20);
        ASSERT_EQ(got.expires_at, 500);
        ASSERT_EQ(got.workspace_bytes, 1 << 20);
        ASSERT_EQ(got.workspace_inodes, 77);
        ASSERT_EQ(got.file_bytes, 4096);
        ASSERT_STREQ(got.env_json, "{\"K\":\"V\"}");
        sandbox_row_done(&got);

        /* touch and set_env change only their columns; text is verbatim. */
        ASSERT_OK(store_sandbox_touch(s, id("sb1"), 30, 600));
        ASSERT_OK(store_sandbox_set_env(s, id("sb1"), "{\"X\":\"'; DROP TABLE sandboxes; --\"}"));
        ASSERT_OK(store_sandbox_get(s, id("sb1"), &got));
        ASSERT_EQ(got.last_used, 30);
        ASSERT_EQ(got.expires_at, 600);
        ASSERT_EQ(got.created_at, 20);
        ASSERT_STREQ(got.env_json, "{\"X\":\"'; DROP TABLE sandboxes; --\"}");
        sandbox_row_done(&got);
        ASSERT_OK(store_sandbox_set_env(s, id("sb1"), NULL));
        ASSERT_OK(store_sandbox_get(s, id("sb1"), &got));
        ASSERT_STREQ(got.env_json, "{}");
        sandbox_row_done(&got);

        /* Times are signed 64-bit in every backend: refuse what would wrap. */
        ASSERT_EQ(store_sandbox_touch(s, id("sb1"), 1, UINT64_MAX), -ERANGE);

        ASSERT_OK(store_sandbox_delete(s, id("sb1")));
        ASSERT_EQ(sandbox_count(s), before);
        ASSERT_EQ(store_sandbox_get(s, id("sb1"), &got), -ENOENT);
        ASSERT_TRUE(got.env_json == NULL);
        ASSERT_EQ(store_sandbox_touch(s, id("sb1"), 1, 1), -ENOENT);
        ASSERT_EQ(store_sandbox_set_env(s, id("sb1"), "{}"), -ENOENT);
        ASSERT_EQ(store_sandbox_delete(s, id("sb1")), -ENOENT);
        store_close(s);
}

/* One host id per sandbox: stored with the row, and the lowest free one in
 * a range is found past the taken ones (and again once a row is deleted). */
TEST(contract_sandbox_host_ids)
{
        struct store *s = open_store();
        struct sandbox_row row = { .created_at = 1, .last_used = 1 };
        struct sandbox_row got = {};
        uint32_t first = 3000000000U, idv = 0;

        ASSERT_OK(store_org_ensure(s, id("o1"), "Org"));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o1"));
        ASSERT_OK(store_sandbox_free_host_id(s, first, 3, &idv));
        ASSERT_EQ(idv, first);
        for (int i = 0; i < 3; i++) {
                snprintf(row.id, sizeof(row.id), "%s", id(i == 0 ? "h0" : i == 1 ? "h1" : "h2"));
                ASSERT_OK(store_sandbox_free_host_id(s, first, 3, &idv));
                ASSERT_EQ(idv, first + (uint32_t)i);
                row.host_id = idv;
                ASSERT_OK(store_sandbox_put(s, &row));
        }
        ASSERT_EQ(store_sandbox_free_host_id(s, first, 3, &idv), -ENOSPC);
        ASSERT_OK(store_sandbox_get(s, id("h1"), &got));
        ASSERT_EQ(got.host_id, first + 1);
        sandbox_row_done(&got);
        ASSERT_OK(store_sandbox_delete(s, id("h1")));
        ASSERT_OK(store_sandbox_free_host_id(s, first, 3, &idv));
        ASSERT_EQ(idv, first + 1);
        ASSERT_EQ(store_sandbox_free_host_id(s, first, 0, &idv), -EINVAL);
        ASSERT_OK(store_sandbox_delete(s, id("h0")));
        ASSERT_OK(store_sandbox_delete(s, id("h2")));
        store_close(s);
}

/* A warm sandbox taken under a tenant's id: the row moves, host id and
 * all, and the old one is gone (two rows never share a host id). */
TEST(contract_sandbox_rekey)
{
        struct store *s = open_store();
        struct sandbox_row row = { .created_at = 1, .last_used = 1, .host_id = 3000000007U };
        struct sandbox_row got = {};
        uint32_t idv = 0;

        put_sandbox(s, "rk-old", 1, 0);
        ASSERT_OK(store_sandbox_get(s, id("rk-old"), &got));
        row = got;
        got.env_json = NULL;
        row.host_id = 3000000007U;
        ASSERT_OK(store_sandbox_put(s, &row));
        snprintf(row.id, sizeof(row.id), "%s", id("rk-new"));
        snprintf(row.warm_class, sizeof(row.warm_class), "moved");
        ASSERT_OK(store_sandbox_rekey(s, id("rk-old"), &row));
        ASSERT_EQ(store_sandbox_get(s, id("rk-old"), &got), -ENOENT);
        ASSERT_OK(store_sandbox_get(s, id("rk-new"), &got));
        ASSERT_EQ(got.host_id, 3000000007U);
        ASSERT_STREQ(got.warm_class, "moved");
        sandbox_row_done(&got);
        /* The host id is held once: the next free one is its successor. */
        ASSERT_OK(store_sandbox_free_host_id(s, 3000000007U, 2, &idv));
        ASSERT_EQ(idv, 3000000008U);
        /* An old row already gone is no error; a bad id is. */
        snprintf(row.id, sizeof(row.id), "%s", id("rk-new2"));
        ASSERT_OK(store_sandbox_rekey(s, id("rk-none"), &row));
        ASSERT_EQ(store_sandbox_rekey(s, "", &row), -EINVAL);
        ASSERT_OK(store_sandbox_delete(s, id("rk-new")));
        ASSERT_OK(store_sandbox_delete(s, id("rk-new2")));
        sandbox_row_done(&row);
        store_close(s);
}

TEST(contract_sandbox_put_keeps_contexts)
{
        struct store *s = open_store();

        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        ASSERT_OK(append_cell(s, "c1", 1, "a"));
        /* Re-putting an existing sandbox updates it in place; a delete +
         * insert would cascade away its contexts and journal. */
        put_sandbox(s, "sb1", 2, 0);
        ASSERT_EQ(context_count(s, "sb1"), 1);
        ASSERT_EQ(cell_count(s, "c1"), 1);
        store_close(s);
}

static struct store *g_reaper_store;

/* Deletes from inside the callback, as the expiry reaper does: the store
 * must not hold a lock while it calls back. */
static void reap(const char *full, void *userdata)
{
        if (!unid(full))
                return;
        on_id(full, userdata);
        ASSERT_OK(store_sandbox_delete(g_reaper_store, full));
}

TEST(contract_sandbox_each_expired)
{
        struct store *s = open_store();
        struct sandbox_row never = {};
        struct seen v = {};

        put_sandbox(s, "never", 1, 0);
        put_sandbox(s, "late", 1, 300);
        put_sandbox(s, "b-at-200", 1, 200);
        put_sandbox(s, "a-at-200", 1, 200);
        put_sandbox(s, "early", 1, 100);
        put_context(s, "c1", "early", 1);

        ASSERT_OK(store_sandbox_each_expired(s, 99, on_id, &v));
        ASSERT_EQ(v.n, 0);
        /* Ordered by expiry time, then id; expires_at == now is expired. */
        ASSERT_OK(store_sandbox_each_expired(s, 200, on_id, &v));
        ASSERT_STREQ(v.buf, "early,a-at-200,b-at-200");

        g_reaper_store = s;
        v = (struct seen){};
        ASSERT_OK(store_sandbox_each_expired(s, 1000, reap, &v));
        ASSERT_STREQ(v.buf, "early,a-at-200,b-at-200,late");
        v = (struct seen){};
        ASSERT_OK(store_sandbox_each_expired(s, 1000, on_id, &v));
        ASSERT_EQ(v.n, 0);
        ASSERT_OK(store_sandbox_get(s, id("never"), &never));
        sandbox_row_done(&never);
        ASSERT_EQ(context_count(s, "early"), 0);
        store_close(s);
}

TEST(contract_sandbox_each_in_org)
{
        struct store *s = open_store();
        struct sandbox_row row = {};
        struct seen v = {};

        put_sandbox(s, "b-in-o1", 1, 0);
        put_sandbox(s, "a-in-o1", 1, 0);
        put_sandbox(s, "in-o2", 1, 0);
        ASSERT_OK(store_org_ensure(s, id("o2"), "Org Two"));
        ASSERT_OK(store_sandbox_get(s, id("in-o2"), &row));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o2"));
        ASSERT_OK(store_sandbox_put(s, &row));
        sandbox_row_done(&row);

        ASSERT_OK(store_sandbox_each_in_org(s, id("o2"), on_id, &v));
        ASSERT_STREQ(v.buf, "in-o2");
        v = (struct seen){};
        /* Ordered by id; the callback may delete (rows are read first). */
        g_reaper_store = s;
        ASSERT_OK(store_sandbox_each_in_org(s, id("o1"), reap, &v));
        ASSERT_STREQ(v.buf, "a-in-o1,b-in-o1");
        v = (struct seen){};
        ASSERT_OK(store_sandbox_each_in_org(s, id("o1"), on_id, &v));
        ASSERT_EQ(v.n, 0);
        ASSERT_OK(store_sandbox_each_in_org(s, id("nobody"), on_id, &v));
        ASSERT_EQ(v.n, 0);
        ASSERT_EQ(store_sandbox_each_in_org(s, "", on_id, &v), -EINVAL);
        ASSERT_EQ(store_sandbox_each_in_org(s, id("o1"), NULL, NULL), -EINVAL);
        store_close(s);
}

static void on_sandbox(const struct sandbox_row *row, void *userdata)
{
        const char *name = unid(row->id);
        if (name)
                seen_add(userdata, name);
}

/* A controller sandbox's limits and absolute deadline round-trip; an org's
 * listing is paged by creation and holds no other org's sandbox. */
TEST(contract_sandbox_org_pages)
{
        struct store *s = open_store();
        struct sandbox_row row = { .created_at = 5, .last_used = 5, .expires_at = 900, .cpu_millis = 200,
                                   .memory_bytes = 64 << 20, .expiry_fixed = true };
        struct sandbox_row got = {};
        struct seen v = {};
        uint64_t total = 0;

        put_sandbox(s, "pb", 2, 0);
        put_sandbox(s, "pa", 1, 0);
        ASSERT_OK(store_org_ensure(s, id("o2"), "Org Two"));
        snprintf(row.id, sizeof(row.id), "%s", id("pc"));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o2"));
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_OK(store_sandbox_get(s, id("pc"), &got));
        ASSERT_EQ(got.cpu_millis, 200);
        ASSERT_EQ(got.memory_bytes, 64 << 20);
        ASSERT_TRUE(got.expiry_fixed);
        sandbox_row_done(&got);

        ASSERT_OK(store_sandbox_each_org(s, id("o2"), 10, 0, on_sandbox, &v, &total));
        ASSERT_STREQ(v.buf, "pc");
        ASSERT_EQ(total, 1);
        v = (struct seen){};
        ASSERT_OK(store_sandbox_each_org(s, id("o1"), 1, 0, on_sandbox, &v, &total));
        ASSERT_STREQ(v.buf, "pa");
        ASSERT_TRUE(total >= 2);
        v = (struct seen){};
        ASSERT_OK(store_sandbox_each_org(s, id("nobody"), 10, 0, on_sandbox, &v, &total));
        ASSERT_EQ(v.n, 0);
        ASSERT_EQ(total, 0);
        store_close(s);
}

TEST(contract_context_crud)
{
        struct store *s = open_store();
        struct context_row c, got = {};

        put_sandbox(s, "sb1", 1, 0);
        make_context(&c, "c1", "sb1", 100);
        c.env_json = (char *)"{\"A\":\"1\"}";
        ASSERT_OK(store_context_insert(s, &c));
        ASSERT_EQ(store_context_insert(s, &c), -EEXIST);

        make_context(&c, "c2", "no-such-sandbox", 100);
        ASSERT_EQ(store_context_insert(s, &c), -ENOENT);

        ASSERT_OK(store_context_get(s, id("c1"), &got));
        ASSERT_STREQ(got.id, id("c1"));
        ASSERT_STREQ(got.sandbox_id, id("sb1"));
        ASSERT_STREQ(got.binding, "PYTHON");
        ASSERT_STREQ(got.language, "python3");
        ASSERT_STREQ(got.cwd, "/workspace");
        ASSERT_STREQ(got.env_json, "{\"A\":\"1\"}");
        ASSERT_STREQ(got.build, "python:CPython 3.11.2:kernel-abc");
        ASSERT_EQ(got.created_at, 100);
        ASSERT_EQ(got.last_used, 100);
        ASSERT_EQ(got.executions, 0);
        ASSERT_EQ(got.snap_taken_at, 0);
        ASSERT_TRUE(!got.snap_stale);
        context_row_done(&got);
        context_row_done(&got);
        context_row_done(NULL);

        /* update writes only the mutable columns, build among them (a
         * journal restarted by another build records the new one). */
        make_context(&c, "c1", "ignored", 999);
        snprintf(c.binding, sizeof(c.binding), "IGNORED");
        snprintf(c.cwd, sizeof(c.cwd), "/workspace/sub");
        snprintf(c.build, sizeof(c.build), "python:CPython 3.12.1:kernel-def");
        c.env_json = NULL;
        c.last_used = 200;
        c.executions = 7;
        c.snap_taken_at = 190;
        c.snap_cells = 3;
        c.snap_bytes = 42;
        c.snap_stale = true;
        ASSERT_OK(store_context_update(s, &c));
        ASSERT_OK(store_context_get(s, id("c1"), &got));
        ASSERT_STREQ(got.sandbox_id, id("sb1"));
        ASSERT_STREQ(got.binding, "PYTHON");
        ASSERT_EQ(got.created_at, 100);
        ASSERT_STREQ(got.cwd, "/workspace/sub");
        ASSERT_STREQ(got.env_json, "{}");
        ASSERT_STREQ(got.build, "python:CPython 3.12.1:kernel-def");
        ASSERT_EQ(got.last_used, 200);
        ASSERT_EQ(got.executions, 7);
        ASSERT_EQ(got.snap_taken_at, 190);
        ASSERT_EQ(got.snap_cells, 3);
        ASSERT_EQ(got.snap_bytes, 42);
        ASSERT_TRUE(got.snap_stale);
        context_row_done(&got);

        ASSERT_EQ(context_count(s, "sb1"), 1);
        ASSERT_OK(store_context_delete(s, id("c1")));
        ASSERT_EQ(context_count(s, "sb1"), 0);
        ASSERT_EQ(store_context_get(s, id("c1"), &got), -ENOENT);
        ASSERT_EQ(store_context_delete(s, id("c1")), -ENOENT);
        make_context(&c, "c1", "sb1", 1);
        ASSERT_EQ(store_context_update(s, &c), -ENOENT);
        store_close(s);
}

TEST(contract_context_each_order)
{
        struct store *s = open_store();
        struct seen v = {};

        put_sandbox(s, "sb1", 1, 0);
        put_sandbox(s, "sb2", 1, 0);
        put_context(s, "c3", "sb1", 10);
        put_context(s, "b", "sb1", 5);
        put_context(s, "a2", "sb1", 10);
        put_context(s, "a1", "sb1", 10);
        put_context(s, "other", "sb2", 1);

        /* created_at, then id. */
        ASSERT_OK(store_context_each(s, id("sb1"), on_context, &v));
        ASSERT_STREQ(v.buf, "b,a1,a2,c3");
        ASSERT_EQ(context_count(s, "sb1"), 4);

        /* An unknown sandbox simply has no contexts. */
        v = (struct seen){};
        ASSERT_OK(store_context_each(s, id("nope"), on_context, &v));
        ASSERT_EQ(v.n, 0);
        ASSERT_EQ(context_count(s, "nope"), 0);
        store_close(s);
}

static struct store *g_store;

/* Reads the store from inside the callback, as the sandbox loader does. */
static void get_again(const struct context_row *row, void *userdata)
{
        struct context_row again = {};
        ASSERT_OK(store_context_get(g_store, row->id, &again));
        ASSERT_STREQ(again.cwd, row->cwd);
        context_row_done(&again);
        (*(int *)userdata)++;
}

static void stats_again(const struct cell_row *cell, void *userdata)
{
        uint64_t n, bytes;
        (void)cell;
        ASSERT_OK(store_cell_stats(g_store, id("c1"), &n, &bytes));
        (*(int *)userdata)++;
}

TEST(contract_callbacks_may_reenter)
{
        struct store *s = open_store();
        int calls = 0;

        g_store = s;
        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        put_context(s, "c2", "sb1", 2);
        ASSERT_OK(append_cell(s, "c1", 1, "a"));
        ASSERT_OK(append_cell(s, "c1", 2, "b"));
        ASSERT_OK(store_context_each(s, id("sb1"), get_again, &calls));
        ASSERT_EQ(calls, 2);
        ASSERT_OK(store_cell_each(s, id("c1"), stats_again, &calls));
        ASSERT_EQ(calls, 4);
        store_close(s);
}

TEST(contract_cell_journal)
{
        struct store *s = open_store();
        struct cell_row ts = { .seq = 3, .code = "let x: number = 1", .env_json = NULL, .cwd = "/t",
                               .typescript = true };
        struct seen v = {};

        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        put_context(s, "c2", "sb1", 2);

        /* Only the next seq is accepted. */
        ASSERT_EQ(append_cell(s, "c1", 0, "zero"), -EINVAL);
        ASSERT_EQ(append_cell(s, "c1", 2, "gap"), -EINVAL);
        ASSERT_OK(append_cell(s, "c1", 1, "one"));
        ASSERT_OK(append_cell(s, "c1", 2, "two"));
        ASSERT_EQ(append_cell(s, "c1", 2, "repeat"), -EINVAL);
        ASSERT_EQ(append_cell(s, "c1", 1, "older"), -EINVAL);
        ASSERT_EQ(append_cell(s, "c1", 5, "gap"), -EINVAL);
        ASSERT_OK(store_cell_append(s, id("c1"), &ts));
        ASSERT_OK(append_cell(s, "c2", 1, "other"));   /* seq is per context */
        ASSERT_EQ(append_cell(s, "missing", 1, "x"), -ENOENT);

        /* In seq order, strings verbatim, a NULL env read back as {}. */
        ASSERT_OK(store_cell_each(s, id("c1"), on_cell, &v));
        ASSERT_STREQ(v.buf, "1:one:{\"A\":\"1\"}:/w:0,"
                            "2:two:{\"A\":\"1\"}:/w:0,"
                            "3:let x: number = 1:{}:/t:1");
        /* Rejected appends left nothing behind. */
        ASSERT_EQ(cell_count(s, "c1"), 3);

        ASSERT_OK(store_cells_delete(s, id("c1")));
        ASSERT_EQ(cell_count(s, "c1"), 0);
        ASSERT_EQ(cell_count(s, "c2"), 1);
        ASSERT_OK(store_cells_delete(s, id("c1")));   /* empty journal is fine */
        ASSERT_EQ(store_cells_delete(s, id("missing")), -ENOENT);
        /* An emptied journal starts again at 1. */
        ASSERT_EQ(append_cell(s, "c1", 4, "continue"), -EINVAL);
        ASSERT_OK(append_cell(s, "c1", 1, "restart"));

        v = (struct seen){};
        ASSERT_OK(store_cell_each(s, id("missing"), on_cell, &v));
        ASSERT_EQ(v.n, 0);

        /* Deleting a context drops its journal: the same id starts empty. */
        ASSERT_OK(store_context_delete(s, id("c2")));
        ASSERT_EQ(cell_count(s, "c2"), 0);
        put_context(s, "c2", "sb1", 3);
        ASSERT_EQ(cell_count(s, "c2"), 0);
        ASSERT_OK(append_cell(s, "c2", 1, "fresh"));
        store_close(s);
}

TEST(contract_cell_stats_are_the_truth)
{
        struct store *s = open_store();
        struct context_row c;
        uint64_t n = 99, bytes = 99;

        put_sandbox(s, "sb1", 1, 0);
        make_context(&c, "c1", "sb1", 1);
        /* The context row's copy says otherwise (a crash between appending
         * a cell and updating the row); the stats must not read it. */
        c.snap_cells = 40;
        c.snap_bytes = 4000;
        ASSERT_OK(store_context_insert(s, &c));
        ASSERT_OK(store_cell_stats(s, id("c1"), &n, &bytes));
        ASSERT_EQ(n, 0);
        ASSERT_EQ(bytes, 0);

        ASSERT_OK(append_cell(s, "c1", 1, "abc"));
        ASSERT_OK(append_cell(s, "c1", 2, "h\xc3\xa9"));   /* "hé": 3 bytes, 2 characters */
        ASSERT_OK(store_cell_stats(s, id("c1"), &n, &bytes));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(bytes, 6);

        ASSERT_OK(store_cells_delete(s, id("c1")));
        ASSERT_OK(store_cell_stats(s, id("c1"), &n, &bytes));
        ASSERT_EQ(n, 0);
        ASSERT_EQ(bytes, 0);
        ASSERT_OK(store_cell_stats(s, id("missing"), &n, &bytes));
        ASSERT_EQ(n, 0);
        store_close(s);
}

TEST(contract_large_cell_round_trip)
{
        struct store *s = open_store();
        size_t len = 2 * 1024 * 1024;
        char *code = malloc(len + 1);
        uint64_t n, bytes;

        ASSERT_TRUE(code != NULL);
        for (size_t i = 0; i < len; i++)
                code[i] = (char)('a' + i % 26);
        code[len] = '\0';
        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        ASSERT_OK(append_cell(s, "c1", 1, code));
        ASSERT_OK(store_cell_stats(s, id("c1"), &n, &bytes));
        ASSERT_EQ(bytes, len);
        free(code);
        store_close(s);
}

TEST(contract_sandbox_delete_cascades)
{
        struct store *s = open_store();
        struct context_row got = {};

        put_sandbox(s, "sb1", 1, 0);
        put_sandbox(s, "sb2", 1, 0);
        put_context(s, "c1", "sb1", 1);
        put_context(s, "c2", "sb1", 2);
        put_context(s, "k1", "sb2", 1);
        ASSERT_OK(append_cell(s, "c1", 1, "a"));
        ASSERT_OK(append_cell(s, "c1", 2, "b"));
        ASSERT_OK(append_cell(s, "c2", 1, "c"));
        ASSERT_OK(append_cell(s, "k1", 1, "d"));

        ASSERT_OK(store_sandbox_delete(s, id("sb1")));
        ASSERT_EQ(store_context_get(s, id("c1"), &got), -ENOENT);
        ASSERT_EQ(store_context_get(s, id("c2"), &got), -ENOENT);
        ASSERT_EQ(context_count(s, "sb1"), 0);
        ASSERT_EQ(cell_count(s, "c1"), 0);
        ASSERT_EQ(cell_count(s, "c2"), 0);
        ASSERT_EQ(append_cell(s, "c1", 3, "late"), -ENOENT);

        /* The other sandbox is untouched. */
        ASSERT_EQ(context_count(s, "sb2"), 1);
        ASSERT_EQ(cell_count(s, "k1"), 1);
        store_close(s);
}

TEST(contract_rejects_too_long_strings)
{
        struct store *s = open_store();
        struct sandbox_row row = {}, got = {};
        struct context_row c;
        char long_id[STORE_ID_MAX + 1];
        char name[300];

        memset(long_id, 'a', sizeof(long_id));
        long_id[STORE_ID_MAX] = '\0';   /* 130 chars: one too many */
        ASSERT_EQ(store_org_ensure(s, long_id, "x"), -ENAMETOOLONG);
        ASSERT_EQ(store_org_get(s, long_id, &(struct org_row){}), -ENAMETOOLONG);
        ASSERT_EQ(store_sandbox_get(s, long_id, &got), -ENAMETOOLONG);
        ASSERT_EQ(store_sandbox_delete(s, long_id), -ENAMETOOLONG);
        ASSERT_EQ(store_cell_append(s, long_id, &(struct cell_row){ .seq = 1, .code = "", .cwd = "" }),
                  -ENAMETOOLONG);
        ASSERT_EQ(store_org_ensure(s, "", "x"), -EINVAL);

        /* 129 chars: the longest id that fits. */
        snprintf(long_id, sizeof(long_id), "%s", id(""));
        memset(long_id + strlen(long_id), 'a', STORE_ID_MAX - 1 - strlen(long_id));
        long_id[STORE_ID_MAX - 1] = '\0';
        ASSERT_OK(store_org_ensure(s, id("o1"), "x"));
        row = (struct sandbox_row){};
        snprintf(row.id, sizeof(row.id), "%s", long_id);
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o1"));
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_OK(store_sandbox_get(s, long_id, &got));
        ASSERT_STREQ(got.id, long_id);
        sandbox_row_done(&got);

        memset(name, 'n', sizeof(name));
        name[256] = '\0';
        ASSERT_EQ(store_org_ensure(s, id("o3"), name), -ENAMETOOLONG);
        name[255] = '\0';
        ASSERT_OK(store_org_ensure(s, id("o3"), name));

        /* A fixed-size field without its NUL is too long, not read past. */
        memset(row.id, 'b', sizeof(row.id));
        ASSERT_EQ(store_sandbox_put(s, &row), -ENAMETOOLONG);

        put_sandbox(s, "sb1", 1, 0);
        make_context(&c, "c1", "sb1", 1);
        memset(c.binding, 'B', sizeof(c.binding));
        ASSERT_EQ(store_context_insert(s, &c), -ENAMETOOLONG);
        make_context(&c, "c1", "sb1", 1);
        memset(c.build, 'V', sizeof(c.build));
        ASSERT_EQ(store_context_insert(s, &c), -ENAMETOOLONG);
        ASSERT_EQ(store_context_update(s, &c), -ENAMETOOLONG);
        make_context(&c, "c1", "sb1", 1);
        memset(c.cwd, '/', sizeof(c.cwd));
        ASSERT_EQ(store_context_insert(s, &c), -ENAMETOOLONG);
        ASSERT_EQ(store_context_update(s, &c), -ENAMETOOLONG);
        ASSERT_EQ(store_context_get(s, id("c1"), &(struct context_row){}), -ENOENT);
        store_close(s);
}

TEST(contract_two_handles_share_data)
{
        struct store *a = open_store();
        struct store *b = open_store();
        struct context_row got = {};

        /* Two handles on one URL (two processes, or two nodes later) see
         * each other's commits and share the journal's seq rule. */
        put_sandbox(a, "sb1", 1, 0);
        put_context(a, "c1", "sb1", 1);
        ASSERT_OK(append_cell(a, "c1", 1, "from a"));
        ASSERT_OK(store_context_get(b, id("c1"), &got));
        context_row_done(&got);
        ASSERT_EQ(append_cell(b, "c1", 1, "stale seq"), -EINVAL);
        ASSERT_OK(append_cell(b, "c1", 2, "from b"));
        ASSERT_EQ(cell_count(a, "c1"), 2);
        store_close(a);
        store_close(b);
}
