#include "base/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mkdir_p(const char *path, mode_t mode)
{
        char tmp[4096];
        size_t len = strlen(path);
        if (len == 0 || len >= sizeof(tmp))
                return -EINVAL;
        memcpy(tmp, path, len + 1);
        for (char *p = tmp + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(tmp, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(tmp, mode) == 0)
                return 0;
        if (errno != EEXIST)
                return -errno;
        /* EEXIST is only success if what exists is a directory (or a link to
         * one): a plain file there must not pass as "created". */
        struct stat st;
        if (stat(tmp, &st) < 0)
                return -errno;
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int rm_rf_at(int dfd, const char *name)
{
        if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int k = rm_rf_at(dirfd(d), de->d_name);
                if (k < 0 && r == 0)
                        r = k;
        }
        closedir(d);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int rm_rf(const char *path)
{
        return rm_rf_at(AT_FDCWD, path);
}

int dir_each(int dir_fd, void (*fn)(int dir_fd, const char *name, void *ud), void *ud)
{
        int fd = dup(dir_fd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                int r = -errno;
                if (fd >= 0)
                        close(fd);
                return r;
        }
        rewinddir(d);
        for (struct dirent *e; (e = readdir(d));)
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        fn(dir_fd, e->d_name, ud);
        closedir(d);
        return 0;
}
