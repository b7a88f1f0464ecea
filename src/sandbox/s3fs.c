/* s3fs, the FUSE file system that serves a bucket, run by the daemon on
 * the host for a sandbox's bucket mount (mount.c). Never inside a jail:
 * the credentials stay in a daemon-private file that s3fs reads once at
 * start and that is removed as soon as the mount exists, and the jails get
 * only a detached copy of the mount (jail_spec.binds).
 *
 * s3fs runs in the foreground (-f) as the daemon's child: its pid is kept,
 * so an unmount can end it and a failed mount leaves nothing running. s3fs
 * mounts before it checks the bucket, and a failed check ends it a moment
 * later with status 0 (observed with 1.90), so success is only claimed
 * after the mount appeared and a listing of its root went through. */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/io.h"
#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/internal.h"

/* The mount must appear within this (the anchor: 60 × 100 ms). */
#define S3FS_MOUNT_MS 6000
/* The first listing (s3fs's own bucket check runs before it is answered). */
#define S3FS_CHECK_MS 20000
/* An unmounted s3fs flushes and exits on SIGTERM; after this, SIGKILL. */
#define S3FS_STOP_MS 3000
/* s3fs stages what a guest writes in temporary files on the host's disk
 * (no workspace quota applies there): it stops using the disk, falling
 * back to smaller uploads, when less than this is free. */
#define S3FS_DISKFREE_MB 1024

static const char *const s3fs_paths[] = { "/usr/bin/s3fs", "/usr/local/bin/s3fs" };

static const char *s3fs_binary(void)
{
        for (size_t i = 0; i < ARRAY_SIZE(s3fs_paths); i++)
                if (access(s3fs_paths[i], X_OK) == 0)
                        return s3fs_paths[i];
        return NULL;
}

/* Undoes mountinfo's octal escapes (space, tab, newline, backslash). */
static void unescape_mountinfo(char *s)
{
        char *o = s;
        for (char *p = s; *p; p++) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
                    p[3] <= '7') {
                        *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                        p += 3;
                } else {
                        *o++ = *p;
                }
        }
        *o = '\0';
}

/* Calls fn for every mount point of the daemon's namespace equal to path
 * (prefix false) or below path/ (prefix true). Read from mountinfo, not by
 * stat: a FUSE mount whose server is still checking its bucket would block
 * a stat of its root. Returns how many matched. */
static size_t each_mount(const char *path, bool prefix, void (*fn)(const char *mp))
{
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[8192], mp[4096];
        size_t n = 0, len = strlen(path);
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
                        continue;
                unescape_mountinfo(mp);
                bool hit = prefix ? strncmp(mp, path, len) == 0 && mp[len] == '/' : strcmp(mp, path) == 0;
                if (hit) {
                        n++;
                        if (fn)
                                fn(mp);
                }
        }
        fclose(f);
        return n;
}

static void detach(const char *mp)
{
        umount2(mp, MNT_DETACH);
}

/* The last error s3fs wrote (its log and stderr share the file): a "[CRT]"
 * or "[ERR]" line without its source position, or a "s3fs: …" line. */
static void last_error(const char *log, char *out, size_t len)
{
        char text[16384];
        size_t n = 0;
        out[0] = '\0';
        _cleanup_close_ int fd = open(log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return;
        off_t size = lseek(fd, 0, SEEK_END);
        lseek(fd, size > (off_t)sizeof(text) - 1 ? size - (off_t)sizeof(text) + 1 : 0, SEEK_SET);
        ssize_t r = read(fd, text, sizeof(text) - 1);
        n = r > 0 ? (size_t)r : 0;
        text[n] = '\0';
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                const char *msg = NULL;
                if (strstr(line, "[CRT]") || strstr(line, "[ERR]"))
                        msg = strstr(line, "): ") ? strstr(line, "): ") + 3 : line;
                else if (strncmp(line, "s3fs: ", 6) == 0)
                        msg = line + 6;
                if (msg && !strstr(msg, "debug level"))
                        snprintf(out, len, "%s", msg);
        }
        for (char *p = out; *p; p++)
                if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
                        *p = '?';
}

static int write_passwd(const char *path, const char *key_id, const char *secret)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        char line[1100];
        int n = snprintf(line, sizeof(line), "%s:%s\n", key_id, secret);
        int r = n > 0 && (size_t)n < sizeof(line) ? write_all(fd, line, (size_t)n) : -E2BIG;
        explicit_bzero(line, sizeof(line));
        return r;
}

/* -o for s3fs, in the anchor's order (logfile, provider flags, the
 * client's options) with our defaults before the client's and the options
 * that keep the mount ours after them (s3fs: the last one wins). */
static int build_options(const struct s3fs_request *rq, const char *log, const char *passwd, struct buf *o)
{
        int r = buf_printf(o, "logfile=%s,retries=2,connect_timeout=10", log);
        if (r == 0 && rq->provider_opt[0])
                r = buf_printf(o, ",%s", rq->provider_opt);
        for (size_t i = 0; r == 0 && i < rq->nopts; i++)
                r = buf_printf(o, ",%s", rq->opts[i]);
        if (r == 0)
                r = buf_printf(o, ",passwd_file=%s,url=%s,allow_other,uid=%u,gid=%u,umask=0022,mp_umask=0022,nosuid,nodev,"
                               "ensure_diskfree=%d%s",
                               passwd, rq->endpoint, rq->uid, rq->gid, S3FS_DISKFREE_MB, rq->readonly ? ",ro" : "");
        return r == 0 ? buf_append(o, "", 1) : r;
}

/* posix_spawn: s3fs starts from a clean slate (its own session, default
 * signals, nothing inherited but the log as stdout and stderr, an
 * environment without the daemon's own credentials). */
static int spawn_s3fs(const char *bin, const char *const argv[], const char *log, pid_t *ret)
{
        static const char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent", NULL };
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        sigset_t none, dfl;
        sigemptyset(&none);
        sigfillset(&dfl);
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&at);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        posix_spawn_file_actions_addclosefrom_np(&fa, 3);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &dfl);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        int r = posix_spawn(ret, bin, &fa, &at, (char *const *)argv, (char *const *)envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        return -r;
}

/* Whether s3fs has exited; once reaped, p->pid is -1 (never signal a pid
 * that may have been reused). */
static bool gone(struct s3fs_proc *p)
{
        if (p->pid <= 0)
                return true;
        pid_t r = waitpid(p->pid, NULL, WNOHANG);
        if (r == p->pid || (r < 0 && errno == ECHILD))
                p->pid = -1;
        return p->pid <= 0;
}

/* Waits until s3fs's mount shows up; -ENOENT when s3fs ended first. */
static int wait_mounted(struct s3fs_proc *p)
{
        for (uint64_t end = now_ms() + S3FS_MOUNT_MS; now_ms() < end; usleep(20000)) {
                if (each_mount(p->mnt, false, NULL))
                        return 0;
                if (gone(p))
                        return -ENOENT;
        }
        return -ETIMEDOUT;
}

/* Lists the mount's root once, from a child: a FUSE request can block
 * (an endpoint that never answers), and a child can be killed and reaped.
 * It only makes raw system calls (no allocation after fork). */
static int check_listing(struct s3fs_proc *p)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char buf[4096] __attribute__((aligned(8)));
                int fd = open(p->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _exit(fd < 0 || syscall(SYS_getdents64, fd, buf, sizeof(buf)) < 0 ? 1 : 0);
        }
        int st = 0;
        pid_t w = 0;
        for (uint64_t end = now_ms() + S3FS_CHECK_MS; (w = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() < end;)
                usleep(20000);
        if (w == 0) {
                /* Killing the server ends the blocked request too. */
                kill(p->pid, SIGKILL);
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                return -ETIMEDOUT;
        }
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static void paths_fill(struct s3fs_proc *p, const char *dir)
{
        snprintf(p->dir, sizeof(p->dir), "%s", dir);
        snprintf(p->mnt, sizeof(p->mnt), "%s/mnt", dir);
}

static int start(const struct s3fs_request *rq, struct s3fs_proc *p, char *log, char *passwd, struct err *err)
{
        const char *bin = s3fs_binary();
        if (!bin)
                return err_set(err, ERR_UNAVAILABLE, ENOENT, "s3fs is not installed on the host");
        if (mkdir(p->mnt, 0755) < 0)
                return err_set(err, ERR_INTERNAL, errno, "Cannot make the mount point: %s", strerror(errno));
        int r = write_passwd(passwd, rq->key_id, rq->secret);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot write the credentials file: %s", strerror(-r));
        _cleanup_(buf_free) struct buf opts;
        buf_init(&opts, 64 * 1024);
        char source[2048];
        snprintf(source, sizeof(source), "%s%s%s", rq->bucket, rq->prefix ? ":" : "", rq->prefix ? rq->prefix : "");
        if (build_options(rq, log, passwd, &opts) < 0)
                return err_set(err, ERR_INVALID, E2BIG, "s3fs options too long");
        const char *argv[] = { "s3fs", source, p->mnt, "-f", "-o", opts.data, NULL };
        r = spawn_s3fs(bin, argv, log, &p->pid);
        if (r < 0) {
                p->pid = -1;
                return err_set(err, ERR_UNAVAILABLE, -r, "Cannot start s3fs: %s", strerror(-r));
        }
        return 0;
}

/* Mounted and listed, or why not (s3fs's own last error when it wrote one). */
static int verify(struct s3fs_proc *p, const char *log, const char *passwd, struct err *err)
{
        int r = wait_mounted(p);
        /* s3fs has read its credentials once it mounted (or gave up). */
        unlink(passwd);
        const char *what = r == -ETIMEDOUT ? "the mount did not appear within 6 s" : "s3fs ended before mounting";
        if (r == 0) {
                r = check_listing(p);
                what = r == -ETIMEDOUT ? "the bucket did not answer within 20 s" : "the bucket cannot be listed";
                /* A failed bucket check ends s3fs a moment after mounting. */
                if (r == 0 && (!each_mount(p->mnt, false, NULL) || gone(p)))
                        r = -EIO;
        }
        if (r == 0 && (p->root_fd = open(p->mnt, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
                r = -errno;
                what = "cannot open the mount";
        }
        if (r < 0) {
                char why[256];
                last_error(log, why, sizeof(why));
                return err_set(err, ERR_UNAVAILABLE, -r, "%s%s%s", what, why[0] ? ": " : "", why);
        }
        return 0;
}

int s3fs_mount(const struct s3fs_request *rq, const char *dir, struct s3fs_proc *ret, struct err *err)
{
        *ret = (struct s3fs_proc){ .pid = -1, .root_fd = -1 };
        paths_fill(ret, dir);
        char log[4200], passwd[4200];
        snprintf(log, sizeof(log), "%s/log", dir);
        snprintf(passwd, sizeof(passwd), "%s/passwd", dir);
        if (strchr(dir, ','))
                return err_set(err, ERR_INTERNAL, EINVAL, "The data dir's path holds a comma (s3fs options)");
        int r = start(rq, ret, log, passwd, err);
        if (r == 0)
                r = verify(ret, log, passwd, err);
        if (r < 0) {
                unlink(passwd);
                s3fs_unmount(ret);
        }
        return r;
}

static void stop(struct s3fs_proc *p)
{
        if (gone(p))
                return;
        kill(p->pid, SIGTERM);
        for (uint64_t end = now_ms() + S3FS_STOP_MS; now_ms() < end; usleep(10000))
                if (gone(p))
                        return;
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = -1;
}

void s3fs_unmount(struct s3fs_proc *p)
{
        if (!p->dir[0])
                return;
        if (p->root_fd >= 0)
                close(p->root_fd);
        p->root_fd = -1;
        /* Detached, not unmounted: nothing must keep the host from letting
         * go. Ending s3fs then ends the copies in running jails too (their
         * next access fails) instead of leaving the bucket reachable. */
        each_mount(p->mnt, false, detach);
        stop(p);
        rmdir(p->mnt);
        char log[4200];
        snprintf(log, sizeof(log), "%s/log", p->dir);
        unlink(log);
        rmdir(p->dir);
        /* The sandbox's directory too, once its last mount is gone. */
        char *slash = strrchr(p->dir, '/');
        if (slash) {
                *slash = '\0';
                rmdir(p->dir);
        }
        p->dir[0] = '\0';
}

struct entry_fn {
        void (*fn)(int, const char *);
};

static void call_entry(int dir_fd, const char *name, void *ud)
{
        ((const struct entry_fn *)ud)->fn(dir_fd, name);
}

/* Calls fn(dir_fd, name) for every entry of dir_fd but . and .. */
static void each_entry(int dir_fd, void (*fn)(int, const char *))
{
        (void)dir_each(dir_fd, call_entry, &(struct entry_fn){ fn });
}

/* One mount's directory: only the names s3fs_mount makes, and the mount
 * point by rmdir, which fails on a mount that is still there. Never a
 * recursive delete: through a live FUSE mount it would delete objects of
 * the bucket. */
static void sweep_mount_dir(int id_fd, const char *name)
{
        int fd = openat(id_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        unlinkat(fd, "passwd", 0);
        unlinkat(fd, "log", 0);
        unlinkat(fd, "mnt", AT_REMOVEDIR);
        close(fd);
        unlinkat(id_fd, name, AT_REMOVEDIR);
}

static void sweep_sandbox_dir(int base_fd, const char *name)
{
        int fd = openat(base_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        each_entry(fd, sweep_mount_dir);
        close(fd);
        unlinkat(base_fd, name, AT_REMOVEDIR);
}

void s3fs_sweep(const char *base)
{
        each_mount(base, true, detach);
        int fd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        each_entry(fd, sweep_sandbox_dir);
        close(fd);
        rmdir(base);
}
