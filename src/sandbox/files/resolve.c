/* Path normalisation, confined resolution, the fs identity and the error
 * shape of the files operations (see sandbox/files.h).
 *
 * Confinement model. The workspace is guest-writable, so every name in it is
 * attacker-controlled and may change between any two system calls. We never
 * build host paths: every lookup is openat2() beneath the root fd with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS, and mutating
 * ops resolve the *parent* directory that way and then act on the final
 * component with *at() calls (which never follow a trailing symlink when
 * used as they are here). The files API therefore does not follow symbolic
 * links at all, not even ones that stay inside the workspace: a path that
 * crosses a symlink, or reads/writes one, is a permission failure. Links
 * themselves can still be listed (as empty files), renamed and deleted,
 * since those act on the link, never on its target. A guest racing us
 * (swapping a directory for a symlink between check and use) can at worst
 * make the operation fail.
 *
 * Identity. When the daemon runs as root, all file system access happens
 * with fsuid/fsgid set to the jail user (per thread on Linux), so new files
 * belong to the guest and root's DAC override cannot be used to read or
 * clobber root-owned objects that happen to sit in the workspace. */
#include "sandbox/files/internal.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>

#include "base/util.h"

#define RESOLVE_FLAGS (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)
#define ROOT_LEN (sizeof(FILES_ROOT) - 1)

/* ---- path normalization ------------------------------------------------- */

int files_normalize(const char *path, char *out, size_t outlen)
{
        size_t len = strlen(path);
        if (!utf8_valid(path, len))
                return -EINVAL;
        if (len >= PATH_MAX)
                return -ENAMETOOLONG;

        /* Relative paths resolve against the fixed cwd /workspace. */
        char base[ROOT_LEN + 1 + PATH_MAX];
        if (path[0] == '/')
                memcpy(base, path, len + 1);
        else
                snprintf(base, sizeof(base), "%s/%s", FILES_ROOT, path);

        /* res only ever shrinks relative to base, so it cannot overflow. */
        char res[sizeof(base)];
        size_t rlen = 0;
        for (const char *seg = base; *seg;) {
                const char *end = strchrnul(seg, '/');
                size_t slen = (size_t)(end - seg);
                if (slen == 0 || (slen == 1 && seg[0] == '.')) {
                        /* skipped */
                } else if (slen == 2 && seg[0] == '.' && seg[1] == '.') {
                        if (rlen == 0)
                                return -EACCES; /* above "/" */
                        while (rlen > 0 && res[rlen - 1] != '/')
                                rlen--;
                        rlen--; /* the '/' itself */
                } else {
                        if (slen > NAME_MAX)
                                return -ENAMETOOLONG;
                        res[rlen++] = '/';
                        memcpy(res + rlen, seg, slen);
                        rlen += slen;
                }
                seg = *end ? end + 1 : end;
        }
        res[rlen] = '\0';

        if (strncmp(res, FILES_ROOT, ROOT_LEN) != 0 || (res[ROOT_LEN] != '\0' && res[ROOT_LEN] != '/'))
                return -EACCES;
        if (rlen + 1 > outlen || rlen >= PATH_MAX)
                return -ENAMETOOLONG;
        memcpy(out, res, rlen + 1);
        return 0;
}

/* "/workspace/a/b" → "a/b"; "/workspace" → "". */
static const char *rel_of(const char *normalized)
{
        return normalized[ROOT_LEN] == '/' ? normalized + ROOT_LEN + 1 : normalized + ROOT_LEN;
}

/* ---- errors -------------------------------------------------------------- */

/* ELOOP is what the resolver reports for a symlink we refuse to follow; to
 * clients that is plain EACCES (a permission failure). */
static int shown_errno(int e)
{
        return e == ELOOP ? EACCES : e;
}

static enum err_reason reason_of(int e, const char *op)
{
        bool perm_or_space = e == EACCES || e == EPERM || e == ENOSPC || e == EDQUOT;
        /* The SDK reports every failed mkdir (missing parent, existing path,
         * non-directory component) as a file system error; errno stays in
         * the details. Permission and space failures keep their own. */
        if (strcmp(op, FILES_OP_MKDIR) == 0 && !perm_or_space)
                return ERR_FILESYSTEM;
        switch (e) {
        case ENOENT: return ERR_NOT_FOUND;
        case EEXIST: return ERR_EXISTS;
        case EACCES:
        case EPERM: return ERR_PERMISSION;
        case EISDIR: return ERR_IS_DIR;
        case ENOTDIR: return ERR_NOT_DIR;
        case EFBIG: return ERR_TOO_LARGE;
        case ENOSPC:
        case EDQUOT: return ERR_NO_SPACE;
        default: return ERR_FILESYSTEM;
        }
}

static const char *errno_name(int e)
{
        const char *n = strerrorname_np(e);
        return n ? n : "EIO";
}

static void fail_message(struct fop *f, int e, const char *msg_path, const char *fmt, va_list ap)
        __attribute__((format(printf, 4, 0)));
static void fail_message(struct fop *f, int e, const char *msg_path, const char *fmt, va_list ap)
{
        enum err_reason reason = reason_of(shown_errno(e), f->op);
        const char *p = msg_path ? msg_path : f->path;
        if (fmt)
                err_setv(f->err, reason, shown_errno(e), fmt, ap);
        else if (e == ELOOP)
                err_set(f->err, reason, EACCES,
                        "Permission denied: '%s' (the files API does not follow symbolic links)", p);
        else if (e == EEXIST)
                err_set(f->err, reason, e, "Already exists: %s", p);
        else
                err_set(f->err, reason, e, "%s: %s", strerrordesc_np(e) ? strerrordesc_np(e) : "Unknown error", p);
        f->err->op = f->op;
        /* Before normalisation succeeded there is only the raw path. */
        err_detail(f->err, "path", f->path[0] ? f->path : f->raw_path, (size_t)-1);
        err_detail(f->err, "operation", f->op, (size_t)-1);
        if (f->new_path[0])
                err_detail(f->err, "newPath", f->new_path, (size_t)-1);
}

static int fail_end(struct fop *f, int e)
{
        err_detail(f->err, "errno", errno_name(shown_errno(e)), (size_t)-1);
        return -shown_errno(e);
}

int fop_fail(struct fop *f, int e, const char *msg_path, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fail_message(f, e, msg_path, fmt, ap);
        va_end(ap);
        return fail_end(f, e);
}

int files_fail(struct err *err, const char *op, const char *path, int errnum, const char *fmt, ...)
{
        struct fop f = { .op = op, .err = err, .raw_path = path };
        va_list ap;
        va_start(ap, fmt);
        fail_message(&f, errnum, path, fmt, ap);
        va_end(ap);
        return fail_end(&f, errnum);
}

static void too_large_message(struct fop *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void too_large_message(struct fop *f, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fail_message(f, EFBIG, NULL, fmt, ap);
        va_end(ap);
}

int fop_too_large(struct fop *f, uint64_t max, uint64_t actual)
{
        too_large_message(f, "File exceeds %llu bytes", (unsigned long long)max);
        err_detail_u64(f->err, "maxSize", max);
        err_detail_u64(f->err, "actualSize", actual);
        return fail_end(f, EFBIG);
}

/* ---- operation set-up ---------------------------------------------------- */

/* Switches fsuid/fsgid (thread-local) to the jail user when running as
 * root. setfsuid() cannot report failure directly, so read the value back. */
static int identity_enter(struct identity *id, unsigned uid, unsigned gid)
{
        *id = (struct identity){ 0 };
        if (geteuid() != 0)
                return 0;
        id->old_gid = (gid_t)setfsgid((gid_t)gid);
        id->old_uid = (uid_t)setfsuid((uid_t)uid);
        id->switched = true;
        if ((unsigned)setfsuid((uid_t)-1) != uid || (unsigned)setfsgid((gid_t)-1) != gid)
                return -EPERM;
        return 0;
}

static void identity_leave(struct identity *id)
{
        if (!id->switched)
                return;
        setfsuid(id->old_uid);
        setfsgid(id->old_gid);
        id->switched = false;
}

/* An escape is a permission failure with the usual details; a path that is
 * not UTF-8 or too long is the caller's input error. */
static int normalize_into(struct fop *f, const char *raw, char *out, const char *what)
{
        int r = files_normalize(raw, out, PATH_MAX);
        if (r == 0)
                return 0;
        out[0] = '\0';
        if (r == -EACCES)
                return fop_fail(f, EACCES, NULL, "Path escapes /workspace: %s", raw);
        err_set(f->err, ERR_INVALID, 0, r == -ENAMETOOLONG ? "%s is too long" : "%s is not a valid path", what);
        return r;
}

int fop_begin(struct fop *f, const struct files_root *root, const char *op, const char *path,
              const char *new_path, struct err *err)
{
        f->root = root;
        f->op = op;
        f->err = err;
        f->raw_path = path;
        f->path[0] = f->new_path[0] = '\0';
        f->rel = f->new_rel = "";
        f->id = (struct identity){ 0 };
        int r = normalize_into(f, path, f->path, "path");
        if (r < 0)
                return r;
        f->rel = rel_of(f->path);
        if (new_path) {
                r = normalize_into(f, new_path, f->new_path, "newPath");
                if (r < 0)
                        return r;
                f->new_rel = rel_of(f->new_path);
        }
        /* A daemon-side fault, not the client's: never a permission error. */
        if (identity_enter(&f->id, root->uid, root->gid) < 0)
                return fop_fail(f, EIO, NULL, "Cannot switch to the sandbox user");
        return 0;
}

void fop_end(struct fop *f)
{
        identity_leave(&f->id);
}

/* ---- confined resolution ------------------------------------------------ */

/* RESOLVE_BENEATH's -EXDEV for escapes is folded into -ELOOP: both mean
 * "refused by confinement". -EAGAIN (the kernel saw a concurrent rename and
 * refused to guess) is retried a few times. */
int resolve_at(int dir_fd, const char *rel, uint64_t flags)
{
        struct open_how how = {
                .flags = flags | O_CLOEXEC,
                .resolve = RESOLVE_FLAGS,
        };
        for (int attempt = 0; attempt < 8; attempt++) {
                long fd = syscall(SYS_openat2, dir_fd, *rel ? rel : ".", &how, sizeof(how));
                if (fd >= 0)
                        return (int)fd;
                if (errno == EAGAIN || errno == EINTR)
                        continue;
                return errno == EXDEV ? -ELOOP : -errno;
        }
        return -EAGAIN;
}

int open_parent(int root_fd, const char *rel, const char **ret_name)
{
        const char *slash = strrchr(rel, '/');
        char parent[PATH_MAX];
        if (slash) {
                size_t n = (size_t)(slash - rel);
                memcpy(parent, rel, n);
                parent[n] = '\0';
        } else {
                parent[0] = '\0';
        }
        int fd = resolve_at(root_fd, parent, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        *ret_name = slash ? slash + 1 : rel;
        return fd;
}

int stat_entry(int dir_fd, const char *name, struct stat *st)
{
        return fstatat(dir_fd, name, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* dir_fd is usually O_PATH, which fsync() rejects, so reopen "." for it. A
 * directory the jail user can search but not read cannot be opened; that
 * corner stays best effort rather than failing an operation that did
 * succeed. */
int fsync_dir(int dir_fd)
{
        _cleanup_close_ int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == EACCES ? 0 : -errno;
        return fsync(fd) < 0 ? -errno : 0;
}
