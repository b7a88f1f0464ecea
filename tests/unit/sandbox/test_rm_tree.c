/* Unit tests for the files API's recursive delete (files_rm_tree in
 * src/sandbox/files/walk.c): bounded fds whatever the depth, the depth cap,
 * links unlinked and never followed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/files/internal.h"
#include "tap.h"

/* dir/top/d/d/…(depth levels in all, counting top) with a file at every
 * level and, at the bottom, a link to outside. Built with dir fds, as a guest
 * would: the path is far longer than PATH_MAX. */
static void make_deep(int dir, int depth, const char *outside)
{
        ASSERT_OK(mkdirat(dir, "top", 0755));
        int fd = openat(dir, "top", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        for (int i = 1; i < depth; i++) {
                int f = openat(fd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                ASSERT_TRUE(f >= 0);
                close(f);
                ASSERT_OK(mkdirat(fd, "d", 0755));
                int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(next >= 0);
                close(fd);
                fd = next;
        }
        ASSERT_OK(symlinkat(outside, fd, "escape"));
        close(fd);
}

/* A fresh directory under /tmp (tmpl: "/tmp/rmtree-XXXXXX"), opened. */
static int temp_dir(char *tmpl)
{
        ASSERT_TRUE(mkdtemp(tmpl) != NULL);
        int dir = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dir >= 0);
        return dir;
}

static void temp_dir_done(int dir, const char *tmpl)
{
        close(dir);
        ASSERT_OK(rmdir(tmpl));
}

static int open_fds(void)
{
        int n = 0;
        for (int fd = 0; fd < 4096; fd++)
                n += fcntl(fd, F_GETFD) >= 0;
        return n;
}

TEST(deep_tree_removed_with_few_fds)
{
        char tmpl[] = "/tmp/rmtree-XXXXXX";
        int dir = temp_dir(tmpl);
        char outside[64];
        snprintf(outside, sizeof(outside), "%s/outside", tmpl);
        ASSERT_OK(mkdir(outside, 0755));
        char keep[80];
        snprintf(keep, sizeof(keep), "%s/keep", outside);
        close(open(keep, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        make_deep(dir, 1500, outside);
        int before = open_fds();
        /* One fd per level would need 1,500: at most 100 are allowed. */
        struct rlimit old, low = { 100, 100 };
        getrlimit(RLIMIT_NOFILE, &old);
        low.rlim_max = old.rlim_max;
        ASSERT_OK(setrlimit(RLIMIT_NOFILE, &low));
        int r = files_rm_tree(dir, "top", 0);
        setrlimit(RLIMIT_NOFILE, &old);
        ASSERT_EQ(r, 0);
        ASSERT_EQ(open_fds(), before);
        ASSERT_TRUE(faccessat(dir, "top", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
        ASSERT_OK(access(keep, F_OK)); /* the link was removed, not followed */
        unlink(keep);
        rmdir(outside);
        temp_dir_done(dir, tmpl);
}

TEST(depth_cap_refuses_deeper_trees)
{
        char tmpl[] = "/tmp/rmtree-XXXXXX";
        int dir = temp_dir(tmpl);
        make_deep(dir, 50, "/nonexistent");
        int before = open_fds();
        ASSERT_EQ(files_rm_tree(dir, "top", 20), -EMLINK);
        ASSERT_EQ(open_fds(), before);
        ASSERT_OK(faccessat(dir, "top", F_OK, AT_SYMLINK_NOFOLLOW));
        /* At the cap exactly it is fine. */
        ASSERT_EQ(files_rm_tree(dir, "top", 50), 0);
        ASSERT_TRUE(faccessat(dir, "top", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
        temp_dir_done(dir, tmpl);
}

TEST(top_level_link_is_not_entered)
{
        char tmpl[] = "/tmp/rmtree-XXXXXX";
        int dir = temp_dir(tmpl);
        ASSERT_OK(symlinkat("/etc", dir, "top"));
        ASSERT_EQ(files_rm_tree(dir, "top", 0), -ELOOP);
        ASSERT_OK(unlinkat(dir, "top", 0));
        temp_dir_done(dir, tmpl);
}
