/* The jail's file system, built by the cloned child before pivot_root: a
 * tmpfs root with /usr bound read-only, a synthesised /etc, a private /dev,
 * /tmp and /workspace, a copy of the kernels, a masked procfs, and the
 * replay overlay, and the extra mounts of jail_spec.binds (also attached
 * later in a running jail: jail_attach_bind). No allocation, no stdio:
 * this runs in the cloned child. */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/internal.h"
#include "jail/procfs.h"

/* System files the runtimes need, bound read-only when present. Everything
 * else in the host /etc (shadow, hostname, machine-id…) stays invisible. */
static const char *const etc_binds[] = {
        "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
        "localtime", "nsswitch.conf", "protocols", "services", "mime.types", "perl", "ruby",
        "python3", "python3.11", "nodejs", "magic", "os-release",
        /* python3-matplotlib: its defaults (Debian reads them only here), and
         * fontconfig's, for the fc-list it runs to find the system fonts. */
        "matplotlibrc", "fonts",
};

/* Host devices re-bound into the jail's private /dev. */
static const char *const dev_binds[] = { "null", "zero", "full", "random", "urandom" };

static int sys_pivot_root(const char *new_root, const char *put_old)
{
        return (int)syscall(SYS_pivot_root, new_root, put_old);
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
                CHECK_R(a, STEP_ETC, jail_bind_ro(src, dst, true));
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
        CHECK(a, STEP_ETC, write_text_file(path_join(dst, etc, "resolv.conf"),
                                           a->spec->local_dns && a->spec->has_netns ? "nameserver 127.0.0.1\n" : ""));
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
        if (a->spec->pty) {
                /* A devpts of its own: the jail sees only its own terminals
                 * and cannot open the host's; ptmx is this instance's. */
                CHECK(a, STEP_DEV, mkdir(path_join(dst, dev, "pts"), 0755));
                CHECK(a, STEP_DEV, mount("devpts", dst, "devpts", MS_NOSUID | MS_NOEXEC,
                                         "newinstance,ptmxmode=0666,mode=0620"));
                CHECK(a, STEP_DEV, symlink("pts/ptmx", path_join(dst, dev, "ptmx")));
        }
        CHECK(a, STEP_DEV, mount(NULL, dev, NULL, MS_REMOUNT | MS_NOSUID | MS_NOEXEC | MS_RDONLY, "size=64k,mode=755"));
}

/* Mounts a fresh procfs. Must run after the pid namespace exists: proc shows
 * the mounting task's pid namespace, so the jail sees only its own tree. */
static void setup_proc(const struct child_args *a)
{
        char proc[PATHLEN];
        path_join(proc, a->root, "proc");
        CHECK(a, STEP_PROC, mkdir(proc, 0555));
        CHECK(a, STEP_PROC, mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL));
        /* A template's children mount their own procfs, which the kernel only
         * allows inside a user namespace while an unobstructed one exists;
         * they mask their own copy. */
        if (!a->spec->template)
                CHECK_R(a, STEP_PROC, jail_mask_proc(proc));
}

int jail_workspace_tree(int dir_fd)
{
        int fd = open_tree(dir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        return fd < 0 ? -errno : fd;
}

/* Puts the sandbox's workspace at dst: the detached copy the daemon made
 * under the sandbox lock (so a concurrent DELETE cannot swap in the plain
 * directory left under the unmounted image) or, without one (rootless: a
 * plain directory anyway), a bind of its path. Private, so nothing mounted
 * in the jail propagates back; nosuid,nodev in every mode, so a set-id file
 * a guest makes never works, even on a plain directory (not noexec: guests
 * run their scripts there). */
static void attach_workspace(const struct child_args *a, const char *dst)
{
        const struct jail_spec *s = a->spec;
        if (s->workspace_tree_fd > 0) {
                CHECK(a, STEP_WORKSPACE, move_mount(s->workspace_tree_fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH));
                close(s->workspace_tree_fd);
                CHECK(a, STEP_WORKSPACE, mount(NULL, dst, NULL, MS_PRIVATE, NULL));
        } else {
                CHECK(a, STEP_WORKSPACE, mount(s->workspace_dir, dst, NULL, MS_BIND, NULL));
        }
        CHECK(a, STEP_WORKSPACE, mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL));
}

int jail_bind_tree(int dir_fd, bool readonly)
{
        int fd = open_tree(dir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (fd < 0)
                return -errno;
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                               (readonly ? MOUNT_ATTR_RDONLY : 0) };
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* Never through a symlink: a guest of another jail of the sandbox may swap
 * a directory of the shared workspace for a link meanwhile, and the mount
 * must still land inside the workspace. */
int jail_open_mount_point(int base_fd, const char *rel, uid_t owner)
{
        char comp[256];
        int dfd = fcntl(base_fd, F_DUPFD_CLOEXEC, 0);
        while (dfd >= 0 && *rel) {
                size_t n = strcspn(rel, "/");
                memcpy(comp, rel, n < sizeof(comp) ? n : 0);
                comp[n < sizeof(comp) ? n : 0] = '\0';
                rel += n + (rel[n] == '/');
                if (n == 0 || n >= sizeof(comp) || strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
                        close(dfd);
                        errno = EINVAL;
                        return -1;
                }
                if (mkdirat(dfd, comp, 0755) == 0 && owner != (uid_t)-1)
                        fchownat(dfd, comp, owner, owner, AT_SYMLINK_NOFOLLOW);
                int next = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int e = errno;
                close(dfd);
                errno = e;
                dfd = next;
        }
        return dfd;
}

/* In the joined namespace of a running jail: the same walk as at its
 * start, from the jail's own root. */
static int attach_in_ns(int tree_fd, const char *path, uid_t owner)
{
        static const char wsp[] = JAIL_WORKSPACE "/";
        bool in_ws = strncmp(path, wsp, sizeof(wsp) - 1) == 0;
        int base = open(in_ws ? JAIL_WORKSPACE : "/", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (base < 0)
                return -errno;
        int dfd = in_ws ? jail_open_mount_point(base, path + sizeof(wsp) - 1, owner)
                        : jail_open_mount_point(base, path + 1, (uid_t)-1);
        int r = dfd < 0 ? -errno : 0;
        close(base);
        if (r == 0 && move_mount(tree_fd, "", dfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                r = -errno;
        if (dfd >= 0)
                close(dfd);
        return r;
}

int jail_attach_bind(int pidfd, int tree_fd, const char *path, uid_t owner)
{
        /* A child: setns(CLONE_NEWNS) needs a single-threaded caller. It
         * makes system calls only (no allocation after fork). */
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int r = setns(pidfd, CLONE_NEWNS) < 0 ? -errno : attach_in_ns(tree_fd, path, owner);
                _exit(r < 0 ? -r & 0xff : 0);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

/* Attaches spec->binds: below /workspace on ws (the workspace as attached
 * in this jail), anywhere else on the root tmpfs (made writable until the
 * pivot), each onto the directory fd jail_open_mount_point walked to. */
static void setup_binds(const struct child_args *a, const char *ws)
{
        static const char wsp[] = JAIL_WORKSPACE "/";
        const struct jail_spec *s = a->spec;
        int root_fd = open(a->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int ws_fd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(a, STEP_BINDS, root_fd);
        CHECK(a, STEP_BINDS, ws_fd);
        for (size_t i = 0; i < s->nbinds && i < JAIL_MAX_BINDS; i++) {
                const char *path = s->binds[i].path;
                bool in_ws = strncmp(path, wsp, sizeof(wsp) - 1) == 0;
                int dfd = in_ws ? jail_open_mount_point(ws_fd, path + sizeof(wsp) - 1, a->host_id)
                                : jail_open_mount_point(root_fd, path + 1, (uid_t)-1);
                CHECK(a, STEP_BINDS, dfd);
                CHECK(a, STEP_BINDS, move_mount(s->binds[i].tree_fd, "", dfd, "",
                                                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
                close(s->binds[i].tree_fd);
                close(dfd);
        }
        close(root_fd);
        close(ws_fd);
}

static void setup_replay_overlay(const struct child_args *a, const char *ws)
{
        char sbx[PATHLEN], real[PATHLEN], ovl[PATHLEN], up[PATHLEN], work[PATHLEN];
        path_join(sbx, a->root, REPLAY_DIR + 1);
        path_join(real, sbx, "ws");
        path_join(ovl, sbx, "ovl");
        CHECK(a, STEP_WORKSPACE, mkdir(sbx, 0700));
        CHECK(a, STEP_WORKSPACE, mkdir(real, 0755));
        CHECK(a, STEP_WORKSPACE, mkdir(ovl, 0755));
        attach_workspace(a, real);
        CHECK(a, STEP_WORKSPACE, mount("tmpfs", ovl, "tmpfs", MS_NOSUID | MS_NODEV, a->ws_opts));
        CHECK(a, STEP_WORKSPACE, mkdir(path_join(up, ovl, "up"), 0755));
        CHECK(a, STEP_WORKSPACE, mkdir(path_join(work, ovl, "work"), 0755));
        CHECK(a, STEP_WORKSPACE, chown(up, a->host_id, a->host_id));
        /* Layer paths relative to sbx (the mount resolves them against the
         * cwd): overlayfs shows them verbatim in the jail's
         * /proc/self/mountinfo, and absolute ones would reveal the host path
         * of the jail root, inside the data dir. */
        CHECK(a, STEP_WORKSPACE, chdir(sbx));
        CHECK(a, STEP_WORKSPACE, mount("overlay", ws, "overlay", MS_NOSUID | MS_NODEV,
                                       "lowerdir=ws,upperdir=ovl/up,workdir=ovl/work"));
        CHECK(a, STEP_WORKSPACE, chdir("/"));
}

/* Runs in the jail's mount namespace after replay (jail_swap_workspace):
 * replaces the overlay with the real workspace. The daemon waits for it
 * before sending the next request, so the kernel never sees a half-swapped
 * /workspace. */
int jail_swap_in_real_workspace(void)
{
        int r = 0;
        if (umount2(JAIL_WORKSPACE, MNT_DETACH) < 0 ||
            mount(REPLAY_DIR "/ws", JAIL_WORKSPACE, NULL, MS_MOVE, NULL) < 0)
                r = -errno;
        umount2(REPLAY_DIR "/ovl", MNT_DETACH);
        return r;
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

void jail_setup_root(const struct child_args *a)
{
        const struct jail_spec *s = a->spec;
        char p[PATHLEN];

        /* The daemon runs with umask 077 (data at rest); the jail's tree and
         * its guests get the usual 022, or 002 when rootless with host ids,
         * so that the daemon, as their group, can still change their files. */
        umask(a->ctx->userns && a->ctx->id_count ? 002 : 022);
        /* Private propagation first, so nothing we mount leaks back to the
         * host namespace and host mount events do not reach the jail. */
        CHECK(a, STEP_PRIVATE, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
        CHECK(a, STEP_ROOT_TMPFS, mount("tmpfs", a->root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755"));

        CHECK(a, STEP_USR, mkdir(path_join(p, a->root, "usr"), 0755));
        CHECK_R(a, STEP_USR, jail_bind_ro("/usr", p, true));
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
                attach_workspace(a, p);
        } else {
                CHECK(a, STEP_WORKSPACE, mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, a->ws_opts));
        }
        if (s->nbinds) {
                /* Replaying: on the real workspace, which the swap moves to
                 * /workspace with its submounts. */
                char sbx[PATHLEN], real[PATHLEN];
                path_join(real, path_join(sbx, a->root, REPLAY_DIR + 1), "ws");
                setup_binds(a, s->workspace_dir && s->replay_fd >= 0 ? real : p);
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
