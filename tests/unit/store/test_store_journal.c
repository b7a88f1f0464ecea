/* store_cell_append_row: an executed cell and its context's row in one
 * transaction (issue 13, the per-request floor). Both land or neither, the
 * row reads back exactly as written, a lazy write survives kill -9 whole,
 * and the statements the backend keeps prepared for it stay correct over
 * many cells and close cleanly. Runs against any backend (STORE_URL). */
#include "store_fixture.h"

/* The row as journal_append writes it for cell seq. */
static void row_after(struct context_row *row, uint64_t seq, const char *code)
{
        row->executions = seq + 10;
        row->last_used = 5000 + seq;
        row->snap_cells = seq;
        row->snap_bytes += strlen(code);
        row->snap_taken_at = 7000 + seq;
        snprintf(row->cwd, sizeof(row->cwd), "/workspace/d%llu", (unsigned long long)seq);
        snprintf(row->build, sizeof(row->build), "python:CPython 3.11.2:kernel-%llu", (unsigned long long)seq);
}

static int append_row(struct store *s, struct context_row *row, uint64_t seq, const char *code)
{
        struct cell_row cell = { .seq = seq, .code = code, .env_json = "{\"A\":\"1\"}", .cwd = "/w" };
        struct context_row next = *row;
        row_after(&next, seq, code);
        int r = store_cell_append_row(s, &cell, &next);
        if (r == 0)
                *row = next;
        return r;
}

static void assert_row(struct store *s, const struct context_row *want)
{
        struct context_row got = {};
        ASSERT_OK(store_context_get(s, want->id, &got));
        ASSERT_EQ(got.executions, want->executions);
        ASSERT_EQ(got.last_used, want->last_used);
        ASSERT_EQ(got.snap_cells, want->snap_cells);
        ASSERT_EQ(got.snap_bytes, want->snap_bytes);
        ASSERT_EQ(got.snap_taken_at, want->snap_taken_at);
        ASSERT_EQ(got.snap_stale, want->snap_stale);
        ASSERT_STREQ(got.cwd, want->cwd);
        ASSERT_STREQ(got.build, want->build);
        ASSERT_EQ(got.created_at, want->created_at);   /* not the update's */
        context_row_done(&got);
}

TEST(journal_append_row_writes_both)
{
        struct store *s = open_store();
        struct context_row row;
        struct seen v = {};

        put_sandbox(s, "sb1", 1, 0);
        make_context(&row, "c1", "sb1", 1);
        ASSERT_OK(store_context_insert(s, &row));
        ASSERT_OK(append_row(s, &row, 1, "x = 1"));
        assert_row(s, &row);
        ASSERT_OK(append_row(s, &row, 2, "x + 1"));
        assert_row(s, &row);
        ASSERT_EQ(row.snap_bytes, 10);
        ASSERT_OK(store_cell_each(s, id("c1"), on_cell, &v));
        ASSERT_STREQ(v.buf, "1:x = 1:{\"A\":\"1\"}:/w:0,2:x + 1:{\"A\":\"1\"}:/w:0");
        store_close(s);
}

TEST(journal_append_row_all_or_nothing)
{
        struct store *s = open_store();
        struct context_row row, bad;

        put_sandbox(s, "sb1", 1, 0);
        make_context(&row, "c1", "sb1", 1);
        ASSERT_OK(store_context_insert(s, &row));
        ASSERT_OK(append_row(s, &row, 1, "x = 1"));
        /* A refused seq (a gap, a repeat) writes neither the cell nor the row. */
        bad = row;
        ASSERT_EQ(append_row(s, &bad, 3, "gap"), -EINVAL);
        ASSERT_EQ(append_row(s, &bad, 1, "repeat"), -EINVAL);
        assert_row(s, &row);
        ASSERT_EQ(cell_count(s, "c1"), 1);
        /* A missing context: -ENOENT, and no cell under its id. */
        make_context(&bad, "gone", "sb1", 1);
        ASSERT_EQ(append_row(s, &bad, 1, "x"), -ENOENT);
        ASSERT_EQ(cell_count(s, "gone"), 0);
        /* Still usable after the rollbacks. */
        ASSERT_OK(append_row(s, &row, 2, "y = 2"));
        assert_row(s, &row);
        ASSERT_EQ(cell_count(s, "c1"), 2);
        /* Bad arguments. */
        struct cell_row cell = { .seq = 3, .code = NULL, .cwd = "/" };
        ASSERT_EQ(store_cell_append_row(s, &cell, &row), -EINVAL);
        cell.code = "z";
        ASSERT_EQ(store_cell_append_row(s, &cell, NULL), -EINVAL);
        store_close(s);
}

/* The kept statements: many cells over two contexts, interleaved with the
 * other cell and context writes, then a close (which must finalize them). */
TEST(journal_append_row_many_cells)
{
        struct store *s = open_store();
        struct context_row a, b;
        char code[32];

        put_sandbox(s, "sb1", 1, 0);
        make_context(&a, "ca", "sb1", 1);
        make_context(&b, "cb", "sb1", 2);
        ASSERT_OK(store_context_insert(s, &a));
        ASSERT_OK(store_context_insert(s, &b));
        for (uint64_t i = 1; i <= 200; i++) {
                snprintf(code, sizeof(code), "v%llu = %llu", (unsigned long long)i, (unsigned long long)i);
                ASSERT_OK(append_row(s, &a, i, code));
                ASSERT_OK(append_row(s, &b, i, code));
                if (i % 50 == 0) {
                        b.snap_stale = true;
                        ASSERT_OK(store_context_update(s, &b));
                }
        }
        assert_row(s, &a);
        assert_row(s, &b);
        ASSERT_EQ(cell_count(s, "ca"), 200);
        ASSERT_OK(store_cells_delete(s, id("cb")));
        ASSERT_EQ(append_row(s, &b, 201, "after delete"), -EINVAL);
        ASSERT_OK(append_row(s, &b, 1, "restart"));
        store_close(s);
        /* Reopened: what was written is there. */
        s = open_store();
        assert_row(s, &a);
        assert_row(s, &b);
        store_close(s);
}

static void lazy_rows(void *arg)
{
        struct context_row row = *(struct context_row *)arg;
        struct store *s = open_store();
        store_set_journal_lazy(s, true, NULL, NULL);
        put_sandbox(s, "sb1", 1, 0);
        ASSERT_OK(store_context_insert(s, &row));
        for (uint64_t i = 1; i <= 3; i++)
                ASSERT_OK(append_row(s, &row, i, "x = 1"));
}

/* A lazy (journal_sync=group|none) write acknowledged, then kill -9: the
 * cell and the row are both there, as one. */
TEST(journal_append_row_survives_kill9)
{
        struct context_row row;

        test_dir();
        id("");
        make_context(&row, "c1", "sb1", 1);
        write_then_kill9_child(lazy_rows, &row);

        struct store *s = open_store();
        for (uint64_t i = 1; i <= 3; i++)
                row_after(&row, i, "x = 1");
        assert_row(s, &row);
        ASSERT_EQ(cell_count(s, "c1"), 3);
        store_close(s);
}
