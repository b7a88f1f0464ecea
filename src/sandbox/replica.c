/* The replica target and its files (sandbox/replica.h): where `<id>.tar`
 * and its manifest `<id>.json` live, and how they are written so that a
 * reader on another node never sees half of one. The scheduling (which
 * sandbox, when) is replica_sched.c. */
#include "sandbox/replica_internal.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/archive.h"
#include "sandbox/sandbox.h"

struct replica {
        char dir[PATH_MAX];
        struct sbx_host_mount *bucket; /* s3:// targets; NULL for dir: */
};

static int open_s3(const char *rest, const struct replica_options *o, struct replica *r, struct err *err)
{
        char bucket[256], prefix[1024] = "", mdir[PATH_MAX];
        const char *slash = strchr(rest, '/');
        size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
        if (blen == 0 || blen >= sizeof(bucket))
                return err_set(err, ERR_INVALID, EINVAL, "cluster.replica: no bucket in 's3://%s'", rest);
        snprintf(bucket, sizeof(bucket), "%.*s", (int)blen, rest);
        /* s3fs wants the prefix as "/a/b" without a trailing slash. */
        if (slash && slash[1])
                snprintf(prefix, sizeof(prefix), "%s", slash);
        size_t pl = strlen(prefix);
        while (pl > 1 && prefix[pl - 1] == '/')
                prefix[--pl] = '\0';
        if (!o || !o->data_dir || !o->s3_endpoint || !o->s3_endpoint[0])
                return err_set(err, ERR_INVALID, EINVAL, "cluster.replica: an s3:// target needs an endpoint");
        if (snprintf(mdir, sizeof(mdir), "%s/replica-s3", o->data_dir) >= (int)sizeof(mdir))
                return err_set(err, ERR_INVALID, ENAMETOOLONG, "cluster.replica: data dir too long");
        const struct sbx_mount_spec spec = { .endpoint = o->s3_endpoint, .bucket = bucket,
                                             .prefix = pl > 1 ? prefix : NULL };
        int k = sbx_host_mount(&spec, mdir, &r->bucket, err);
        if (k < 0)
                return k;
        snprintf(r->dir, sizeof(r->dir), "%s", sbx_host_mount_dir(r->bucket));
        return 0;
}

int replica_open(const char *target, const struct replica_options *o, struct replica **ret, struct err *err)
{
        _cleanup_free_ struct replica *r = calloc(1, sizeof(*r));
        if (!r)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        int k;
        if (strncmp(target, "dir:", 4) == 0) {
                const char *path = target + 4;
                if (path[0] != '/' || strlen(path) >= sizeof(r->dir))
                        return err_set(err, ERR_INVALID, EINVAL, "cluster.replica: '%s' is not an absolute path",
                                       path);
                snprintf(r->dir, sizeof(r->dir), "%s", path);
                if ((k = mkdir_p(r->dir, 0700)) < 0)
                        return err_set(err, ERR_FILESYSTEM, -k, "cluster.replica: cannot make '%s': %s", r->dir,
                                       strerror(-k));
        } else if (strncmp(target, "s3://", 5) == 0) {
                if ((k = open_s3(target + 5, o, r, err)) < 0)
                        return k;
        } else {
                return err_set(err, ERR_INVALID, EINVAL,
                               "cluster.replica: '%s' is neither dir:/path nor s3://bucket/prefix", target);
        }
        *ret = TAKE_PTR(r);
        return 0;
}

void replica_free(struct replica *r)
{
        if (!r)
                return;
        sbx_host_unmount(r->bucket);
        free(r);
}

const char *replica_dir(const struct replica *r)
{
        return r->dir;
}

static int path_of(const struct replica *r, const char *id, const char *suffix, char *out, size_t len)
{
        return snprintf(out, len, "%s/%s%s", r->dir, id, suffix) >= (int)len ? -ENAMETOOLONG : 0;
}

/* A hidden temp name beside the final one, unique per process and call
 * (two threads, or two nodes sharing the directory, never share one). */
static int temp_of(const struct replica *r, const char *id, const char *suffix, char *out, size_t len)
{
        static atomic_uint seq;
        return snprintf(out, len, "%s/.%s%s.%d.%u.tmp", r->dir, id, suffix, (int)getpid(),
                        atomic_fetch_add(&seq, 1)) >= (int)len
                       ? -ENAMETOOLONG
                       : 0;
}

/* The directory entry of a rename is durable only once the directory is. */
static int fsync_dir(const char *dir)
{
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fsync(fd) < 0)
                return -errno;
        return 0;
}

int replica_manifest_read(const struct replica *r, const char *id, struct replica_manifest *ret)
{
        char path[PATH_MAX];
        int k = path_of(r, id, ".json", path, sizeof(path));
        if (k < 0)
                return k;
        json_error_t je;
        json_t *j = json_load_file(path, 0, &je);
        if (!j)
                return access(path, F_OK) < 0 ? -ENOENT : -EBADMSG;
        const char *sum = json_string_value(json_object_get(j, "sha256"));
        *ret = (struct replica_manifest){
                .bytes = (uint64_t)json_integer_value(json_object_get(j, "bytes")),
                .generation = (uint64_t)json_integer_value(json_object_get(j, "generation")),
                .persisted_at = (uint64_t)json_integer_value(json_object_get(j, "persisted_at")),
        };
        snprintf(ret->sha256, sizeof(ret->sha256), "%s", sum ? sum : "");
        json_decref(j);
        return 0;
}

static int manifest_write(const struct replica *r, const char *id, const struct replica_manifest *mf)
{
        char tmp[PATH_MAX], path[PATH_MAX];
        int k = path_of(r, id, ".json", path, sizeof(path));
        if (k == 0)
                k = temp_of(r, id, ".json", tmp, sizeof(tmp));
        if (k < 0)
                return k;
        json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I}", "id", id, "sha256", mf->sha256, "bytes",
                              (json_int_t)mf->bytes, "generation", (json_int_t)mf->generation, "persisted_at",
                              (json_int_t)mf->persisted_at);
        if (!j)
                return -ENOMEM;
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                k = -errno;
        else if (json_dumpfd(j, fd, JSON_COMPACT | JSON_SORT_KEYS) < 0)
                k = -EIO;
        else if (fsync(fd) < 0 || rename(tmp, path) < 0)
                k = -errno;
        json_decref(j);
        if (k < 0 && fd >= 0)
                unlink(tmp);
        return k;
}

int replica_stage_open(const struct replica *r, const char *id, replica_writer_fn *fn, void *userdata,
                       struct replica_stage *ret, struct err *err)
{
        *ret = (struct replica_stage){ .fd = -1 };
        int k = temp_of(r, id, ".tar", ret->tmp, sizeof(ret->tmp));
        if (k < 0)
                return err_set(err, ERR_INVALID, -k, "Replica path too long");
        ret->fd = open(ret->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (ret->fd < 0)
                return err_set(err, ERR_FILESYSTEM, errno, "Cannot make the replica of '%s': %s", id,
                               strerror(errno));
        if ((k = fn(userdata, ret->fd, err)) < 0)
                replica_stage_drop(ret);
        return k;
}

void replica_stage_drop(struct replica_stage *st)
{
        if (st->fd < 0)
                return;
        close(st->fd);
        st->fd = -1;
        unlink(st->tmp);
}

/* Durable, hashed and measured; 0 or -errno with err filled. */
static int stage_seal(struct replica_stage *st, const char *id, struct replica_manifest *mf, struct err *err)
{
        struct stat sb;
        if (fsync(st->fd) < 0 || fstat(st->fd, &sb) < 0)
                return err_set(err, ERR_FILESYSTEM, errno, "Cannot write the replica of '%s': %s", id,
                               strerror(errno));
        int k = files_sha256_fd(st->fd, mf->sha256);
        if (k < 0)
                return err_set(err, ERR_FILESYSTEM, -k, "Cannot hash the replica of '%s'", id);
        mf->bytes = (uint64_t)sb.st_size;
        return 0;
}

int replica_stage_commit(const struct replica *r, const char *id, struct replica_stage *st,
                         struct replica_manifest *ret, struct err *err)
{
        char path[PATH_MAX];
        struct replica_manifest old = { 0 }, mf = { 0 };
        int k = path_of(r, id, ".tar", path, sizeof(path));
        if (k < 0)
                err_set(err, ERR_INVALID, -k, "Replica path too long");
        else
                k = stage_seal(st, id, &mf, err);
        bool have_old = k == 0 && replica_manifest_read(r, id, &old) == 0;
        if (k < 0 || (have_old && strcmp(old.sha256, mf.sha256) == 0 && access(path, F_OK) == 0)) {
                /* A failure, or nothing changed (a read, a write undone): no
                 * new generation. */
                replica_stage_drop(st);
                if (k == 0)
                        *ret = old;
                return k;
        }
        mf.generation = (have_old ? old.generation : 0) + 1;
        mf.persisted_at = wall_ms();
        /* Tar first, manifest second: a crash between leaves a whole tar
         * newer than its manifest, which a restore still takes (see
         * replica_read), never a manifest naming a missing tar. */
        if (rename(st->tmp, path) < 0) {
                k = -errno;
                replica_stage_drop(st);
                return err_set(err, ERR_FILESYSTEM, -k, "Cannot keep the replica of '%s': %s", id, strerror(-k));
        }
        close(st->fd);
        st->fd = -1;
        if ((k = manifest_write(r, id, &mf)) < 0 || (k = fsync_dir(r->dir)) < 0)
                return err_set(err, ERR_FILESYSTEM, -k, "Cannot keep the replica manifest of '%s': %s", id,
                               strerror(-k));
        *ret = mf;
        return 0;
}

int replica_write(const struct replica *r, const char *id, replica_writer_fn *fn, void *userdata,
                  struct replica_manifest *ret, struct err *err)
{
        struct replica_stage st;
        int k = replica_stage_open(r, id, fn, userdata, &st, err);
        return k < 0 ? k : replica_stage_commit(r, id, &st, ret, err);
}

int replica_read(const struct replica *r, const char *id, int *ret_fd, struct err *err)
{
        char path[PATH_MAX];
        if (path_of(r, id, ".tar", path, sizeof(path)) < 0)
                return err_set(err, ERR_NOT_FOUND, ENOENT, "No replica of '%s'", id);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return err_set(err, errno == ENOENT ? ERR_NOT_FOUND : ERR_FILESYSTEM, errno,
                               "No replica of '%s': %s", id, strerror(errno));
        struct replica_manifest mf;
        char sum[65];
        int k = files_sha256_fd(fd, sum);
        if (k < 0)
                return err_set(err, ERR_FILESYSTEM, -k, "Cannot read the replica of '%s'", id);
        /* The tar is always whole (renamed into place); a manifest that
         * disagrees is either older (the writer died between its two
         * renames: the tar is the newer truth) or names a corrupted copy.
         * Only a manifest written after this tar could tell the two
         * apart, so the mismatch is logged and the tar used. */
        if (replica_manifest_read(r, id, &mf) == 0 && strcmp(mf.sha256, sum) != 0)
                log_warn("msg=\"replica checksum differs from its manifest\" sandbox=%s generation=%llu", id,
                         (unsigned long long)mf.generation);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

void replica_delete(const struct replica *r, const char *id)
{
        char path[PATH_MAX];
        if (path_of(r, id, ".tar", path, sizeof(path)) == 0)
                unlink(path);
        if (path_of(r, id, ".json", path, sizeof(path)) == 0)
                unlink(path);
}
