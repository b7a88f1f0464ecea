/* Directory trees. Both return 0 or -errno. */
#pragma once

#include <sys/types.h>

/* mkdir -p with the given mode; something other than a directory in the
 * way is -ENOTDIR. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf below dirfd/name without following symlinks. */
int rm_rf_at(int dirfd, const char *name);
int rm_rf(const char *path);
