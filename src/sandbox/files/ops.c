/* mkdir, delete, rename/move and exists beneath the workspace root. */
#include "sandbox/files/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"

/* ---- mkdir --------------------------------------------------------------- */

/* mkdirat with exactly DIR_MODE, whatever the daemon's umask (077): the new
 * directory is re-opened confined (a guest may have swapped the name for a
 * link meanwhile: then ELOOP) and chmodded through its fd. No set-id or
 * sticky bit is ever given. -EEXIST when the name exists. */
static int mkdir_at(int dir_fd, const char *name)
{
        if (mkdirat(dir_fd, name, DIR_MODE) < 0)
                return -errno;
        _cleanup_close_ int fd = resolve_at(dir_fd, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        return fchmod(fd, DIR_MODE) < 0 ? -errno : 0;
}

int fop_mkdir_parents(const struct fop *f, const char *rel)
{
        char comps[PATH_MAX];
        snprintf(comps, sizeof(comps), "%s", rel);
        char *names[PATH_MAX / 2];
        size_t n = 0;
        char *save = NULL;
        for (char *c = strtok_r(comps, "/", &save); c; c = strtok_r(NULL, "/", &save))
                names[n++] = c;

        _cleanup_close_ int cur = resolve_at(f->root->fd, "", O_PATH | O_DIRECTORY);
        if (cur < 0)
                return cur;
        size_t i = 0;
        for (; i < n; i++) {
                int fd = resolve_at(cur, names[i], O_PATH | O_DIRECTORY);
                if (fd == -ENOENT)
                        break;
                if (fd < 0)
                        return fd;
                close(cur);
                cur = fd;
        }
        if (i == n)
                return 0;
        int r = fop_check_new_entries(f, n - i);
        if (r < 0)
                return r;
        for (; i < n; i++) {
                r = mkdir_at(cur, names[i]);
                if (r < 0 && r != -EEXIST)
                        return r;
                r = fsync_dir(cur);
                if (r < 0)
                        return r;
                /* EEXIST above may be a racing guest's file or symlink:
                 * the confined open sorts that out (ENOTDIR / ELOOP). */
                int fd = resolve_at(cur, names[i], O_PATH | O_DIRECTORY);
                if (fd < 0)
                        return fd;
                close(cur);
                cur = fd;
        }
        return 0;
}

static int mkdir_one(const struct fop *f)
{
        const char *name;
        _cleanup_close_ int pfd = open_parent(f->root->fd, f->rel, &name);
        if (pfd < 0)
                return pfd;
        struct stat st;
        int r = stat_entry(pfd, name, &st);
        if (r == 0)
                return -EEXIST;
        if (r != -ENOENT)
                return r;
        r = fop_check_new_entries(f, 1);
        if (r < 0)
                return r;
        if ((r = mkdir_at(pfd, name)) < 0)
                return r;
        return fsync_dir(pfd);
}

int files_mkdir(const struct files_root *root, const char *path, unsigned flags, struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_MKDIR, path, NULL, err);
        if (r < 0)
                return r;
        /* The root always exists: a no-op even without recursive. */
        if (!f.rel[0])
                return 0;
        r = flags & FILES_RECURSIVE ? fop_mkdir_parents(&f, f.rel) : mkdir_one(&f);
        if (r == -ENOSPC)
                return fop_fail(&f, ENOSPC, NULL, "Workspace exceeds %llu entries",
                                (unsigned long long)root->limits.max_entries);
        if (r < 0)
                return fop_fail(&f, -r, NULL, NULL);
        return 0;
}

/* ---- delete -------------------------------------------------------------- */

int files_delete(const struct files_root *root, const char *path, unsigned flags, struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_DELETE, path, NULL, err);
        if (r < 0)
                return r;
        bool force = flags & FILES_FORCE;
        if (!f.rel[0])
                return fop_fail(&f, EACCES, NULL, "Cannot delete the /workspace root");

        const char *name;
        _cleanup_close_ int pfd = open_parent(root->fd, f.rel, &name);
        if (pfd == -ENOENT && force)
                return 0;
        if (pfd < 0)
                return fop_fail(&f, -pfd, NULL, NULL);

        struct stat st;
        r = stat_entry(pfd, name, &st);
        if (r == -ENOENT && force)
                return 0;
        if (r < 0)
                return fop_fail(&f, -r, NULL, NULL);

        if (S_ISDIR(st.st_mode)) {
                if (!(flags & FILES_RECURSIVE))
                        return fop_fail(&f, EISDIR, NULL,
                                        "Cannot delete directory with deleteFile() at '%s'. "
                                        "Pass { recursive: true } to delete a directory.",
                                        f.path);
                /* Every level is re-opened confined beneath its parent, so
                 * links are unlinked, never followed, and a swapped-in link
                 * cannot redirect it; a bounded number of fds whatever the
                 * depth (a guest can nest thousands of levels). */
                r = files_rm_tree(pfd, name, root->limits.max_depth);
                if (r == -EMLINK) {
                        fop_fail(&f, EMLINK, NULL,
                                 "Directory tree deeper than %llu levels (limits.files_max_depth): %s; "
                                 "entries removed before that level was reached stay removed",
                                 (unsigned long long)root->limits.max_depth, f.path);
                        err->reason = ERR_LIMIT;
                        return r;
                }
        } else {
                /* A symlink is removed itself; its target is untouched. */
                r = unlinkat(pfd, name, 0) < 0 ? -errno : 0;
                if (r == -ENOENT && force)
                        r = 0;
        }
        if (r == 0)
                r = fsync_dir(pfd);
        if (r < 0)
                return fop_fail(&f, -r, NULL, NULL);
        return 0;
}

/* ---- rename / move ------------------------------------------------------- */

/* rename(2) would say the same; checked up front for the reference's
 * messages and because a same-inode rename is a no-op the kernel does not
 * validate. */
static int check_rename_target(struct fop *f, const struct stat *sst, int dpfd, const char *dname)
{
        struct stat dst;
        int r = stat_entry(dpfd, dname, &dst);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return fop_fail(f, -r, f->new_path, NULL);
        bool sdir = S_ISDIR(sst->st_mode), ddir = S_ISDIR(dst.st_mode);
        if (sdir && !ddir)
                return fop_fail(f, ENOTDIR, NULL, "Not a directory: %s", f->new_path);
        if (!sdir && ddir)
                return fop_fail(f, EISDIR, NULL, "Is a directory: %s", f->new_path);
        return 0;
}

static int rename_entry(const struct files_root *root, const char *op, const char *from, const char *to,
                        struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, op, from, to, err);
        if (r < 0)
                return r;
        if (!f.rel[0])
                return fop_fail(&f, EACCES, NULL, "Cannot rename the /workspace root");
        if (!f.new_rel[0])
                return fop_fail(&f, EACCES, NULL, "Cannot rename onto the /workspace root");

        const char *sname, *dname;
        _cleanup_close_ int spfd = open_parent(root->fd, f.rel, &sname);
        if (spfd < 0)
                return fop_fail(&f, -spfd, NULL, NULL);
        struct stat sst;
        r = stat_entry(spfd, sname, &sst);
        if (r < 0)
                return fop_fail(&f, -r, NULL, NULL);

        _cleanup_close_ int dpfd = open_parent(root->fd, f.new_rel, &dname);
        if (dpfd < 0)
                return fop_fail(&f, -dpfd, f.new_path, NULL);
        r = check_rename_target(&f, &sst, dpfd, dname);
        if (r < 0)
                return r;

        if (renameat(spfd, sname, dpfd, dname) < 0) {
                int e = errno == EEXIST ? ENOTEMPTY : errno; /* some fs say EEXIST */
                return fop_fail(&f, e, e == ENOTEMPTY || e == EISDIR || e == ENOTDIR ? f.new_path : f.path, NULL);
        }
        r = fsync_dir(dpfd);
        if (r == 0)
                r = fsync_dir(spfd);
        if (r < 0)
                return fop_fail(&f, -r, NULL, NULL);
        return 0;
}

int files_rename(const struct files_root *root, const char *from, const char *to, struct err *err)
{
        return rename_entry(root, FILES_OP_RENAME, from, to, err);
}

int files_move(const struct files_root *root, const char *from, const char *to, struct err *err)
{
        return rename_entry(root, FILES_OP_MOVE, from, to, err);
}

/* ---- exists -------------------------------------------------------------- */

int files_exists(const struct files_root *root, const char *path, bool *ret, struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_STAT, path, NULL, err);
        if (r < 0)
                return r;
        /* As in the reference, any lookup failure (missing, a file used as a
         * directory, a symlink on the way, no permission) is just "false". */
        bool exists = true;
        if (f.rel[0]) {
                const char *name;
                _cleanup_close_ int pfd = open_parent(root->fd, f.rel, &name);
                struct stat st;
                exists = pfd >= 0 && stat_entry(pfd, name, &st) == 0;
        }
        *ret = exists;
        return 0;
}
