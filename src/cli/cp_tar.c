/* The archives of `sandboxd cp` (cli/cp.h): libarchive in, libarchive out,
 * one copy loop with a renaming rule per direction. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "cli/cp.h"

#define CP_BLOCK (64 * 1024)
/* An upload's archive is cut into parts of about this much: hydrate takes
 * 32 MiB per request body. */
#define CP_PART_BYTES (24 * 1024 * 1024)

int cp_norm_path(const char *in, bool absolute_ok, char *out, size_t len)
{
        if (in[0] == '/' && !absolute_ok)
                return -EINVAL;
        size_t o = 0;
        const char *p = in;
        while (*p) {
                while (*p == '/')
                        p++;
                const char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);
                if (n == 2 && !memcmp(p, "..", 2))
                        return -EINVAL;
                if (n > 0 && !(n == 1 && *p == '.')) {
                        if (o + n + 2 > len)
                                return -ENAMETOOLONG;
                        if (o)
                                out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p = end;
        }
        if (len)
                out[o] = '\0';
        return 0;
}

/* a[/b] into out ("" parts are left out). */
static int join(const char *a, const char *b, char *out, size_t len)
{
        int n = snprintf(out, len, "%s%s%s", a, *a && *b ? "/" : "", b);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the copy loop ---- */

/* 1 keep (renamed), 0 skip, -errno fail. */
typedef int (*rename_fn)(void *cls, struct archive *in, struct archive_entry *e, struct err *err);

/* The ancestors of the entry being written, as written (uploads). */
struct dir_stack {
        struct archive_entry **e;
        size_t n, cap;
};

struct copy {
        struct archive *in, *out;
        bool out_disk;
        const struct cp_sink *sink;     /* uploads: cut into archives */
        struct dir_stack dirs;
        rename_fn rename;
        void *cls;
        struct cli_progress *p;
        bool progress_raw;      /* progress in bytes of the input archive, else of data */
        struct cp_stats *st;
};

static void refuse(struct cp_stats *st, const char *name, const char *why)
{
        fprintf(stderr, "sandboxd cp: refused %s: %s\n", name, why);
        st->refused++;
}

static void tick(struct copy *c, size_t n)
{
        if (c->progress_raw)
                cli_progress_update(c->p, (uint64_t)archive_filter_bytes(c->in, -1), 0);
        else
                cli_progress_add(c->p, n);
}

static int copy_data(struct copy *c, struct archive_entry *e, struct err *err)
{
        char buf[CP_BLOCK];
        for (;;) {
                la_ssize_t n = archive_read_data(c->in, buf, sizeof(buf));
                if (n == 0)
                        break;
                if (n < 0)
                        return err_set(err, ERR_FILESYSTEM, EIO, "%s: %s", archive_entry_pathname(e),
                                       archive_error_string(c->in));
                if (archive_write_data(c->out, buf, (size_t)n) < 0)
                        return err_set(err, ERR_FILESYSTEM, EIO, "%s: %s", archive_entry_pathname(e),
                                       archive_error_string(c->out));
                c->st->bytes += (uint64_t)n;
                tick(c, (size_t)n);
        }
        c->st->files++;
        return 0;
}

static bool is_ancestor(const char *dir, const char *path)
{
        size_t n = strlen(dir);
        return !strncmp(dir, path, n) && path[n] == '/';
}

static void dirs_clear(struct dir_stack *d)
{
        for (size_t i = 0; i < d->n; i++)
                archive_entry_free(d->e[i]);
        free(d->e);
        memset(d, 0, sizeof(*d));
}

/* Keeps the stack to e's ancestors, then e itself when a directory. */
static int dirs_track(struct dir_stack *d, struct archive_entry *e)
{
        const char *p = archive_entry_pathname(e);
        while (d->n > 0 && !is_ancestor(archive_entry_pathname(d->e[d->n - 1]), p))
                archive_entry_free(d->e[--d->n]);
        if (archive_entry_filetype(e) != AE_IFDIR)
                return 0;
        if (d->n == d->cap) {
                size_t cap = d->cap ? 2 * d->cap : 16;
                struct archive_entry **grown = realloc(d->e, cap * sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                d->e = grown, d->cap = cap;
        }
        d->e[d->n] = archive_entry_clone(e);
        return d->e[d->n] ? (d->n++, 0) : -ENOMEM;
}

static struct archive *tar_writer(int fd);

/* Ends the archive, hands it to the sink and starts the next one, which
 * names e's ancestor folders again (the stack holds them, and e on top
 * when a folder): hydrate makes a folder it names
 * writable, so a read-only one from an earlier part takes new entries. */
static int rotate(struct copy *c, struct archive_entry *e, struct err *err)
{
        if (archive_write_close(c->out) < ARCHIVE_WARN)
                return err_set(err, ERR_FILESYSTEM, EIO, "%s", archive_error_string(c->out));
        archive_write_free(c->out);
        c->out = NULL;
        int r = c->sink->flush(c->sink->cls, c->sink->fd);
        if (r != 0)
                return -ECANCELED;
        if (ftruncate(c->sink->fd, 0) < 0 || lseek(c->sink->fd, 0, SEEK_SET) < 0 || !(c->out = tar_writer(c->sink->fd)))
                return err_set(err, ERR_FILESYSTEM, errno ? errno : EIO, "the archive: %s", strerror(errno ? errno : EIO));
        for (size_t i = 0; i < c->dirs.n && is_ancestor(archive_entry_pathname(c->dirs.e[i]), archive_entry_pathname(e)); i++)
                if (archive_write_header(c->out, c->dirs.e[i]) < ARCHIVE_WARN)
                        return err_set(err, ERR_FILESYSTEM, EIO, "%s", archive_error_string(c->out));
        return 0;
}

/* Uploads: a new part when this one is full, and the folders tracked. */
static int before_header(struct copy *c, struct archive_entry *e, struct err *err)
{
        if (!c->sink)
                return 0;
        if (dirs_track(&c->dirs, e) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        return archive_filter_bytes(c->out, -1) >= (la_int64_t)CP_PART_BYTES ? rotate(c, e, err) : 0;
}

static int copy_one(struct copy *c, struct archive_entry *e, struct err *err)
{
        int keep = c->rename(c->cls, c->in, e, err);
        if (keep <= 0)
                return keep;
        int r = before_header(c, e, err);
        if (r < 0)
                return r;
        r = archive_write_header(c->out, e);
        if (r == ARCHIVE_FAILED && c->out_disk) {
                /* libarchive's secure checks: a symlink on the way, … */
                refuse(c->st, archive_entry_pathname(e), archive_error_string(c->out));
                return 0;
        }
        if (r < ARCHIVE_WARN)
                return err_set(err, ERR_FILESYSTEM, EIO, "%s: %s", archive_entry_pathname(e),
                               archive_error_string(c->out));
        if (archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e))
                return copy_data(c, e, err);
        return 0;
}

static int copy_all(struct copy *c, struct err *err)
{
        struct archive_entry *e = archive_entry_new();
        int r = 0;
        while (r == 0) {
                int a = archive_read_next_header2(c->in, e);
                if (a == ARCHIVE_EOF)
                        break;
                if (a == ARCHIVE_WARN)
                        fprintf(stderr, "sandboxd cp: %s\n", archive_error_string(c->in));
                if (a < ARCHIVE_WARN) {
                        r = err_set(err, ERR_FILESYSTEM, EIO, "%s", archive_error_string(c->in));
                        break;
                }
                r = copy_one(c, e, err);
                tick(c, 0);
                archive_entry_clear(e);
        }
        archive_entry_free(e);
        if (r == 0 && archive_write_close(c->out) < ARCHIVE_WARN)
                r = err_set(err, ERR_FILESYSTEM, EIO, "%s", archive_error_string(c->out));
        if (r == 0 && c->sink && c->sink->flush(c->sink->cls, c->sink->fd) != 0)
                r = -ECANCELED;
        dirs_clear(&c->dirs);
        return r;
}

static struct archive *tar_writer(int fd)
{
        struct archive *w = archive_write_new();
        if (w && (archive_write_set_format_pax_restricted(w) != ARCHIVE_OK || archive_write_open_fd(w, fd) != ARCHIVE_OK)) {
                archive_write_free(w);
                return NULL;
        }
        return w;
}

static bool kind_ok(struct archive_entry *e)
{
        mode_t t = archive_entry_filetype(e);
        return t == AE_IFREG || t == AE_IFDIR || t == AE_IFLNK;
}

/* Permission bits only: no set-id bits from anyone's archive. */
static void plain_entry(struct archive_entry *e)
{
        archive_entry_set_perm(e, archive_entry_perm(e) & 0777);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_uname(e, NULL);
        archive_entry_set_gname(e, NULL);
}

/* ---- uploads ---- */

struct up {
        const char *src;        /* local root, no trailing '/' (disk) */
        const char *prefix;
        struct cp_stats *st;
};

static int up_name(struct up *u, const char *sub, struct archive_entry *e, struct err *err)
{
        char name[PATH_MAX];
        if (join(u->prefix, sub, name, sizeof(name)) < 0)
                return err_set(err, ERR_INVALID, ENAMETOOLONG, "path too long: %s/%s", u->prefix, sub);
        archive_entry_copy_pathname(e, name);
        plain_entry(e);
        return 1;
}

static int up_disk(void *cls, struct archive *in, struct archive_entry *e, struct err *err)
{
        struct up *u = cls;
        const char *p = archive_entry_pathname(e);
        if (archive_entry_filetype(e) == AE_IFDIR)
                archive_read_disk_descend(in);
        if (!kind_ok(e)) {
                fprintf(stderr, "sandboxd cp: skipped %s: not a file, folder or symlink\n", p);
                return 0;
        }
        size_t n = strlen(u->src);
        const char *sub = !strncmp(p, u->src, n) ? p + n : p;
        while (*sub == '/')
                sub++;
        return up_name(u, sub, e, err);
}

static int up_stream(void *cls, struct archive *in, struct archive_entry *e, struct err *err)
{
        (void)in;
        struct up *u = cls;
        char name[PATH_MAX], link[PATH_MAX];
        const char *p = archive_entry_pathname(e);
        if (!p || cp_norm_path(p, false, name, sizeof(name)) < 0)
                return err_set(err, ERR_INVALID, EINVAL, "the input tar has an absolute or '..' name: %s", p ? p : "");
        if (!kind_ok(e)) {
                fprintf(stderr, "sandboxd cp: skipped %s: not a file, folder or symlink\n", p);
                return 0;
        }
        const char *hl = archive_entry_hardlink(e);
        if (hl) {
                char target[PATH_MAX];
                if (cp_norm_path(hl, false, target, sizeof(target)) < 0 || join(u->prefix, target, link, sizeof(link)) < 0)
                        return err_set(err, ERR_INVALID, EINVAL, "the input tar has a bad hardlink: %s", hl);
                archive_entry_copy_hardlink(e, link);
        }
        return up_name(u, name, e, err);
}

int cp_tar_local(const char *src, const char *prefix, const struct cp_sink *sink, struct cli_progress *p,
                 struct cp_stats *st, struct err *err)
{
        struct up u = { .src = src, .prefix = prefix, .st = st };
        struct archive *in = archive_read_disk_new();
        struct copy c = { .in = in, .out = tar_writer(sink->fd), .sink = sink, .rename = up_disk, .cls = &u,
                          .p = p, .st = st };
        int r = 0;
        if (!in || !c.out)
                r = err_set(err, ERR_INTERNAL, ENOMEM, "cannot start an archive");
        if (r == 0) {
                /* Follows SRC itself when a link (as cp -H), never one below. */
                archive_read_disk_set_symlink_hybrid(in);
                if (archive_read_disk_open(in, src) != ARCHIVE_OK)
                        r = err_set(err, ERR_FILESYSTEM, ENOENT, "%s: %s", src, archive_error_string(in));
        }
        if (r == 0)
                r = copy_all(&c, err);
        archive_read_free(in);
        archive_write_free(c.out);
        return r;
}

static struct archive *tar_reader(int fd)
{
        struct archive *a = archive_read_new();
        if (!a)
                return NULL;
        archive_read_support_format_tar(a);
        archive_read_support_format_gnutar(a);
        /* Compressed input, in-process only (never an external program). */
        archive_read_support_filter_gzip(a);
        archive_read_support_filter_bzip2(a);
        archive_read_support_filter_xz(a);
        if (archive_read_open_fd(a, fd, CP_BLOCK) != ARCHIVE_OK) {
                archive_read_free(a);
                return NULL;
        }
        return a;
}

int cp_tar_stream(int in_fd, const char *prefix, const struct cp_sink *sink, struct cli_progress *p,
                  struct cp_stats *st, struct err *err)
{
        struct up u = { .prefix = prefix, .st = st };
        struct copy c = { .in = tar_reader(in_fd), .out = tar_writer(sink->fd), .sink = sink, .rename = up_stream,
                          .cls = &u, .p = p, .st = st };
        int r = 0;
        if (!c.in || !c.out)
                r = err_set(err, ERR_INVALID, EINVAL, "cannot read a tar from the input");
        if (r == 0)
                r = copy_all(&c, err);
        archive_read_free(c.in);
        archive_write_free(c.out);
        return r;
}

/* ---- downloads ---- */

struct down {
        const char *rel, *leaf;
        struct cp_stats *st;
};

/* The part of name at or below rel: its sub path ("" for rel itself). */
static const char *below(const char *rel, const char *name)
{
        size_t n = strlen(rel);
        if (n == 0)
                return name;
        if (strncmp(name, rel, n))
                return NULL;
        if (name[n] == '\0')
                return name + n;
        return name[n] == '/' ? name + n + 1 : NULL;
}

bool cp_link_inside(const char *sub, const char *target)
{
        /* The top itself a link: its directory is outside the tree. */
        if (target[0] == '/' || !target[0] || !sub[0])
                return false;
        int depth = 0;
        bool named = false;
        for (const char *p = sub; *p; p++)
                depth += *p == '/';
        for (const char *p = target; *p;) {
                const char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);
                if (n == 2 && !memcmp(p, "..", 2)) {
                        /* ".." after a name would resolve from wherever
                         * that name, maybe a link, leads: not lexical. */
                        if (named || --depth < 0)
                                return false;
                } else if (n > 0 && !(n == 1 && *p == '.')) {
                        named = true;
                }
                p = *end ? end + 1 : end;
        }
        return true;
}

static int down_entry(void *cls, struct archive *in, struct archive_entry *e, struct err *err)
{
        (void)in;
        struct down *d = cls;
        char name[PATH_MAX], out[PATH_MAX];
        const char *p = archive_entry_pathname(e) ?: "";
        if (cp_norm_path(p, false, name, sizeof(name)) < 0) {
                refuse(d->st, p, "an absolute path or a '..' in the archive");
                return 0;
        }
        const char *sub = below(d->rel, name);
        if (!sub)
                return 0;
        d->st->matched++;
        if (!kind_ok(e)) {
                refuse(d->st, name, "not a file, folder or symlink");
                return 0;
        }
        const char *target = archive_entry_symlink(e);
        if (archive_entry_filetype(e) == AE_IFLNK && (!target || !cp_link_inside(sub, target))) {
                refuse(d->st, name, "a symlink pointing outside the copied folder");
                return 0;
        }
        const char *hl = archive_entry_hardlink(e);
        if (hl) {
                char t[PATH_MAX], tout[PATH_MAX];
                const char *tsub = cp_norm_path(hl, false, t, sizeof(t)) == 0 ? below(d->rel, t) : NULL;
                if (!tsub || join(d->leaf, tsub, tout, sizeof(tout)) < 0) {
                        refuse(d->st, name, "a hardlink to outside the copied folder");
                        return 0;
                }
                archive_entry_copy_hardlink(e, tout);
        }
        if (join(d->leaf, sub, out, sizeof(out)) < 0)
                return err_set(err, ERR_INVALID, ENAMETOOLONG, "path too long: %s", name);
        archive_entry_copy_pathname(e, out);
        plain_entry(e);
        return 1;
}

static struct archive *disk_writer(void)
{
        struct archive *w = archive_write_disk_new();
        if (w)
                archive_write_disk_set_options(w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                                          ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                          ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
        return w;
}

int cp_tar_extract(int tar_fd, const char *rel, const char *dest_dir, const char *leaf, int out_fd,
                   struct cli_progress *p, struct cp_stats *st, struct err *err)
{
        struct down d = { .rel = rel, .leaf = leaf, .st = st };
        /* Names are relative to dest_dir: libarchive's secure flags check
         * every step below it for symlinks. */
        if (out_fd < 0 && chdir(dest_dir) < 0)
                return err_set(err, ERR_FILESYSTEM, errno, "%s: %s", dest_dir, strerror(errno));
        struct archive *in = tar_reader(tar_fd), *out = out_fd < 0 ? disk_writer() : tar_writer(out_fd);
        int r = 0;
        if (!in || !out)
                r = err_set(err, ERR_INVALID, EINVAL, "cannot read the sandbox's archive");
        if (r == 0) {
                struct copy c = { .in = in, .out = out, .out_disk = out_fd < 0, .rename = down_entry, .cls = &d,
                                  .p = p, .progress_raw = true, .st = st };
                r = copy_all(&c, err);
        }
        archive_read_free(in);
        archive_write_free(out);
        return r;
}
