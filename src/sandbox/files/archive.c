/* files_persist: a tar of the workspace, written with libarchive while the
 * bounded walk of walk.c visits it (no fd held per level, symlinks
 * reported and stored, never entered or followed). */
#include "sandbox/files/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "jail/jail.h"
#include "sandbox/archive.h"

struct persist {
        struct fop *f;
        struct archive *a;
        struct archive_entry *e;
        const struct files_filter *filter;
        uint64_t files;
};

static bool any_match(const char *const *pats, size_t n, const char *rel)
{
        for (size_t i = 0; i < n; i++)
                if (fnmatch(pats[i], rel, 0) == 0)
                        return true;
        return false;
}

/* rel or one of its parents matches one of pats. */
static bool self_or_parent_match(const char *const *pats, size_t n, const char *rel)
{
        char prefix[PATH_MAX];
        if (!n)
                return false;
        for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
                snprintf(prefix, sizeof(prefix), "%.*s", (int)(s - rel), rel);
                if (any_match(pats, n, prefix))
                        return true;
        }
        return any_match(pats, n, rel);
}

bool files_filter_match(const struct files_filter *f, const char *rel)
{
        if (self_or_parent_match(f->exclude, f->nexclude, rel))
                return false;
        return !f->ninclude || self_or_parent_match(f->include, f->ninclude, rel);
}

/* The archive's own failures are I/O failures of out_fd or out of memory. */
static int archive_fail(struct persist *p)
{
        int e = archive_errno(p->a) > 0 ? archive_errno(p->a) : EIO;
        return fop_fail(p->f, e, NULL, "Cannot write the archive: %s",
                        archive_error_string(p->a) ? archive_error_string(p->a) : strerror(e));
}

/* A header for rel ("" is the root) with st's type, permissions, size and
 * mtime, owned by the sandbox user as the jail sees it. */
static int put_header(struct persist *p, const char *rel, const struct stat *st, const char *link)
{
        char name[PATH_MAX + 8];
        snprintf(name, sizeof(name), "./%s", rel);
        archive_entry_clear(p->e);
        archive_entry_set_pathname(p->e, name);
        archive_entry_set_filetype(p->e, st->st_mode & S_IFMT);
        archive_entry_set_perm(p->e, st->st_mode & 07777);
        archive_entry_set_size(p->e, S_ISREG(st->st_mode) ? st->st_size : 0);
        archive_entry_set_mtime(p->e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
        archive_entry_set_uid(p->e, JAIL_UID);
        archive_entry_set_gid(p->e, JAIL_GID);
        archive_entry_set_uname(p->e, "sandbox");
        archive_entry_set_gname(p->e, "sandbox");
        if (link)
                archive_entry_set_symlink(p->e, link);
        return archive_write_header(p->a, p->e) < ARCHIVE_WARN ? archive_fail(p) : 0;
}

/* Exactly size bytes of fd (zeros past a shrunk file's end). */
static int put_data(struct persist *p, int fd, uint64_t size)
{
        char buf[65536];
        uint64_t done = 0;
        while (done < size) {
                size_t want = size - done < sizeof(buf) ? (size_t)(size - done) : sizeof(buf);
                ssize_t n = read(fd, buf, want);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return fop_fail(p->f, errno, NULL, NULL);
                if (n == 0) {
                        memset(buf, 0, want);
                        n = (ssize_t)want;
                }
                if (archive_write_data(p->a, buf, (size_t)n) != n)
                        return archive_fail(p);
                done += (uint64_t)n;
        }
        return 0;
}

static int put_file(struct persist *p, const char *rel)
{
        _cleanup_close_ int fd = resolve_at(p->f->root->fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd == -ENOENT || fd == -ELOOP)
                return 0; /* gone, or swapped for a link, since the walk saw it */
        if (fd < 0)
                return fop_fail(p->f, -fd, NULL, "Cannot read /workspace/%s: %s", rel, strerror(-fd));
        struct stat st;
        if (fstat(fd, &st) < 0)
                return fop_fail(p->f, errno, NULL, NULL);
        if (!S_ISREG(st.st_mode))
                return 0;
        int r = put_header(p, rel, &st, NULL);
        p->files++;
        return r < 0 ? r : put_data(p, fd, (uint64_t)st.st_size);
}

static int put_symlink(struct persist *p, const char *rel, const struct stat *st)
{
        const char *name;
        _cleanup_close_ int pfd = open_parent(p->f->root->fd, rel, &name);
        if (pfd < 0)
                return pfd == -ENOENT || pfd == -ELOOP ? 0 : fop_fail(p->f, -pfd, NULL, NULL);
        char target[PATH_MAX];
        ssize_t n = readlinkat(pfd, name, target, sizeof(target) - 1);
        if (n < 0)
                return errno == ENOENT || errno == EINVAL ? 0 : fop_fail(p->f, errno, NULL, NULL);
        target[n] = '\0';
        return put_header(p, rel, st, target);
}

static int persist_visit(void *userdata, const char *rel, const struct stat *st)
{
        struct persist *p = userdata;
        if (any_match(p->filter->exclude, p->filter->nexclude, rel))
                return WALK_PRUNE;
        /* Outside the includes: a directory may still hold included entries. */
        if (!files_filter_match(p->filter, rel))
                return 0;
        if (S_ISDIR(st->st_mode))
                return put_header(p, rel, st, NULL);
        if (S_ISREG(st->st_mode))
                return put_file(p, rel);
        if (S_ISLNK(st->st_mode))
                return put_symlink(p, rel, st);
        return 0; /* FIFOs, sockets, devices: not archived (hydrate refuses them) */
}

static void archive_writep(struct archive **a)
{
        if (*a)
                archive_write_free(*a);
}

static void archive_entryp(struct archive_entry **e)
{
        if (*e)
                archive_entry_free(*e);
}

int files_persist(const struct files_root *root, const char *const *excludes, size_t n, int out_fd,
                  struct err *err)
{
        const struct files_filter f = { .exclude = excludes, .nexclude = n };
        return files_persist_filtered(root, &f, out_fd, NULL, err);
}

int files_persist_filtered(const struct files_root *root, const struct files_filter *filter, int out_fd,
                           uint64_t *ret_files, struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_PERSIST, FILES_ROOT, NULL, err);
        if (r < 0)
                return r;
        _cleanup_(archive_writep) struct archive *a = archive_write_new();
        _cleanup_(archive_entryp) struct archive_entry *e = archive_entry_new();
        if (!a || !e)
                return fop_fail(&f, ENOMEM, NULL, NULL);
        struct persist p = { &f, a, e, filter, 0 };
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK || archive_write_add_filter_none(a) != ARCHIVE_OK ||
            archive_write_open_fd(a, out_fd) != ARCHIVE_OK)
                return archive_fail(&p);

        struct stat st;
        if (fstat(root->fd, &st) < 0)
                return fop_fail(&f, errno, NULL, NULL);
        r = put_header(&p, "", &st, NULL);
        if (r == 0)
                r = walk_tree(root->fd, "", true, true, persist_visit, &p);
        if (r < 0)
                return err->reason ? r : fop_fail(&f, -r, NULL, NULL);
        if (archive_write_close(a) != ARCHIVE_OK)
                return archive_fail(&p);
        if (ret_files)
                *ret_files = p.files;
        return 0;
}
