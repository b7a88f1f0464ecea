/* Whole-file reads and atomic, durable, quota-checked writes. */
#include "sandbox/files/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "base/util.h"

void files_blob_done(struct files_blob *b)
{
        if (!b)
                return;
        free(b->data);
        *b = (struct files_blob){ 0 };
}

/* Reads fd to its end into b; -ENOBUFS when it grows past b->max (the file
 * grew while we were reading), with *ret_seen the bytes seen so far. */
static int read_to_end(int fd, struct buf *b, uint64_t *ret_seen)
{
        char chunk[65536];
        for (;;) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                int r = buf_append(b, chunk, (size_t)n);
                if (r < 0) {
                        *ret_seen = (uint64_t)b->len + (uint64_t)n;
                        return r;
                }
        }
}

/* Opens f's path as a regular file for reading (confined, never through a
 * symlink) and fstats it into st. Directories are EISDIR, other
 * non-regular files EACCES, both with err filled. */
static int open_regular(struct fop *f, struct stat *st)
{
        /* O_NONBLOCK: a guest-planted FIFO must not hang the daemon; it is
         * refused below like every non-regular file. */
        _cleanup_close_ int fd = resolve_at(f->root->fd, f->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return fop_fail(f, -fd, NULL, NULL);
        if (fstat(fd, st) < 0)
                return fop_fail(f, errno, NULL, NULL);
        if (S_ISDIR(st->st_mode))
                return fop_fail(f, EISDIR, NULL, "Is a directory: %s", f->path);
        if (!S_ISREG(st->st_mode))
                return fop_fail(f, EACCES, NULL, "Permission denied: '%s' is not a regular file", f->path);
        return TAKE_FD(fd);
}

int files_open_read(const struct files_root *root, const char *path, int *ret_fd, uint64_t *ret_size,
                    struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_READ, path, NULL, err);
        if (r < 0)
                return r;
        struct stat st;
        _cleanup_close_ int fd = open_regular(&f, &st);
        if (fd < 0)
                return fd;
        /* The reader streams it: blocking reads from here on. */
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
                return fop_fail(&f, errno, NULL, NULL);
        *ret_size = (uint64_t)st.st_size;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int files_read(const struct files_root *root, const char *path, struct files_blob *ret, struct err *err)
{
        *ret = (struct files_blob){ 0 };
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_READ, path, NULL, err);
        if (r < 0)
                return r;
        uint64_t max = root->limits.max_file_bytes ? root->limits.max_file_bytes : READ_HARD_MAX;
        struct stat st;
        _cleanup_close_ int fd = open_regular(&f, &st);
        if (fd < 0)
                return fd;
        if ((uint64_t)st.st_size > max)
                return fop_too_large(&f, max, (uint64_t)st.st_size);

        struct buf b;
        buf_init(&b, (size_t)max);
        uint64_t seen = 0;
        r = read_to_end(fd, &b, &seen);
        /* buf keeps its data NUL-terminated; an empty file has none yet. */
        if (r == 0 && !b.data && !(b.data = calloc(1, 1)))
                r = -ENOMEM;
        if (r < 0) {
                buf_free(&b);
                if (r == -ENOBUFS)
                        return fop_too_large(&f, max, seen);
                return fop_fail(&f, -r, NULL, NULL);
        }
        *ret = (struct files_blob){ .data = (unsigned char *)b.data, .len = b.len };
        return 0;
}

void files_temp_name(char out[static 40])
{
        uint64_t v;
        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
                v = now_ns() ^ ((uint64_t)getpid() << 32);
        snprintf(out, 40, FILES_TEMP_PREFIX "%016llx.tmp", (unsigned long long)v);
}

/* Replaces dir_fd/name atomically: a hidden temp file in the same
 * directory is filled (and fsynced when durable), renamed over the target,
 * then the directory is fsynced (durable), so an acknowledged write
 * survives a crash and a reader never sees a half-written file.
 * O_EXCL|O_NOFOLLOW keeps a guest from pre-planting the temp name as a
 * symlink. renameat() replaces the directory entry itself and never follows
 * a symlink at the target. On failure the temp file is gone. */
int atomic_replace(int dir_fd, const char *name, int (*fill)(int fd, void *ud), void *ud, bool durable)
{
        char tmp[40];
        _cleanup_close_ int fd = -1;
        for (int attempt = 0; attempt < 16; attempt++) {
                files_temp_name(tmp);
                fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0 || errno != EEXIST)
                        break;
        }
        if (fd < 0)
                return -errno;

        int r = fill(fd, ud);
        if (r == 0 && durable && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dir_fd, tmp, 0);
                return r;
        }
        return durable ? fsync_dir(dir_fd) : 0;
}

int files_replace_at(int dir_fd, const char *name, int (*fill)(int fd, void *ud), void *ud)
{
        return atomic_replace(dir_fd, name, fill, ud, true);
}

struct bytes {
        const void *data;
        size_t len;
};

static int fill_bytes(int fd, void *ud)
{
        const struct bytes *b = ud;
        /* Independent of the daemon's umask: the contract says -rw-r--r--. */
        if (fchmod(fd, FILE_MODE) < 0)
                return -errno;
        return write_all(fd, b->data, b->len);
}

/* The byte and entry quotas for replacing an entry of old_size (existing)
 * with len bytes. */
static int check_quota(struct fop *f, bool existing, uint64_t old_size, size_t len)
{
        const struct files_limits *lim = &f->root->limits;
        uint64_t entries, bytes;
        int r = fop_usage(f, &entries, &bytes);
        if (r < 0)
                return fop_fail(f, -r, NULL, NULL);
        if (lim->max_total_bytes && bytes - (old_size < bytes ? old_size : bytes) + len > lim->max_total_bytes)
                return fop_fail(f, ENOSPC, NULL, "Workspace exceeds %llu bytes total",
                                (unsigned long long)lim->max_total_bytes);
        if (lim->max_entries && !existing && entries + 1 > lim->max_entries)
                return fop_fail(f, ENOSPC, NULL, "Workspace exceeds %llu entries",
                                (unsigned long long)lim->max_entries);
        return 0;
}

/* The parent of f's path, created first (mkdir -p) when missing and
 * recursive. A new file is checked against the byte quota before any
 * directory is made, so a refused write leaves nothing behind. */
static int put_parent(struct fop *f, bool recursive, size_t len, const char **ret_name)
{
        int pfd = open_parent(f->root->fd, f->rel, ret_name);
        const char *slash = strrchr(f->rel, '/');
        if (pfd == -ENOENT && recursive && slash) {
                int r = check_quota(f, false, 0, len);
                if (r < 0)
                        return r;
                char parent[PATH_MAX];
                snprintf(parent, sizeof(parent), "%.*s", (int)(slash - f->rel), f->rel);
                r = fop_mkdir_parents(f, parent);
                if (r == -ENOSPC)
                        return fop_fail(f, ENOSPC, NULL, "Workspace exceeds %llu entries",
                                        (unsigned long long)f->root->limits.max_entries);
                if (r < 0)
                        return fop_fail(f, -r, NULL, NULL);
                pfd = open_parent(f->root->fd, f->rel, ret_name);
        }
        return pfd < 0 ? fop_fail(f, -pfd, NULL, NULL) : pfd;
}

/* files_put with the content written by fill (len bytes). */
static int put_filled(const struct files_root *root, const char *path, uint64_t len, unsigned flags,
                      int (*fill)(int fd, void *ud), void *ud, struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_WRITE, path, NULL, err);
        if (r < 0)
                return r;
        if (!f.rel[0])
                return fop_fail(&f, EISDIR, NULL, "Cannot write to the /workspace root");
        /* The per-file limit is checked before anything touches the disk. */
        uint64_t max = root->limits.max_file_bytes;
        if (max && len > max)
                return fop_too_large(&f, max, len);

        const char *name;
        _cleanup_close_ int pfd = put_parent(&f, flags & FILES_RECURSIVE, len, &name);
        if (pfd < 0)
                return pfd;

        struct stat st;
        bool existing = false;
        uint64_t old_size = 0;
        r = stat_entry(pfd, name, &st);
        if (r == 0) {
                existing = true;
                if (S_ISDIR(st.st_mode))
                        return fop_fail(&f, EISDIR, NULL, "Is a directory: %s", f.path);
                /* Replacing the link would be harmless, but writing "through"
                 * a link is refused like every other symlink use. */
                if (S_ISLNK(st.st_mode))
                        return fop_fail(&f, ELOOP, NULL, NULL);
                if (S_ISREG(st.st_mode))
                        old_size = (uint64_t)st.st_size;
        } else if (r != -ENOENT) {
                return fop_fail(&f, -r, NULL, NULL);
        }
        r = check_quota(&f, existing, old_size, len);
        if (r < 0)
                return r;
        r = atomic_replace(pfd, name, fill, ud, true);
        if (r < 0)
                return fop_fail(&f, -r, NULL, NULL);
        return 0;
}

int files_put(const struct files_root *root, const char *path, const void *data, size_t len, unsigned flags,
              struct err *err)
{
        return put_filled(root, path, len, flags, fill_bytes, &(struct bytes){ data, len }, err);
}

struct from_fd {
        int fd;
        uint64_t len;
};

/* Exactly len bytes of the source, from its current offset. */
static int fill_from_fd(int fd, void *ud)
{
        const struct from_fd *src = ud;
        char chunk[64 * 1024];
        if (fchmod(fd, FILE_MODE) < 0)
                return -errno;
        for (uint64_t left = src->len; left;) {
                ssize_t n = read(src->fd, chunk, left < sizeof(chunk) ? (size_t)left : sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                int r = write_all(fd, chunk, (size_t)n);
                if (r < 0)
                        return r;
                left -= (uint64_t)n;
        }
        return 0;
}

int files_put_fd(const struct files_root *root, const char *path, int src_fd, uint64_t len, unsigned flags,
                 struct err *err)
{
        return put_filled(root, path, len, flags, fill_from_fd, &(struct from_fd){ src_fd, len }, err);
}

int files_write(const struct files_root *root, const char *path, const void *data, size_t len,
                struct err *err)
{
        return files_put(root, path, data, len, 0, err);
}
