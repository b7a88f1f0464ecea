/* The bytes of artifacts and of multipart uploads' parts on the host, under
 * <data_dir>/artifacts or the bucket's mount (see artifacts.h). Every file
 * is written by files_replace_at (a temp name in its final directory,
 * fsynced, renamed into place, the directory fsynced), so a reader (or a
 * restart) never sees half a file.
 * Bodies are copied in 64 KiB chunks and hashed on the way: nothing is held
 * whole in memory. The ids in paths come from the store (org ids, "art_" /
 * "upl_" ids of hex), never from the client's text. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/controller/artifacts.h"
#include "base/fs.h"
#include "base/io.h"
#include "base/log.h"
#include "base/thread.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/files.h"
#include "sandbox/sandbox.h"

#define CHUNK (64 * 1024)

static void md_freep(EVP_MD_CTX **md)
{
        EVP_MD_CTX_free(*md);
}
#define _cleanup_md_ _cleanup_(md_freep)

static EVP_MD_CTX *md_new(void)
{
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(md);
                return NULL;
        }
        return md;
}

static void md_hex(EVP_MD_CTX *md, char out[ART_SHA_HEX])
{
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned n = 0;
        out[0] = '\0';
        if (EVP_DigestFinal_ex(md, d, &n) != 1)
                return;
        for (unsigned i = 0; i < n && i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* An id used as a path component: what the store's ids are made of. */
static bool id_ok(const char *id)
{
        size_t n = strlen(id);
        return n && n < STORE_ID_MAX && id[0] != '.' &&
               strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* Where artifacts live: the bucket's mount when one is configured, else
 * "" (<data_dir>/artifacts). Set before the server starts. */
static char bucket_root[PATH_MAX];
static struct sbx_host_mount *bucket;
static struct bg_thread sweeper;

/* <root>/<org> for artifacts, <data_dir>/artifacts/<org>/uploads/<up> for
 * parts (local scratch even with a bucket: parts are rewritten and joined,
 * the bucket gets the joined file once); made (0700) when mk. */
static int dir_path(const struct app *app, const char *org, const char *up, bool mk, char out[PATH_MAX])
{
        if (!id_ok(org) || (up && !id_ok(up)))
                return -EINVAL;
        int n = up ? snprintf(out, PATH_MAX, "%s/artifacts/%s/uploads/%s", app->cfg->data_dir, org, up)
            : bucket_root[0] ? snprintf(out, PATH_MAX, "%s/%s", bucket_root, org)
                             : snprintf(out, PATH_MAX, "%s/artifacts/%s", app->cfg->data_dir, org);
        if (n < 0 || n >= PATH_MAX)
                return -ENAMETOOLONG;
        return mk ? mkdir_p(out, 0700) : 0;
}

static int open_dir(const struct app *app, const char *org, const char *up, bool mk)
{
        char path[PATH_MAX];
        int r = dir_path(app, org, up, mk, path);
        if (r < 0)
                return r;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Copies len bytes of in (UINT64_MAX: to its end) to out (-1: nowhere),
 * into every non-NULL digest; *ret_n: bytes copied. A source that ends
 * before len is -EIO. */
static int copy_hashed(int in, int out, uint64_t len, EVP_MD_CTX *a, EVP_MD_CTX *b, uint64_t *ret_n)
{
        _cleanup_free_ char *chunk = malloc(CHUNK);
        if (!chunk)
                return -ENOMEM;
        uint64_t done = 0;
        while (done < len) {
                uint64_t want = len - done < CHUNK ? len - done : CHUNK;
                ssize_t n = read(in, chunk, (size_t)want);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                if ((a && EVP_DigestUpdate(a, chunk, (size_t)n) != 1) ||
                    (b && EVP_DigestUpdate(b, chunk, (size_t)n) != 1))
                        return -EIO;
                int r = out >= 0 ? write_all(out, chunk, (size_t)n) : 0;
                if (r < 0)
                        return r;
                done += (uint64_t)n;
        }
        if (ret_n)
                *ret_n = done;
        return len != UINT64_MAX && done != len ? -EIO : 0;
}

static void blob_name(const char *id, char out[STORE_ID_MAX])
{
        snprintf(out, STORE_ID_MAX, "%s", id);
}

/* ---- an artifact from a file descriptor ---- */

struct from_fd {
        int src;
        uint64_t len;
        EVP_MD_CTX *md;
};

static int fill_from_fd(int fd, void *ud)
{
        struct from_fd *f = ud;
        return copy_hashed(f->src, fd, f->len, f->md, NULL, NULL);
}

static int fail(struct err *err, int r, const char *what)
{
        return err_set(err, r == -ENOSPC ? ERR_NO_SPACE : ERR_INTERNAL, -r, "Cannot %s: %s", what, strerror(-r));
}

int art_blob_write_fd(const struct app *app, const char *org, const char *id, int src_fd, uint64_t len,
                      char sha[ART_SHA_HEX], struct err *err)
{
        _cleanup_md_ EVP_MD_CTX *md = md_new();
        if (!md)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        _cleanup_close_ int dfd = open_dir(app, org, NULL, true);
        if (dfd < 0 || !id_ok(id))
                return fail(err, dfd < 0 ? dfd : -EINVAL, "store the artifact");
        char name[STORE_ID_MAX];
        blob_name(id, name);
        int r = files_replace_at(dfd, name, fill_from_fd, &(struct from_fd){ src_fd, len, md });
        if (r == -EIO)
                return err_set(err, ERR_EXISTS, EIO, "The source file changed while it was read");
        if (r < 0)
                return fail(err, r, "store the artifact");
        md_hex(md, sha);
        return 0;
}

int art_blob_open(const struct app *app, const char *org, const char *id, int *ret_fd, uint64_t *ret_size)
{
        _cleanup_close_ int dfd = open_dir(app, org, NULL, false);
        if (dfd < 0)
                return dfd;
        if (!id_ok(id))
                return -ENOENT;
        int fd = openat(dfd, id, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return -EIO;
        }
        *ret_fd = fd;
        *ret_size = (uint64_t)st.st_size;
        return 0;
}

void art_blob_remove(const struct app *app, const char *org, const char *id)
{
        _cleanup_close_ int dfd = open_dir(app, org, NULL, false);
        if (dfd >= 0 && id_ok(id))
                (void)unlinkat(dfd, id, 0);
}

/* ---- parts ---- */

struct from_mem {
        const void *data;
        size_t len;
};

static int fill_from_mem(int fd, void *ud)
{
        const struct from_mem *m = ud;
        return write_all(fd, m->data, m->len);
}

struct part_visit {
        void (*fn)(unsigned n, uint64_t size, void *ud);
        void *ud;
};

static void visit_part(int dir_fd, const char *name, void *ud)
{
        const struct part_visit *v = ud;
        struct stat st;
        if (strspn(name, "0123456789") == strlen(name) && strlen(name) < 10 &&
            fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                v->fn((unsigned)strtoul(name, NULL, 10), (uint64_t)st.st_size, v->ud);
}

/* Calls fn for each part in dir_fd (names of digits only: not temp files
 * nor etag sidecars) with its number and size. */
static void each_part(int dir_fd, void (*fn)(unsigned n, uint64_t size, void *ud), void *ud)
{
        (void)dir_each(dir_fd, visit_part, &(struct part_visit){ fn, ud });
}

static void add_size(unsigned n, uint64_t size, void *ud)
{
        (void)n;
        *(uint64_t *)ud += size;
}

void art_sha256_hex(const void *data, size_t len, char out[ART_SHA_HEX])
{
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned dn = 0;
        out[0] = '\0';
        if (EVP_Digest(data, len, d, &dn, EVP_sha256(), NULL) != 1)
                return;
        for (unsigned i = 0; i < dn && i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int art_part_write(const struct app *app, const char *org, const char *up, unsigned n, const void *data,
                   size_t len, const char *sha, uint64_t *ret_total, struct err *err)
{
        _cleanup_close_ int dfd = open_dir(app, org, up, true);
        if (dfd < 0)
                return fail(err, dfd, "store the part");
        char name[16], side[32];
        snprintf(name, sizeof(name), "%u", n);
        snprintf(side, sizeof(side), "%u.sha256", n);
        /* The sidecar (for listings) first: a part is only listed once its
         * bytes are in, and complete hashes the bytes again anyway. */
        int r = files_replace_at(dfd, side, fill_from_mem, &(struct from_mem){ sha, strlen(sha) });
        if (r == 0)
                r = files_replace_at(dfd, name, fill_from_mem, &(struct from_mem){ data, len });
        if (r < 0)
                return fail(err, r, "store the part");
        *ret_total = 0;
        each_part(dfd, add_size, ret_total);
        return 0;
}

struct part_list {
        int dir_fd;
        struct art_part_info *v;
        size_t n, cap;
};

static void add_info(unsigned n, uint64_t size, void *ud)
{
        struct part_list *l = ud;
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 16;
                struct art_part_info *v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return;
                l->v = v;
                l->cap = cap;
        }
        struct art_part_info *p = &l->v[l->n++];
        *p = (struct art_part_info){ .number = n, .size = size };
        char side[32];
        snprintf(side, sizeof(side), "%u.sha256", n);
        _cleanup_close_ int fd = openat(l->dir_fd, side, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && read_all(fd, p->etag, ART_SHA_HEX - 1) == 0)
                p->etag[ART_SHA_HEX - 1] = '\0';
        else
                p->etag[0] = '\0';
}

static int by_number(const void *a, const void *b)
{
        unsigned x = ((const struct art_part_info *)a)->number, y = ((const struct art_part_info *)b)->number;
        return x < y ? -1 : x > y;
}

int art_parts_list(const struct app *app, const char *org, const char *up, struct art_part_info **ret,
                   size_t *ret_n)
{
        _cleanup_close_ int dfd = open_dir(app, org, up, false);
        struct part_list l = { .dir_fd = dfd };
        if (dfd >= 0)
                each_part(dfd, add_info, &l);
        else if (dfd != -ENOENT)
                return dfd;
        if (l.n)
                qsort(l.v, l.n, sizeof(*l.v), by_number);
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}

struct join {
        int parts_fd;
        const struct art_part *parts;
        size_t n;
        uint64_t min_part, max_total, size;
        EVP_MD_CTX *whole;
        struct err *err;
};

/* One part appended to out: hashed on its own (against its etag) and into
 * the whole. */
static int join_one(struct join *j, size_t i, int out)
{
        const struct art_part *p = &j->parts[i];
        char name[16];
        snprintf(name, sizeof(name), "%u", p->number);
        _cleanup_close_ int fd = openat(j->parts_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return err_set(j->err, ERR_INVALID, ENOENT, "Part %u was not uploaded", p->number);
        uint64_t size = (uint64_t)st.st_size;
        if (i + 1 < j->n && size < j->min_part)
                return err_set(j->err, ERR_INVALID, EINVAL, "Part %u is %llu bytes; every part but the last needs %llu",
                               p->number, (unsigned long long)size, (unsigned long long)j->min_part);
        if (j->size + size > j->max_total)
                return err_set(j->err, ERR_TOO_LARGE, EFBIG, "The artifact would exceed %llu bytes",
                               (unsigned long long)j->max_total);
        _cleanup_md_ EVP_MD_CTX *md = md_new();
        if (!md)
                return err_set(j->err, ERR_INTERNAL, ENOMEM, "Out of memory");
        uint64_t copied = 0;
        int r = copy_hashed(fd, out, UINT64_MAX, md, j->whole, &copied);
        if (r < 0)
                return fail(j->err, r, "join the parts");
        char sha[ART_SHA_HEX];
        md_hex(md, sha);
        if (strcmp(sha, p->etag) != 0)
                return err_set(j->err, ERR_INVALID, EINVAL, "Part %u does not match its etag", p->number);
        j->size += copied;
        return 0;
}

static int fill_join(int fd, void *ud)
{
        struct join *j = ud;
        for (size_t i = 0; i < j->n; i++) {
                int r = join_one(j, i, fd);
                if (r < 0)
                        return r;
        }
        return 0;
}

int art_parts_join(const struct app *app, const char *org, const char *up, const struct art_part *parts,
                   size_t n, uint64_t min_part, uint64_t max_total, const char *id, char sha[ART_SHA_HEX],
                   uint64_t *ret_size, struct err *err)
{
        _cleanup_md_ EVP_MD_CTX *whole = md_new();
        _cleanup_close_ int pfd = open_dir(app, org, up, true);
        _cleanup_close_ int dfd = open_dir(app, org, NULL, true);
        if (!whole)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        if (pfd < 0 || dfd < 0 || !id_ok(id))
                return fail(err, pfd < 0 ? pfd : dfd < 0 ? dfd : -EINVAL, "join the parts");
        struct join j = { .parts_fd = pfd, .parts = parts, .n = n, .min_part = min_part, .max_total = max_total,
                          .whole = whole, .err = err };
        int r = files_replace_at(dfd, id, fill_join, &j);
        if (r < 0)
                return err->reason != ERR_OK ? r : fail(err, r, "join the parts");
        md_hex(whole, sha);
        *ret_size = j.size;
        return 0;
}

void art_parts_remove(const struct app *app, const char *org, const char *up)
{
        char path[PATH_MAX];
        if (dir_path(app, org, up, false, path) == 0)
                (void)rm_rf(path);
}

/* ---- start and stop ---- */

#define SWEEP_EVERY_NS (5ull * 1000000000ull)

static void sweep_loop(void *arg)
{
        struct app *app = arg;
        bg_thread_lock(&sweeper);
        while (bg_thread_running(&sweeper)) {
                bg_thread_unlock(&sweeper);
                art_sweep(app, true);
                bg_thread_lock(&sweeper);
                bg_thread_wait(&sweeper, now_ns() + SWEEP_EVERY_NS);
        }
        bg_thread_unlock(&sweeper);
}

static int mount_bucket(struct app *app)
{
        const struct config *c = app->cfg;
        char dir[PATH_MAX + 32];
        struct err err = {};
        const struct sbx_mount_spec spec = { .endpoint = c->ctl_artifact_s3_endpoint,
                                             .bucket = c->ctl_artifact_s3_bucket,
                                             .prefix = c->ctl_artifact_s3_prefix[0] ? c->ctl_artifact_s3_prefix
                                                                                    : NULL };
        snprintf(dir, sizeof(dir), "%s/artifacts-s3", c->data_dir);
        int r = sbx_host_mount(&spec, dir, &bucket, &err);
        if (r < 0) {
                log_error("msg=\"cannot mount the artifacts bucket\" bucket=\"%s\" error=\"%s\"",
                          c->ctl_artifact_s3_bucket, err.msg);
                err_done(&err);
                return r;
        }
        snprintf(bucket_root, sizeof(bucket_root), "%s", sbx_host_mount_dir(bucket));
        log_info("msg=\"artifacts in a bucket\" bucket=\"%s\" mount=\"%s\"", c->ctl_artifact_s3_bucket,
                 bucket_root);
        return 0;
}

int ctl_artifacts_start(struct app *app)
{
        int r = app->cfg->ctl_artifact_s3_bucket[0] ? mount_bucket(app) : 0;
        if (r == 0)
                r = bg_thread_init(&sweeper, NULL);
        if (r == 0)
                r = bg_thread_start(&sweeper, "artifact-sweep", 1, sweep_loop, app);
        if (r < 0)
                ctl_artifacts_stop(app);
        return r;
}

void ctl_artifacts_stop(struct app *app)
{
        (void)app;
        bg_thread_done(&sweeper);
        sbx_host_unmount(bucket);
        bucket = NULL;
        bucket_root[0] = '\0';
}
