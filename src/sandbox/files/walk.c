/* Tree walking beneath the workspace root: listings and usage totals. */
#include "sandbox/files/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

struct walk {
        int root_fd;
        char path[PATH_MAX]; /* current directory relative to root_fd */
        size_t base_len;     /* length of the walked directory's own path */
        bool recursive;
        bool include_hidden;
        walk_fn fn;
        void *userdata;
};

struct names {
        char **v;
        size_t n, cap;
};

static void names_done(struct names *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
        *s = (struct names){ 0 };
}

static int names_add(struct names *s, const char *name)
{
        if (s->n == s->cap) {
                size_t ncap = s->cap ? s->cap * 2 : 8;
                char **nv = realloc(s->v, ncap * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                s->v = nv, s->cap = ncap;
        }
        s->v[s->n] = strdup(name);
        if (!s->v[s->n])
                return -ENOMEM;
        s->n++;
        return 0;
}

/* Appends "/name" (or "name" at the root) to w->path[0..len). */
static int path_push(struct walk *w, size_t len, const char *name)
{
        size_t nlen = strlen(name);
        size_t need = len + (len ? 1 : 0) + nlen;
        if (need >= sizeof(w->path))
                return -ENAMETOOLONG;
        if (len)
                w->path[len++] = '/';
        memcpy(w->path + len, name, nlen + 1);
        return 0;
}

/* Reports the entries of the open directory d; collects subdirectories to
 * enter into subdirs. */
static int walk_entries(struct walk *w, size_t len, DIR *d, struct names *subdirs)
{
        size_t rel_off = w->base_len ? w->base_len + 1 : 0;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                const char *name = de->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                        continue;
                /* A hidden directory hides its whole subtree, since every
                 * descendant's relativePath has that segment. */
                if (!w->include_hidden && name[0] == '.')
                        continue;
                struct stat st;
                int r = stat_entry(dirfd(d), name, &st);
                if (r == -ENOENT)
                        continue;
                if (r == 0)
                        r = path_push(w, len, name);
                if (r < 0)
                        return r;
                r = w->fn(w->userdata, w->path + rel_off, &st);
                w->path[len] = '\0';
                if (r == WALK_PRUNE)
                        continue;
                if (r == 0 && w->recursive && S_ISDIR(st.st_mode))
                        r = names_add(subdirs, name);
                if (r < 0)
                        return r;
        }
        return errno != 0 ? -errno : 0;
}

/* Visits one directory (w->path[0..len)). Child directories are collected
 * and visited after the stream is closed, each re-resolved from root_fd
 * with openat2: no fd is held per level, so depth does not eat fds, and a
 * directory swapped for a symlink meanwhile is simply not entered. */
static int walk_level(struct walk *w, size_t len)
{
        w->path[len] = '\0';
        int fd = resolve_at(w->root_fd, w->path, O_RDONLY | O_DIRECTORY);
        if (fd < 0) {
                /* Below the walked directory, vanished/swapped/unreadable
                 * entries are skipped; the walked directory itself fails. */
                if (len > w->base_len && (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP || fd == -EACCES))
                        return 0;
                return fd;
        }
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        _cleanup_(names_done) struct names subdirs = { 0 };
        int r = walk_entries(w, len, d, &subdirs);
        closedir(d);

        for (size_t i = 0; r == 0 && i < subdirs.n; i++) {
                r = path_push(w, len, subdirs.v[i]);
                if (r == 0)
                        r = walk_level(w, strlen(w->path));
                w->path[len] = '\0';
        }
        return r;
}

int walk_tree(int root_fd, const char *rel, bool recursive, bool include_hidden, walk_fn fn, void *userdata)
{
        _cleanup_free_ struct walk *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        size_t len = strlen(rel);
        if (len >= sizeof(w->path))
                return -ENAMETOOLONG;
        *w = (struct walk){ .root_fd = root_fd, .base_len = len, .recursive = recursive,
                            .include_hidden = include_hidden, .fn = fn, .userdata = userdata };
        memcpy(w->path, rel, len + 1);
        return walk_level(w, len);
}

/* ---- usage --------------------------------------------------------------- */

struct usage {
        uint64_t entries;
        uint64_t bytes;
};

static int usage_visit(void *userdata, const char *rel UNUSED, const struct stat *st)
{
        struct usage *u = userdata;
        u->entries++;
        if (S_ISREG(st->st_mode))
                u->bytes += (uint64_t)st->st_size;
        return 0;
}

int files_usage(int root_fd, uint64_t *ret_entries, uint64_t *ret_bytes)
{
        struct usage u = { 0 };
        int r = walk_tree(root_fd, "", true, true, usage_visit, &u);
        if (r < 0)
                return r;
        if (ret_entries)
                *ret_entries = u.entries;
        if (ret_bytes)
                *ret_bytes = u.bytes;
        return 0;
}

int fop_usage(const struct fop *f, uint64_t *entries, uint64_t *bytes)
{
        const struct files_limits *lim = &f->root->limits;
        *entries = *bytes = 0;
        if (!lim->max_total_bytes && !lim->max_entries)
                return 0;
        return files_usage(f->root->fd, entries, bytes);
}

int fop_check_new_entries(const struct fop *f, uint64_t count)
{
        uint64_t entries, bytes;
        if (!f->root->limits.max_entries)
                return 0;
        int r = fop_usage(f, &entries, &bytes);
        if (r < 0)
                return r;
        return entries + count > f->root->limits.max_entries ? -ENOSPC : 0;
}

/* ---- list ---------------------------------------------------------------- */

void files_list_done(struct files_list *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i].rel);
        free(l->v);
        *l = (struct files_list){ 0 };
}

static int list_visit(void *userdata, const char *rel, const struct stat *st)
{
        struct files_list *l = userdata;
        if (l->n >= LIST_MAX_ENTRIES)
                return -E2BIG;
        if (l->n == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 32;
                struct files_entry *nv = realloc(l->v, ncap * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                l->v = nv, l->cap = ncap;
        }
        char *copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        /* Only directories and regular files have a meaningful size; links
         * and other special files are reported as empty "file"s. */
        l->v[l->n++] = (struct files_entry){
                .rel = copy,
                .dir = S_ISDIR(st->st_mode),
                .size = S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0,
                .mtime = st->st_mtim,
        };
        return 0;
}

static int entry_cmp(const void *a, const void *b)
{
        return strcmp(((const struct files_entry *)a)->rel, ((const struct files_entry *)b)->rel);
}

int files_list(const struct files_root *root, const char *path, unsigned flags, struct files_list *ret,
               struct err *err)
{
        *ret = (struct files_list){ 0 };
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_LIST, path, NULL, err);
        if (r < 0)
                return r;
        /* Name the listed directory itself precisely: a file is ENOTDIR, a
         * symlink ELOOP (a permission failure), before walking. */
        _cleanup_close_ int fd = resolve_at(root->fd, f.rel, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fop_fail(&f, -fd, NULL, NULL);

        _cleanup_(files_list_done) struct files_list l = { 0 };
        r = walk_tree(root->fd, f.rel, flags & FILES_RECURSIVE, flags & FILES_INCLUDE_HIDDEN, list_visit, &l);
        if (r == -E2BIG)
                return fop_fail(&f, E2BIG, NULL, "Too many entries to list (over %d): %s", LIST_MAX_ENTRIES,
                                f.path);
        if (r < 0)
                return fop_fail(&f, -r, NULL, NULL);
        if (l.n > 1)
                qsort(l.v, l.n, sizeof(*l.v), entry_cmp);
        *ret = l;
        l = (struct files_list){ 0 };
        return 0;
}

/* ---- recursive delete ---------------------------------------------------- */

/* Depth-first removal that holds at most RM_FD_WINDOW directory fds (plus one
 * stream) however deep the tree: the open directories are the deepest
 * levels; when the walk climbs above them it re-opens the next ones from the
 * top, one confined component at a time. The names on the way down stay in
 * memory (bounded by max_depth). Each level is scanned from its start again
 * after a subdirectory is gone, so no position is kept across re-opens. */
#define RM_FD_WINDOW 64

struct rm_walk {
        int top_fd;                  /* parent of the removed directory (borrowed) */
        struct names names;          /* v[i]: level i, a child of level i-1; n: the depth */
        size_t lo;                   /* levels [lo, n) are open in ring */
        int ring[RM_FD_WINDOW];
        size_t max_depth;
};

static int *rm_slot(struct rm_walk *w, size_t level)
{
        return &w->ring[level % RM_FD_WINDOW];
}

static int rm_fd(struct rm_walk *w, size_t level)
{
        return level == (size_t)-1 ? w->top_fd : *rm_slot(w, level);
}

/* Opens level `level` (whose name is known) below the open level-1. */
static int rm_open_level(struct rm_walk *w, size_t level)
{
        int fd = resolve_at(rm_fd(w, level - 1), w->names.v[level], O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        if (level - w->lo == RM_FD_WINDOW) { /* the window is full: drop its top */
                close(*rm_slot(w, w->lo));
                w->lo++;
        }
        *rm_slot(w, level) = fd;
        return 0;
}

static int rm_push(struct rm_walk *w, const char *name)
{
        if (w->names.n >= w->max_depth)
                return -EMLINK;
        int r = names_add(&w->names, name);
        if (r == 0 && (r = rm_open_level(w, w->names.n - 1)) < 0)
                free(w->names.v[--w->names.n]);
        return r;
}

/* Closes the deepest level; makes its parent open again if the window had
 * dropped it, re-walking down from the top. */
static int rm_pop(struct rm_walk *w)
{
        size_t level = --w->names.n;
        close(*rm_slot(w, level));
        free(w->names.v[level]);
        if (level == 0 || w->lo < level)
                return 0;
        w->lo = 0;
        for (size_t i = 0; i < level; i++) {
                int r = rm_open_level(w, i);
                if (r < 0) {
                        /* Moved meanwhile: keep what is open, [lo, i). */
                        for (size_t k = i; k < level; k++)
                                free(w->names.v[k]);
                        w->names.n = i;
                        return r;
                }
        }
        return 0;
}

static void rm_walk_done(struct rm_walk *w)
{
        for (size_t i = w->lo; i < w->names.n; i++)
                close(*rm_slot(w, i));
        names_done(&w->names);
}

/* Unlinks every non-directory in the deepest level; *ret_sub is the first
 * subdirectory met (empty string: none left). */
static int rm_scan(struct rm_walk *w, char ret_sub[NAME_MAX + 1])
{
        int fd = rm_fd(w, w->names.n - 1);
        ret_sub[0] = '\0';
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        DIR *d = fdopendir(dfd);
        if (!d) {
                int r = -errno;
                close(dfd);
                return r;
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (errno = 0, de = readdir(d))) {
                const char *name = de->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                        continue;
                if (unlinkat(fd, name, 0) == 0 || errno == ENOENT)
                        continue;
                if (errno == EISDIR) {
                        snprintf(ret_sub, NAME_MAX + 1, "%s", name);
                        break;
                }
                r = -errno;
        }
        if (r == 0 && !de && errno)
                r = -errno;
        closedir(d);
        return r;
}

int files_rm_tree(int parent_fd, const char *name, size_t max_depth)
{
        struct rm_walk w = { .top_fd = parent_fd, .max_depth = max_depth ? max_depth : SIZE_MAX };
        int r = rm_push(&w, name);
        char sub[NAME_MAX + 1];
        while (r == 0 && w.names.n > 0) {
                r = rm_scan(&w, sub);
                if (r == 0 && sub[0]) {
                        r = rm_push(&w, sub);
                        continue;
                }
                if (r < 0)
                        break;
                /* Empty: remove it from its parent, then rescan that. */
                size_t level = w.names.n - 1;
                char *last = TAKE_PTR(w.names.v[level]);
                r = rm_pop(&w);
                if (r == 0 && unlinkat(rm_fd(&w, level - 1), last, AT_REMOVEDIR) < 0 && errno != ENOENT)
                        r = -errno;
                free(last);
        }
        rm_walk_done(&w);
        return r;
}
