#include "jail/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/util.h"
#include "jail/cgroup_internal.h"

/* Rootless and undelegated: no hierarchy at all, only rlimits apply. */
static const struct cgroup_ops cg_ops_none = { .backend = CGROUP_NONE };

static const struct cgroup_ops *const backends[_CGROUP_BACKEND_MAX] = {
        [CGROUP_NONE] = &cg_ops_none, [CGROUP_V1] = &cg_ops_v1, [CGROUP_V2] = &cg_ops_v2,
};

static void sleep_poll(void)
{
        struct timespec ts = { 0, CG_POLL_NS };
        nanosleep(&ts, NULL);
}

int cg_join_path(char buf[static PATH_MAX], const char *dir, const char *file)
{
        int n = snprintf(buf, PATH_MAX, "%s/%s", dir, file);
        return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

int cg_write(const char *dir, const char *file, const char *value)
{
        char p[PATH_MAX];
        int r = cg_join_path(p, dir, file);
        return r < 0 ? r : write_string_file(p, value);
}

int cg_write_u64(const char *dir, const char *file, uint64_t v)
{
        char s[32];
        snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
        return cg_write(dir, file, s);
}

/* True when word is an element of a list separated by sep ("rw,memory" or
 * "cpu memory pids"). */
bool cg_list_has(const char *list, const char *word, char sep)
{
        size_t wl = strlen(word);
        for (const char *p = list; *p;) {
                const char *e = strchr(p, sep);
                size_t l = e ? (size_t)(e - p) : strlen(p);
                while (l > 0 && (p[l - 1] == '\n' || p[l - 1] == ' '))
                        l--;
                if (l == wl && memcmp(p, word, wl) == 0)
                        return true;
                if (!e)
                        break;
                p = e + 1;
        }
        return false;
}

/* The value of "key value" in a flat-keyed file's text (memory.oom_control,
 * pids.events, cpu.stat, cgroup.events). A missing key reads as 0: a
 * counter the kernel does not print has never fired. */
static uint64_t key_value(const char *buf, const char *key)
{
        size_t kl = strlen(key);
        for (const char *line = buf; *line;) {
                if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
                        return strtoull(line + kl + 1, NULL, 10);
                const char *nl = strchr(line, '\n');
                if (!nl)
                        break;
                line = nl + 1;
        }
        return 0;
}

/* key's value in a flat-keyed file; -ENOENT when the file is missing. */
int cg_read_key_u64(const char *dir, const char *file, const char *key, uint64_t *ret)
{
        char p[PATH_MAX], buf[4096];
        int r = cg_join_path(p, dir, file);
        if (r < 0)
                return r;
        r = read_file_small(p, buf, sizeof(buf), NULL);
        if (r < 0)
                return r;
        *ret = key_value(buf, key);
        return 0;
}

/* Usage counters: files of older kernels or disabled controllers read as 0. */
int cg_read_key_opt(const char *dir, const char *file, const char *key, uint64_t *ret)
{
        int r = cg_read_key_u64(dir, file, key, ret);
        if (r == -ENOENT) {
                *ret = 0;
                return 0;
        }
        return r;
}

int cg_read_u64_opt(const char *dir, const char *file, uint64_t *ret)
{
        char p[PATH_MAX];
        int r = cg_join_path(p, dir, file);
        if (r < 0)
                return r;
        r = read_u64_file(p, ret);
        if (r == -ENOENT) {
                *ret = 0;
                return 0;
        }
        return r;
}

/* Counter c's fd, opened on first use; CG_CNT_MISSING when the file is not
 * there (an older kernel, a controller not enabled). */
static int counter_fd(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file)
{
        char p[PATH_MAX];
        if (cg->cnt_fd[c] != CG_CNT_CLOSED)
                return cg->cnt_fd[c];
        if (!dir || cg_join_path(p, dir, file) < 0)
                return CG_CNT_MISSING;
        int fd = open(p, (c == CG_CNT_PEAK ? O_RDWR : O_RDONLY) | O_CLOEXEC);
        if (fd < 0 && c == CG_CNT_PEAK && (errno == EACCES || errno == EPERM))
                fd = open(p, O_RDONLY | O_CLOEXEC); /* v2 before 6.12: a peak with no reset */
        if (fd < 0 && errno != ENOENT)
                return -errno; /* not remembered: the next read tries again */
        cg->cnt_fd[c] = fd < 0 ? CG_CNT_MISSING : fd;
        return cg->cnt_fd[c];
}

/* Counter c's text, NUL-terminated; "" when the file is missing. */
static int counter_text(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file, char *buf,
                        size_t size)
{
        int fd = counter_fd(cg, c, dir, file);
        buf[0] = '\0';
        if (fd == CG_CNT_MISSING)
                return 0;
        if (fd < 0)
                return fd;
        ssize_t n = pread(fd, buf, size - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return 0;
}

int cg_counter_u64(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file, uint64_t *ret)
{
        char buf[64];
        int r = counter_text(cg, c, dir, file, buf, sizeof(buf));
        *ret = r < 0 ? 0 : strtoull(buf, NULL, 10);
        return r;
}

int cg_counter_key(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file, const char *key,
                   uint64_t *ret)
{
        char buf[4096];
        int r = counter_text(cg, c, dir, file, buf, sizeof(buf));
        *ret = r < 0 ? 0 : key_value(buf, key);
        return r;
}

int cg_counter_write(struct cgroup *cg, enum cg_counter c, const char *dir, const char *file, const char *value)
{
        int fd = counter_fd(cg, c, dir, file);
        if (fd == CG_CNT_MISSING)
                return -ENOENT;
        if (fd < 0)
                return fd;
        size_t len = strlen(value);
        ssize_t n = pwrite(fd, value, len, 0);
        return n < 0 ? -errno : (size_t)n == len ? 0 : -EIO;
}

/* ---- discovery ------------------------------------------------------- */

/* Matches one /proc/self/cgroup line "ID:ctrl,ctrl:/path". ctrl NULL asks
 * for the v2 line ("0::/path"). Returns the path inside line, or NULL. */
const char *cg_proc_cgroup_match(char *line, const char *ctrl)
{
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
                return NULL;
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        bool hit = ctrl ? cg_list_has(ctrls, ctrl, ',') : (strcmp(line, "0:") == 0 && *ctrls == '\0');
        if (!hit)
                return NULL;
        char *path = c2 + 1;
        path[strcspn(path, "\n")] = '\0';
        return path;
}

static int own_group(const char *ctrl, char *ret, size_t size)
{
        FILE *f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return -errno;
        char *line = NULL;
        size_t cap = 0;
        int r = -ENOENT;
        while (r == -ENOENT && getline(&line, &cap, f) > 0) {
                const char *p = cg_proc_cgroup_match(line, ctrl);
                if (p)
                        r = snprintf(ret, size, "%s", p) < (int)size ? 0 : -ENAMETOOLONG;
        }
        free(line);
        fclose(f);
        return r;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
        char *w = s;
        for (char *p = s; *p; p++) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
                    p[3] >= '0' && p[3] <= '7') {
                        *w++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                        p += 3;
                } else {
                        *w++ = *p;
                }
        }
        *w = '\0';
}

/* Matches one /proc/self/mountinfo line against a cgroup mount of fstype
 * carrying ctrl (NULL: any), whose root contains our group own. Writes the
 * directory of own inside that mount to ret. Returns 1 on a match, 0 if not,
 * -errno on overflow. Format: "id parent maj:min root mnt opts... - type src
 * superopts"; v1 controllers are listed in superopts. */
int cg_mountinfo_match(char *line, const char *fstype, const char *ctrl, const char *own,
                           char *ret, size_t size)
{
        char *f[5], *save = NULL, *sep = strstr(line, " - ");
        if (!sep)
                return 0;
        *sep = '\0';
        char *tail = sep + 3;
        f[0] = strtok_r(line, " ", &save);
        for (int i = 1; i < 5; i++)
                f[i] = f[i - 1] ? strtok_r(NULL, " ", &save) : NULL;
        char *type = strtok_r(tail, " ", &save);
        char *src = type ? strtok_r(NULL, " ", &save) : NULL;
        char *super = src ? strtok_r(NULL, " \n", &save) : NULL;
        if (!f[4] || !super || strcmp(type, fstype) != 0)
                return 0;
        if (ctrl && !cg_list_has(super, ctrl, ','))
                return 0;
        char *root = f[3], *mnt = f[4];
        unescape_octal(root);
        unescape_octal(mnt);
        /* The mount shows the hierarchy from root down; our group must be
         * at or below it ("/a" contains "/a/b" but not "/ab"). */
        size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
        if (strncmp(own, root, rl) != 0 || (own[rl] != '/' && own[rl] != '\0'))
                return 0;
        const char *rest = own + rl;
        if (strcmp(rest, "/") == 0)
                rest = "";
        return snprintf(ret, size, "%s%s", mnt, rest) < (int)size ? 1 : -ENAMETOOLONG;
}

/* Finds the directory of our own group in the hierarchy carrying ctrl (v1)
 * or in the cgroup2 mount (ctrl NULL). -ENOENT when there is none. */
int cg_find_own_dir(const char *ctrl, char *ret, size_t size)
{
        char own[PATH_MAX];
        int r = own_group(ctrl, own, sizeof(own));
        if (r < 0)
                return r;
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return -errno;
        const char *fstype = ctrl ? "cgroup" : "cgroup2";
        char *line = NULL;
        size_t cap = 0;
        r = 0;
        while (r == 0 && getline(&line, &cap, f) > 0)
                r = cg_mountinfo_match(line, fstype, ctrl, own, ret, size);
        free(line);
        fclose(f);
        return r == 0 ? -ENOENT : (r < 0 ? r : 0);
}

static int make_dir(const char *path)
{
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static void rmdir_tree(int dfd, const char *name, int depth)
{
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd < 0 || depth > 8 ? NULL : fdopendir(fd);
        if (!d) {
                if (fd >= 0)
                        close(fd);
        } else {
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                                rmdir_tree(dirfd(d), de->d_name, depth + 1);
                closedir(d);
        }
        (void)unlinkat(dfd, name, AT_REMOVEDIR);
}

/* "<prefix>-<pid>-..." of a daemon that is gone (kill(pid, 0) says ESRCH). */
static bool name_stale(const char *entry, const char *name)
{
        const char *dash = strchr(name, '-');
        size_t pl = dash ? (size_t)(dash - name) + 1 : 0;
        if (!pl || strncmp(entry, name, pl) != 0 || strcmp(entry, name) == 0)
                return false;
        char *end = NULL;
        long pid = strtol(entry + pl, &end, 10);
        return end != entry + pl && pid > 0 && pid <= INT_MAX && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

void cg_sweep_stale(const char *dir, const char *name)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && name_stale(de->d_name, name))
                        rmdir_tree(dirfd(d), de->d_name, 0);
        closedir(d);
}

/* Adds "dir/name" for controller c, merging co-mounted controllers. */
int cg_root_add(struct cgroup_root *root, const char *dir, const char *name, enum cg_ctrl c)
{
        char *path = NULL;
        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < root->n; i++) {
                if (strcmp(root->h[i].path, path) == 0) {
                        root->h[i].ctrls |= CG_BIT(c);
                        free(path);
                        return 0;
                }
        }
        root->h[root->n++] = (struct cg_hier){ path, CG_BIT(c) };
        cg_sweep_stale(dir, name);
        return make_dir(path);
}

void cgroup_root_free(struct cgroup_root *root)
{
        if (!root)
                return;
        for (size_t i = 0; i < root->n; i++) {
                /* Only succeeds once every execution group is gone; a busy
                 * root is simply left for the next start. */
                rmdir(root->h[i].path);
                free(root->h[i].path);
        }
        free(root);
}

static void cgroup_root_freep(struct cgroup_root **root)
{
        cgroup_root_free(*root);
}

static int open_backend(enum cgroup_backend b, const char *name, struct cgroup_root **ret)
{
        _cleanup_(cgroup_root_freep) struct cgroup_root *root = calloc(1, sizeof(*root));
        if (!root)
                return -ENOMEM;
        root->ops = backends[b];
        int r = root->ops->root_open ? root->ops->root_open(root, name) : 0;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(root);
        return 0;
}

static bool name_valid(const char *name)
{
        return name && *name && strlen(name) < NAME_MAX && !strchr(name, '/') &&
               strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static int open_auto(const char *name, struct cgroup_root **ret)
{
        struct cgroup_root *root = NULL;
        if (cg_v2_has_memory()) {
                int r = open_backend(CGROUP_V2, name, &root);
                if (r == -ENOMEM)
                        return r;
                if (r == 0 && (root->h[0].ctrls & CG_BIT(CG_MEMORY))) {
                        *ret = root;
                        return 0;
                }
                cgroup_root_free(root);
        }
        int r = open_backend(CGROUP_V1, name, ret);
        if (r == 0 || r == -ENOMEM)
                return r;
        /* Rootless and undelegated: run with rlimits only. */
        return open_backend(CGROUP_NONE, name, ret);
}

int cgroup_root_open(const char *name, int force, struct cgroup_root **ret)
{
        if (!name_valid(name))
                return -EINVAL;
        if (force < 0)
                return open_auto(name, ret);
        if (force >= _CGROUP_BACKEND_MAX)
                return -EINVAL;
        return open_backend((enum cgroup_backend)force, name, ret);
}

enum cgroup_backend cgroup_root_backend(const struct cgroup_root *root)
{
        return root ? root->ops->backend : CGROUP_NONE;
}

const char *cgroup_root_path(const struct cgroup_root *root, size_t i)
{
        return root && i < root->n ? root->h[i].path : NULL;
}

int cgroup_root_set_cpu_quota(struct cgroup_root *root, uint32_t percent)
{
        bool have = false;
        for (size_t i = 0; root && i < root->n; i++)
                have |= (root->h[i].ctrls & CG_BIT(CG_CPUQ)) != 0;
        if (percent && !have)
                return -EOPNOTSUPP;
        root->cpu_quota_percent = percent;
        return 0;
}

const char *cgroup_backend_name(enum cgroup_backend b)
{
        switch (b) {
        case CGROUP_NONE:
                return "none";
        case CGROUP_V1:
                return "v1";
        case CGROUP_V2:
                return "v2";
        case _CGROUP_BACKEND_MAX:
                break;
        }
        return "unknown";
}

/* ---- execution groups ------------------------------------------------ */

/* Directory holding controller c's files, or NULL when not in use. On v2
 * everything is in the one directory (files of disabled controllers are
 * simply absent). */
const char *cg_ctrl_dir(const struct cgroup *cg, enum cg_ctrl c)
{
        if (cg->ops->unified)
                return cg->n ? cg->h[0].path : NULL;
        for (size_t i = 0; i < cg->n; i++)
                if (cg->h[i].ctrls & CG_BIT(c))
                        return cg->h[i].path;
        return NULL;
}

/* Makes "name" below each of the n directories of h (the root's, or a
 * parent group's), with the controllers each carries. */
static int create_dirs(struct cgroup *cg, const struct cg_hier *h, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++) {
                char *path = NULL;
                if (asprintf(&path, "%s/%s", h[i].path, name) < 0)
                        return -ENOMEM;
                /* An existing group may belong to a live execution: never
                 * adopt it (EEXIST goes back to the caller). */
                if (mkdir(path, 0755) < 0) {
                        int r = -errno;
                        free(path);
                        return r;
                }
                cg->h[cg->n++] = (struct cg_hier){ path, h[i].ctrls };
        }
        return 0;
}

static void cgroup_destroyp(struct cgroup **cg)
{
        cgroup_destroy(*cg);
}

static int create_group(struct cgroup_root *root, struct cgroup *parent, const char *name,
                        const struct cgroup_limits *lim, struct cgroup **ret)
{
        static const struct cgroup_limits none = { 0 };
        if (!root || !name_valid(name) || (parent && parent->ops != root->ops))
                return -EINVAL;
        struct cgroup_limits l = lim ? *lim : none;
        if (!l.cpu_quota_percent && !parent)
                l.cpu_quota_percent = root->cpu_quota_percent;
        _cleanup_(cgroup_destroyp) struct cgroup *cg = calloc(1, sizeof(*cg));
        if (!cg)
                return -ENOMEM;
        cg->ops = root->ops;
        for (size_t i = 0; i < _CG_CNT_MAX; i++)
                cg->cnt_fd[i] = CG_CNT_CLOSED;
        cg->nested = parent != NULL;
        int r = parent ? create_dirs(cg, parent->h, parent->n, name) : create_dirs(cg, root->h, root->n, name);
        if (r < 0)
                return r;
        if (cg->ops->set_limits && (r = cg->ops->set_limits(cg, &l)) < 0)
                return r;
        *ret = TAKE_PTR(cg);
        return 0;
}

int cgroup_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *lim,
                  struct cgroup **ret)
{
        return create_group(root, NULL, name, lim, ret);
}

int cgroup_create_in(struct cgroup_root *root, struct cgroup *parent, const char *name,
                     const struct cgroup_limits *lim, struct cgroup **ret)
{
        return create_group(root, parent, name, lim, ret);
}

int cgroup_create_parent(struct cgroup_root *root, const char *name, const struct cgroup_limits *lim,
                         struct cgroup **ret)
{
        struct cgroup *cg = NULL;
        int r = create_group(root, NULL, name, lim, &cg);
        if (r < 0)
                return r;
        if (cg->ops->delegate && (r = cg->ops->delegate(cg)) < 0) {
                cgroup_destroy(cg);
                return r;
        }
        *ret = cg;
        return 0;
}

bool cgroup_is_nested(const struct cgroup *cg)
{
        return cg && cg->nested;
}

int cgroup_attach(struct cgroup *cg, pid_t pid)
{
        char s[32];
        if (pid <= 0)
                return -EINVAL;
        snprintf(s, sizeof(s), "%d", (int)pid);
        for (size_t i = 0; i < cg->n; i++) {
                int r = cg_write(cg->h[i].path, "cgroup.procs", s);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int read_raw(struct cgroup *cg, struct cgroup_usage *u, unsigned what)
{
        *u = (struct cgroup_usage){ 0 };
        if (cg->n == 0)
                return 0;
        return cg->ops->read_raw(cg, u, what);
}

static uint64_t sub_sat(uint64_t a, uint64_t b)
{
        return a > b ? a - b : 0;
}

/* Raw counters u as seen from the last reset. */
static struct cgroup_usage since_base(const struct cgroup *cg, const struct cgroup_usage *u)
{
        return (struct cgroup_usage){
                .cpu_ns = sub_sat(u->cpu_ns, cg->base.cpu_ns),
                .memory_peak = u->memory_peak,
                .oom_kills = sub_sat(u->oom_kills, cg->base.oom_kills),
                .pids_max_hits = sub_sat(u->pids_max_hits, cg->base.pids_max_hits),
        };
}

int cgroup_read_usage_of(struct cgroup *cg, unsigned what, struct cgroup_usage *ret)
{
        struct cgroup_usage u;
        int r = read_raw(cg, &u, what);
        if (r < 0)
                return r;
        *ret = since_base(cg, &u);
        return 0;
}

int cgroup_read_usage(struct cgroup *cg, struct cgroup_usage *ret)
{
        return cgroup_read_usage_of(cg, CGROUP_USAGE_ALL, ret);
}

/* SIGKILLs every pid listed in dir/cgroup.procs; *seen counts them. A group
 * whose directory is gone has nobody left to kill.
 * The pid could in theory be recycled between reading and kill(); jobs run
 * in their own pid namespace and are reaped by the jail, so the window is a
 * few microseconds against a full pid wrap. cgroup.kill (v2) has no race. */
static int kill_listed(const char *dir, size_t *seen)
{
        char p[PATH_MAX];
        int r = cg_join_path(p, dir, "cgroup.procs");
        if (r < 0)
                return r;
        FILE *f = fopen(p, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;
        int pid;
        while (fscanf(f, "%d", &pid) == 1) {
                (*seen)++;
                if (pid > 0)
                        kill(pid, SIGKILL);
        }
        fclose(f);
        return 0;
}

bool cg_procs_empty(const char *dir)
{
        char p[PATH_MAX], buf[16];
        if (cg_join_path(p, dir, "cgroup.procs") < 0)
                return false;
        int r = read_file_small(p, buf, sizeof(buf), NULL);
        if (r == -ENOENT)
                return true;
        return r == 0 && buf[0] == '\0';
}

bool cgroup_is_empty(struct cgroup *cg)
{
        if (cg->n && cg->ops->is_empty) {
                int r = cg->ops->is_empty(cg);
                if (r >= 0)
                        return r;
        }
        for (size_t i = 0; i < cg->n; i++)
                if (!cg_procs_empty(cg->h[i].path))
                        return false;
        return true;
}

/* Re-reads and kills until a pass finds nobody: a job may fork between our
 * read and its kill, but pids.max bounds how often that can happen. */
int cg_kill_loop(struct cgroup *cg)
{
        for (int round = 0; round < CG_KILL_ROUNDS; round++) {
                size_t seen = 0;
                for (size_t i = 0; i < cg->n; i++) {
                        int r = kill_listed(cg->h[i].path, &seen);
                        if (r < 0)
                                return r;
                }
                if (seen == 0)
                        return 0;
                sleep_poll();
        }
        return -EBUSY;
}

int cg_wait_empty(struct cgroup *cg)
{
        for (int round = 0; round < CG_KILL_ROUNDS; round++) {
                if (cgroup_is_empty(cg))
                        return 0;
                sleep_poll();
        }
        return -EBUSY;
}

int cgroup_kill_all(struct cgroup *cg)
{
        if (cg->n == 0)
                return 0;
        if (cg->ops->kill_all) {
                int r = cg->ops->kill_all(cg);
                if (r != -ENOENT)
                        return r;
        }
        return cg_kill_loop(cg);
}

/* Emptiness is the caller's precondition for reusing a pooled group, not
 * something enforced here: a warm interpreter that stays in its group resets
 * between requests, and there the numbers simply restart from now (v1 resets
 * max_usage to the current usage). */
int cgroup_reset(struct cgroup *cg)
{
        return cgroup_reset_read(cg, NULL);
}

int cgroup_set_cpu_idle(struct cgroup *cg, bool idle)
{
        const char *cpu = cg->n ? cg_ctrl_dir(cg, CG_CPUQ) : NULL;
        if (!cpu)
                return -ENOENT;
        if (cg->cpu_idle == idle)
                return 0;
        int r = cg_write(cpu, "cpu.idle", idle ? "1" : "0");
        if (r == 0)
                cg->cpu_idle = idle;
        return r;
}

int cgroup_reset_read(struct cgroup *cg, struct cgroup_usage *before)
{
        if (before)
                *before = (struct cgroup_usage){ 0 };
        if (cg->n == 0)
                return 0;
        /* A group left idle would run its next jail only on idle CPUs. */
        int r = cgroup_set_cpu_idle(cg, false);
        if (r < 0 && r != -ENOENT)
                return r;
        cg->ops->reset_peaks(cg);
        /* oom_kill and pids.events cannot be reset by writing, so remember
         * where they stand and report the difference from now on. One read
         * serves both: the peak reset leaves the other counters alone. The
         * peak itself is not read: the baseline's is 0 whatever it says. */
        struct cgroup_usage raw;
        r = read_raw(cg, &raw, CGROUP_USAGE_OOM | CGROUP_USAGE_PIDS);
        if (r < 0)
                return r;
        if (before) {
                *before = since_base(cg, &raw);
                before->memory_peak = 0;
        }
        cg->base = raw;
        cg->base.memory_peak = 0;
        return 0;
}

static void rmdir_retry(const char *path)
{
        for (int round = 0; round < CG_KILL_ROUNDS; round++) {
                if (rmdir(path) == 0 || errno != EBUSY)
                        return;
                sleep_poll();
        }
}

void cgroup_destroy(struct cgroup *cg)
{
        if (!cg)
                return;
        (void)cgroup_kill_all(cg);
        /* The counter files go first: nothing of the group outlives it. */
        for (size_t i = 0; i < _CG_CNT_MAX; i++)
                if (cg->cnt_fd[i] >= 0)
                        close(cg->cnt_fd[i]);
        for (size_t i = 0; i < cg->n; i++) {
                rmdir_retry(cg->h[i].path);
                free(cg->h[i].path);
        }
        free(cg);
}
