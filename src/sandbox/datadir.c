#include "sandbox/datadir.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/log.h"

#define DIR_PERM 0700
#define FILE_PERM 0600

static int check_rootless(const char *dir, struct err *err)
{
        struct stat st;
        struct statvfs vfs;
        if (stat(dir, &st) < 0 || statvfs(dir, &vfs) < 0)
                return err_set(err, ERR_FILESYSTEM, errno, "cannot inspect the data dir %s: %s", dir,
                               strerror(errno));
        if (st.st_uid != geteuid())
                return err_set(err, ERR_PERMISSION, EPERM,
                               "rootless mode: the data dir %s is owned by uid %u, not by the daemon's uid %u",
                               dir, (unsigned)st.st_uid, (unsigned)geteuid());
        if (st.st_mode & 0077)
                return err_set(err, ERR_PERMISSION, EPERM,
                               "rootless mode: the data dir %s is accessible by other users (mode %04o); "
                               "workspaces are plain directories there: chmod 700 it",
                               dir, (unsigned)(st.st_mode & 07777));
        if (!(vfs.f_flag & ST_NOSUID))
                return err_set(err, ERR_PERMISSION, EPERM,
                               "rootless mode: the data dir %s is on a file system mounted without nosuid; "
                               "a guest could leave a set-id program there: use a nosuid mount "
                               "(e.g. a tmpfs or a partition mounted with -o nosuid,nodev)",
                               dir);
        return 0;
}

/* nftw has no user pointer: the walk's state (start-up, one thread). */
static struct {
        size_t mnt_len;     /* strlen("<dir>/mnt") */
        char mnt[4200];
        unsigned fixed;
        int error;
} walk;

static bool is_rootless_workspace(const char *path)
{
        /* <dir>/mnt/<id>, not deeper (the subtree is skipped there). */
        return strncmp(path, walk.mnt, walk.mnt_len) == 0 && path[walk.mnt_len] == '/' &&
               !strchr(path + walk.mnt_len + 1, '/');
}

static int fix_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)ftw;
        mode_t want;
        if (type == FTW_D || type == FTW_DNR)
                want = DIR_PERM;
        else if (type == FTW_F && S_ISREG(st->st_mode))
                want = FILE_PERM;
        else
                return FTW_CONTINUE; /* symlinks, sockets, fifos */
        /* Rootless: another user's file here (a log the operator
         * redirected) cannot be changed, and the 0700 dir above hides it. */
        bool mine = geteuid() == 0 || st->st_uid == geteuid();
        if (mine && (st->st_mode & 07777) != want) {
                if (chmod(path, want) < 0 && !walk.error)
                        walk.error = errno;
                walk.fixed++;
        }
        return type == FTW_D && is_rootless_workspace(path) ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
}

int sbx_data_dir_secure(const char *dir, struct err *err)
{
        int r;
        if (geteuid() != 0 && (r = check_rootless(dir, err)) < 0)
                return r;
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') /* nftw joins names with one '/' */
                n--;
        snprintf(walk.mnt, sizeof(walk.mnt), "%.*s/mnt", (int)n, dir);
        walk.mnt_len = strlen(walk.mnt);
        walk.fixed = 0;
        walk.error = 0;
        /* FTW_MOUNT: a workspace image still mounted below is not entered. */
        if (nftw(dir, fix_entry, 16, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL) < 0)
                return err_set(err, ERR_FILESYSTEM, errno, "cannot walk the data dir %s: %s", dir, strerror(errno));
        if (walk.error)
                return err_set(err, ERR_FILESYSTEM, walk.error, "cannot restrict the modes in the data dir %s: %s",
                               dir, strerror(walk.error));
        if (walk.fixed)
                log_info("msg=\"data dir modes restricted to 0700/0600\" dir=\"%s\" entries=%u", dir, walk.fixed);
        return 0;
}
