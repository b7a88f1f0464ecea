/* The workspace part of creating a sandbox, alone: workspace_open of a new
 * sandbox with a ready image from the pool (rename + loop mount) against
 * the same without one (mkfs.ext4 runs + loop mount), interleaved, for the
 * runtime API's default quota and the bridge's. Each sample is followed by
 * workspace_destroy (untimed) and, for the pool row, by waiting until the
 * pool holds an image again (untimed). Prints "name p50_ms p99_ms" lines
 * (bench/fast_paths.py). Needs root. Usage: ws_open DIR [N]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fs.h"
#include "base/util.h"
#include "sandbox/workspace.h"
#include "sandbox/ws_pool.h"
#include "stats.h"

static uint64_t open_once(const char *dir, struct ws_pool *pool, const struct ws_shape *q, int i)
{
        char id[32];
        snprintf(id, sizeof(id), "b%d", i);
        struct workspace ws;
        workspace_init(&ws, dir, id);
        ws.pool = pool;
        uint64_t t0 = now_ns();
        int r = workspace_open(&ws, q->bytes, q->inodes);
        uint64_t dt = now_ns() - t0;
        if (r < 0 || (pool && ws_pool_ready(pool) != 0)) {
                fprintf(stderr, "ws_open: workspace_open: %s\n", r < 0 ? strerror(-r) : "did not take the image");
                exit(1);
        }
        workspace_destroy(&ws);
        return dt;
}

static void wait_ready(struct ws_pool *p)
{
        for (int i = 0; i < 1000 && ws_pool_ready(p) < 1; i++)
                nanosleep(&(struct timespec){ 0, 10 * 1000000 }, NULL);
}

int main(int argc, char **argv)
{
        if (argc < 2)
                return 2;
        int n = argc > 2 ? atoi(argv[2]) : 30;
        const struct ws_shape shapes[] = { { 16 * MiB, 4096 }, { 256 * MiB, 65536 } };
        const char *names[][2] = { { "ws-api-pool", "ws-api-mkfs" }, { "ws-bridge-pool", "ws-bridge-mkfs" } };
        for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
                struct ws_pool_options o = { .depth = 1, .nshapes = 1, .shapes = { shapes[s] } };
                snprintf(o.dir, sizeof(o.dir), "%s/wspool", argv[1]);
                struct ws_pool *pool = NULL;
                if (ws_pool_new(&o, &pool) < 0 || !pool)
                        return 1;
                uint64_t *a = calloc((size_t)n, sizeof(*a)), *b = calloc((size_t)n, sizeof(*b));
                for (int i = 0; i < n; i++) {
                        wait_ready(pool);
                        a[i] = open_once(argv[1], pool, &shapes[s], i);
                        b[i] = open_once(argv[1], NULL, &shapes[s], i);
                }
                ws_pool_free(pool);
                report(names[s][0], a, n);
                report(names[s][1], b, n);
                free(a);
                free(b);
        }
        rm_rf(argv[1]);
        return 0;
}
