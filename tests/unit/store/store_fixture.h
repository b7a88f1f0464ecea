/* Shared by the store's unit tests: where the store lives, and small
 * builders for rows. Static functions in a header, included once per test
 * binary.
 *
 * STORE_URL selects the backend under test; unset, every test gets a fresh
 * SQLite file in its own mkdtemp directory, removed by an atexit hook even
 * when an ASSERT exits early (the runner forks per test, so the hook is per
 * test). With STORE_URL set the database may be shared and not empty, so
 * every id a test writes carries a per-test namespace (id("sb1")) and the
 * callbacks below see only the test's own ids, with the namespace cut. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "store/store.h"
#include "tap.h"

static char g_dir[PATH_MAX - 64];
static char g_ns[32];

UNUSED static void remove_dir(void)
{
        if (g_dir[0])
                rm_rf(g_dir);
}

/* The per-test directory (created on first use). */
UNUSED static const char *test_dir(void)
{
        const char *tmp = getenv("TMPDIR");

        if (!g_dir[0]) {
                snprintf(g_dir, sizeof(g_dir), "%s/sbx-store-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
                ASSERT_TRUE(mkdtemp(g_dir) != NULL);
                atexit(remove_dir);
        }
        return g_dir;
}

/* The SQLite file of the default backend. */
UNUSED static const char *db_path(void)
{
        static char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/store.db", test_dir());
        return path;
}

UNUSED static const char *store_url(void)
{
        static char url[PATH_MAX + 16];
        const char *env = getenv("STORE_URL");

        if (env && env[0])
                return env;
        snprintf(url, sizeof(url), "sqlite:%s", db_path());
        return url;
}

/* "<namespace>-name", from a small per-thread ring of buffers so several
 * may be live in one expression. Call once before starting threads (the
 * namespace is set on first use). */
UNUSED static const char *id(const char *name)
{
        static __thread char ring[16][STORE_ID_MAX];
        static __thread unsigned next;
        char *buf = ring[next++ % ARRAY_SIZE(ring)];

        if (!g_ns[0]) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                snprintf(g_ns, sizeof(g_ns), "t%x%lx", (unsigned)getpid(), (unsigned long)ts.tv_nsec);
        }
        snprintf(buf, STORE_ID_MAX, "%s-%s", g_ns, name);
        return buf;
}

/* The name of one of this test's ids, or NULL for someone else's. */
UNUSED static const char *unid(const char *full)
{
        size_t n = strlen(g_ns);
        if (!g_ns[0] || strncmp(full, g_ns, n) != 0 || full[n] != '-')
                return NULL;
        return full + n + 1;
}

UNUSED static struct store *open_store(void)
{
        struct store *s = NULL;
        struct err err = { 0 };
        int r = store_open(store_url(), &s, &err);
        if (r < 0)
                TAP_FAIL("store_open(%s): %d %s", store_url(), r, err.msg);
        return s;
}

UNUSED static void put_sandbox(struct store *s, const char *name, uint64_t created, uint64_t expires)
{
        struct sandbox_row row = { .created_at = created, .last_used = created, .expires_at = expires };
        snprintf(row.id, sizeof(row.id), "%s", id(name));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o1"));
        ASSERT_OK(store_org_ensure(s, id("o1"), "Org One"));
        ASSERT_OK(store_sandbox_put(s, &row));
}

UNUSED static void make_context(struct context_row *c, const char *name, const char *sandbox, uint64_t created)
{
        *c = (struct context_row){ .created_at = created, .last_used = created };
        snprintf(c->id, sizeof(c->id), "%s", id(name));
        snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", id(sandbox));
        snprintf(c->binding, sizeof(c->binding), "PYTHON");
        snprintf(c->language, sizeof(c->language), "python3");
        snprintf(c->cwd, sizeof(c->cwd), "/workspace");
        snprintf(c->build, sizeof(c->build), "python:CPython 3.11.2:kernel-abc");
}

UNUSED static void put_context(struct store *s, const char *name, const char *sandbox, uint64_t created)
{
        struct context_row c;
        make_context(&c, name, sandbox, created);
        ASSERT_OK(store_context_insert(s, &c));
}

UNUSED static int append_cell(struct store *s, const char *ctx, uint64_t seq, const char *code)
{
        struct cell_row c = { .seq = seq, .code = code, .env_json = "{\"A\":\"1\"}", .cwd = "/w" };
        return store_cell_append(s, id(ctx), &c);
}

/* Collects callback output as "a,b,c". */
struct seen {
        char buf[1024];
        int n;
};

UNUSED static void seen_add(struct seen *v, const char *s)
{
        size_t len = strlen(v->buf);
        snprintf(v->buf + len, sizeof(v->buf) - len, "%s%s", v->n++ ? "," : "", s);
}

UNUSED static void on_id(const char *full, void *userdata)
{
        const char *name = unid(full);
        if (name)
                seen_add(userdata, name);
}

UNUSED static void on_context(const struct context_row *row, void *userdata)
{
        const char *name = unid(row->id);
        if (name)
                seen_add(userdata, name);
}

UNUSED static void on_cell(const struct cell_row *cell, void *userdata)
{
        char item[128];
        snprintf(item, sizeof(item), "%" PRIu64 ":%s:%s:%s:%d", cell->seq, cell->code, cell->env_json,
                 cell->cwd, cell->typescript);
        seen_add(userdata, item);
}

/* The journal length as the cells say (not the context row). */
UNUSED static uint64_t sandbox_count(struct store *s)
{
        uint64_t n = 0;
        ASSERT_OK(store_sandbox_count(s, &n));
        return n;
}

UNUSED static uint64_t journal_len(struct store *s, const char *ctx)
{
        uint64_t n = 0, bytes = 0;
        ASSERT_OK(store_cell_stats(s, id(ctx), &n, &bytes));
        return n;
}

UNUSED static void count_cell(const struct cell_row *cell, void *userdata)
{
        (void)cell;
        (*(uint64_t *)userdata)++;
}

/* The cells a journal holds, counted one by one. */
UNUSED static uint64_t cell_count(struct store *s, const char *ctx)
{
        uint64_t n = 0;
        ASSERT_OK(store_cell_each(s, id(ctx), count_cell, &n));
        return n;
}

/* Runs fn(arg) in a child that then acknowledges and waits to be killed;
 * returns once it is dead of SIGKILL: no close, no checkpoint. What fn
 * wrote before the acknowledgement must be in the store after it. */
UNUSED static void write_then_kill9_child(void (*fn)(void *arg), void *arg)
{
        int status, acked[2];
        char c;

        test_dir();
        id("");   /* the namespace, shared with the child */
        ASSERT_EQ(pipe2(acked, O_CLOEXEC), 0);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                fn(arg);
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
}
