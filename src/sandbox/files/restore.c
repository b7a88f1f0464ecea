/* files_restore (a workspace's scope made exactly an archive's) and
 * files_tar_each (a streamed listing of an archive with each file's
 * SHA-256): the checkpoints' restore and compare. */
#include "sandbox/files/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "sandbox/archive.h"

/* ---- reading an archive ---- */

static void archive_readp(struct archive **a)
{
        if (*a)
                archive_read_free(*a);
}

static void md_ctxp(EVP_MD_CTX **c)
{
        EVP_MD_CTX_free(*c);
}

/* An entry's name relative to the workspace: "./" prefixes and trailing
 * slashes dropped ("" for the root). */
static void entry_name(const char *name, char out[PATH_MAX])
{
        while (name[0] == '.' && name[1] == '/')
                name += 2;
        size_t n = strnlen(name, PATH_MAX - 1);
        while (n && name[n - 1] == '/')
                n--;
        memcpy(out, name, n);
        out[n] = '\0';
        if (!strcmp(out, "."))
                out[0] = '\0';
}

static int read_fail(struct archive *a, struct err *err, const char *op)
{
        int e = archive_errno(a) > 0 ? archive_errno(a) : EIO;
        err_set(err, ERR_FILESYSTEM, e, "Cannot read the archive: %s",
                archive_error_string(a) ? archive_error_string(a) : strerror(e));
        err->op = op;
        return -e;
}

static char entry_type(struct archive_entry *e)
{
        if (archive_entry_hardlink(e))
                return 'h';
        switch (archive_entry_filetype(e)) {
        case AE_IFREG: return 'f';
        case AE_IFDIR: return 'd';
        case AE_IFLNK: return 'l';
        default: return '?';
        }
}

/* SHA-256 of what read() yields until it returns 0, as hex into out;
 * read's negative value is returned as is. */
static long sha256_stream(long (*read)(void *src, void *buf, size_t len), void *src, char out[65])
{
        _cleanup_(md_ctxp) EVP_MD_CTX *c = EVP_MD_CTX_new();
        unsigned char md[EVP_MAX_MD_SIZE], buf[65536];
        unsigned len = 0;
        if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1)
                return -ENOMEM;
        for (;;) {
                long n = read(src, buf, sizeof(buf));
                if (n < 0)
                        return n;
                if (n == 0)
                        break;
                EVP_DigestUpdate(c, buf, (size_t)n);
        }
        EVP_DigestFinal_ex(c, md, &len);
        for (unsigned i = 0; i < len && i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
        return 0;
}

static long read_archive(void *src, void *buf, size_t len)
{
        la_ssize_t n = archive_read_data(src, buf, len);
        return n < 0 ? -EIO : (long)n;
}

struct fd_at {
        int fd;
        off_t off;
};

static long read_fd(void *src, void *buf, size_t len)
{
        struct fd_at *f = src;
        for (;;) {
                ssize_t n = pread(f->fd, buf, len, f->off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                f->off += n;
                return n;
        }
}

int files_sha256_fd(int fd, char out[65])
{
        struct fd_at f = { fd, 0 };
        return (int)sha256_stream(read_fd, &f, out);
}

static int hash_data(struct archive *a, char out[65], struct err *err)
{
        long r = sha256_stream(read_archive, a, out);
        if (r == -ENOMEM)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Cannot hash: out of memory");
        return r < 0 ? read_fail(a, err, "checkpoint.read") : 0;
}

static int open_reader(struct archive **ret)
{
        struct archive *a = archive_read_new();
        if (!a)
                return -ENOMEM;
        archive_read_support_format_tar(a);
        archive_read_support_format_gnutar(a);
        archive_read_support_filter_gzip(a);
        archive_read_support_filter_none(a);
        *ret = a;
        return 0;
}

int files_tar_each(int fd, int (*fn)(void *userdata, const struct files_tar_entry *e), void *userdata,
                   struct err *err)
{
        _cleanup_(archive_readp) struct archive *a = NULL;
        if (open_reader(&a) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK)
                return read_fail(a, err, "checkpoint.read");
        struct archive_entry *ae;
        int r;
        while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
                char rel[PATH_MAX];
                entry_name(archive_entry_pathname(ae) ? archive_entry_pathname(ae) : "", rel);
                struct files_tar_entry e = { .rel = rel, .type = entry_type(ae) };
                if (!rel[0])
                        continue;
                if (e.type == 'f') {
                        e.size = archive_entry_size(ae) > 0 ? (uint64_t)archive_entry_size(ae) : 0;
                        if ((r = hash_data(a, e.sha256, err)) < 0)
                                return r;
                }
                if ((r = fn(userdata, &e)) < 0)
                        return r;
        }
        return r == ARCHIVE_EOF ? 0 : read_fail(a, err, "checkpoint.read");
}

/* ---- restore ---- */

struct name {
        char *rel;
        bool dir;
};

struct restore {
        const struct files_filter *filter;
        struct name *names;          /* the archive's, sorted */
        size_t nnames;
        char **doomed;               /* in scope, not (so) in the archive */
        size_t ndoomed, cap;
};

static int by_rel(const void *a, const void *b)
{
        return strcmp(((const struct name *)a)->rel, ((const struct name *)b)->rel);
}

static void restore_done(struct restore *r)
{
        for (size_t i = 0; i < r->nnames; i++)
                free(r->names[i].rel);
        for (size_t i = 0; i < r->ndoomed; i++)
                free(r->doomed[i]);
        free(r->names);
        free(r->doomed);
}

/* The archive's names (headers only; the data is skipped). */
static int read_names(struct restore *rs, const void *data, size_t len, struct err *err)
{
        _cleanup_(archive_readp) struct archive *a = NULL;
        if (open_reader(&a) < 0)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        if (archive_read_open_memory(a, data, len) != ARCHIVE_OK)
                return read_fail(a, err, FILES_OP_RESTORE);
        struct archive_entry *ae;
        int r;
        size_t cap = 0;
        while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
                char rel[PATH_MAX];
                entry_name(archive_entry_pathname(ae) ? archive_entry_pathname(ae) : "", rel);
                if (!rel[0])
                        continue;
                if (rs->nnames == cap) {
                        struct name *v = reallocarray(rs->names, cap = cap ? 2 * cap : 64, sizeof(*v));
                        if (!v)
                                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
                        rs->names = v;
                }
                if (!(rs->names[rs->nnames].rel = strdup(rel)))
                        return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
                rs->names[rs->nnames++].dir = archive_entry_filetype(ae) == AE_IFDIR;
        }
        if (r != ARCHIVE_EOF)
                return read_fail(a, err, FILES_OP_RESTORE);
        if (rs->nnames > 0) /* qsort(NULL, 0, …) is undefined */
                qsort(rs->names, rs->nnames, sizeof(*rs->names), by_rel);
        return 0;
}

static int doom(struct restore *rs, const char *rel)
{
        if (rs->ndoomed == rs->cap) {
                char **v = reallocarray(rs->doomed, rs->cap = rs->cap ? 2 * rs->cap : 32, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                rs->doomed = v;
        }
        if (!(rs->doomed[rs->ndoomed] = strdup(rel)))
                return -ENOMEM;
        rs->ndoomed++;
        return 0;
}

static int restore_visit(void *userdata, const char *rel, const struct stat *st)
{
        struct restore *rs = userdata;
        if (!files_filter_match(rs->filter, rel))
                return 0; /* outside the scope; an included entry may lie below */
        struct name key = { .rel = (char *)rel };
        const struct name *n = rs->nnames ? bsearch(&key, rs->names, rs->nnames, sizeof(key), by_rel) : NULL;
        if (n && n->dir == S_ISDIR(st->st_mode))
                return 0;
        int r = doom(rs, rel);
        return r < 0 ? r : WALK_PRUNE;
}

/* The entries of the scope the archive does not hold, into rs->doomed. */
static int find_doomed(const struct files_root *root, struct restore *rs, struct err *err)
{
        _cleanup_(fop_end) struct fop f;
        int r = fop_begin(&f, root, FILES_OP_RESTORE, FILES_ROOT, NULL, err);
        if (r == 0)
                r = walk_tree(root->fd, "", true, true, restore_visit, rs);
        return r < 0 && !err->reason ? fop_fail(&f, -r, NULL, NULL) : r;
}

int files_restore(const struct files_root *root, const struct files_filter *f, const void *data, size_t len,
                  struct err *err)
{
        _cleanup_(restore_done) struct restore rs = { .filter = f };
        int r = read_names(&rs, data, len, err);
        if (r == 0)
                r = find_doomed(root, &rs, err);
        for (size_t i = 0; r == 0 && i < rs.ndoomed; i++)
                r = files_delete(root, rs.doomed[i], FILES_RECURSIVE | FILES_FORCE, err);
        return r < 0 ? r : files_hydrate(root, data, len, err);
}
