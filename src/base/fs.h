/* Directory trees. Both return 0 or -errno. */
#pragma once

#include <sys/types.h>

/* mkdir -p with the given mode; something other than a directory in the
 * way is -ENOTDIR. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf below dirfd/name without following symlinks. */
int rm_rf_at(int dirfd, const char *name);
int rm_rf(const char *path);
/* Calls fn(dir_fd, name, ud) for every entry of dir_fd but . and .. (a
 * duplicate of dir_fd is read, so dir_fd stays usable). 0 or -errno. */
int dir_each(int dir_fd, void (*fn)(int dir_fd, const char *name, void *ud), void *ud);
