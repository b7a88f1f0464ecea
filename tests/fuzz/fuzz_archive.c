/* Fuzzes the archive reader and extractor behind the bridge's /hydrate
 * (files_hydrate in src/sandbox/files/extract.c, on libarchive's tar and
 * gzip readers): the input is the request body, a tar or tar.gz.
 *
 * Set-up, once: <tmp>/host/secret (a file outside the workspace) and
 * <tmp>/ws, rebuilt before every input with a file, a directory and
 * symlinks to "/", to "../host" and inside, so an archive can try to
 * write through links of the workspace too. Small limits (64 KiB a file,
 * 1 MiB, 256 entries, 32 levels), as getuid()/getgid().
 *
 * Invariants after every input:
 *  - nothing outside the workspace changed: <tmp> holds exactly "host" and
 *    "ws", host/ holds exactly the unchanged secret;
 *  - a refusal in the validation pass (ERR_INVALID, ERR_LIMIT,
 *    ERR_TOO_LARGE) left the workspace exactly as it was built;
 *  - a failure carries a message;
 *  - in the workspace, whatever happened: no temp file of the extractor,
 *    no FIFO, socket or device, no set-id or sticky bit, no new symlink
 *    whose target leaves /workspace, and it stays within its quotas;
 *  - files_persist of the result succeeds and every name of its tar is
 *    "." or "./…" without a ".." segment. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/util.h"
#include "fuzz.h"
#include "sandbox/archive.h"

static char g_dir[PATH_MAX];
static int g_dir_fd = -1;
static struct stat g_secret_st;
static const struct files_limits LIMITS = {
        .max_file_bytes = 64 * KiB,
        .max_total_bytes = 1 * MiB,
        .max_entries = 256,
        .max_depth = 32,
};

static bool has_dotdot(const char *path)
{
        for (const char *seg = path; *seg;) {
                size_t n = strcspn(seg, "/");
                if (n == 2 && seg[0] == '.' && seg[1] == '.')
                        return true;
                seg += n + (seg[n] == '/');
        }
        return false;
}

/* A symlink the extractor made (not one of build()'s) stays inside. */
static void check_link(int dfd, const char *prefix, const char *name)
{
        if (!prefix[0] && (!strcmp(name, "to_root") || !strcmp(name, "to_host") || !strcmp(name, "to_dir")))
                return;
        char target[PATH_MAX], joined[3 * PATH_MAX], norm[PATH_MAX];
        ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
        CHECK(n > 0);
        target[n] = '\0';
        if (target[0] == '/')
                snprintf(joined, sizeof(joined), "%s", target);
        else
                snprintf(joined, sizeof(joined), FILES_ROOT "/%s%s", prefix, target);
        CHECK(files_normalize(joined, norm, sizeof(norm)) == 0);
}

/* The workspace's entries as "type mode size name\n" lines, sorted by the
 * walk's order (readdir order is stable for an unchanged tmpfs dir). */
struct snap {
        char text[8192];
        size_t len;
};

static void snap_dir(int dfd, const char *prefix, struct snap *s, int depth)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);
        DIR *d = fdopendir(fd);
        CHECK(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                struct stat st;
                CHECK(fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0);
                char name[PATH_MAX];
                snprintf(name, sizeof(name), "%s%s", prefix, de->d_name);
                int n = snprintf(s->text + s->len, sizeof(s->text) - s->len, "%o %lld %s\n", (unsigned)st.st_mode,
                                 (long long)st.st_size, name);
                if (n > 0 && (size_t)n < sizeof(s->text) - s->len)
                        s->len += (size_t)n;
                /* The extractor's rules, whatever the outcome. */
                CHECK(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode));
                CHECK(!(st.st_mode & (S_ISUID | S_ISGID | S_ISVTX)));
                CHECK(strncmp(de->d_name, ".sandboxd-", 10) != 0 || strlen(de->d_name) != 30);
                if (S_ISLNK(st.st_mode))
                        check_link(dirfd(d), prefix, de->d_name);
                if (S_ISDIR(st.st_mode) && depth < 40) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                char p[PATH_MAX];
                                snprintf(p, sizeof(p), "%s/", name);
                                snap_dir(sub, p, s, depth + 1);
                                close(sub);
                        }
                }
        }
        closedir(d);
}

static void snapshot(struct snap *s)
{
        s->len = 0;
        s->text[0] = '\0';
        int ws = openat(g_dir_fd, "ws", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        CHECK(ws >= 0);
        snap_dir(ws, "", s, 0);
        close(ws);
}

static struct snap g_pristine;

static void build(void)
{
        CHECK(rm_rf_at(g_dir_fd, "ws") == 0);
        CHECK(mkdirat(g_dir_fd, "ws", 0755) == 0);
        int ws = openat(g_dir_fd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(ws >= 0);
        CHECK(mkdirat(ws, "dir", 0755) == 0);
        int fd = openat(ws, "dir/file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        CHECK(fd >= 0 && write_all(fd, "inside\n", 7) == 0);
        close(fd);
        CHECK(symlinkat("/", ws, "to_root") == 0);
        CHECK(symlinkat("../host", ws, "to_host") == 0);
        CHECK(symlinkat("dir", ws, "to_dir") == 0);
        close(ws);
}

static void check_outside(void)
{
        struct stat st;
        CHECK(fstatat(g_dir_fd, "host/secret", &st, AT_SYMLINK_NOFOLLOW) == 0);
        CHECK(st.st_ino == g_secret_st.st_ino && st.st_size == g_secret_st.st_size &&
              st.st_mtim.tv_nsec == g_secret_st.st_mtim.tv_nsec && st.st_mode == g_secret_st.st_mode);
        static const char *const expect[2][3] = { { "host", "ws", NULL }, { "secret", NULL, NULL } };
        const char *dirs[2] = { ".", "host" };
        for (int i = 0; i < 2; i++) {
                int fd = openat(g_dir_fd, dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                CHECK(fd >= 0);
                DIR *d = fdopendir(fd);
                CHECK(d);
                struct dirent *de;
                int n = 0;
                while ((de = readdir(d))) {
                        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                                continue;
                        CHECK(!strcmp(de->d_name, expect[i][0]) ||
                              (expect[i][1] && !strcmp(de->d_name, expect[i][1])));
                        n++;
                }
                closedir(d);
                CHECK(n == (i == 0 ? 2 : 1));
        }
}

/* Persist the result; its names must be "." or "./x" without "..". */
static void check_persist(const struct files_root *root)
{
        int fd = memfd_create("persist", MFD_CLOEXEC);
        CHECK(fd >= 0);
        struct err err = { 0 };
        CHECK(files_persist(root, NULL, 0, fd, &err) == 0);
        err_done(&err);
        off_t size = lseek(fd, 0, SEEK_END);
        CHECK(size > 0 && lseek(fd, 0, SEEK_SET) == 0);
        struct archive *a = archive_read_new();
        CHECK(a && archive_read_support_format_tar(a) == ARCHIVE_OK);
        CHECK(archive_read_open_fd(a, fd, 10240) == ARCHIVE_OK);
        struct archive_entry *e;
        int r;
        while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
                const char *name = archive_entry_pathname(e);
                CHECK(name && (!strcmp(name, ".") || !strcmp(name, "./") || !strncmp(name, "./", 2)));
                CHECK(!has_dotdot(name));
        }
        CHECK(r == ARCHIVE_EOF);
        archive_read_free(a);
        close(fd);
}

int LLVMFuzzerInitialize(int *argc UNUSED, char ***argv UNUSED)
{
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(g_dir, sizeof(g_dir), "%s/sandboxd-fuzz-archive-XXXXXX", base);
        CHECK(mkdtemp(g_dir));
        g_dir_fd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(g_dir_fd >= 0 && mkdirat(g_dir_fd, "host", 0777) == 0);
        int fd = openat(g_dir_fd, "host/secret", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        CHECK(fd >= 0 && write_all(fd, "host secret\n", 12) == 0);
        close(fd);
        CHECK(fstatat(g_dir_fd, "host/secret", &g_secret_st, AT_SYMLINK_NOFOLLOW) == 0);
        build();
        snapshot(&g_pristine);
        return 0;
}

__attribute__((destructor)) void fuzz_cleanup(void)
{
        if (g_dir[0]) {
                rm_rf(g_dir);
                g_dir[0] = '\0';
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        build();
        int ws = openat(g_dir_fd, "ws", O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(ws >= 0);
        struct files_root root = { .fd = ws, .limits = LIMITS, .uid = getuid(), .gid = getgid() };
        struct err err = { 0 };
        int r = files_hydrate(&root, data, size, &err);
        check_outside();
        struct snap after;
        snapshot(&after);
        if (r < 0) {
                CHECK(err.reason != ERR_OK && err.msg[0]);
                if (err.reason == ERR_INVALID || err.reason == ERR_LIMIT || err.reason == ERR_TOO_LARGE)
                        CHECK(after.len == g_pristine.len && !memcmp(after.text, g_pristine.text, after.len));
        } else {
                uint64_t entries, bytes;
                CHECK(files_usage(ws, &entries, &bytes) == 0);
                CHECK(entries <= LIMITS.max_entries && bytes <= LIMITS.max_total_bytes);
        }
        err_done(&err);
        check_persist(&root);
        close(ws);
        return 0;
}
