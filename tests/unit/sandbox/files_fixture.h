/* Shared fixture of the files tests (tests/unit/sandbox/test_files.c and
 * tests/unit/api/workers/test_files_*.c): a fresh temp tree per test,
 *
 *   /tmp/sbx-files-XXXXXX/            (0777: writable for the jail user, so
 *       sentinel                       only confinement protects it)
 *       workspace/                    (root_fd; owned by the jail user)
 *
 * When run as root, ops run with fsuid 65534 like in the daemon. */
#pragma once

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox/files.h"
#include "tap.h"

#ifdef FILES_TEST_OPENAT2_SHIM
/* valgrind 3.19 (Debian 12) does not know openat2 (syscall 437), so the
 * leak-check build links with -Wl,--wrap=syscall and this emulation of
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, one O_NOFOLLOW component at a time.
 * Only for valgrind runs: the normal build tests the real syscall.
 *   gcc … -DFILES_TEST_OPENAT2_SHIM -Wl,--wrap=syscall … */
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>

long __real_syscall(long n, ...);
long __wrap_syscall(long n, ...);

static inline long shim_openat2(int dirfd, const char *path, const struct open_how *how)
{
        char buf[PATH_MAX];
        snprintf(buf, sizeof(buf), "%s", path);
        if (buf[0] == '/') {
                errno = EXDEV;
                return -1;
        }
        int cur = dup(dirfd);
        char *save = NULL, *comp = strtok_r(buf, "/", &save);
        while (comp) {
                char *next = strtok_r(NULL, "/", &save);
                if (strcmp(comp, "..") == 0) {
                        close(cur);
                        errno = EXDEV;
                        return -1;
                }
                struct stat lst;
                if (!next && fstatat(cur, comp, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode) &&
                    (how->flags & (O_PATH | O_NOFOLLOW)) != (O_PATH | O_NOFOLLOW)) {
                        close(cur);
                        errno = ELOOP;
                        return -1;
                }
                if (!next) {
                        int fd = openat(cur, comp, (int)how->flags | O_NOFOLLOW, (mode_t)how->mode);
                        int e = errno;
                        close(cur);
                        errno = e;
                        return fd;
                }
                int fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                struct stat st;
                if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
                        close(fd);
                        fd = -1;
                        errno = ELOOP;
                } else if (fd >= 0 && !S_ISDIR(st.st_mode)) {
                        close(fd);
                        fd = -1;
                        errno = ENOTDIR;
                }
                int e = errno;
                close(cur);
                if (fd < 0) {
                        errno = e;
                        return -1;
                }
                cur = fd;
                comp = next;
        }
        int fd = openat(cur, ".", (int)how->flags, (mode_t)how->mode);
        int e = errno;
        close(cur);
        errno = e;
        return fd;
}

long __wrap_syscall(long n, ...)
{
        va_list ap;
        va_start(ap, n);
        long a[6];
        for (int i = 0; i < 6; i++)
                a[i] = va_arg(ap, long);
        va_end(ap);
        if (n == SYS_openat2)
                return shim_openat2((int)a[0], (const char *)a[1], (const struct open_how *)a[2]);
        return __real_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
#endif

#define SENTINEL_TEXT "TOPSECRET-SENTINEL-7f3a9c\n"
#define CREATED_AT 1700000000123ULL /* 2023-11-14T22:13:20.123Z */
#define CREATED_AT_ISO "2023-11-14T22:13:20.123Z"

struct ws {
        char outer[64];
        char root[128];
        char sentinel[128];
        int root_fd;
        unsigned uid, gid;
        struct files_limits lim;
        struct stat sentinel_st;
};

static char cleanup_dir[64];

static inline void cleanup_tree(void)
{
        if (cleanup_dir[0])
                rm_rf(cleanup_dir);
}

static inline void ws_init(struct ws *w)
{
        *w = (struct ws){ 0 };
        umask(022);
        snprintf(w->outer, sizeof(w->outer), "/tmp/sbx-files-XXXXXX");
        ASSERT_TRUE(mkdtemp(w->outer) != NULL);
        snprintf(cleanup_dir, sizeof(cleanup_dir), "%s", w->outer);
        atexit(cleanup_tree);
        ASSERT_OK(chmod(w->outer, 0777));
        snprintf(w->root, sizeof(w->root), "%s/workspace", w->outer);
        snprintf(w->sentinel, sizeof(w->sentinel), "%s/sentinel", w->outer);
        ASSERT_OK(mkdir(w->root, 0755));

        w->uid = geteuid() == 0 ? 65534 : geteuid();
        w->gid = geteuid() == 0 ? 65534 : getegid();
        ASSERT_OK(chown(w->root, w->uid, w->gid));

        int fd = open(w->sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_all(fd, SENTINEL_TEXT, strlen(SENTINEL_TEXT)));
        close(fd);
        ASSERT_OK(chmod(w->sentinel, 0666));
        ASSERT_OK(lstat(w->sentinel, &w->sentinel_st));

        w->root_fd = open(w->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(w->root_fd >= 0);
        w->lim = (struct files_limits){
                .max_file_bytes = 1 * MiB,
                .max_total_bytes = 16 * MiB,
                .max_entries = 4096,
        };
}

/* Host path of a workspace-relative name. */
static inline const char *host(struct ws *w, const char *rel)
{
        static char buf[8][512];
        static int n;
        char *b = buf[n++ % 8];
        snprintf(b, 512, "%s/%s", w->root, rel);
        return b;
}

static inline void put_file(struct ws *w, const char *rel, const void *data, size_t len)
{
        int fd = open(host(w, rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_all(fd, data, len));
        close(fd);
        ASSERT_OK(chown(host(w, rel), w->uid, w->gid));
}

static inline void put_dir(struct ws *w, const char *rel)
{
        ASSERT_OK(mkdir(host(w, rel), 0755));
        ASSERT_OK(chown(host(w, rel), w->uid, w->gid));
}

static inline char *slurp(const char *path, size_t *ret_len)
{
        static char buf[65536];
        size_t len = 0;
        if (read_file_small(path, buf, sizeof(buf), &len) < 0)
                return NULL;
        if (ret_len)
                *ret_len = len;
        return buf;
}

/* The typed operations' view of the workspace (limits as set now). */
static inline struct files_root root_of(const struct ws *w)
{
        return (struct files_root){ .fd = w->root_fd, .limits = w->lim, .uid = w->uid, .gid = w->gid };
}

static inline void assert_sentinel_intact(struct ws *w)
{
        struct stat st;
        ASSERT_OK(lstat(w->sentinel, &st));
        ASSERT_EQ(st.st_ino, w->sentinel_st.st_ino);
        ASSERT_EQ(st.st_size, w->sentinel_st.st_size);
        ASSERT_EQ(st.st_mtim.tv_sec, w->sentinel_st.st_mtim.tv_sec);
        ASSERT_EQ(st.st_mtim.tv_nsec, w->sentinel_st.st_mtim.tv_nsec);
        ASSERT_EQ(st.st_uid, w->sentinel_st.st_uid);
        ASSERT_STREQ(slurp(w->sentinel, NULL), SENTINEL_TEXT);
}

static inline void plant_links(struct ws *w)
{
        char target[256];
        ASSERT_OK(symlink("/", host(w, "rootlink")));
        ASSERT_OK(symlink("/etc/passwd", host(w, "passwd")));
        ASSERT_OK(symlink("/etc", host(w, "etc")));
        ASSERT_OK(symlink("../../", host(w, "up")));
        ASSERT_OK(symlink("..", host(w, "parent")));
        ASSERT_OK(symlink("../sentinel", host(w, "sent")));
        ASSERT_OK(symlink(w->sentinel, host(w, "abs-sent")));
        snprintf(target, sizeof(target), "/proc/self/root%s", w->sentinel);
        ASSERT_OK(symlink(target, host(w, "magic")));
        put_dir(w, "inner");
        ASSERT_OK(symlink("..", host(w, "inner/dotdot")));
        ASSERT_OK(symlink("../../sentinel", host(w, "inner/sent2")));
}
