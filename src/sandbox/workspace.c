#include "sandbox/workspace.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <spawn.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/jail.h"
#include "sandbox/files.h"
#include "sandbox/ws_pool.h"

/* ext4 metadata (journal, inode tables, bitmaps) takes part of a small
 * image. First guess: the quota plus the 1 MiB journal, 256-byte inodes
 * and 1/32 for the rest; create_image then measures what mkfs left free
 * and shrinks the image until the usable space is at most the quota. */
#define WS_INODE_BYTES 256
#define WS_MKFS_ROUNDS 4
/* Room for lost+found, removed after the first mount (it frees blocks). */
#define WS_SLACK_BYTES (64 * KiB)

static uint64_t image_size_for(uint64_t quota, uint64_t inodes)
{
        return quota + 1 * MiB + inodes * WS_INODE_BYTES + quota / 32;
}

void workspace_init(struct workspace *ws, const char *data_dir, const char *id)
{
        memset(ws, 0, sizeof(*ws));
        snprintf(ws->image, sizeof(ws->image), "%s/sandboxes/%s/workspace.img", data_dir, id);
        snprintf(ws->mount, sizeof(ws->mount), "%s/mnt/%s", data_dir, id);
        ws->plain = geteuid() != 0;
}

/* posix_spawn, not fork: glibc's fork holds every malloc arena lock until
 * the parent side is done, and the pool's filler runs niced, so a loaded
 * machine preempts it with the locks held and a request thread's malloc
 * waits for it (40 ms seen under strace). posix_spawn's clone(CLONE_VM |
 * CLONE_VFORK) takes no allocator lock and copies no page table. */
static int run_mkfs(const char *image, uint64_t inodes)
{
        char n[32], owner[64];
        snprintf(n, sizeof(n), "%llu", (unsigned long long)inodes);
        snprintf(owner, sizeof(owner), "root_owner=%u:%u", JAIL_UID, JAIL_GID);
        /* -J size=1: the smallest journal, as in the first guess; -I: the
         * inode size the guess assumes. */
        char *const argv[] = { "/sbin/mkfs.ext4", "-q", "-F", "-N", n, "-m", "0", "-E", owner,
                               "-O", "^resize_inode", "-J", "size=1", "-I", "256", (char *)image, NULL };
        char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        posix_spawn_file_actions_t fa;
        int r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        for (int fd = 0; fd <= 2 && r == 0; fd++)
                r = posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
        pid_t pid;
        if (r == 0)
                r = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return -r;
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* Free space of a freshly made ext4 image, from its superblock (at byte
 * 1024: s_free_blocks_count_lo at +12, s_log_block_size at +24, and
 * s_free_blocks_count_hi at +0x158 with the 64bit feature). */
uint64_t workspace_image_free_bytes(int fd)
{
        unsigned char sb[1024];
        if (pread(fd, sb, sizeof(sb), 1024) != (ssize_t)sizeof(sb))
                return UINT64_MAX;
        uint32_t lo, hi, log_bs;
        memcpy(&lo, sb + 12, 4);
        memcpy(&log_bs, sb + 24, 4);
        memcpy(&hi, sb + 0x158, 4);
        if (log_bs > 6)
                return UINT64_MAX;
        return (((uint64_t)hi << 32) | lo) * (1024ULL << log_bs);
}

/* mkfs at size, then the space it left for data. */
static int mkfs_sized(const char *tmp, uint64_t size, uint64_t inodes, uint64_t *ret_free)
{
        _cleanup_close_ int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t)size) < 0)
                return -errno;
        int r = run_mkfs(tmp, inodes);
        if (r < 0)
                return r;
        *ret_free = workspace_image_free_bytes(fd);
        return 0;
}

/* Sizes the image so that the guest can store at most quota bytes: the
 * usable space of an ext4 image is not its size (issue 10 row 9: a 22 MiB
 * image gave 19 MiB for a 16 MiB quota). */
static int mkfs_fitting(const char *tmp, uint64_t quota, uint64_t inodes)
{
        uint64_t size = image_size_for(quota, inodes), avail = UINT64_MAX, want = quota - WS_SLACK_BYTES;
        if (quota <= WS_SLACK_BYTES * 2)
                want = quota;
        for (int round = 0; round < WS_MKFS_ROUNDS; round++) {
                int r = mkfs_sized(tmp, size, inodes, &avail);
                if (r < 0)
                        return r;
                if (avail <= want)
                        return 0;
                size -= avail - want + 4 * KiB;
        }
        return -ERANGE;
}

static int image_dir(const char *image)
{
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s", image);
        char *slash = strrchr(dir, '/');
        if (slash)
                *slash = '\0';
        return mkdir_p(dir, 0700);
}

int workspace_image_create(const char *image, uint64_t quota, uint64_t inodes)
{
        char tmp[4200];
        int r = image_dir(image);
        if (r < 0)
                return r;
        /* Build under a temporary name and rename: a crash mid-mkfs never
         * leaves a half-made image under the real name. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", image);
        if ((r = mkfs_fitting(tmp, quota, inodes)) < 0 || rename(tmp, image) < 0) {
                r = r < 0 ? r : -errno;
                unlink(tmp);
                return r;
        }
        return 0;
}

/* Attaches image to a free loop device with autoclear, so the device is
 * released by the kernel as soon as the file system is unmounted. Returns
 * the open device fd: it must stay open until the mount holds the device,
 * or autoclear detaches it on that last close. */
static int loop_attach(const char *image, char *dev, size_t devlen)
{
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        _cleanup_close_ int file = open(image, O_RDWR | O_CLOEXEC);
        if (ctl < 0 || file < 0)
                return -errno;
        for (int attempt = 0; attempt < 16; attempt++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return -errno;
                snprintf(dev, devlen, "/dev/loop%d", n);
                if (access(dev, F_OK) < 0 && mknod(dev, S_IFBLK | 0600, makedev(7, n)) < 0 && errno != EEXIST)
                        return -errno;
                _cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
                if (lfd < 0)
                        return -errno;
                struct loop_config cfg = { .fd = (unsigned)file };
                cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
                if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0)
                        return TAKE_FD(lfd);
                if (errno != EBUSY)
                        return -errno;
                /* Another thread took that device between GET_FREE and
                 * CONFIGURE: try the next free one. */
        }
        return -EBUSY;
}

/* A ready image of the pool when it has one of this quota (a rename),
 * else one formatted here. */
static int image_get(struct workspace *ws, uint64_t quota, uint64_t inodes)
{
        int r = image_dir(ws->image);
        if (r < 0)
                return r;
        if (ws_pool_take(ws->pool, quota, inodes, ws->image) == 0)
                return 0;
        return workspace_image_create(ws->image, quota, inodes);
}

static bool is_mountpoint(const char *path)
{
        struct stat a, b;
        char parent[4200];
        snprintf(parent, sizeof(parent), "%s/..", path);
        return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

int workspace_open(struct workspace *ws, uint64_t quota_bytes, uint64_t quota_inodes)
{
        int r;
        if (ws->mounted)
                return 0;
        if ((r = mkdir_p(ws->mount, 0700)) < 0)
                return r;
        if (ws->plain) {
                ws->mounted = true;
                return 0;
        }
        if (is_mountpoint(ws->mount)) {
                ws->mounted = true;
                return 0;
        }
        if (access(ws->image, F_OK) < 0 && (r = image_get(ws, quota_bytes, quota_inodes)) < 0)
                return r;
        char dev[64];
        int lfd = loop_attach(ws->image, dev, sizeof(dev));
        if (lfd < 0)
                return lfd;
        r = mount(dev, ws->mount, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "errors=remount-ro") < 0 ? -errno : 0;
        /* On success the mount now holds the device; on failure this last
         * close lets autoclear detach it. */
        close(lfd);
        if (r < 0)
                return r;
        char lf[4200];
        snprintf(lf, sizeof(lf), "%s/lost+found", ws->mount);
        rmdir(lf); /* not part of the user's workspace */
        ws->mounted = true;
        return 0;
}

void workspace_close(struct workspace *ws)
{
        if (!ws->mounted)
                return;
        if (!ws->plain)
                umount2(ws->mount, MNT_DETACH);
        ws->mounted = false;
}

/* The mount point, or in rootless mode the plain directory guest code
 * filled: any depth, any number of entries, symlinks anywhere. The bounded
 * walk of the files API removes it with a fixed number of fds and no
 * recursion (rm_rf would recurse once per level). */
static int remove_mount_dir(const char *path)
{
        char parent[4096];
        snprintf(parent, sizeof(parent), "%s", path);
        char *slash = strrchr(parent, '/');
        if (!slash || !slash[1])
                return -EINVAL;
        *slash = '\0';
        _cleanup_close_ int fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        int r = files_rm_tree(fd, slash + 1, 0);
        return r == -ENOENT ? 0 : r;
}

/* <data>/sandboxes/<id>: the directory of an image. */
static void dir_of_image(const char *image, char dir[4096])
{
        snprintf(dir, 4096, "%s", image);
        char *slash = strrchr(dir, '/');
        if (slash)
                *slash = '\0';
}

int workspace_destroy(struct workspace *ws)
{
        workspace_close(ws);
        if (!ws->plain)
                umount2(ws->mount, MNT_DETACH); /* a stale mount from a previous run */
        int r = remove_mount_dir(ws->mount);
        char dir[4096];
        dir_of_image(ws->image, dir);
        int k = rm_rf(dir);
        return r < 0 ? r : k;
}

static void *detach_old(void *path)
{
        umount2(path, MNT_DETACH);
        rmdir(path);
        free(path);
        return NULL;
}

/* The same filesystem mounted at to, then gone from from: one ext4
 * instance throughout (a second mount of the image would be another). A
 * mount point cannot be renamed, and MS_MOVE refuses a shared parent. The
 * old one is detached by a thread of its own: an unmount waits for an RCU
 * grace period (up to several ms on a busy host), and nothing needs it
 * gone now (a daemon killed meanwhile leaves a second mount point of the
 * same filesystem, detached at the next clean stop). */
static int move_mount_point(const char *from, const char *to)
{
        if (mkdir(to, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (mount(from, to, NULL, MS_BIND, NULL) < 0) {
                int r = -errno;
                rmdir(to);
                return r;
        }
        char *old = strdup(from);
        pthread_t t;
        if (old && pthread_create(&t, NULL, detach_old, old) == 0)
                pthread_detach(t);
        else if (old)
                detach_old(old);
        else
                umount2(from, MNT_DETACH);
        return 0;
}

int workspace_move(struct workspace *ws, const char *data_dir, const char *id)
{
        struct workspace to;
        workspace_init(&to, data_dir, id);
        to.plain = ws->plain;
        /* Only a crash in the middle of a move leaves anything there, and
         * its sandbox never existed. */
        workspace_destroy(&to);
        char from_dir[4096], to_dir[4096];
        dir_of_image(ws->image, from_dir);
        dir_of_image(to.image, to_dir);
        if (rename(from_dir, to_dir) < 0)
                return -errno;
        int r = ws->plain ? (rename(ws->mount, to.mount) < 0 ? -errno : 0) : move_mount_point(ws->mount, to.mount);
        if (r < 0) {
                (void)rename(to_dir, from_dir);
                return r;
        }
        snprintf(ws->image, sizeof(ws->image), "%s", to.image);
        snprintf(ws->mount, sizeof(ws->mount), "%s", to.mount);
        return 0;
}

void workspace_unmount_all(const char *data_dir)
{
        char prefix[4200], line[8192];
        char real[4096];
        if (!realpath(data_dir, real))
                return;
        snprintf(prefix, sizeof(prefix), "%s/mnt/", real);
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return;
        /* Field 5 of mountinfo is the mount point. */
        while (fgets(line, sizeof(line), f)) {
                char mp[4096];
                if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && strncmp(mp, prefix, strlen(prefix)) == 0)
                        umount2(mp, MNT_DETACH);
        }
        fclose(f);
}
