#include "jail/jail.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/landlock.h"
#include "jail/proc_masks.h"
#include "jail/seccomp.h"

/* Steps reported by a failing child, so the daemon can say which one broke. */
enum jail_step {
        STEP_SYNC, STEP_NETNS, STEP_HOSTNAME, STEP_PRIVATE, STEP_ROOT_TMPFS, STEP_USR,
        STEP_ETC, STEP_TMP, STEP_WORKSPACE, STEP_KERNELS, STEP_DEV, STEP_PROC,
        STEP_PIVOT, STEP_RO_ROOT, STEP_FORK, STEP_FDS, STEP_RLIMIT, STEP_PRIVS,
        STEP_LANDLOCK, STEP_SECCOMP, STEP_CHDIR, STEP_EXEC, _STEP_MAX
};

static const char *const step_names[_STEP_MAX] = {
        "sync", "netns", "hostname", "private-mounts", "root-tmpfs", "bind-usr", "etc",
        "tmp", "workspace", "kernels", "dev", "proc", "pivot_root", "ro-root", "fork",
        "fds", "rlimit", "drop-privileges", "landlock", "seccomp", "chdir", "exec",
};

struct child_report {
        int step;
        int err;
};

/* System files the runtimes need, bound read-only when present. Everything
 * else in the host /etc (shadow, hostname, machine-id…) stays invisible. */
static const char *const etc_binds[] = {
        "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
        "localtime", "nsswitch.conf", "protocols", "services", "mime.types", "perl", "ruby",
        "python3", "python3.11", "nodejs", "magic", "os-release",
};

/* Host devices re-bound into the jail's private /dev. */
static const char *const dev_binds[] = { "null", "zero", "full", "random", "urandom" };

/* procfs entries that leak host state even inside a pid namespace; masked
 * with /dev/null as OCI runtimes do. */

#define PATHLEN 4200

/* Everything the child needs, prepared before clone(): the child must not
 * allocate (another daemon thread may hold the malloc lock at clone time). */
struct child_args {
        const struct jail_ctx *ctx;
        const struct jail_spec *spec;
        int sync_fd;   /* read end: parent says "go" after cgroup attach / maps */
        int report_fd; /* write end: child reports failure; EOF means exec'd */
        int devnull_fd;
        int replay_fd;  /* init's end of the replay socket, or -1 */
        char root[PATHLEN];
        char tmp_opts[128];
        char ws_opts[128];
};

static int sys_pivot_root(const char *new_root, const char *put_old)
{
        return (int)syscall(SYS_pivot_root, new_root, put_old);
}

static void child_fail(const struct child_args *a, int step, int err)
{
        struct child_report rep = { step, err };
        if (a->report_fd >= 0)
                (void)!write(a->report_fd, &rep, sizeof(rep));
        _exit(127);
}

#define CHECK(a, step, expr)                        \
        do {                                        \
                if ((expr) < 0)                     \
                        child_fail(a, step, errno); \
        } while (0)

/* Joins two path pieces into buf without allocating. */
static const char *path_join(char *buf, const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        if (la + lb + 2 > PATHLEN) {
                buf[0] = '\0';
                return buf;
        }
        memcpy(buf, a, la);
        buf[la] = '/';
        memcpy(buf + la + 1, b, lb + 1);
        return buf;
}

static int touch_at(const char *path, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, mode);
        if (fd < 0)
                return -1;
        close(fd);
        return 0;
}

static int write_text_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        int r = write_all(fd, text, strlen(text));
        close(fd);
        return r < 0 ? -1 : 0;
}

/* Bind-mounts src onto dst read-only, nosuid, nodev. A bind mount ignores
 * flags on creation, so a second remount pass applies them. */
static int bind_ro(const char *src, const char *dst, bool rec)
{
        unsigned long f = MS_BIND | (rec ? MS_REC : 0);
        if (mount(src, dst, NULL, f, NULL) < 0)
                return -1;
        return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

static void setup_etc(const struct child_args *a)
{
        char etc[PATHLEN], dst[PATHLEN], src[PATHLEN];
        path_join(etc, a->root, "etc");
        CHECK(a, STEP_ETC, mkdir(etc, 0755));
        for (size_t i = 0; i < ARRAY_SIZE(etc_binds); i++) {
                struct stat st;
                path_join(src, "/etc", etc_binds[i]);
                if (stat(src, &st) < 0)
                        continue;
                path_join(dst, etc, etc_binds[i]);
                if (S_ISDIR(st.st_mode))
                        CHECK(a, STEP_ETC, mkdir(dst, 0755));
                else
                        CHECK(a, STEP_ETC, touch_at(dst, 0644));
                CHECK(a, STEP_ETC, bind_ro(src, dst, true));
        }
        /* Synthesised identity files: the jail user exists by name, the host's
         * accounts do not. */
        CHECK(a, STEP_ETC, write_text_file(path_join(dst, etc, "passwd"),
                                           "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
                                           "sandbox:x:65534:65534:sandbox:/tmp:/bin/sh\n"));
        CHECK(a, STEP_ETC, write_text_file(path_join(dst, etc, "group"),
                                           "root:x:0:\nsandbox:x:65534:\n"));
        CHECK(a, STEP_ETC, write_text_file(path_join(dst, etc, "hosts"),
                                           "127.0.0.1 localhost sandbox\n::1 localhost\n"));
        CHECK(a, STEP_ETC, write_text_file(path_join(dst, etc, "hostname"), "sandbox\n"));
        CHECK(a, STEP_ETC, write_text_file(path_join(dst, etc, "resolv.conf"), ""));
}

static void setup_dev(const struct child_args *a)
{
        char dev[PATHLEN], dst[PATHLEN], src[PATHLEN];
        path_join(dev, a->root, "dev");
        CHECK(a, STEP_DEV, mkdir(dev, 0755));
        CHECK(a, STEP_DEV, mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755"));
        for (size_t i = 0; i < ARRAY_SIZE(dev_binds); i++) {
                path_join(dst, dev, dev_binds[i]);
                path_join(src, "/dev", dev_binds[i]);
                CHECK(a, STEP_DEV, touch_at(dst, 0666));
                CHECK(a, STEP_DEV, mount(src, dst, NULL, MS_BIND, NULL));
                CHECK(a, STEP_DEV, mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL));
        }
        CHECK(a, STEP_DEV, symlink("/proc/self/fd", path_join(dst, dev, "fd")));
        CHECK(a, STEP_DEV, symlink("/proc/self/fd/0", path_join(dst, dev, "stdin")));
        CHECK(a, STEP_DEV, symlink("/proc/self/fd/1", path_join(dst, dev, "stdout")));
        CHECK(a, STEP_DEV, symlink("/proc/self/fd/2", path_join(dst, dev, "stderr")));
        CHECK(a, STEP_DEV, symlink("/tmp", path_join(dst, dev, "shm")));
        CHECK(a, STEP_DEV, mount(NULL, dev, NULL, MS_REMOUNT | MS_NOSUID | MS_NOEXEC | MS_RDONLY, "size=64k,mode=755"));
}

/* Mounts a fresh procfs. Must run after the pid namespace exists: proc shows
 * the mounting task's pid namespace, so the jail sees only its own tree. */
static void setup_proc(const struct child_args *a)
{
        char proc[PATHLEN], dst[PATHLEN];
        path_join(proc, a->root, "proc");
        CHECK(a, STEP_PROC, mkdir(proc, 0555));
        CHECK(a, STEP_PROC, mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
        /* A template's children mount their own procfs, which the kernel only
         * allows inside a user namespace while an unobstructed one exists;
         * they mask their own copy. */
        if (a->spec->template)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(jail_proc_masks); i++) {
                path_join(dst, proc, jail_proc_masks[i]);
                if (access(dst, F_OK) < 0)
                        continue;
                CHECK(a, STEP_PROC, mount("/dev/null", dst, NULL, MS_BIND, NULL));
        }
        CHECK(a, STEP_PROC, bind_ro(path_join(dst, proc, "sys"), dst, true));
}

/* Paths of the replay overlay, relative to the new root. /.sbx is 0700
 * root-owned, so the jail user can reach neither the real workspace nor the
 * overlay layers directly while state is being replayed. */
#define REPLAY_DIR "/.sbx"

static void setup_replay_overlay(const struct child_args *a, const char *ws)
{
        char sbx[PATHLEN], real[PATHLEN], ovl[PATHLEN], up[PATHLEN], work[PATHLEN];
        path_join(sbx, a->root, REPLAY_DIR + 1);
        path_join(real, sbx, "ws");
        path_join(ovl, sbx, "ovl");
        CHECK(a, STEP_WORKSPACE, mkdir(sbx, 0700));
        CHECK(a, STEP_WORKSPACE, mkdir(real, 0755));
        CHECK(a, STEP_WORKSPACE, mkdir(ovl, 0755));
        CHECK(a, STEP_WORKSPACE, mount(a->spec->workspace_dir, real, NULL, MS_BIND, NULL));
        CHECK(a, STEP_WORKSPACE, mount(NULL, real, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL));
        CHECK(a, STEP_WORKSPACE, mount("tmpfs", ovl, "tmpfs", MS_NOSUID | MS_NODEV, a->ws_opts));
        CHECK(a, STEP_WORKSPACE, mkdir(path_join(up, ovl, "up"), 0755));
        CHECK(a, STEP_WORKSPACE, mkdir(path_join(work, ovl, "work"), 0755));
        CHECK(a, STEP_WORKSPACE, chown(up, JAIL_UID, JAIL_GID));
        /* Layer paths relative to sbx (the mount resolves them against the
         * cwd): overlayfs shows them verbatim in the jail's
         * /proc/self/mountinfo, and absolute ones would reveal the host path
         * of the jail root, inside the data dir. */
        CHECK(a, STEP_WORKSPACE, chdir(sbx));
        CHECK(a, STEP_WORKSPACE, mount("overlay", ws, "overlay", MS_NOSUID | MS_NODEV,
                                       "lowerdir=ws,upperdir=ovl/up,workdir=ovl/work"));
        CHECK(a, STEP_WORKSPACE, chdir("/"));
}

/* Runs in init after replay: replaces the overlay with the real workspace.
 * The daemon waits for the answer byte before sending the next request, so
 * the kernel never sees a half-swapped /workspace. */
static void swap_in_real_workspace(struct child_args *a, int fd)
{
        char c;
        ssize_t n;
        do
                n = read(fd, &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1)
                return; /* the daemon gave up on this jail; it will kill it */
        if (umount2(JAIL_WORKSPACE, MNT_DETACH) < 0 ||
            mount(REPLAY_DIR "/ws", JAIL_WORKSPACE, NULL, MS_MOVE, NULL) < 0)
                c = 'E';
        umount2(REPLAY_DIR "/ovl", MNT_DETACH);
        (void)!write(fd, &c, 1);
        (void)a;
}

/* The kernels directory is copied into a private read-only tmpfs instead of
 * being bind-mounted: a bind mount shows its source path (the "root" field)
 * in the jail's /proc/self/mountinfo, which would tell the guest where
 * sandboxd is installed on the host. The tree is small (a few hundred KiB,
 * charged to the execution's memory cgroup) and is read afresh for every
 * jail, as the bind mount was. Only regular files and directories are
 * copied; symlinks and anything else are skipped. No allocation: this runs
 * in the cloned child. */
#define KERNELS_TMPFS_OPTS "size=32m,nr_inodes=1024,mode=755"
#define KERNELS_MAX_DEPTH 4

struct sbx_dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
};

static int copy_file_at(int sdir, int ddir, const char *name)
{
        int in = openat(sdir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (in < 0)
                return -1;
        struct stat st;
        int out = -1, r = -1;
        if (fstat(in, &st) < 0)
                goto done;
        if (!S_ISREG(st.st_mode)) {
                r = 0;
                goto done;
        }
        out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0755);
        if (out < 0)
                goto done;
        for (off_t left = st.st_size; left > 0;) {
                ssize_t n = sendfile(out, in, NULL, (size_t)left);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n == 0)
                                errno = EIO; /* the file shrank under us */
                        goto done;
                }
                left -= n;
        }
        r = 0;
done:;
        int e = errno;
        close(in);
        if (out >= 0)
                close(out);
        errno = e;
        return r;
}

static int copy_tree_at(int sdir, int ddir, int depth)
{
        char buf[4096] __attribute__((aligned(8)));
        for (;;) {
                long n = syscall(SYS_getdents64, sdir, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return (int)n;
                for (long off = 0; off < n;) {
                        const struct sbx_dirent64 *d = (const struct sbx_dirent64 *)(buf + off);
                        off += d->d_reclen;
                        const char *name = d->d_name;
                        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                                continue;
                        unsigned char type = d->d_type;
                        if (type == DT_UNKNOWN) {
                                struct stat st;
                                if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                        return -1;
                                type = S_ISREG(st.st_mode) ? DT_REG : S_ISDIR(st.st_mode) ? DT_DIR : DT_UNKNOWN;
                        }
                        if (type == DT_REG) {
                                if (copy_file_at(sdir, ddir, name) < 0)
                                        return -1;
                        } else if (type == DT_DIR && depth > 0) {
                                if (mkdirat(ddir, name, 0755) < 0)
                                        return -1;
                                int s2 = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                int d2 = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                int r = s2 < 0 || d2 < 0 ? -1 : copy_tree_at(s2, d2, depth - 1);
                                int e = errno;
                                if (s2 >= 0)
                                        close(s2);
                                if (d2 >= 0)
                                        close(d2);
                                errno = e;
                                if (r < 0)
                                        return -1;
                        }
                }
        }
}

static void setup_kernels(const struct child_args *a, const char *dst)
{
        CHECK(a, STEP_KERNELS, mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, KERNELS_TMPFS_OPTS));
        int sdir = openat(a->ctx->kernels_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(a, STEP_KERNELS, sdir);
        int ddir = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(a, STEP_KERNELS, ddir);
        CHECK(a, STEP_KERNELS, copy_tree_at(sdir, ddir, KERNELS_MAX_DEPTH));
        if (a->spec->template)
                CHECK(a, STEP_KERNELS, copy_file_at(a->ctx->forkserver_dir_fd, ddir, JAIL_FORKSERVER_LIB));
        close(sdir);
        close(ddir);
        CHECK(a, STEP_KERNELS, mount(NULL, dst, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                                     KERNELS_TMPFS_OPTS));
}

static void setup_root(const struct child_args *a)
{
        const struct jail_spec *s = a->spec;
        char p[PATHLEN];

        /* Private propagation first, so nothing we mount leaks back to the
         * host namespace and host mount events do not reach the jail. */
        CHECK(a, STEP_PRIVATE, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
        CHECK(a, STEP_ROOT_TMPFS, mount("tmpfs", a->root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755"));

        CHECK(a, STEP_USR, mkdir(path_join(p, a->root, "usr"), 0755));
        CHECK(a, STEP_USR, bind_ro("/usr", p, true));
        static const char *const links[][2] = {
                { "usr/bin", "bin" }, { "usr/sbin", "sbin" }, { "usr/lib", "lib" },
                { "usr/lib64", "lib64" }, { "usr/lib32", "lib32" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                CHECK(a, STEP_USR, symlink(links[i][0], path_join(p, a->root, links[i][1])));

        setup_etc(a);

        CHECK(a, STEP_TMP, mkdir(path_join(p, a->root, "tmp"), 01777));
        CHECK(a, STEP_TMP, mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, a->tmp_opts));

        CHECK(a, STEP_WORKSPACE, mkdir(path_join(p, a->root, "workspace"), 0755));
        if (s->workspace_dir && s->replay_fd >= 0) {
                setup_replay_overlay(a, p);
        } else if (s->workspace_dir) {
                CHECK(a, STEP_WORKSPACE, mount(s->workspace_dir, p, NULL, MS_BIND, NULL));
                CHECK(a, STEP_WORKSPACE, mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL));
        } else {
                CHECK(a, STEP_WORKSPACE, mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, a->ws_opts));
        }

        CHECK(a, STEP_KERNELS, mkdir(path_join(p, a->root, "opt"), 0755));
        CHECK(a, STEP_KERNELS, mkdir(path_join(p, a->root, "opt/sandboxd"), 0755));
        CHECK(a, STEP_KERNELS, mkdir(path_join(p, a->root, "opt/sandboxd/kernels"), 0755));
        setup_kernels(a, p);

        setup_dev(a);
        setup_proc(a);

        CHECK(a, STEP_PIVOT, mkdir(path_join(p, a->root, ".old"), 0700));
        CHECK(a, STEP_PIVOT, sys_pivot_root(a->root, p));
        CHECK(a, STEP_PIVOT, chdir("/"));
        /* Detach the host tree entirely: after this no path leads back. */
        CHECK(a, STEP_PIVOT, umount2("/.old", MNT_DETACH));
        CHECK(a, STEP_PIVOT, rmdir("/.old"));
        CHECK(a, STEP_RO_ROOT, mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL));
}

static void set_rlimit(const struct child_args *a, int res, uint64_t soft, uint64_t hard)
{
        struct rlimit rl = { soft, hard };
        CHECK(a, STEP_RLIMIT, setrlimit(res, &rl));
}

static void apply_rlimits(const struct child_args *a)
{
        const struct jail_limits *l = &a->spec->limits;
        if (l->cpu_seconds)
                set_rlimit(a, RLIMIT_CPU, l->cpu_seconds, l->cpu_seconds + 1);
        if (l->file_bytes)
                set_rlimit(a, RLIMIT_FSIZE, l->file_bytes, l->file_bytes);
        if (l->nofile)
                set_rlimit(a, RLIMIT_NOFILE, l->nofile, l->nofile);
        if (l->data_bytes)
                set_rlimit(a, RLIMIT_DATA, l->data_bytes, l->data_bytes);
        set_rlimit(a, RLIMIT_CORE, 0, 0);
        set_rlimit(a, RLIMIT_MSGQUEUE, 0, 0);
}

/* Raw set*id system calls for the cloned child. glibc's wrappers change the
 * ids of every thread of the process (__nptl_setxid) using the thread list
 * copied from the daemon: in a child made by a raw clone() those threads do
 * not exist, and one that was inside pthread_create() at clone time makes
 * the wrapper wait for it forever (seen as a template start hanging at
 * daemon start-up, holding the template lock). The child has exactly one
 * thread, so the per-thread system call is the right one. */
static int sys_setgroups_none(void)
{
        return (int)syscall(SYS_setgroups, 0, NULL);
}

static int sys_setresgid(gid_t g)
{
        return (int)syscall(SYS_setresgid, g, g, g);
}

static int sys_setresuid(uid_t u)
{
        return (int)syscall(SYS_setresuid, u, u, u);
}

static int capset_zero(void)
{
        struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
        struct __user_cap_data_struct d[2] = { { 0 } };
        return (int)syscall(SYS_capset, &h, d);
}

/* Drops every privilege: supplementary groups, the bounding and ambient
 * sets, then uid/gid (which clears the remaining capability sets because
 * SECBIT_KEEP_CAPS is off), and finally no_new_privs so setuid binaries and
 * file capabilities inside the jail are inert. */
static void drop_privileges(const struct child_args *a, bool become_user)
{
        for (int cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        child_fail(a, STEP_PRIVS, errno);
        CHECK(a, STEP_PRIVS, prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
        if (become_user) {
                /* In a user namespace setgroups is denied (and there are no
                 * supplementary groups to drop). */
                if (!a->ctx->userns)
                        CHECK(a, STEP_PRIVS, sys_setgroups_none());
                CHECK(a, STEP_PRIVS, sys_setresgid(JAIL_GID));
                CHECK(a, STEP_PRIVS, sys_setresuid(JAIL_UID));
        }
        CHECK(a, STEP_PRIVS, capset_zero());
        CHECK(a, STEP_PRIVS, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
}

static void confine(const struct child_args *a)
{
        if (a->ctx->landlock) {
                int r = landlock_restrict_scopes();
                if (r < 0 && r != -EOPNOTSUPP)
                        child_fail(a, STEP_LANDLOCK, -r);
        }
        if (a->ctx->seccomp) {
                int r = seccomp_prog_apply(a->ctx->seccomp);
                if (r < 0)
                        child_fail(a, STEP_SECCOMP, -r);
        }
}

/* fds 0..3 for the workload, the report pipe at 4 (close-on-exec, so the
 * parent sees EOF once the workload has exec'd), everything else closed. */
static void setup_fds(struct child_args *a)
{
        const struct jail_spec *s = a->spec;
        /* Move sources above the target range first so that dup2 order cannot
         * clobber them. */
        int out = fcntl(s->stdout_fd, F_DUPFD_CLOEXEC, 10);
        int err = fcntl(s->stderr_fd, F_DUPFD_CLOEXEC, 10);
        int ctl = s->ctl_fd >= 0 ? fcntl(s->ctl_fd, F_DUPFD_CLOEXEC, 10) : -1;
        int nul = fcntl(a->devnull_fd, F_DUPFD_CLOEXEC, 10);
        int rep = fcntl(a->report_fd, F_DUPFD_CLOEXEC, 10);
        if (out < 0 || err < 0 || nul < 0 || rep < 0 || (s->ctl_fd >= 0 && ctl < 0))
                child_fail(a, STEP_FDS, errno);
        a->report_fd = rep;
        CHECK(a, STEP_FDS, dup2(nul, 0));
        CHECK(a, STEP_FDS, dup2(out, 1));
        CHECK(a, STEP_FDS, dup2(err, 2));
        if (ctl >= 0)
                CHECK(a, STEP_FDS, dup2(ctl, 3));
        CHECK(a, STEP_FDS, dup3(rep, 4, O_CLOEXEC));
        a->report_fd = 4;
        CHECK(a, STEP_FDS, (int)syscall(SYS_close_range, 5U, ~0U, 0U));
}

/* The workload starts like a login would start it: nothing blocked and
 * every disposition at its default. The daemon blocks SIGTERM/SIGINT (for
 * its signal thread) and ignores SIGPIPE, and both survive execve. */
static void reset_signals(void)
{
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        for (int sig = 1; sig < NSIG; sig++)
                (void)sigaction(sig, &dfl, NULL); /* SIGKILL, SIGSTOP, glibc's own: EINVAL */
        sigset_t none;
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
}

static void exec_workload(struct child_args *a)
{
        const struct jail_spec *s = a->spec;
        setup_fds(a);
        reset_signals();
        CHECK(a, STEP_PRIVS, prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0));
        apply_rlimits(a);
        if (s->template) {
                /* Namespaced capabilities stay (uid 0 of its own user
                 * namespace); no_new_privs and Landlock scoping still apply. */
                CHECK(a, STEP_PRIVS, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
                if (a->ctx->landlock && landlock_restrict_scopes() < 0)
                        child_fail(a, STEP_LANDLOCK, EPERM);
        } else {
                drop_privileges(a, true);
                confine(a);
        }
        CHECK(a, STEP_CHDIR, chdir(s->cwd ? s->cwd : JAIL_WORKSPACE));
        execve(s->argv[0], (char *const *)s->argv, (char *const *)s->envp);
        child_fail(a, STEP_EXEC, errno);
}

static pid_t raw_fork(void)
{
        return (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
}

static int exit_code_of(int status)
{
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return 255;
}

/* Pid 1 of the jail: starts the workload, reaps everything, and exits with
 * the workload's status as soon as the workload itself has exited. Exiting
 * makes the kernel SIGKILL every other process of the pid namespace, so no
 * background process, daemonised or not, outlives the execution. */
static void run_init(struct child_args *a)
{
        pid_t child = raw_fork();
        if (child < 0)
                child_fail(a, STEP_FORK, errno);
        if (child == 0)
                exec_workload(a);

        /* Init keeps uid 0 but loses every capability: the workload (uid
         * 65534) cannot signal, ptrace or read /proc/1 of a different uid. */
        int replay = a->replay_fd;
        if (replay >= 0) {
                /* Keep the replay socket as fd 0, close everything else. */
                dup2(replay, 0);
                replay = 0;
        }
        syscall(SYS_close_range, replay >= 0 ? 1U : 0U, ~0U, 0U);
        a->report_fd = -1;
        if (replay >= 0) {
                swap_in_real_workspace(a, replay);
                close(replay);
        }
        drop_privileges(a, false);
        confine(a);
        for (;;) {
                int status;
                pid_t p = waitpid(-1, &status, __WALL);
                if (p == child)
                        _exit(exit_code_of(status));
                if (p < 0 && errno != EINTR)
                        _exit(255);
        }
}

/* Where the daemon's argv and environment strings live (fields 48-51 of
 * /proc/self/stat), found once by jail_ctx_init. A jail's init is a clone of
 * the daemon that never execs, and /proc/1/cmdline (unlike environ) is
 * readable by every process of the jail: it would show the daemon's command
 * line (binary path, listen address, data dir, --set values such as an
 * api_key). The child blanks both areas in its private copy of the memory. */
static struct {
        unsigned long arg_start, arg_end, env_start, env_end;
} host_strings;

static void find_host_strings(void)
{
        char buf[4096];
        if (read_file_small("/proc/self/stat", buf, sizeof(buf), NULL) < 0)
                return;
        /* comm (field 2) may hold spaces and parentheses: count from the last ')'. */
        char *p = strrchr(buf, ')');
        unsigned long v[4];
        int field = 2, got = 0;
        while (p && *p && got < 4) {
                p = strchr(p, ' ');
                if (!p)
                        break;
                p++;
                field++;
                if (field >= 48 && field <= 51)
                        v[got++] = strtoul(p, NULL, 10);
        }
        if (got == 4 && v[0] <= v[1] && v[2] <= v[3]) {
                host_strings.arg_start = v[0];
                host_strings.arg_end = v[1];
                host_strings.env_start = v[2];
                host_strings.env_end = v[3];
        }
}

static void blank_host_strings(void)
{
        if (host_strings.arg_end > host_strings.arg_start)
                memset((void *)host_strings.arg_start, 0, host_strings.arg_end - host_strings.arg_start);
        if (host_strings.env_end > host_strings.env_start)
                memset((void *)host_strings.env_start, 0, host_strings.env_end - host_strings.env_start);
        prctl(PR_SET_NAME, "init", 0, 0, 0);
}

static void child_main(struct child_args *a)
{
        char go;
        /* Die with the daemon thread that spawned us (house style R7). */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        blank_host_strings();
        if (read(a->sync_fd, &go, 1) != 1)
                child_fail(a, STEP_SYNC, EPIPE);
        close(a->sync_fd);
        if (a->spec->template) {
                /* Our host uid (0) is not mapped in the template's user
                 * namespace; become its root (JAIL_TEMPLATE_UID outside) or
                 * every file we create would fail with EOVERFLOW. */
                CHECK(a, STEP_SYNC, sys_setgroups_none());
                CHECK(a, STEP_SYNC, sys_setresgid(0));
                CHECK(a, STEP_SYNC, sys_setresuid(0));
        }
        /* A session and process group of its own: otherwise every process
         * of the jail is in the daemon's (kill(0, …) from the guest would aim
         * at the daemon's group, which only the uid check and Landlock's
         * signal scope stop, and in rootless mode the uid is the daemon's),
         * and in its terminal session when started from a shell. */
        CHECK(a, STEP_SYNC, setsid());
        CHECK(a, STEP_SYNC, unshare(CLONE_NEWCGROUP));
        if (a->ctx->netns_fd >= 0 && !a->spec->template)
                CHECK(a, STEP_NETNS, setns(a->ctx->netns_fd, CLONE_NEWNET));
        CHECK(a, STEP_HOSTNAME, sethostname("sandbox", 7));
        setup_root(a);
        run_init(a);
}

/* Template jails map their root to JAIL_TEMPLATE_UID and the jail user to
 * itself; only a privileged daemon may write a two-line map. */
static int write_template_maps(pid_t pid)
{
        char path[64], map[64];
        snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", JAIL_TEMPLATE_UID, JAIL_UID, JAIL_UID);
        snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
        int r = write_string_file(path, map);
        if (r < 0)
                return r;
        snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", JAIL_TEMPLATE_UID, JAIL_GID, JAIL_GID);
        snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
        return write_string_file(path, map);
}

static int write_id_maps(const struct jail_ctx *ctx, pid_t pid)
{
        char path[64], map[64];
        snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
        int r = write_string_file(path, "deny");
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
        snprintf(map, sizeof(map), "%u %u 1\n", JAIL_UID, (unsigned)ctx->outer_uid);
        if ((r = write_string_file(path, map)) < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
        snprintf(map, sizeof(map), "%u %u 1\n", JAIL_GID, (unsigned)ctx->outer_gid);
        return write_string_file(path, map);
}

/* How long a jail child may take to set up and exec before the spawn is
 * given up (and the child killed by the caller): a child stuck in setup must
 * not hold a worker, or a template's lock, forever. */
#define CHILD_REPORT_TIMEOUT_MS 20000

static int read_child_report(int fd, const char **ret_err)
{
        struct child_report rep;
        ssize_t n;
        struct pollfd p = { fd, POLLIN, 0 };
        int pr;
        do
                pr = poll(&p, 1, CHILD_REPORT_TIMEOUT_MS);
        while (pr < 0 && errno == EINTR);
        if (pr == 0) {
                *ret_err = "timeout";
                return -ETIMEDOUT;
        }
        do
                n = read(fd, &rep, sizeof(rep));
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return 0;
        if (n != (ssize_t)sizeof(rep)) {
                *ret_err = "report";
                return -EIO;
        }
        *ret_err = rep.step >= 0 && rep.step < _STEP_MAX ? step_names[rep.step] : "unknown";
        return rep.err > 0 ? -rep.err : -EIO;
}

static void format_opts(char *buf, size_t len, uint64_t bytes, uint64_t inodes, const char *mode)
{
        snprintf(buf, len, "size=%llu,nr_inodes=%llu,mode=%s", (unsigned long long)bytes,
                 (unsigned long long)(inodes ? inodes : 16384), mode);
}

static struct cgroup *cgroup_take_free(struct jail_ctx *ctx, uint64_t memory_bytes, uint64_t pids)
{
        struct cgroup *cg = NULL;
        pthread_mutex_lock(&ctx->cg_lock);
        for (size_t i = 0; i < ctx->cg_nfree; i++) {
                struct jail_cg_slot *slot = &ctx->cg_free[i];
                if (slot->memory_bytes == memory_bytes && slot->pids == pids) {
                        cg = slot->cg;
                        *slot = ctx->cg_free[--ctx->cg_nfree];
                        break;
                }
        }
        pthread_mutex_unlock(&ctx->cg_lock);
        return cg;
}

/* Keeps an emptied group for the next jail with the same limits. */
static bool cgroup_give_back(struct jail_ctx *ctx, struct cgroup *cg, uint64_t memory_bytes, uint64_t pids)
{
        if (!ctx || !cg || !cgroup_is_empty(cg) || cgroup_reset(cg) < 0)
                return false;
        bool kept = false;
        pthread_mutex_lock(&ctx->cg_lock);
        if (ctx->cg_nfree < ARRAY_SIZE(ctx->cg_free)) {
                ctx->cg_free[ctx->cg_nfree++] = (struct jail_cg_slot){ cg, memory_bytes, pids };
                kept = true;
        }
        pthread_mutex_unlock(&ctx->cg_lock);
        return kept;
}

int jail_spawn(struct jail_ctx *ctx, const struct jail_spec *spec, struct jail_proc *ret,
               const char **ret_err)
{
        int sync[2] = { -1, -1 }, report[2] = { -1, -1 }, r;
        struct cgroup *cg = NULL;
        struct child_args a = { .ctx = ctx, .spec = spec, .replay_fd = spec->replay_fd };
        *ret_err = "setup";

        snprintf(a.root, sizeof(a.root), "%s", ctx->root_dir);
        format_opts(a.tmp_opts, sizeof(a.tmp_opts), spec->limits.tmp_bytes, spec->limits.tmp_inodes, "1777");
        format_opts(a.ws_opts, sizeof(a.ws_opts), spec->limits.workspace_bytes,
                    spec->limits.workspace_inodes, "0777");

        cg = cgroup_take_free(ctx, spec->limits.memory_bytes, spec->limits.pids);
        if (!cg) {
                struct cgroup_limits cl = { spec->limits.memory_bytes, spec->limits.pids };
                r = cgroup_create(ctx->cgroot, spec->cgroup_name, &cl, &cg);
                if (r < 0) {
                        *ret_err = "cgroup";
                        return r;
                }
        }
        _cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0 || pipe2(sync, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }
        a.sync_fd = sync[0];
        a.report_fd = report[1];
        a.devnull_fd = devnull;

        /* The cgroup namespace is unshared by the child after the parent has
         * attached it, so its root is the execution's own group. */
        unsigned long flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
        if (spec->template && ctx->userns) {
                r = -EOPNOTSUPP;
                goto fail;
        }
        if (ctx->userns || spec->template)
                flags |= CLONE_NEWUSER;
        if (ctx->netns_fd < 0 || spec->template)
                flags |= CLONE_NEWNET;
        int pidfd = -1;
        pid_t pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, &pidfd, NULL, 0);
        if (pid < 0) {
                r = -errno;
                *ret_err = "clone";
                goto fail;
        }
        if (pid == 0)
                child_main(&a); /* never returns */

        close(sync[0]);
        close(report[1]);
        sync[0] = report[1] = -1;
        if ((r = cgroup_attach(cg, pid)) < 0)
                *ret_err = "cgroup-attach";
        else if (spec->template && (r = write_template_maps(pid)) < 0)
                *ret_err = "id-maps";
        else if (ctx->userns && (r = write_id_maps(ctx, pid)) < 0)
                *ret_err = "id-maps";
        if (r == 0 && write(sync[1], "g", 1) != 1)
                r = -errno;
        close(sync[1]);
        sync[1] = -1;
        if (r == 0)
                r = read_child_report(report[0], ret_err);
        close(report[0]);
        report[0] = -1;
        if (r < 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, __WALL);
                close(pidfd);
                goto fail;
        }
        *ret = (struct jail_proc){ .ctx = ctx, .memory_bytes = spec->limits.memory_bytes,
                                   .pids = spec->limits.pids, .pid = pid, .pidfd = pidfd, .cg = cg };
        return 0;
fail:
        for (int i = 0; i < 2; i++) {
                if (sync[i] >= 0)
                        close(sync[i]);
                if (report[i] >= 0)
                        close(report[i]);
        }
        cgroup_destroy(cg);
        return r;
}

int jail_adopt(struct jail_ctx *ctx, pid_t pid, const struct jail_limits *lim, const char *cgroup_name,
               struct jail_proc *ret)
{
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return -errno;
        struct cgroup *cg = cgroup_take_free(ctx, lim->memory_bytes, lim->pids);
        int r = 0;
        if (!cg) {
                struct cgroup_limits cl = { lim->memory_bytes, lim->pids };
                r = cgroup_create(ctx->cgroot, cgroup_name, &cl, &cg);
        }
        if (r == 0 && (r = cgroup_attach(cg, pid)) < 0)
                cgroup_destroy(cg);
        if (r < 0) {
                close(pidfd);
                return r;
        }
        *ret = (struct jail_proc){ .ctx = ctx, .foreign = true, .memory_bytes = lim->memory_bytes,
                                   .pids = lim->pids, .pid = pid, .pidfd = pidfd, .cg = cg };
        return 0;
}

void jail_kill(struct jail_proc *p)
{
        /* Signal through the pidfd: unlike a pid, it cannot name a recycled
         * process if the jail was reaped concurrently. */
        if (p->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
        else if (p->pid > 0)
                kill(p->pid, SIGKILL);
        if (p->cg)
                cgroup_kill_all(p->cg);
}

/* A foreign process is somebody else's child: wait for its pidfd to say it
 * exited (bounded), there is nothing to reap. */
static int wait_foreign(struct jail_proc *p)
{
        struct pollfd pf = { p->pidfd, POLLIN, 0 };
        poll(&pf, 1, 2000);
        p->pid = 0;
        close(p->pidfd);
        p->pidfd = -1;
        return 0;
}

int jail_reap(struct jail_proc *p, int *ret_status)
{
        int status = 0;
        if (p->pid <= 0)
                return -ECHILD;
        if (p->foreign) {
                /* Its real status went to its parent in the template jail;
                 * "exited 1" makes an unanswered death an EngineError. */
                if (ret_status)
                        *ret_status = 1 << 8;
                return wait_foreign(p);
        }
        while (waitpid(p->pid, &status, __WALL) < 0) {
                if (errno != EINTR)
                        return -errno;
        }
        p->pid = 0;
        if (p->pidfd >= 0) {
                close(p->pidfd);
                p->pidfd = -1;
        }
        if (ret_status)
                *ret_status = status;
        return 0;
}

void jail_proc_release(struct jail_proc *p)
{
        if (p->pid > 0) {
                jail_kill(p);
                jail_reap(p, NULL);
        }
        if (!cgroup_give_back(p->ctx, p->cg, p->memory_bytes, p->pids))
                cgroup_destroy(p->cg);
        p->cg = NULL;
}

/* The shared empty network namespace: a child unshares one and we keep a
 * handle to it. It has only a down loopback, so nothing inside can reach any
 * address, and one namespace for all jails avoids the ~1 ms create and the
 * background teardown cost of a namespace per run (isolation probe). */
static int make_empty_netns(int *ret_fd)
{
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0);
        if (pid < 0) {
                int r = -errno;
                close(pfd[0]);
                close(pfd[1]);
                return r;
        }
        if (pid == 0) {
                char c;
                close(pfd[1]);
                (void)!read(pfd[0], &c, 1);
                _exit(0);
        }
        close(pfd[0]);
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int r = fd < 0 ? -errno : 0;
        close(pfd[1]);
        waitpid(pid, NULL, 0);
        if (r == 0)
                *ret_fd = fd;
        return r;
}

int jail_ctx_init(struct jail_ctx *ctx, const char *run_dir, const char *kernels_dir,
                  int cgroup_force, const char **ret_err)
{
        int r;
        *ctx = (struct jail_ctx){ .netns_fd = -1, .kernels_fd = -1, .forkserver_dir_fd = -1 };
        pthread_mutex_init(&ctx->cg_lock, NULL);
        ctx->userns = geteuid() != 0;
        ctx->outer_uid = geteuid();
        ctx->outer_gid = getegid();

        if (!realpath(kernels_dir, ctx->kernels_dir)) {
                *ret_err = "kernels directory not found";
                return -errno;
        }
        ctx->kernels_fd = open(ctx->kernels_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ctx->kernels_fd < 0) {
                *ret_err = "cannot open the kernels directory";
                return -errno;
        }
        /* The mount point for jail roots must be reachable by a template
         * jail's root (JAIL_TEMPLATE_UID), whatever the data dir's mode:
         * prefer a root-owned 0755 directory under /run. */
        if (access("/run", W_OK) == 0)
                snprintf(ctx->root_dir, sizeof(ctx->root_dir), "/run/sandboxd/%d/jailroot", (int)getpid());
        else
                snprintf(ctx->root_dir, sizeof(ctx->root_dir), "%s/jailroot", run_dir);
        if ((r = mkdir_p(ctx->root_dir, 0755)) < 0) {
                *ret_err = "cannot create the jail root directory";
                return r;
        }
        /* Rootless mode cannot join a namespace owned by the host user
         * namespace, so each jail makes its own (empty) one instead. */
        if (!ctx->userns && (r = make_empty_netns(&ctx->netns_fd)) < 0) {
                *ret_err = "cannot create the empty network namespace";
                return r;
        }
        ctx->landlock = landlock_abi_version() >= 6;
        find_host_strings();
        if ((r = seccomp_prog_build(false, &ctx->seccomp)) < 0) {
                *ret_err = "cannot build the seccomp policy";
                return r;
        }
        char name[64];
        /* pid plus start time: a daemon killed with -9 leaves its (empty)
         * groups behind, and pids wrap around quickly on a busy host; a
         * restart that inherited the old pid must not collide with them. */
        snprintf(name, sizeof(name), "sandboxd-%d-%llx", (int)getpid(), (unsigned long long)wall_ms());
        if ((r = cgroup_root_open(name, cgroup_force, &ctx->cgroot)) < 0) {
                *ret_err = "cannot open the cgroup root";
                return r;
        }
        return 0;
}

int jail_ctx_set_forkserver_dir(struct jail_ctx *ctx, const char *dir)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (faccessat(fd, JAIL_FORKSERVER_LIB, R_OK, 0) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        if (ctx->forkserver_dir_fd >= 0)
                close(ctx->forkserver_dir_fd);
        ctx->forkserver_dir_fd = fd;
        return 0;
}

void jail_ctx_done(struct jail_ctx *ctx)
{
        while (ctx->cg_nfree > 0)
                cgroup_destroy(ctx->cg_free[--ctx->cg_nfree].cg);
        if (ctx->netns_fd >= 0)
                close(ctx->netns_fd);
        ctx->netns_fd = -1;
        seccomp_prog_free(ctx->seccomp);
        ctx->seccomp = NULL;
        cgroup_root_free(ctx->cgroot);
        ctx->cgroot = NULL;
        if (ctx->kernels_fd >= 0)
                close(ctx->kernels_fd);
        ctx->kernels_fd = -1;
        if (ctx->forkserver_dir_fd >= 0)
                close(ctx->forkserver_dir_fd);
        ctx->forkserver_dir_fd = -1;
        /* Remove our (empty) mount point directories under /run. */
        if (strncmp(ctx->root_dir, "/run/sandboxd/", 14) == 0) {
                char dir[4096];
                rmdir(ctx->root_dir);
                snprintf(dir, sizeof(dir), "%s", ctx->root_dir);
                char *slash = strrchr(dir, '/');
                if (slash) {
                        *slash = '\0';
                        rmdir(dir);
                }
        }
}
