/* A sandbox's bucket mounts: validation of what a client asks for, the
 * credential lookup, the registry of live mounts and the view of them each
 * new jail of the sandbox gets (jail_spec.binds). s3fs itself is s3fs.c.
 *
 * The client picks the endpoint: the host's s3fs connects wherever the API
 * key holder says (docs/security.md). What reaches s3fs's command line is
 * checked here: the bucket, endpoint and prefix by shape, the client's own
 * s3fs options against an allowlist (no option naming a host file, a
 * command, an owner or the URL). */
#include <ctype.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox/internal.h"

_Static_assert(SBX_MOUNT_MAX <= JAIL_MAX_BINDS, "every mount must fit in a jail");

struct bucket_mount {
        char path[SBX_MOUNT_PATH_MAX]; /* in the jail, normalised */
        bool readonly;
        struct s3fs_proc proc;
        struct bucket_mount *next;
};

/* ---- validation ---- */

int sbx_mount_path_normalize(const char *in, char *out, size_t len)
{
        if (!in || in[0] != '/' || len < 2)
                return -EINVAL;
        size_t n = 0;
        for (const char *p = in; *p;) {
                while (*p == '/')
                        p++;
                size_t c = strcspn(p, "/");
                if (c == 0)
                        break;
                if (c >= 256)
                        return -EINVAL;
                if (c == 1 && p[0] == '.') {
                        /* nothing */
                } else if (c == 2 && p[0] == '.' && p[1] == '.') {
                        while (n > 0 && out[--n] != '/')
                                ;
                } else {
                        if (n + 1 + c + 1 > len)
                                return -EINVAL;
                        out[n++] = '/';
                        memcpy(out + n, p, c);
                        n += c;
                }
                p += c;
        }
        if (n == 0)
                out[n++] = '/';
        out[n] = '\0';
        return 0;
}

/* The jail's own directories (and the usual system ones): a mount there
 * would hide what every runtime needs, and the root above the workspace is
 * read-only in the jail. */
static const char *const system_dirs[] = { "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32",
                                           "opt", "proc", "root", "run", "sbin", "srv", "sys", "tmp", "usr", "var" };

/* Below /workspace (on the sandbox's files), or a directory of its own
 * made at the root (e.g. /mnt/data, /data). */
static int check_place(const char *path, struct err *err)
{
        static const char ws[] = JAIL_WORKSPACE "/";
        if (strcmp(path, "/") == 0)
                return err_set(err, ERR_INVALID, 0, "mountPath must not be /");
        if (strcmp(path, JAIL_WORKSPACE) == 0)
                return err_set(err, ERR_INVALID, 0, "mountPath must be below /workspace, not /workspace itself");
        if (strncmp(path, ws, sizeof(ws) - 1) == 0)
                return 0;
        size_t n = strcspn(path + 1, "/");
        bool bad = path[1] == '.';
        for (size_t i = 0; !bad && i < ARRAY_SIZE(system_dirs); i++)
                bad = strlen(system_dirs[i]) == n && strncmp(path + 1, system_dirs[i], n) == 0;
        if (bad)
                return err_set(err, ERR_INVALID, 0,
                               "mountPath must be below /workspace or in a directory of its own such as /mnt "
                               "(not /%.*s)",
                               (int)n, path + 1);
        return 0;
}

/* ^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$ */
static bool bucket_valid(const char *b)
{
        size_t n = strlen(b);
        if (n == 0 || n > 63 || strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") != n)
                return false;
        return isalnum((unsigned char)b[0]) && isalnum((unsigned char)b[n - 1]);
}

/* Printable ASCII without the characters that would split or quote an
 * s3fs -o list (',', '\\', quotes) or a passwd file line (':'). */
static bool plain_text(const char *s, const char *also_bad, size_t max)
{
        size_t n = 0;
        for (; s[n]; n++)
                if ((unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f || strchr(",\\\"'", s[n]) ||
                    strchr(also_bad, s[n]))
                        return false;
        return n > 0 && n <= max;
}

/* The host of an http(s) URL, lower-cased, into host. */
static int endpoint_host(const char *url, char *host, size_t len)
{
        const char *p = strncmp(url, "https://", 8) == 0 ? url + 8 : strncmp(url, "http://", 7) == 0 ? url + 7 : NULL;
        if (!p || !plain_text(url, "", 2048))
                return -EINVAL;
        size_t n = p[0] == '[' ? strcspn(p, "]") + 1 : strcspn(p, ":/?#");
        if (n == 0 || n >= len || strchr(p, '@'))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                host[i] = (char)tolower((unsigned char)p[i]);
        host[n] = '\0';
        return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The anchor's provider detection: R2 cannot mix multipart uploads,
 * AWS and GCS take virtual-host requests, anything else gets path-style
 * requests (MinIO, s3rver, Ceph…). */
static const char *provider_opt(const char *host)
{
        if (ends_with(host, ".r2.cloudflarestorage.com"))
                return "nomixupload";
        if (ends_with(host, ".amazonaws.com") || strcmp(host, "storage.googleapis.com") == 0)
                return "";
        return "use_path_request_style";
}

/* s3fs options a client may add: tuning and S3 dialect only. Left out on
 * purpose: everything naming a host file or command (passwd_file, logfile,
 * use_cache, tmpdir, credlib, ahbe_conf, mime, use_sse=…:file, ssl client
 * keys), the identity and reach of the mount (url, host, allow_other,
 * uid, gid, umask, mp_umask, dev, suid, nonempty, default_permissions),
 * and credentials from the host (iam_role, ecs, ibm_iam_*). */
static const char *const flag_opts[] = {
        "nomultipart", "nomixupload", "use_path_request_style", "sigv2", "sigv4", "enable_noobj_cache",
        "disable_noobj_cache", "enable_content_md5", "enable_unsigned_payload", "notsup_compat_dir", "compat_dir",
        "complement_stat", "nocopyapi", "norenameapi", "noxmlns", "no_check_certificate", "kernel_cache",
        "requester_pays", "listobjectsv2", "no_time_stamp_msg",
};
static const char *const value_opts[] = {
        "retries", "connect_timeout", "readwrite_timeout", "multipart_size", "multipart_copy_size",
        "parallel_count", "multireq_max", "max_dirty_data", "singlepart_copy_limit", "max_stat_cache_size",
        "stat_cache_expire", "stat_cache_interval_expire", "list_object_max_keys", "max_background",
        "endpoint", "storage_class", "ssl_verify_hostname", "public_bucket",
};

static bool in_list(const char *const *list, size_t n, const char *name, size_t len)
{
        for (size_t i = 0; i < n; i++)
                if (strlen(list[i]) == len && strncmp(list[i], name, len) == 0)
                        return true;
        return false;
}

static bool option_allowed(const char *opt)
{
        const char *eq = strchr(opt, '=');
        if (!eq)
                return in_list(flag_opts, ARRAY_SIZE(flag_opts), opt, strlen(opt));
        size_t vlen = strlen(eq + 1);
        return in_list(value_opts, ARRAY_SIZE(value_opts), opt, (size_t)(eq - opt)) && vlen > 0 && vlen <= 64 &&
               strspn(eq + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == vlen;
}

/* The bucket, its endpoint (its host into host), prefix and credentials
 * pair: what every mount checks, a sandbox's or the daemon's own. */
static int validate_bucket(const struct sbx_mount_spec *spec, char *host, size_t host_len, struct err *err)
{
        if (!spec->bucket || !bucket_valid(spec->bucket))
                return err_set(err, ERR_INVALID, 0, "Invalid bucket name: must match ^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$");
        if (!spec->endpoint || endpoint_host(spec->endpoint, host, host_len) < 0)
                return err_set(err, ERR_INVALID, 0, "endpoint must be an http:// or https:// URL without ',', "
                                                    "quotes, spaces or user info");
        if (spec->prefix && (spec->prefix[0] != '/' || !plain_text(spec->prefix, "", 1024) || strstr(spec->prefix, "/..")))
                return err_set(err, ERR_INVALID, 0, "prefix must start with / (printable, no ',' or '..', 1024 bytes at most)");
        if (!spec->access_key_id != !spec->secret_access_key)
                return err_set(err, ERR_INVALID, 0, "credentials need both accessKeyId and secretAccessKey");
        return 0;
}

static int validate(const struct sbx_mount_spec *spec, char *path, char *host, size_t host_len, struct err *err)
{
        if (sbx_mount_path_normalize(spec->path, path, SBX_MOUNT_PATH_MAX) < 0)
                return err_set(err, ERR_INVALID, 0, "mountPath must be an absolute path (components under 256 bytes, "
                                                    "%d bytes at most)", SBX_MOUNT_PATH_MAX - 1);
        int r = check_place(path, err);
        if (r == 0)
                r = validate_bucket(spec, host, host_len, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < spec->noptions; i++)
                if (!option_allowed(spec->options[i]))
                        return err_set(err, ERR_INVALID, 0, "s3fs option not allowed: %.100s (see docs/bridge/mount.md)",
                                       spec->options[i]);
        return 0;
}

/* ---- credentials ---- */

struct creds {
        char key_id[256], secret[512];
};

static bool creds_set(struct creds *c, const char *key_id, const char *secret)
{
        if (!key_id || !secret || !*key_id || !*secret)
                return false;
        snprintf(c->key_id, sizeof(c->key_id), "%s", key_id);
        snprintf(c->secret, sizeof(c->secret), "%s", secret);
        return true;
}

static const char *env_get(json_t *env, const char *key)
{
        return json_string_value(json_object_get(env, key));
}

/* Explicit, then AWS_*, then R2_* (the anchor checks AWS first), each
 * from the daemon's environment, then from env (the sandbox's; may be
 * NULL). Caller holds the sandbox's lock. */
static int creds_lookup(json_t *env, const struct sbx_mount_spec *spec, struct creds *c, struct err *err)
{
        static const char *const pairs[][2] = { { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY" },
                                                { "R2_ACCESS_KEY_ID", "R2_SECRET_ACCESS_KEY" } };
        bool found = creds_set(c, spec->access_key_id, spec->secret_access_key);
        for (size_t i = 0; !found && i < ARRAY_SIZE(pairs); i++)
                found = creds_set(c, getenv(pairs[i][0]), getenv(pairs[i][1])) ||
                        creds_set(c, env_get(env, pairs[i][0]), env_get(env, pairs[i][1]));
        if (!found)
                return err_set(err, ERR_INVALID, 0, "No credentials: give options.credentials or set "
                                                    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                                                    "R2_ACCESS_KEY_ID/R2_SECRET_ACCESS_KEY");
        /* s3fs's passwd file is key:secret on one line. */
        if (!plain_text(c->key_id, ":", sizeof(c->key_id) - 1) || !plain_text(c->secret, ":", sizeof(c->secret) - 1))
                return err_set(err, ERR_INVALID, 0, "Credentials must be printable ASCII without ':' or ','");
        return 0;
}

/* ---- jails already running ---- */

/* Drops the pidfds of jails that have ended (readable pidfd). */
static void jails_prune(struct sandbox *s)
{
        size_t k = 0;
        for (size_t i = 0; i < s->njails; i++) {
                struct pollfd pf = { s->jails[i], POLLIN, 0 };
                if (poll(&pf, 1, 0) == 0)
                        s->jails[k++] = s->jails[i];
                else
                        close(s->jails[i]);
        }
        s->njails = k;
}

void sandbox_jail_started(struct sandbox *s, int pidfd)
{
        if (pidfd < 0)
                return;
        jails_prune(s);
        if (s->njails == s->jails_cap) {
                size_t cap = s->jails_cap ? 2 * s->jails_cap : 8;
                int *n = realloc(s->jails, cap * sizeof(*n));
                if (!n)
                        return; /* that jail only sees mounts made before it */
                s->jails = n;
                s->jails_cap = cap;
        }
        int fd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
        if (fd >= 0)
                s->jails[s->njails++] = fd;
}

void sandbox_jails_kill(struct sandbox *s)
{
        /* SIGKILL to a jail's init ends its whole pid namespace. */
        for (size_t i = 0; i < s->njails; i++)
                syscall(SYS_pidfd_send_signal, s->jails[i], SIGKILL, NULL, 0);
}

void sandbox_jails_forget(struct sandbox *s)
{
        for (size_t i = 0; i < s->njails; i++)
                close(s->jails[i]);
        free(s->jails);
        s->jails = NULL;
        s->njails = s->jails_cap = 0;
}

/* A new mount goes into the sandbox's running jails as well (sessions,
 * terminals, interpreters started before it), as in a container where a
 * mount is seen by every process. Best effort: a jail that has just ended,
 * or a mount point outside /workspace whose directory its read-only root
 * lacks, keeps its view. Caller holds s->lock. */
static void attach_running(struct sandbox *s, const struct bucket_mount *bm, unsigned owner)
{
        jails_prune(s);
        for (size_t i = 0; i < s->njails; i++) {
                int tree = jail_bind_tree(bm->proc.root_fd, bm->readonly);
                int r = tree < 0 ? tree : jail_attach_bind(s->jails[i], tree, bm->path, owner);
                if (tree >= 0)
                        close(tree);
                if (r < 0)
                        log_debug("msg=\"mount not attached in a running jail\" sandbox=%s path='%s' err=\"%s\"",
                                  s->row.id, bm->path, strerror(-r));
        }
}

/* ---- the registry ---- */

static bool overlaps(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
        return strncmp(a, b, n) == 0 && (la == lb || (la < lb ? b[la] : a[lb]) == '/');
}

/* Caller holds s->lock. */
static int check_free(const struct sandbox *s, const char *path, struct err *err)
{
        size_t n = 0;
        for (const struct bucket_mount *bm = s->mounts; bm; bm = bm->next, n++)
                if (overlaps(bm->path, path))
                        return err_set(err, ERR_EXISTS, EBUSY, "A mount already exists at %s", bm->path);
        if (n >= SBX_MOUNT_MAX)
                return err_set(err, ERR_LIMIT, EMFILE, "At most %d mounts per sandbox", SBX_MOUNT_MAX);
        return 0;
}

/* <data>/s3/<sandbox>/<n>: private (the data dir is the daemon's only). */
static int make_dir(struct sandbox_mgr *m, struct sandbox *s, char *dir, size_t len, struct err *err)
{
        char real[4096];
        if (!realpath(m->opt.data_dir, real))
                return err_set(err, ERR_INTERNAL, errno, "Cannot resolve the data dir: %s", strerror(errno));
        for (int tries = 0; tries < 100; tries++) {
                int n = snprintf(dir, len, "%s/s3/%s/%u", real, s->row.id, s->mount_seq++);
                if (n < 0 || (size_t)n >= len)
                        return err_set(err, ERR_INTERNAL, ENAMETOOLONG, "The data dir's path is too long");
                char *slash = strrchr(dir, '/');
                *slash = '\0';
                int r = mkdir_p(dir, 0700);
                *slash = '/';
                if (r < 0)
                        return err_set(err, ERR_INTERNAL, -r, "Cannot make the mount's directory: %s", strerror(-r));
                if (mkdir(dir, 0700) == 0)
                        return 0;
                /* ENOENT: the sandbox's directory went with its last mount
                 * (a delete meanwhile); make it again. */
                if (errno != EEXIST && errno != ENOENT)
                        return err_set(err, ERR_INTERNAL, errno, "Cannot make the mount's directory: %s", strerror(errno));
        }
        return err_set(err, ERR_INTERNAL, EEXIST, "Cannot make the mount's directory");
}

/* Who owns the guest's files on the host: the sandbox's host id, or the
 * jail user's without an id range. */
static unsigned guest_id(const struct sandbox *s)
{
        return s->row.host_id ? s->row.host_id : JAIL_UID;
}

/* A mount point below /workspace is made now, as the anchor's mkdir -p
 * does (owned by the guest), so a file or a symlink in the way is an
 * error of this request rather than of every later jail. Caller holds
 * s->lock. */
static int make_mount_point(struct sandbox_mgr *m, struct sandbox *s, const char *path, struct err *err)
{
        static const char ws[] = JAIL_WORKSPACE "/";
        if (strncmp(path, ws, sizeof(ws) - 1) != 0)
                return 0;
        int r = sandbox_open_workspace(m, s, err);
        if (r < 0)
                return r;
        _cleanup_close_ int root = open(s->ws.mount, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int fd = root < 0 ? -1 : jail_open_mount_point(root, path + sizeof(ws) - 1, guest_id(s));
        if (fd < 0)
                return err_set(err, ERR_EXISTS, errno, "%s cannot be a mount point (%s): it must be a directory, "
                               "reached without symlinks", path, strerror(errno));
        return 0;
}

/* Everything that needs s->lock before s3fs runs without it. */
static int prepare(struct sandbox_mgr *m, struct sandbox *s, const struct sbx_mount_spec *spec, const char *path,
                   struct creds *c, struct bucket_mount *bm, struct err *err)
{
        int r = check_free(s, path, err);
        if (r == 0)
                r = creds_lookup(s->env, spec, c, err);
        if (r == 0)
                r = make_mount_point(m, s, path, err);
        if (r == 0)
                r = make_dir(m, s, bm->proc.dir, sizeof(bm->proc.dir), err);
        snprintf(bm->path, sizeof(bm->path), "%s", path);
        bm->readonly = spec->readonly;
        return r;
}

static int mount_serialised(struct sandbox_mgr *m, struct sandbox *s, const struct sbx_mount_spec *spec,
                            const char *path, const char *host, struct err *err)
{
        struct creds c = { 0 };
        struct bucket_mount *bm = calloc(1, sizeof(*bm));
        if (!bm)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        bm->proc.pid = bm->proc.root_fd = -1;
        pthread_mutex_lock(&s->lock);
        unsigned owner = guest_id(s);
        int r = prepare(m, s, spec, path, &c, bm, err);
        pthread_mutex_unlock(&s->lock);
        if (r == 0) {
                char dir[sizeof(bm->proc.dir)];
                snprintf(dir, sizeof(dir), "%s", bm->proc.dir);
                const struct s3fs_request rq = {
                        .endpoint = spec->endpoint, .bucket = spec->bucket, .prefix = spec->prefix,
                        .key_id = c.key_id, .secret = c.secret, .provider_opt = provider_opt(host),
                        .opts = spec->options, .nopts = spec->noptions, .readonly = spec->readonly,
                        .uid = owner, .gid = owner,
                };
                r = s3fs_mount(&rq, dir, &bm->proc, err);
        } else if (bm->proc.dir[0]) {
                rmdir(bm->proc.dir);
                bm->proc.dir[0] = '\0';
        }
        explicit_bzero(&c, sizeof(c));
        if (r == 0) {
                pthread_mutex_lock(&s->lock);
                if (s->deleted) {
                        r = err_set(err, ERR_NOT_FOUND, ENOENT, "The sandbox was deleted");
                } else {
                        spare_drop(m, s); /* built without it */
                        attach_running(s, bm, owner);
                        bm->next = s->mounts;
                        s->mounts = TAKE_PTR(bm);
                }
                pthread_mutex_unlock(&s->lock);
        }
        if (bm)
                s3fs_unmount(&bm->proc);
        free(bm);
        return r;
}

int sbx_mount(struct sandbox_mgr *m, const char *id, const struct sbx_mount_spec *spec, struct err *err)
{
        char path[SBX_MOUNT_PATH_MAX], host[256];
        int r = validate(spec, path, host, sizeof(host), err);
        if (r < 0)
                return r;
        /* Rootless, the jails bind the workspace by path in a user
         * namespace of their own and the daemon cannot mount FUSE for them
         * with allow_other. */
        if (geteuid() != 0)
                return err_set(err, ERR_UNAVAILABLE, EPERM, "Bucket mounts need the daemon to run as root");
        if (access("/dev/fuse", R_OK | W_OK) < 0)
                return err_set(err, ERR_UNAVAILABLE, errno, "FUSE is not available on the host (/dev/fuse: %s)",
                               strerror(errno));
        struct sandbox *s = sandbox_enter(m, id, err);
        if (!s)
                return err_ret(err);
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_lock(&s->mount_lock);
        r = mount_serialised(m, s, spec, path, host, err);
        pthread_mutex_unlock(&s->mount_lock);
        if (r == 0)
                log_info("msg=\"bucket mounted\" sandbox=%s path='%s' bucket='%s'", id, path, spec->bucket);
        sandbox_put(m, s);
        return r;
}

int sbx_unmount(struct sandbox_mgr *m, const char *id, const char *mount_path, struct err *err)
{
        char path[SBX_MOUNT_PATH_MAX];
        if (sbx_mount_path_normalize(mount_path, path, sizeof(path)) < 0)
                return err_set(err, ERR_INVALID, 0, "mountPath must be an absolute path");
        if (strcmp(path, "/") == 0)
                return err_set(err, ERR_INVALID, 0, "mountPath must not be /");
        struct sandbox *s = sandbox_enter(m, id, err);
        if (!s)
                return err_ret(err);
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_lock(&s->mount_lock);
        pthread_mutex_lock(&s->lock);
        struct bucket_mount *bm = NULL;
        for (struct bucket_mount **pp = &s->mounts; *pp; pp = &(*pp)->next)
                if (strcmp((*pp)->path, path) == 0) {
                        bm = *pp;
                        *pp = bm->next;
                        spare_drop(m, s); /* built with it */
                        break;
                }
        pthread_mutex_unlock(&s->lock);
        int r = 0;
        if (bm) {
                s3fs_unmount(&bm->proc);
                free(bm);
                log_info("msg=\"bucket unmounted\" sandbox=%s path='%s'", id, path);
        } else {
                r = err_set(err, ERR_NOT_FOUND, ENOENT, "No active mount found at path: %s", path);
        }
        pthread_mutex_unlock(&s->mount_lock);
        sandbox_put(m, s);
        return r;
}

void mounts_drop_all(struct sandbox *s)
{
        while (s->mounts) {
                struct bucket_mount *bm = s->mounts;
                s->mounts = bm->next;
                s3fs_unmount(&bm->proc);
                free(bm);
        }
}

void mounts_sweep(const char *data_dir)
{
        char real[4096], base[4200];
        if (!realpath(data_dir, real))
                return;
        snprintf(base, sizeof(base), "%s/s3", real);
        s3fs_sweep(base);
}

/* ---- what a jail gets ---- */

void mount_view_take(const struct sandbox *s, struct mount_view *v)
{
        v->n = 0;
        for (const struct bucket_mount *bm = s->mounts; bm && v->n < JAIL_MAX_BINDS; bm = bm->next) {
                int fd = fcntl(bm->proc.root_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        continue;
                snprintf(v->paths[v->n], sizeof(v->paths[v->n]), "%s", bm->path);
                v->binds[v->n] = (struct kproc_bind){ .fd = fd, .path = v->paths[v->n], .readonly = bm->readonly };
                v->n++;
        }
}

void mount_view_done(struct mount_view *v)
{
        for (size_t i = 0; i < v->n; i++)
                close(v->binds[i].fd);
        v->n = 0;
}

/* ---- the daemon's own bucket ---- */

struct sbx_host_mount {
        struct s3fs_proc proc;
};

int sbx_host_mount(const struct sbx_mount_spec *spec, const char *dir, struct sbx_host_mount **ret, struct err *err)
{
        char host[256];
        struct creds c = { 0 };
        int r = validate_bucket(spec, host, sizeof(host), err);
        if (r == 0)
                r = creds_lookup(NULL, spec, &c, err);
        if (r < 0)
                return r;
        if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) < 0)
                return err_set(err, ERR_UNAVAILABLE, EPERM, "A bucket mount needs root and FUSE (/dev/fuse)");
        struct sbx_host_mount *hm = calloc(1, sizeof(*hm));
        if (!hm)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        /* What a killed daemon left there is detached first. */
        s3fs_sweep(dir);
        if (mkdir(dir, 0700) < 0) {
                free(hm);
                return err_set(err, ERR_INTERNAL, errno, "Cannot make %s: %s", dir, strerror(errno));
        }
        const struct s3fs_request rq = {
                .endpoint = spec->endpoint, .bucket = spec->bucket, .prefix = spec->prefix, .key_id = c.key_id,
                .secret = c.secret, .provider_opt = provider_opt(host),
        };
        r = s3fs_mount(&rq, dir, &hm->proc, err);
        explicit_bzero(&c, sizeof(c));
        if (r < 0) {
                free(hm);
                return r;
        }
        *ret = hm;
        return 0;
}

const char *sbx_host_mount_dir(const struct sbx_host_mount *hm)
{
        return hm->proc.mnt;
}

void sbx_host_unmount(struct sbx_host_mount *hm)
{
        if (!hm)
                return;
        s3fs_unmount(&hm->proc);
        free(hm);
}
