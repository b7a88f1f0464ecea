/* files_hydrate: a tar (or tar.gz) from memory into the workspace, tar-slip
 * proof (see sandbox/archive.h for the rules).
 *
 * Two passes over the same bytes. The first reads every header (and skips
 * the data, which proves the archive is complete) and refuses the whole
 * archive before anything is written: a refused archive leaves the
 * workspace as it was. The second writes, never with libarchive's
 * archive_write_disk (which works on host paths): every entry is created
 * with *at() calls on a parent directory opened confined beneath the root
 * fd (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so even a guest that
 * swaps a directory for a symlink between the passes can only make the
 * extraction fail, never write outside or through a link. The guest's
 * fsuid/fsgid own everything created and take root's capabilities away for
 * the duration (fop_begin). */
#include "sandbox/files/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "sandbox/archive.h"

enum kind { K_DIR, K_IMPLICIT_DIR, K_FILE, K_SYMLINK, K_HARDLINK };

/* The archive's paths seen so far (open addressing; the key is the
 * normalised relative path), with their kind and, for files, size. */
struct seen_entry {
        char *key;
        uint64_t size;
        unsigned char kind;
};

struct seen {
        struct seen_entry *v;
        size_t cap, n;
};

struct dir_meta {
        char *rel;
        mode_t mode;
        struct timespec mtime;
};

struct hydrate {
        struct fop *f;
        const void *data;
        size_t len;
        struct archive *a;
        struct seen seen;
        uint64_t entries, new_entries, bytes, replaced_bytes;
        struct dir_meta *dirs;
        size_t ndirs, dirs_cap;
};

/* ---- the set of paths ---------------------------------------------------- */

static void seen_done(struct seen *s)
{
        for (size_t i = 0; s->v && i < s->cap; i++)
                free(s->v[i].key);
        free(s->v);
        *s = (struct seen){ 0 };
}

static size_t seen_slot(const struct seen *s, const char *key)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *c = key; *c; c++)
                h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        size_t i = (size_t)h & (s->cap - 1);
        while (s->v[i].key && strcmp(s->v[i].key, key) != 0)
                i = (i + 1) & (s->cap - 1);
        return i;
}

/* What is recorded for key, or NULL. */
static const struct seen_entry *seen_get(const struct seen *s, const char *key)
{
        if (!s->cap)
                return NULL;
        size_t i = seen_slot(s, key);
        return s->v[i].key ? &s->v[i] : NULL;
}

static int seen_kind(const struct seen *s, const char *key)
{
        const struct seen_entry *e = seen_get(s, key);
        return e ? e->kind : -1;
}

static int seen_grow(struct seen *s)
{
        struct seen g = { .cap = s->cap ? s->cap * 2 : 256 };
        if (!(g.v = calloc(g.cap, sizeof(*g.v))))
                return -ENOMEM;
        for (size_t i = 0; i < s->cap; i++)
                if (s->v[i].key)
                        g.v[seen_slot(&g, s->v[i].key)] = s->v[i];
        g.n = s->n;
        free(s->v);
        *s = g;
        return 0;
}

/* Records (or, for an implicit directory made explicit, updates) key. */
static int seen_put(struct seen *s, const char *key, enum kind kind, uint64_t size)
{
        if ((s->n + 1) * 2 > s->cap && seen_grow(s) < 0)
                return -ENOMEM;
        size_t i = seen_slot(s, key);
        if (!s->v[i].key) {
                if (!(s->v[i].key = strdup(key)))
                        return -ENOMEM;
                s->n++;
        }
        s->v[i].kind = (unsigned char)kind;
        s->v[i].size = size;
        return 0;
}

/* ---- names --------------------------------------------------------------- */

static int refuse(struct hydrate *h, enum err_reason reason, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int refuse(struct hydrate *h, enum err_reason reason, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        err_setv(h->f->err, reason, 0, fmt, ap);
        va_end(ap);
        h->f->err->op = FILES_OP_HYDRATE;
        return reason == ERR_NO_SPACE ? -ENOSPC : reason == ERR_TOO_LARGE ? -EFBIG : -EINVAL;
}

/* An entry name as a path relative to the workspace ("" for the root):
 * "./" and "." segments and repeated or trailing slashes dropped. Refused:
 * absolute, "..", not UTF-8, too long or too deep. */
static int entry_rel(struct hydrate *h, const char *name, char out[PATH_MAX])
{
        size_t len = strlen(name);
        if (name[0] == '/')
                return refuse(h, ERR_INVALID, "Archive entry has an absolute path: %s", name);
        if (!utf8_valid(name, len))
                return refuse(h, ERR_INVALID, "Archive entry name is not valid UTF-8");
        size_t o = 0, depth = 0, max_depth = h->f->root->limits.max_depth;
        for (const char *seg = name; *seg;) {
                const char *end = strchrnul(seg, '/');
                size_t n = (size_t)(end - seg);
                if (n == 2 && seg[0] == '.' && seg[1] == '.')
                        return refuse(h, ERR_INVALID, "Archive entry escapes with '..': %s", name);
                if (n > NAME_MAX)
                        return refuse(h, ERR_INVALID, "Archive entry name segment too long: %.64s…", seg);
                if (n && !(n == 1 && seg[0] == '.')) {
                        if (o + n + 2 >= PATH_MAX)
                                return refuse(h, ERR_INVALID, "Archive entry path too long: %.64s…", name);
                        if (max_depth && ++depth > max_depth)
                                return refuse(h, ERR_LIMIT, "Archive entry deeper than %zu levels: %.64s…",
                                              max_depth, name);
                        if (o)
                                out[o++] = '/';
                        memcpy(out + o, seg, n);
                        o += n;
                }
                seg = *end ? end + 1 : end;
        }
        out[o] = '\0';
        return 0;
}

/* A symlink's target must resolve inside /workspace, read from the link's
 * directory (absolute targets as the jail sees them). */
static int check_link_target(struct hydrate *h, const char *rel, const char *target)
{
        char joined[2 * PATH_MAX], norm[PATH_MAX];
        const char *slash = strrchr(rel, '/');
        if (!target[0])
                return refuse(h, ERR_INVALID, "Archive symlink has an empty target: %s", rel);
        if (target[0] == '/')
                snprintf(joined, sizeof(joined), "%s", target);
        else
                snprintf(joined, sizeof(joined), FILES_ROOT "/%.*s/%s", slash ? (int)(slash - rel) : 0, rel, target);
        if (files_normalize(joined, norm, sizeof(norm)) < 0)
                return refuse(h, ERR_INVALID, "Archive symlink leaves /workspace: %s -> %s", rel, target);
        return 0;
}

/* ---- pass 1: validation -------------------------------------------------- */

/* What the workspace holds at rel now: -ENOENT (nothing, parents included),
 * else 0 with *st. A symlink or a file on the way is a refusal. */
static int ws_lookup(struct hydrate *h, const char *rel, struct stat *st)
{
        const char *name;
        _cleanup_close_ int pfd = open_parent(h->f->root->fd, rel, &name);
        if (pfd == -ENOENT)
                return -ENOENT;
        if (pfd == -ELOOP)
                return refuse(h, ERR_INVALID, "Archive entry would be written through a symlink: %s", rel);
        if (pfd == -ENOTDIR)
                return refuse(h, ERR_INVALID, "Archive entry is beneath a file of the workspace: %s", rel);
        if (pfd < 0)
                return fop_fail(h->f, -pfd, NULL, NULL);
        int r = stat_entry(pfd, name, st);
        return r == -ENOENT ? r : r < 0 ? fop_fail(h->f, -r, NULL, NULL) : 0;
}

/* Accounts one path of the archive against what the workspace has there. */
static int account(struct hydrate *h, const char *rel, bool dir)
{
        struct stat st;
        int r = ws_lookup(h, rel, &st);
        if (r == -ENOENT) {
                h->new_entries++;
                return 0;
        }
        if (r < 0)
                return r;
        if (dir && !S_ISDIR(st.st_mode))
                return refuse(h, ERR_INVALID, "Archive directory replaces a non-directory: %s", rel);
        if (!dir && S_ISDIR(st.st_mode))
                return refuse(h, ERR_INVALID, "Archive entry replaces a directory: %s", rel);
        if (S_ISREG(st.st_mode))
                h->replaced_bytes += (uint64_t)st.st_size;
        return 0;
}

/* Every parent of rel must be a directory (of the archive, implicit or
 * explicit, or of the workspace). */
static int check_parents(struct hydrate *h, const char *rel)
{
        char prefix[PATH_MAX];
        for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
                snprintf(prefix, sizeof(prefix), "%.*s", (int)(s - rel), rel);
                int k = seen_kind(&h->seen, prefix);
                if (k == K_DIR || k == K_IMPLICIT_DIR)
                        continue;
                if (k >= 0)
                        return refuse(h, ERR_INVALID, "Archive entry is beneath a %s of the archive: %s",
                                      k == K_FILE ? "file" : "link", rel);
                int r = account(h, prefix, true);
                if (r == 0)
                        r = seen_put(&h->seen, prefix, K_IMPLICIT_DIR, 0);
                if (r < 0)
                        return r == -ENOMEM ? fop_fail(h->f, ENOMEM, NULL, NULL) : r;
        }
        return 0;
}

static int entry_kind(struct hydrate *h, struct archive_entry *e, const char *rel, enum kind *ret)
{
        const char *hard = archive_entry_hardlink(e);
        if (hard) {
                char target[PATH_MAX];
                int r = entry_rel(h, hard, target);
                if (r < 0)
                        return r;
                const struct seen_entry *t = seen_get(&h->seen, target);
                if (!t || t->kind != K_FILE)
                        return refuse(h, ERR_INVALID,
                                      "Archive hardlink must name a regular file earlier in the archive: %s -> %s",
                                      rel, hard);
                /* The workspace's usage counts every name of a file. */
                h->bytes += t->size;
                *ret = K_HARDLINK;
                return 0;
        }
        switch (archive_entry_filetype(e)) {
        case AE_IFREG: *ret = K_FILE; return 0;
        case AE_IFDIR: *ret = K_DIR; return 0;
        case AE_IFLNK:
                *ret = K_SYMLINK;
                return check_link_target(h, rel, archive_entry_symlink(e) ? archive_entry_symlink(e) : "");
        default:
                return refuse(h, ERR_INVALID, "Archive entry is not a file, directory or link: %s", rel);
        }
}

static int check_ratio(struct hydrate *h)
{
        uint64_t out = (uint64_t)archive_filter_bytes(h->a, 0);
        uint64_t cap = (uint64_t)h->len * ARCHIVE_MAX_RATIO;
        if (out > (cap > ARCHIVE_RATIO_FLOOR ? cap : ARCHIVE_RATIO_FLOOR))
                return refuse(h, ERR_LIMIT, "Archive decompresses to more than %d times its size",
                              ARCHIVE_MAX_RATIO);
        return 0;
}

static int validate_entry(struct hydrate *h, struct archive_entry *e)
{
        char rel[PATH_MAX];
        enum kind kind = K_FILE;
        const char *name = archive_entry_pathname(e);
        int r = name ? entry_rel(h, name, rel) : refuse(h, ERR_INVALID, "Archive entry without a name");
        if (r < 0)
                return r;
        if ((r = entry_kind(h, e, rel, &kind)) < 0)
                return r;
        if (!rel[0])
                return kind == K_DIR ? 0 : refuse(h, ERR_INVALID, "Archive entry '%s' is not a directory", name);
        int prev = seen_kind(&h->seen, rel);
        if (prev >= 0 && !(prev == K_IMPLICIT_DIR && kind == K_DIR))
                return refuse(h, ERR_INVALID, "Archive has a duplicate entry: %s", rel);
        if ((r = check_parents(h, rel)) < 0)
                return r;
        if (prev < 0 && (r = account(h, rel, kind == K_DIR)) < 0)
                return r;
        uint64_t size = 0;
        if (kind == K_FILE) {
                int64_t declared = archive_entry_size(e);
                uint64_t max = h->f->root->limits.max_file_bytes;
                if (declared < 0)
                        return refuse(h, ERR_INVALID, "Archive entry has no size: %s", rel);
                if (max && (uint64_t)declared > max)
                        return refuse(h, ERR_TOO_LARGE, "Archive file exceeds %llu bytes: %s",
                                      (unsigned long long)max, rel);
                size = (uint64_t)declared;
                h->bytes += size;
        }
        if (seen_put(&h->seen, rel, kind, size) < 0)
                return fop_fail(h->f, ENOMEM, NULL, NULL);
        return 0;
}

static int check_quota(struct hydrate *h)
{
        const struct files_limits *lim = &h->f->root->limits;
        uint64_t entries, bytes;
        int r = fop_usage(h->f, &entries, &bytes);
        if (r < 0)
                return fop_fail(h->f, -r, NULL, NULL);
        uint64_t after = bytes - (h->replaced_bytes < bytes ? h->replaced_bytes : bytes) + h->bytes;
        if (lim->max_total_bytes && after > lim->max_total_bytes)
                return refuse(h, ERR_NO_SPACE, "Archive would exceed the workspace's %llu bytes (%llu needed)",
                              (unsigned long long)lim->max_total_bytes, (unsigned long long)after);
        if (lim->max_entries && entries + h->new_entries > lim->max_entries)
                return refuse(h, ERR_NO_SPACE, "Archive would exceed the workspace's %llu entries",
                              (unsigned long long)lim->max_entries);
        return 0;
}

static void archive_readp(struct archive **a)
{
        if (*a)
                archive_read_free(*a);
}

/* A reader of h's bytes: tar (ustar, pax, GNU) and gzip only, no external
 * decompressor program (libarchive may run one for other filters). */
static int open_reader(struct hydrate *h)
{
        h->a = archive_read_new();
        if (!h->a)
                return fop_fail(h->f, ENOMEM, NULL, NULL);
        if (archive_read_support_filter_gzip(h->a) != ARCHIVE_OK ||
            archive_read_support_format_tar(h->a) != ARCHIVE_OK ||
            archive_read_open_memory(h->a, h->data, h->len) != ARCHIVE_OK)
                return refuse(h, ERR_INVALID, "Not a tar archive: %s",
                              archive_error_string(h->a) ? archive_error_string(h->a) : "unknown format");
        return 0;
}

/* ARCHIVE_EOF → 1, a header → 0, else a refusal. */
static int next_header(struct hydrate *h, struct archive_entry **e)
{
        int r = archive_read_next_header(h->a, e);
        if (r == ARCHIVE_EOF)
                return 1;
        if (r < ARCHIVE_WARN)
                return refuse(h, ERR_INVALID, "Invalid tar archive: %s",
                              archive_error_string(h->a) ? archive_error_string(h->a) : "read error");
        if (++h->entries > ARCHIVE_MAX_ENTRIES)
                return refuse(h, ERR_LIMIT, "Archive has more than %d entries", ARCHIVE_MAX_ENTRIES);
        return check_ratio(h);
}

static int validate(struct hydrate *h)
{
        int r = open_reader(h);
        struct archive_entry *e;
        while (r == 0 && (r = next_header(h, &e)) == 0) {
                r = validate_entry(h, e);
                if (r == 0 && archive_read_data_skip(h->a) != ARCHIVE_OK)
                        r = refuse(h, ERR_INVALID, "Invalid tar archive: %s",
                                   archive_error_string(h->a) ? archive_error_string(h->a) : "truncated");
                if (r == 0)
                        r = check_ratio(h);
        }
        archive_readp(&h->a);
        h->a = NULL;
        return r < 0 ? r : check_quota(h);
}

/* ---- pass 2: extraction ---------------------------------------------------- */

struct fill {
        struct hydrate *h;
        mode_t mode;
        struct timespec mtime;
};

/* The entry's data into the temp file, then its mode and mtime. */
static int fill_entry(int fd, void *ud)
{
        struct fill *x = ud;
        char buf[65536];
        for (;;) {
                la_ssize_t n = archive_read_data(x->h->a, buf, sizeof(buf));
                if (n == 0)
                        break;
                if (n < 0)
                        return -EIO;
                int r = write_all(fd, buf, (size_t)n);
                if (r < 0)
                        return r;
                if (check_ratio(x->h) < 0)
                        return -E2BIG;
        }
        if (fchmod(fd, x->mode) < 0)
                return -errno;
        struct timespec t[2] = { { 0, UTIME_OMIT }, x->mtime };
        return futimens(fd, t) < 0 ? -errno : 0;
}

/* A symlink to target (tpfd < 0) or a hardlink to tpfd/tname, made under
 * a temp name and renamed over name; the temp name never survives. */
static int link_replace(int pfd, const char *name, const char *target, int tpfd, const char *tname)
{
        char tmp[40];
        int r = -EEXIST;
        for (int attempt = 0; attempt < 16 && r == -EEXIST; attempt++) {
                files_temp_name(tmp);
                int k = tpfd < 0 ? symlinkat(target, pfd, tmp) : linkat(tpfd, tname, pfd, tmp, 0);
                r = k < 0 ? -errno : 0;
        }
        if (r < 0)
                return r;
        if (renameat(pfd, tmp, pfd, name) < 0)
                r = -errno;
        /* A rename between two links of one inode does nothing: the temp
         * name stays, so it is removed in every case. */
        (void)unlinkat(pfd, tmp, 0);
        return r;
}

/* chmod (and with mtime, utimens) of the directory rel through an O_PATH
 * fd opened confined: its /proc/self/fd link names that very inode, so a
 * directory swapped for a link meanwhile is never the one changed. */
static int set_dir_meta(struct hydrate *h, const char *rel, mode_t mode, const struct timespec *mtime)
{
        _cleanup_close_ int fd = resolve_at(h->f->root->fd, rel, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        if (chmod(proc, mode) < 0)
                return -errno;
        struct timespec t[2] = { { 0, UTIME_OMIT }, mtime ? *mtime : (struct timespec){ 0, UTIME_OMIT } };
        return mtime && utimensat(AT_FDCWD, proc, t, 0) < 0 ? -errno : 0;
}

static int remember_dir(struct hydrate *h, const char *rel, struct archive_entry *e)
{
        if (h->ndirs == h->dirs_cap) {
                size_t ncap = h->dirs_cap ? h->dirs_cap * 2 : 64;
                struct dir_meta *nv = realloc(h->dirs, ncap * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                h->dirs = nv, h->dirs_cap = ncap;
        }
        char *copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        h->dirs[h->ndirs++] = (struct dir_meta){ copy, archive_entry_perm(e) & 0777,
                                                 { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
        return 0;
}

static int extract_entry(struct hydrate *h, struct archive_entry *e, const char *rel)
{
        int root = h->f->root->fd;
        if (archive_entry_filetype(e) == AE_IFDIR && !archive_entry_hardlink(e)) {
                /* An existing directory of the archive may be read-only
                 * (a second hydrate of one tree): writable by its owner
                 * until its own mode is applied at the end. */
                int r = fop_mkdir_parents(h->f, rel);
                if (r == 0)
                        r = set_dir_meta(h, rel, DIR_MODE | S_IRWXU, NULL);
                return r < 0 ? r : remember_dir(h, rel, e);
        }
        const char *name;
        int pfd = open_parent(root, rel, &name);
        if (pfd == -ENOENT) {
                char parent[PATH_MAX];
                snprintf(parent, sizeof(parent), "%.*s", (int)(strrchr(rel, '/') - rel), rel);
                int r = fop_mkdir_parents(h->f, parent);
                pfd = r < 0 ? r : open_parent(root, rel, &name);
        }
        if (pfd < 0)
                return pfd;
        _cleanup_close_ int pfd_owned = pfd;
        const char *hard = archive_entry_hardlink(e);
        if (hard) {
                char trel[PATH_MAX];
                const char *tname;
                if (entry_rel(h, hard, trel) < 0)
                        return -EINVAL;
                _cleanup_close_ int tpfd = open_parent(root, trel, &tname);
                return tpfd < 0 ? tpfd : link_replace(pfd, name, NULL, tpfd, tname);
        }
        if (archive_entry_filetype(e) == AE_IFLNK)
                return link_replace(pfd, name, archive_entry_symlink(e), -1, NULL);
        struct fill x = { h, archive_entry_perm(e) & 0777,
                          { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
        return atomic_replace(pfd, name, fill_entry, &x, false);
}

/* Directory modes and mtimes go last (a read-only directory must not stop
 * its own entries), deepest first. */
static int apply_dirs(struct hydrate *h)
{
        int r = 0;
        for (size_t i = h->ndirs; r == 0 && i-- > 0;)
                r = set_dir_meta(h, h->dirs[i].rel, h->dirs[i].mode, &h->dirs[i].mtime);
        return r;
}

static int extract(struct hydrate *h)
{
        int r = open_reader(h);
        struct archive_entry *e;
        char rel[PATH_MAX];
        h->entries = 0;
        while (r == 0 && (r = next_header(h, &e)) == 0) {
                r = entry_rel(h, archive_entry_pathname(e), rel);
                if (r == 0 && rel[0] && (r = extract_entry(h, e, rel)) < 0)
                        r = fop_fail(h->f, -r, NULL, "Cannot extract /workspace/%s: %s", rel, strerror(-r));
        }
        archive_readp(&h->a);
        h->a = NULL;
        if (r < 0)
                return r;
        if ((r = apply_dirs(h)) < 0)
                return fop_fail(h->f, -r, NULL, NULL);
        /* One syncfs instead of an fsync per file: acknowledged means durable. */
        _cleanup_close_ int fd = resolve_at(h->f->root->fd, "", O_RDONLY | O_DIRECTORY);
        if (fd < 0 || syncfs(fd) < 0)
                return fop_fail(h->f, fd < 0 ? -fd : errno, NULL, NULL);
        return 0;
}

int files_hydrate(const struct files_root *root, const void *data, size_t len, struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_HYDRATE, FILES_ROOT, NULL, err);
        if (r < 0)
                return r;
        struct hydrate h = { .f = &f, .data = data, .len = len };
        r = validate(&h);
        seen_done(&h.seen);
        /* The quotas were checked for the whole archive: directories made
         * now need no usage walk each (the file system's own quota stays). */
        struct files_root unchecked = *root;
        unchecked.limits.max_total_bytes = unchecked.limits.max_entries = 0;
        f.root = &unchecked;
        if (r == 0)
                r = extract(&h);
        for (size_t i = 0; i < h.ndirs; i++)
                free(h.dirs[i].rel);
        free(h.dirs);
        return r;
}
