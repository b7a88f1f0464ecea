/* Checkpoints (checkpoint.h): the tar files in the data dir and their
 * store rows, kept in step (a file without a row is removed before the
 * call returns; a row is made only after its file is complete). */
#include "sandbox/checkpoint.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/internal.h"

/* Creates are serialised so that an org's caps hold: two creates may not
 * both see room for one more. A create costs one workspace walk. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

void sbx_mgr_set_checkpoint_events(struct sandbox_mgr *m, sbx_checkpoint_event_fn fn, void *userdata)
{
        m->checkpoint_event = fn;
        m->checkpoint_event_userdata = userdata;
}

static void emit(struct sandbox_mgr *m, const char *event, const struct checkpoint_row *row, const char *sandbox_id)
{
        if (m->checkpoint_event)
                m->checkpoint_event(m->checkpoint_event_userdata, event, row, sandbox_id);
}

static int path_of(struct sandbox_mgr *m, const char *org_id, const char *id, const char *suffix, char *out,
                   size_t len)
{
        /* org ids become a directory name: only the sandbox id alphabet. */
        if (!sbx_id_valid(org_id))
                return -EINVAL;
        int n = snprintf(out, len, "%s/checkpoints/%s%s%s%s", m->opt.data_dir, org_id, id ? "/" : "", id ? id : "",
                         suffix);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int new_id(char out[STORE_ID_MAX])
{
        unsigned char b[12];
        if (getrandom(b, sizeof(b), 0) != sizeof(b))
                return -EIO;
        size_t n = (size_t)snprintf(out, STORE_ID_MAX, SBX_CHECKPOINT_ID_PREFIX);
        for (size_t i = 0; i < sizeof(b); i++)
                n += (size_t)snprintf(out + n, 3, "%02x", b[i]);
        return 0;
}

/* "sha256:<hex>" of fd's bytes (streamed). */
static int checksum_fd(int fd, char out[72])
{
        memcpy(out, "sha256:", 7);
        return files_sha256_fd(fd, out + 7);
}

static int fail_errno(struct err *err, int r, const char *what)
{
        err_set(err, ERR_INTERNAL, -r, "Cannot %s: %s", what, strerror(-r));
        err->op = "checkpoint";
        return r;
}

static int quota(struct err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int quota(struct err *err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        err_setv(err, ERR_TOO_LARGE, EDQUOT, fmt, ap);
        va_end(ap);
        err->op = SBX_CHECKPOINT_OP_QUOTA;
        return -EDQUOT;
}

static json_t *patterns_json(const char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *meta_new(const struct sbx_checkpoint_spec *spec, json_t *env)
{
        json_t *meta = json_pack("{s:o, s:o}", "include_paths", patterns_json(spec->filter.include, spec->filter.ninclude),
                                 "exclude_paths", patterns_json(spec->filter.exclude, spec->filter.nexclude));
        if (meta && env)
                json_object_set(meta, "env", env);
        return meta;
}

/* The contexts' side file <id>.contexts.json (0600); its count and
 * SHA-256 go into meta. */
static int write_contexts(struct sandbox_mgr *m, const char *org_id, const char *id, json_t *ctxs, json_t *meta,
                          struct err *err)
{
        char path[4400], sum[72];
        int r = path_of(m, org_id, id, ".contexts.json", path, sizeof(path));
        if (r < 0)
                return fail_errno(err, r, "keep the code contexts");
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return fail_errno(err, -errno, "keep the code contexts");
        if (json_dumpfd(ctxs, fd, JSON_COMPACT) < 0 || fsync(fd) < 0 || (r = checksum_fd(fd, sum)) < 0) {
                unlink(path);
                return fail_errno(err, r < 0 ? r : -EIO, "keep the code contexts");
        }
        json_object_set_new(meta, "contexts", json_integer((json_int_t)json_array_size(ctxs)));
        json_object_set_new(meta, "contexts_sha256", json_string(sum));
        return 0;
}

static void unlink_files(struct sandbox_mgr *m, const char *org_id, const char *id)
{
        char path[4400];
        if (path_of(m, org_id, id, ".tar", path, sizeof(path)) == 0)
                unlink(path);
        if (path_of(m, org_id, id, ".contexts.json", path, sizeof(path)) == 0)
                unlink(path);
}

/* The tar of the sandbox's scope into fd; *ret_files its regular files. */
static int write_tar(struct sandbox_mgr *m, const struct sbx_checkpoint_spec *spec, int fd, uint64_t *ret_files,
                     struct err *err)
{
        struct sbx_workspace ws;
        int r = sbx_workspace_acquire_org(m, spec->org_id, spec->sandbox_id, &ws, err);
        if (r < 0)
                return r;
        struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
        r = files_persist_filtered(&root, &spec->filter, fd, ret_files, err);
        sbx_workspace_release(m, &ws);
        if (r == 0 && fsync(fd) < 0)
                r = fail_errno(err, -errno, "write the checkpoint");
        return r;
}

/* The file part of a create, under create_lock: row filled but for the
 * text fields, the tar at its final path. */
static int create_file(struct sandbox_mgr *m, const struct sbx_checkpoint_spec *spec, struct checkpoint_row *row,
                       struct err *err)
{
        uint64_t count = 0, bytes = 0;
        char dir[4200], part[4400], final[4400];
        int r = store_checkpoint_usage(m->store, spec->org_id, &count, &bytes);
        if (r < 0)
                return fail_errno(err, r, "read the org's checkpoints");
        if (spec->max_count && count >= spec->max_count)
                return quota(err, "Checkpoint quota exceeded: the organization keeps %llu of %llu checkpoints",
                             (unsigned long long)count, (unsigned long long)spec->max_count);
        if ((r = new_id(row->id)) < 0 || (r = path_of(m, spec->org_id, NULL, "", dir, sizeof(dir))) < 0 ||
            (r = path_of(m, spec->org_id, row->id, ".tar.part", part, sizeof(part))) < 0 ||
            (r = path_of(m, spec->org_id, row->id, ".tar", final, sizeof(final))) < 0 || (r = mkdir_p(dir, 0700)) < 0)
                return fail_errno(err, r, "make the checkpoint file");
        _cleanup_close_ int fd = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return fail_errno(err, -errno, "make the checkpoint file");
        struct stat st;
        r = write_tar(m, spec, fd, &row->file_count, err);
        if (r == 0 && fstat(fd, &st) < 0)
                r = fail_errno(err, -errno, "measure the checkpoint");
        if (r == 0 && spec->max_bytes && bytes + (uint64_t)st.st_size > spec->max_bytes)
                r = quota(err, "Checkpoint quota exceeded: %llu bytes would take the organization past %llu bytes",
                          (unsigned long long)st.st_size, (unsigned long long)spec->max_bytes);
        if (r == 0 && (r = checksum_fd(fd, row->checksum)) < 0)
                r = fail_errno(err, r, "hash the checkpoint");
        if (r == 0 && rename(part, final) < 0)
                r = fail_errno(err, -errno, "keep the checkpoint");
        if (r < 0) {
                unlink(part);
                return r;
        }
        row->size_bytes = (uint64_t)st.st_size;
        return 0;
}

/* The files, then the row (under create_lock). */
static int create_locked(struct sandbox_mgr *m, const struct sbx_checkpoint_spec *spec, json_t *meta, json_t *ctxs,
                         struct checkpoint_row *row, struct err *err)
{
        int r = create_file(m, spec, row, err);
        if (r < 0)
                return r;
        if (ctxs)
                r = write_contexts(m, spec->org_id, row->id, ctxs, meta, err);
        if (r == 0 && !(row->meta_json = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS)))
                r = fail_errno(err, -ENOMEM, "take a checkpoint");
        if (r == 0 && (r = store_checkpoint_create(m->store, row)) < 0)
                fail_errno(err, r, "store the checkpoint");
        if (r < 0)
                unlink_files(m, spec->org_id, row->id);
        return r;
}

int sbx_checkpoint_create(struct sandbox_mgr *m, const struct sbx_checkpoint_spec *spec, struct checkpoint_row *ret,
                          struct err *err)
{
        struct sbx_info info;
        int r = sbx_find(m, spec->org_id, spec->sandbox_id, &info, err);
        if (r < 0)
                return r;
        _cleanup_(json_decrefp) json_t *meta = meta_new(spec, spec->include_env ? info.env : NULL), *ctxs = NULL;
        sbx_info_done(&info);
        if (spec->include_contexts && (r = sbx_contexts_export(m, spec->org_id, spec->sandbox_id, &ctxs, err)) < 0)
                return r;
        struct checkpoint_row row = { .created_at = wall_ms() };
        snprintf(row.org_id, sizeof(row.org_id), "%s", spec->org_id);
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", spec->sandbox_id);
        row.name = strdup(spec->name);
        row.description = strdup(spec->description ? spec->description : "");
        if (!row.name || !row.description || !meta) {
                checkpoint_row_done(&row);
                return fail_errno(err, -ENOMEM, "take a checkpoint");
        }
        pthread_mutex_lock(&create_lock);
        r = create_locked(m, spec, meta, ctxs, &row, err);
        pthread_mutex_unlock(&create_lock);
        if (r < 0) {
                checkpoint_row_done(&row);
                return r;
        }
        emit(m, "checkpoint.created", &row, row.sandbox_id);
        *ret = row;
        return 0;
}

static int not_found(struct err *err, const char *id)
{
        err_set(err, ERR_NOT_FOUND, ENOENT, "Checkpoint not found: %.64s", id);
        err->op = "checkpoint";
        return -ENOENT;
}

int sbx_checkpoint_get(struct sandbox_mgr *m, const char *org_id, const char *id, struct checkpoint_row *ret,
                       struct err *err)
{
        int r = store_checkpoint_get(m->store, org_id, id, ret);
        if (r == -ENOENT || r == -ENAMETOOLONG || r == -EINVAL)
                return not_found(err, id);
        return r < 0 ? fail_errno(err, r, "read the checkpoint") : 0;
}

int sbx_checkpoint_list(struct sandbox_mgr *m, const char *org_id, const char *sandbox_id, uint64_t limit,
                        uint64_t offset, void (*fn)(const struct checkpoint_row *row, void *userdata), void *userdata,
                        uint64_t *ret_total, struct err *err)
{
        int r = store_checkpoint_each(m->store, org_id, sandbox_id, limit, offset, fn, userdata, ret_total);
        return r < 0 ? fail_errno(err, r, "list checkpoints") : 0;
}

int sbx_checkpoint_delete(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err)
{
        int r = store_checkpoint_delete(m->store, org_id, id);
        if (r == -ENOENT || r == -ENAMETOOLONG || r == -EINVAL)
                return not_found(err, id);
        if (r < 0)
                return fail_errno(err, r, "delete the checkpoint");
        unlink_files(m, org_id, id);
        return 0;
}

/* ---- reading a checkpoint back ---- */

struct opened {
        struct checkpoint_row row;
        json_t *meta;
        int fd;
        const char **pats;           /* include then exclude, borrowed from meta */
        struct files_filter filter;
};

static void opened_done(struct opened *o)
{
        checkpoint_row_done(&o->row);
        json_decref(o->meta);
        free(o->pats);
        if (o->fd >= 0)
                close(o->fd);
}

static size_t take_patterns(json_t *arr, const char **out)
{
        size_t i, n = 0;
        json_t *v;
        json_array_foreach(arr, i, v) if (json_is_string(v)) out[n++] = json_string_value(v);
        return n;
}

/* org_id's checkpoint id with its meta parsed and its tar open. */
static int open_checkpoint(struct sandbox_mgr *m, const char *org_id, const char *id, struct opened *o,
                           struct err *err)
{
        char path[4400];
        *o = (struct opened){ .fd = -1 };
        int r = sbx_checkpoint_get(m, org_id, id, &o->row, err);
        if (r < 0)
                return r;
        o->meta = json_loads(o->row.meta_json, 0, NULL);
        json_t *inc = json_object_get(o->meta, "include_paths"), *exc = json_object_get(o->meta, "exclude_paths");
        o->pats = calloc(json_array_size(inc) + json_array_size(exc) + 1, sizeof(*o->pats));
        if (!o->meta || !o->pats)
                return fail_errno(err, -ENOMEM, "read the checkpoint");
        o->filter.include = o->pats;
        o->filter.ninclude = take_patterns(inc, o->pats);
        o->filter.exclude = o->pats + o->filter.ninclude;
        o->filter.nexclude = take_patterns(exc, o->pats + o->filter.ninclude);
        if ((r = path_of(m, org_id, o->row.id, ".tar", path, sizeof(path))) < 0)
                return fail_errno(err, r, "open the checkpoint");
        o->fd = open(path, O_RDONLY | O_CLOEXEC);
        return o->fd < 0 ? fail_errno(err, -errno, "open the checkpoint's archive") : 0;
}

int sbx_checkpoint_entries(struct sandbox_mgr *m, const char *org_id, const char *id,
                           int (*fn)(void *userdata, const struct files_tar_entry *e), void *userdata,
                           struct err *err)
{
        _cleanup_(opened_done) struct opened o;
        int r = open_checkpoint(m, org_id, id, &o, err);
        return r < 0 ? r : files_tar_each(o.fd, fn, userdata, err);
}

/* The env patch that makes a sandbox's env exactly want. */
static json_t *env_patch(struct sandbox_mgr *m, const char *org_id, const char *target, json_t *want,
                         struct err *err)
{
        struct sbx_info info;
        if (sbx_find(m, org_id, target, &info, err) < 0)
                return NULL;
        json_t *patch = json_deep_copy(want);
        const char *k;
        json_t *v;
        json_object_foreach(info.env, k, v) if (!json_object_get(want, k)) json_object_set_new(patch, k, json_null());
        sbx_info_done(&info);
        return patch;
}

static int restore_files(struct sandbox_mgr *m, const char *org_id, const char *target, struct opened *o,
                         struct err *err)
{
        struct stat st;
        char sum[72];
        int r = fstat(o->fd, &st) < 0 ? -errno : checksum_fd(o->fd, sum);
        if (r < 0)
                return fail_errno(err, r, "read the checkpoint's archive");
        if (strcmp(sum, o->row.checksum) != 0 || !st.st_size)
                return fail_errno(err, -EBADMSG, "restore a checkpoint whose archive does not match its checksum");
        void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, o->fd, 0);
        if (data == MAP_FAILED)
                return fail_errno(err, -errno, "map the checkpoint's archive");
        struct sbx_workspace ws;
        r = sbx_workspace_acquire_org(m, org_id, target, &ws, err);
        if (r == 0) {
                struct files_root root = { .fd = ws.root_fd, .limits = ws.limits, .uid = ws.uid, .gid = ws.gid };
                r = files_restore(&root, &o->filter, data, (size_t)st.st_size, err);
                sbx_workspace_release(m, &ws);
        }
        munmap(data, (size_t)st.st_size);
        return r;
}

/* The saved contexts, checked against their SHA-256 (*ret NULL when the
 * checkpoint has none). */
static int load_contexts(struct sandbox_mgr *m, const char *org_id, struct opened *o, json_t **ret,
                         struct err *err)
{
        char path[4400], sum[72];
        *ret = NULL;
        if (!json_object_get(o->meta, "contexts"))
                return 0;
        int r = path_of(m, org_id, o->row.id, ".contexts.json", path, sizeof(path));
        _cleanup_close_ int fd = r < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || (r = checksum_fd(fd, sum)) < 0)
                return fail_errno(err, r < 0 ? r : -errno, "read the checkpoint's code contexts");
        if (strcmp(sum, json_string_value(json_object_get(o->meta, "contexts_sha256")) ?: "") != 0)
                return fail_errno(err, -EBADMSG, "restore code contexts that do not match their checksum");
        json_t *ctxs = json_loadfd(fd, 0, NULL);
        if (!json_is_array(ctxs)) {
                json_decref(ctxs);
                return fail_errno(err, -EBADMSG, "read the checkpoint's code contexts");
        }
        *ret = ctxs;
        return 0;
}

int sbx_checkpoint_restore(struct sandbox_mgr *m, const char *org_id, const char *id, const char *target,
                           bool with_env, struct err *err)
{
        _cleanup_(opened_done) struct opened o;
        _cleanup_(json_decrefp) json_t *ctxs = NULL;
        int r = open_checkpoint(m, org_id, id, &o, err);
        if (r == 0)
                r = load_contexts(m, org_id, &o, &ctxs, err);
        if (r == 0)
                r = restore_files(m, org_id, target, &o, err);
        json_t *env = json_object_get(o.meta, "env");
        if (r == 0 && with_env && json_is_object(env)) {
                _cleanup_(json_decrefp) json_t *patch = env_patch(m, org_id, target, env, err);
                r = patch ? sbx_set_env_org(m, org_id, target, patch, err) : err_ret(err);
        }
        /* Saved contexts replace the target's: with their ids when restored
         * into the sandbox they came from (REPL session ids stay valid). */
        if (r == 0 && ctxs)
                r = sbx_contexts_import(m, org_id, target, ctxs, !strcmp(target, o.row.sandbox_id), err);
        if (r == 0)
                emit(m, "checkpoint.restored", &o.row, target);
        return r;
}
