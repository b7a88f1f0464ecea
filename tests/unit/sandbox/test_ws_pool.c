/* Ready workspace images (src/sandbox/ws_pool.c): the filler's decisions
 * (which shape to format, which to trim), and a real pool in a temp dir:
 * start-up deletes what a killed daemon left, a take moves an image out
 * (never the same one twice) and the pool refills, a quota it does not
 * keep is not served, and a shrinking room trims it. The real-pool tests
 * run mkfs.ext4 (skipped without it). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/util.h"
#include "sandbox/workspace.h"
#include "sandbox/ws_pool.h"
#include "tap.h"

static const struct ws_shape shapes[2] = { { 16 * MiB, 4096 }, { 256 * MiB, 65536 } };

TEST(ws_pool_next_shape_fills_in_order)
{
        unsigned ready[2] = { 0, 0 };
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, UINT64_MAX), 0);
        ready[0] = 2;
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, UINT64_MAX), 1);
        ready[1] = 2;
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, UINT64_MAX), -1);
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 0, UINT64_MAX), -1); /* depth 0: nothing */
}

TEST(ws_pool_next_shape_counts_ready_images_in_the_room)
{
        unsigned ready[2] = { 1, 0 };
        /* 16 MiB held: a second small one fits in 32 MiB, the big one not. */
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, 32 * MiB), 0);
        ready[0] = 2;
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, 32 * MiB), -1);
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, 32 * MiB + 256 * MiB), 1);
        ready[0] = 0;
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, 16 * MiB - 1), -1);
        ASSERT_EQ(ws_pool_next_shape(shapes, ready, 2, 2, 0), -1);
}

TEST(ws_pool_trim_shape)
{
        unsigned ready[2] = { 2, 1 };
        uint64_t held = 2 * 16 * MiB + 256 * MiB;
        ASSERT_EQ(ws_pool_trim_shape(shapes, ready, 2, held), -1);
        ASSERT_EQ(ws_pool_trim_shape(shapes, ready, 2, UINT64_MAX), -1);
        ASSERT_EQ(ws_pool_trim_shape(shapes, ready, 2, held - 1), 1); /* the most bytes first */
        ready[1] = 0;
        ASSERT_EQ(ws_pool_trim_shape(shapes, ready, 2, 16 * MiB), 0);
        ready[0] = 0;
        ASSERT_EQ(ws_pool_trim_shape(shapes, ready, 2, 0), -1);
}

/* ---- a real pool ---- */

static char dir[64];
static uint64_t room = UINT64_MAX;

static uint64_t room_fn(void *userdata)
{
        (void)userdata;
        return __atomic_load_n(&room, __ATOMIC_SEQ_CST);
}

static bool have_mkfs(void)
{
        if (access("/sbin/mkfs.ext4", X_OK) == 0)
                return true;
        printf("# skipped: no /sbin/mkfs.ext4\n");
        return false;
}

static void wait_ready(struct ws_pool *p, size_t n)
{
        for (int i = 0; i < 600 && ws_pool_ready(p) != n; i++)
                nanosleep(&(struct timespec){ 0, 20 * 1000000 }, NULL);
        ASSERT_EQ(ws_pool_ready(p), n);
}

static struct ws_pool *start(unsigned depth, size_t nshapes)
{
        struct ws_pool_options o = { .depth = depth, .nshapes = nshapes, .room = room_fn };
        memcpy(o.shapes, shapes, sizeof(shapes));
        o.shapes[1] = (struct ws_shape){ 1 * MiB, 64 };   /* small: quick to format */
        o.shapes[0] = (struct ws_shape){ 2 * MiB, 128 };
        snprintf(o.dir, sizeof(o.dir), "%s/wspool", dir);
        struct ws_pool *p = NULL;
        ASSERT_OK(ws_pool_new(&o, &p));
        ASSERT_NOT_NULL(p);
        return p;
}

static void mkdtemp_dir(void)
{
        snprintf(dir, sizeof(dir), "/tmp/sbx-wspool-XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(dir));
}

static size_t files_in(const char *path)
{
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", path);
        FILE *f = popen(cmd, "r");
        size_t n = 0;
        ASSERT_TRUE(f && fscanf(f, "%zu", &n) == 1);
        pclose(f);
        return n;
}

TEST(ws_pool_off_is_null)
{
        struct ws_pool_options o = { .depth = 0, .nshapes = 1, .shapes = { { MiB, 64 } } };
        struct ws_pool *p = (struct ws_pool *)1;
        ASSERT_OK(ws_pool_new(&o, &p));
        ASSERT_NULL(p);
        ASSERT_ERR(ws_pool_take(NULL, MiB, 64, "/nonexistent"), ENOENT);
        ASSERT_EQ(ws_pool_ready(NULL), 0);
}

TEST(ws_pool_start_deletes_leftovers_and_fills)
{
        if (!have_mkfs())
                return;
        mkdtemp_dir();
        char pool[128], f[160];
        snprintf(pool, sizeof(pool), "%s/wspool", dir);
        ASSERT_OK(mkdir_p(pool, 0700));
        /* What a kill -9 leaves: a ready image and a half-made one. */
        const char *left[] = { "0-7.img", "0-8.img.tmp" };
        for (size_t i = 0; i < ARRAY_SIZE(left); i++) {
                snprintf(f, sizeof(f), "%s/%s", pool, left[i]);
                int fd = open(f, O_CREAT | O_WRONLY, 0600);
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(write_all(fd, "junk", 4));
                close(fd);
        }
        struct ws_pool *p = start(2, 2);
        wait_ready(p, 4);
        ASSERT_EQ(files_in(pool), 4);
        for (size_t i = 0; i < ARRAY_SIZE(left); i++) {
                snprintf(f, sizeof(f), "%s/%s", pool, left[i]);
                ASSERT_TRUE(access(f, F_OK) < 0);
        }
        ws_pool_free(p);
        ASSERT_TRUE(access(pool, F_OK) < 0); /* a clean stop leaves nothing */
        rm_rf(dir);
}

TEST(ws_pool_take_moves_a_fresh_image_out_and_refills)
{
        if (!have_mkfs())
                return;
        mkdtemp_dir();
        struct ws_pool *p = start(1, 2);
        wait_ready(p, 2);
        char a[128], b[128];
        snprintf(a, sizeof(a), "%s/a.img", dir);
        snprintf(b, sizeof(b), "%s/b.img", dir);
        /* A quota it does not keep is not served. */
        ASSERT_ERR(ws_pool_take(p, 3 * MiB, 128, a), ENOENT);
        ASSERT_ERR(ws_pool_take(p, 2 * MiB, 64, a), ENOENT);
        ASSERT_OK(ws_pool_take(p, 2 * MiB, 128, a));
        /* The only one of that quota is gone until the filler made another. */
        ASSERT_ERR(ws_pool_take(p, 2 * MiB, 128, b), ENOENT);
        struct stat sa;
        ASSERT_OK(stat(a, &sa) < 0 ? -errno : 0);
        /* A formatted ext4 image: its superblock names some free space. */
        int fd = open(a, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        uint64_t free_bytes = workspace_image_free_bytes(fd);
        close(fd);
        ASSERT_TRUE(free_bytes > 0 && free_bytes <= 2 * MiB);
        wait_ready(p, 2);
        ASSERT_OK(ws_pool_take(p, 2 * MiB, 128, b));
        struct stat sb;
        ASSERT_OK(stat(b, &sb) < 0 ? -errno : 0);
        ASSERT_NE(sa.st_ino, sb.st_ino); /* never the same image twice */
        ASSERT_OK(stat(a, &sa) < 0 ? -errno : 0); /* and a stays where it went */
        ws_pool_free(p);
        rm_rf(dir);
}

TEST(ws_pool_trims_when_the_room_shrinks)
{
        if (!have_mkfs())
                return;
        mkdtemp_dir();
        __atomic_store_n(&room, 3 * MiB, __ATOMIC_SEQ_CST);
        struct ws_pool *p = start(2, 2);
        /* 2 MiB + 1 MiB fit in 3 MiB: one of each, not two of the first. */
        wait_ready(p, 2);
        __atomic_store_n(&room, 1 * MiB, __ATOMIC_SEQ_CST);
        wait_ready(p, 1);  /* the filler re-asks within a second */
        char c[128];
        snprintf(c, sizeof(c), "%s/c.img", dir);
        ASSERT_ERR(ws_pool_take(p, 2 * MiB, 128, c), ENOENT);   /* the bigger one went */
        ASSERT_OK(ws_pool_take(p, 1 * MiB, 64, c));
        ws_pool_free(p);
        __atomic_store_n(&room, UINT64_MAX, __ATOMIC_SEQ_CST);
        rm_rf(dir);
}
