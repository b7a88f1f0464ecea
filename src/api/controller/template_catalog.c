/* Loading the template catalog (template_catalog.h) from its directory.
 * The files are trusted data shipped with the daemon, but they are read
 * with O_NOFOLLOW and symlinks are refused all the same: a template's
 * files/ tree is copied into tenants' workspaces, and a link planted there
 * by a packaging mistake must not publish a host file. */
#include "api/controller/template_catalog.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/workers/validate.h"
#include "base/util.h"

#define TEMPLATE_DEPTH_MAX 16

struct loading {
        struct ctl_template *t;
        size_t cap;
        struct err *err;
        char where[512];             /* the template being loaded, for messages */
};

static int bad(struct loading *l, const char *what)
{
        return err_set(l->err, ERR_INVALID, EINVAL, "template %s: %s", l->where, what);
}

static void template_done(struct ctl_template *t)
{
        for (size_t i = 0; i < t->nfiles; i++) {
                free(t->files[i].path);
                free(t->files[i].data);
        }
        free(t->files);
        json_decref(t->meta);
}

void ctl_templates_free(struct ctl_templates *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n; i++)
                template_done(&t->v[i]);
        free(t->v);
        free(t);
}

/* A whole regular file (never through a symlink) of at most max bytes. */
static int read_whole(int dirfd, const char *name, size_t max, unsigned char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat st;
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EPERM;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        _cleanup_free_ unsigned char *data = malloc((size_t)st.st_size + 1);
        if (!data)
                return -ENOMEM;
        size_t n = 0;
        while (n < (size_t)st.st_size) {
                ssize_t k = read(fd, data + n, (size_t)st.st_size - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                n += (size_t)k;
        }
        data[n] = '\0';
        *ret_len = n;
        *ret = TAKE_PTR(data);
        return 0;
}

static int add_file(struct loading *l, int dirfd, const char *name, const char *rel)
{
        struct ctl_template *t = l->t;
        if (t->nfiles >= CTL_TEMPLATE_FILES_MAX)
                return bad(l, "too many files");
        struct ctl_template_file f = {};
        int r = read_whole(dirfd, name, CTL_TEMPLATE_BYTES_MAX - t->bytes, &f.data, &f.len);
        if (r < 0) {
                char m[PATH_MAX + 64];
                snprintf(m, sizeof(m), "files/%s: %s", rel, r == -EFBIG ? "over the template size cap" : strerror(-r));
                return bad(l, m);
        }
        struct ctl_template_file *v = reallocarray(t->files, t->nfiles + 1, sizeof(*v));
        if (v)
                t->files = v;
        if (!v || !(f.path = strdup(rel))) {
                free(f.data);
                return err_set(l->err, ERR_INTERNAL, ENOMEM, "out of memory");
        }
        t->files[t->nfiles++] = f;
        t->bytes += f.len;
        return 0;
}

static int walk_files(struct loading *l, int dirfd, const char *prefix, unsigned depth)
{
        if (depth > TEMPLATE_DEPTH_MAX)
                return bad(l, "files/ is nested too deep");
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return bad(l, "cannot read files/");
        }
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                char rel[PATH_MAX];
                snprintf(rel, sizeof(rel), "%s%s%s", prefix, prefix[0] ? "/" : "", de->d_name);
                struct stat st;
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        r = bad(l, "cannot stat a file");
                else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        r = sub < 0 ? bad(l, "cannot open a directory") : walk_files(l, sub, rel, depth + 1);
                } else if (S_ISREG(st.st_mode))
                        r = add_file(l, dirfd, de->d_name, rel);
                else
                        r = bad(l, "files/ holds a symlink or special file");
        }
        closedir(d);
        return r;
}

static int by_path(const void *a, const void *b)
{
        return strcmp(((const struct ctl_template_file *)a)->path, ((const struct ctl_template_file *)b)->path);
}

static const char *str_member(json_t *o, const char *name)
{
        json_t *v = json_object_get(o, name);
        return json_is_string(v) && json_string_length(v) == strlen(json_string_value(v)) ? json_string_value(v)
                                                                                            : NULL;
}

static bool strings_only(json_t *v, bool object)
{
        if (object ? !json_is_object(v) : !json_is_array(v))
                return false;
        const char *k;
        json_t *x;
        size_t i;
        if (object) {
                json_object_foreach(v, k, x) if (!json_is_string(x) || !env_key_valid(k)) return false;
        } else {
                json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
        }
        return true;
}

static bool id_ok(const char *id)
{
        size_t n = id ? strlen(id) : 0;
        return n && n <= 64 && strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* The checked meta of one template (json owned by t). */
static int check_meta(struct loading *l, const char *dirname)
{
        struct ctl_template *t = l->t;
        static const char *const required[] = { "id", "name", "description", "category", "language" };
        for (size_t i = 0; i < ARRAY_SIZE(required); i++)
                if (!str_member(t->meta, required[i]))
                        return bad(l, "a string id, name, description, category and language are required");
        t->id = str_member(t->meta, "id");
        if (!id_ok(t->id) || strcmp(t->id, dirname) != 0)
                return bad(l, "id must be its directory's name ([a-z0-9-], at most 64)");
        if (!json_object_get(t->meta, "env"))
                json_object_set_new(t->meta, "env", json_object());
        if (!json_object_get(t->meta, "tags"))
                json_object_set_new(t->meta, "tags", json_array());
        t->env = json_object_get(t->meta, "env");
        if (!strings_only(t->env, true) || !strings_only(json_object_get(t->meta, "tags"), false))
                return bad(l, "env must be {name: string} and tags [string]");
        json_t *setup = json_object_get(t->meta, "setup_command");
        if (setup && !json_is_null(setup) && !str_member(t->meta, "setup_command"))
                return bad(l, "setup_command must be a string");
        t->setup_command = str_member(t->meta, "setup_command");
        t->category = str_member(t->meta, "category");
        t->language = str_member(t->meta, "language");
        return 0;
}

static int load_one(struct loading *l, int dirfd, const char *name)
{
        _cleanup_close_ int tfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (tfd < 0)
                return 0; /* not a template directory */
        unsigned char *text = NULL;
        size_t len;
        if (read_whole(tfd, "template.json", 1u << 20, &text, &len) < 0)
                return 0; /* a directory without template.json is not a template */
        json_error_t je;
        l->t->meta = json_loadb((const char *)text, len, 0, &je);
        free(text);
        snprintf(l->where, sizeof(l->where), "%s", name);
        if (!json_is_object(l->t->meta))
                return bad(l, "template.json is not a JSON object");
        int r = check_meta(l, name);
        if (r < 0)
                return r;
        _cleanup_close_ int ffd = openat(tfd, "files", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (ffd >= 0 && (r = walk_files(l, ffd, "", 0)) < 0)
                return r;
        if (l->t->nfiles > 0)
                qsort(l->t->files, l->t->nfiles, sizeof(*l->t->files), by_path);
        return 1;
}

static int by_id(const void *a, const void *b)
{
        return strcmp(((const struct ctl_template *)a)->id, ((const struct ctl_template *)b)->id);
}

int ctl_templates_load(const char *dir, struct ctl_templates **ret, struct err *err)
{
        struct ctl_templates *cat = calloc(1, sizeof(*cat));
        if (!cat)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        DIR *d = opendir(dir);
        if (!d) {
                *ret = cat; /* no templates shipped: an empty catalog */
                return 0;
        }
        struct loading l = { .err = err };
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                struct ctl_template *v = reallocarray(cat->v, cat->n + 1, sizeof(*v));
                if (!v) {
                        r = err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
                        break;
                }
                cat->v = v;
                l.t = memset(&cat->v[cat->n], 0, sizeof(*l.t));
                r = load_one(&l, dirfd(d), de->d_name);
                if (r > 0)
                        cat->n++;
                else
                        template_done(l.t);
        }
        closedir(d);
        if (r < 0) {
                ctl_templates_free(cat);
                return r;
        }
        if (cat->n > 0)
                qsort(cat->v, cat->n, sizeof(*cat->v), by_id);
        *ret = cat;
        return 0;
}

const struct ctl_template *ctl_template_find(const struct ctl_templates *t, const char *id)
{
        for (size_t i = 0; t && id && i < t->n; i++)
                if (!strcmp(t->v[i].id, id))
                        return &t->v[i];
        return NULL;
}
