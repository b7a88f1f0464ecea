/* Store operations per second on one backend (issue 16, item 7): the
 * calls a node makes on its hot paths, through the public store interface,
 * against the store named by the URL (sqlite:PATH or postgresql://…).
 * bench/store.py runs it on SQLite and on a throwaway PostgreSQL and
 * prints the ratio.
 *
 *   store_ops URL N [THREADS]
 *
 * Prints one line per operation: "op n seconds ops_per_s". Every call is
 * checked: a failure prints the op and the error and exits 1, so a figure
 * is never the speed of an error path. Ids carry a per-run prefix, so a
 * database that is not empty (a shared server) is fine. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "store/store.h"

struct bench {
        struct store *s;
        char run[32];        /* per-run id prefix */
        unsigned n, threads;
};

static void die(const char *op, int r)
{
        fprintf(stderr, "store_ops: %s: %s\n", op, strerror(-r));
        exit(1);
}

static void sandbox_id(const struct bench *b, unsigned i, char out[static STORE_ID_MAX])
{
        snprintf(out, STORE_ID_MAX, "%s-sb%u", b->run, i);
}

static void report(const char *op, unsigned n, uint64_t t0)
{
        double s = (double)(now_ns() - t0) / 1e9;
        printf("%s %u %.4f %.1f\n", op, n, s, s > 0 ? n / s : 0.0);
        fflush(stdout);
}

static void op_put(struct bench *b)
{
        uint64_t t0 = now_ns(), now = now_ms();
        for (unsigned i = 0; i < b->n; i++) {
                struct sandbox_row row = { .created_at = now, .last_used = now, .expires_at = now + 3600000,
                                           .env_json = (char *)"{\"A\":\"1\"}" };
                sandbox_id(b, i, row.id);
                snprintf(row.org_id, sizeof(row.org_id), "%s-org", b->run);
                int r = store_sandbox_put(b->s, &row);
                if (r < 0)
                        die("sandbox.put", r);
        }
        report("sandbox.put", b->n, t0);
}

static void op_get(struct bench *b)
{
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < b->n; i++) {
                char id[STORE_ID_MAX];
                struct sandbox_row row = { 0 };
                sandbox_id(b, i, id);
                int r = store_sandbox_get(b->s, id, &row);
                sandbox_row_done(&row);
                if (r < 0)
                        die("sandbox.get", r);
        }
        report("sandbox.get", b->n, t0);
}

static void op_touch(struct bench *b)
{
        uint64_t t0 = now_ns(), now = now_ms();
        for (unsigned i = 0; i < b->n; i++) {
                char id[STORE_ID_MAX];
                sandbox_id(b, i, id);
                int r = store_sandbox_touch(b->s, id, now + i, now + i + 3600000);
                if (r < 0)
                        die("sandbox.touch", r);
        }
        report("sandbox.touch", b->n, t0);
}

/* Every sandbox claimed once from epoch 0 (each claim one conditional
 * UPDATE), then a stale claim that must lose. */
static void op_claim(struct bench *b)
{
        uint64_t t0 = now_ns(), epoch = 0;
        for (unsigned i = 0; i < b->n; i++) {
                char id[STORE_ID_MAX];
                sandbox_id(b, i, id);
                int r = store_sandbox_claim(b->s, id, "bench-node", 0, &epoch);
                if (r < 0)
                        die("sandbox.claim", r);
        }
        report("sandbox.claim", b->n, t0);
        char id[STORE_ID_MAX];
        sandbox_id(b, 0, id);
        if (store_sandbox_claim(b->s, id, "other-node", 0, &epoch) != -EBUSY)
                die("sandbox.claim (stale epoch must lose)", -EPROTO);
}

/* One context's journal, N cells in order (each append checks seq). */
static void op_cells(struct bench *b)
{
        struct context_row c = { .created_at = now_ms(), .last_used = now_ms(), .env_json = (char *)"{}" };
        snprintf(c.id, sizeof(c.id), "%s-ctx", b->run);
        sandbox_id(b, 0, c.sandbox_id);
        snprintf(c.binding, sizeof(c.binding), "PYTHON");
        snprintf(c.language, sizeof(c.language), "python");
        snprintf(c.cwd, sizeof(c.cwd), "/workspace");
        int r = store_context_insert(b->s, &c);
        if (r < 0)
                die("context.insert", r);
        uint64_t t0 = now_ns();
        for (unsigned i = 1; i <= b->n; i++) {
                struct cell_row cell = { .seq = i, .code = "x = x + 1", .env_json = "{}", .cwd = "/workspace" };
                if ((r = store_cell_append(b->s, c.id, &cell)) < 0)
                        die("cell.append", r);
        }
        report("cell.append", b->n, t0);
}

struct worker {
        struct bench *b;
        unsigned first;
        int r;
};

static void *get_worker(void *arg)
{
        struct worker *w = arg;
        for (unsigned i = 0; i < w->b->n && w->r == 0; i++) {
                char id[STORE_ID_MAX];
                struct sandbox_row row = { 0 };
                sandbox_id(w->b, (w->first + i) % w->b->n, id);
                w->r = store_sandbox_get(w->b->s, id, &row);
                sandbox_row_done(&row);
        }
        return NULL;
}

/* THREADS readers at once, N gets each: what a busy node's HTTP threads
 * do (SQLite serialises them on one connection, PostgreSQL leases a pool). */
static void op_get_parallel(struct bench *b)
{
        pthread_t t[64];
        struct worker w[64];
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < b->threads; i++) {
                w[i] = (struct worker){ .b = b, .first = i * (b->n / b->threads) };
                if (pthread_create(&t[i], NULL, get_worker, &w[i]) != 0)
                        die("pthread_create", -EAGAIN);
        }
        for (unsigned i = 0; i < b->threads; i++) {
                pthread_join(t[i], NULL);
                if (w[i].r < 0)
                        die("sandbox.get (parallel)", w[i].r);
        }
        char name[64];
        snprintf(name, sizeof(name), "sandbox.get_x%u", b->threads);
        report(name, b->n * b->threads, t0);
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: %s URL N [THREADS]\n", argv[0]);
                return 2;
        }
        struct bench b = { .n = (unsigned)strtoul(argv[2], NULL, 10),
                           .threads = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 4 };
        if (b.n == 0 || b.threads == 0 || b.threads > 64) {
                fprintf(stderr, "store_ops: N >= 1 and 1 <= THREADS <= 64\n");
                return 2;
        }
        snprintf(b.run, sizeof(b.run), "bench%d-%" PRIu64, (int)getpid(), now_ms());
        struct err err = { 0 };
        int r = store_open(argv[1], &b.s, &err);
        if (r < 0) {
                fprintf(stderr, "store_ops: cannot open the store: %s\n", err.msg[0] ? err.msg : strerror(-r));
                err_done(&err);
                return 1;
        }
        char org[STORE_ID_MAX];
        snprintf(org, sizeof(org), "%s-org", b.run);
        if ((r = store_org_ensure(b.s, org, "bench")) < 0)
                die("org.ensure", r);
        op_put(&b);
        op_get(&b);
        op_touch(&b);
        op_claim(&b);
        op_cells(&b);
        op_get_parallel(&b);
        store_close(b.s);
        return 0;
}
