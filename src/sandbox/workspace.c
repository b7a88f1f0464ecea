#include "sandbox/workspace.h"

#include <fcntl.h>
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

/* ext4 metadata (journal, bitmaps) takes part of a tiny image; size the
 * image so that roughly quota_bytes remain usable for data. */
static uint64_t image_size_for(uint64_t quota)
{
        return quota + quota / 4 + 2 * MiB;
}

void workspace_init(struct workspace *ws, const char *data_dir, const char *id)
{
        memset(ws, 0, sizeof(*ws));
        snprintf(ws->image, sizeof(ws->image), "%s/sandboxes/%s/workspace.img", data_dir, id);
        snprintf(ws->mount, sizeof(ws->mount), "%s/mnt/%s", data_dir, id);
        ws->plain = geteuid() != 0;
}

static int run_mkfs(const char *image, uint64_t inodes)
{
        char n[32], owner[64];
        snprintf(n, sizeof(n), "%llu", (unsigned long long)inodes);
        snprintf(owner, sizeof(owner), "root_owner=%u:%u", JAIL_UID, JAIL_GID);
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int nul = open("/dev/null", O_RDWR);
                dup2(nul, 0);
                dup2(nul, 1);
                dup2(nul, 2);
                char *const argv[] = { "/sbin/mkfs.ext4", "-q", "-F", "-N", n, "-m", "0", "-E", owner,
                                       "-O", "^resize_inode", (char *)image, NULL };
                char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
                execve(argv[0], argv, envp);
                _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int create_image(const char *image, uint64_t quota, uint64_t inodes)
{
        char dir[4096], tmp[4200];
        snprintf(dir, sizeof(dir), "%s", image);
        char *slash = strrchr(dir, '/');
        if (slash)
                *slash = '\0';
        int r = mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        /* Build under a temporary name and rename: a crash mid-mkfs never
         * leaves a half-made image under the real name. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", image);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t)image_size_for(quota)) < 0) {
                r = -errno;
                close(fd);
                unlink(tmp);
                return r;
        }
        close(fd);
        if ((r = run_mkfs(tmp, inodes)) < 0 || rename(tmp, image) < 0) {
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
        if (access(ws->image, F_OK) < 0 && (r = create_image(ws->image, quota_bytes, quota_inodes)) < 0)
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

int workspace_destroy(struct workspace *ws)
{
        workspace_close(ws);
        if (!ws->plain)
                umount2(ws->mount, MNT_DETACH); /* a stale mount from a previous run */
        int r = rm_rf(ws->mount);
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s", ws->image);
        char *slash = strrchr(dir, '/');
        if (slash)
                *slash = '\0';
        int k = rm_rf(dir);
        return r < 0 ? r : k;
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
