/* The store contract under concurrency: many threads on one handle, through
 * the public store.h functions only. Run it against another backend with
 * STORE_URL=<url> build/unit/store/test_store_threads (store_fixture.h). */
#include <pthread.h>

#include "store_fixture.h"

/* ---- many threads --------------------------------------------------- */

#define THREADS 4
#define ROUNDS 50

struct worker {
        struct store *s;
        int idx;
        int failures;
        int appended, conflicts;
};

static void run_threads(struct worker *w, void *(*fn)(void *), struct store *s)
{
        pthread_t th[THREADS];

        id("");   /* sets the namespace before the threads read it */
        for (int i = 0; i < THREADS; i++) {
                w[i] = (struct worker){ .s = s, .idx = i };
                ASSERT_EQ(pthread_create(&th[i], NULL, fn, &w[i]), 0);
        }
        for (int i = 0; i < THREADS; i++)
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
}

static void *touch_loop(void *arg)
{
        struct worker *t = arg;
        for (int i = 1; i <= ROUNDS * 4; i++)
                if (store_sandbox_touch(t->s, id("sb1"), (uint64_t)i, (uint64_t)((t->idx + 1) * 1000 + i)) < 0)
                        t->failures++;
        return NULL;
}

TEST(contract_concurrent_touches)
{
        struct store *s = open_store();
        struct worker w[THREADS];
        struct sandbox_row got = {};

        put_sandbox(s, "sb1", 1, 0);
        run_threads(w, touch_loop, s);
        for (int i = 0; i < THREADS; i++)
                ASSERT_EQ(w[i].failures, 0);
        ASSERT_OK(store_sandbox_get(s, id("sb1"), &got));
        ASSERT_EQ(got.last_used, ROUNDS * 4);   /* every thread ends on its last touch */
        sandbox_row_done(&got);
        store_close(s);
}

/* Threads race to extend one journal: each reads the length and appends
 * the next seq, retrying when another thread got there first. */
static void *append_race(void *arg)
{
        struct worker *t = arg;
        char code[32];
        uint64_t n, bytes;

        for (int tries = 0; t->appended < ROUNDS && tries < ROUNDS * 100; tries++) {
                if (store_cell_stats(t->s, id("c1"), &n, &bytes) < 0) {
                        t->failures++;
                        continue;
                }
                snprintf(code, sizeof(code), "t%d-%d", t->idx, t->appended);
                int r = store_cell_append(t->s, id("c1"),
                                          &(struct cell_row){ .seq = n + 1, .code = code, .cwd = "/" });
                if (r == 0)
                        t->appended++;
                else if (r == -EINVAL)
                        t->conflicts++;
                else
                        t->failures++;
        }
        return NULL;
}

static void check_seq(const struct cell_row *cell, void *userdata)
{
        uint64_t *next = userdata;
        ASSERT_EQ(cell->seq, ++*next);
}

TEST(contract_concurrent_appends_keep_the_journal_exact)
{
        struct store *s = open_store();
        struct worker w[THREADS];
        uint64_t seen = 0;

        put_sandbox(s, "sb1", 1, 0);
        put_context(s, "c1", "sb1", 1);
        run_threads(w, append_race, s);
        for (int i = 0; i < THREADS; i++) {
                ASSERT_EQ(w[i].failures, 0);
                ASSERT_EQ(w[i].appended, ROUNDS);
        }
        ASSERT_OK(store_cell_each(s, id("c1"), check_seq, &seen));
        ASSERT_EQ(seen, THREADS * ROUNDS);
        ASSERT_EQ(journal_len(s, "c1"), THREADS * ROUNDS);
        store_close(s);
}

/* Each thread runs a sandbox's whole life while the others do too. */
static void *lifecycle(void *arg)
{
        struct worker *t = arg;
        char sb[32], ctx[32];
        struct context_row c;
        uint64_t n = 0;

        for (int round = 0; round < ROUNDS / 5; round++) {
                snprintf(sb, sizeof(sb), "sb-%d-%d", t->idx, round);
                snprintf(ctx, sizeof(ctx), "c-%d-%d", t->idx, round);
                put_sandbox(t->s, sb, 1, 10);
                make_context(&c, ctx, sb, 1);
                if (store_context_insert(t->s, &c) < 0)
                        t->failures++;
                for (uint64_t seq = 1; seq <= 5; seq++)
                        if (append_cell(t->s, ctx, seq, "x") < 0)
                                t->failures++;
                c.executions = 5;
                if (store_context_update(t->s, &c) < 0 || cell_count(t->s, ctx) != 5 ||
                    store_context_count(t->s, id(sb), &n) < 0 || n != 1)
                        t->failures++;
                if (store_sandbox_delete(t->s, id(sb)) < 0)
                        t->failures++;
        }
        return NULL;
}

TEST(contract_concurrent_lifecycles)
{
        struct store *s = open_store();
        struct worker w[THREADS];
        uint64_t before = sandbox_count(s);
        char msg[64];

        run_threads(w, lifecycle, s);
        for (int i = 0; i < THREADS; i++)
                ASSERT_EQ(w[i].failures, 0);
        ASSERT_EQ(sandbox_count(s), before);
        ASSERT_EQ(store_integrity_check(s, msg, sizeof(msg)), 0);
        store_close(s);
}
