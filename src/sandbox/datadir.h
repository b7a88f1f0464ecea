/* Data at rest: the data dir holds the store (every tenant's env secrets),
 * the workspace images and, in rootless mode, the workspaces themselves as
 * plain directories. It must be reachable by the daemon's uid only. */
#pragma once

#include <stdbool.h>

#include "base/err.h"

/* Start-up check and fix of the data dir (which must exist):
 * - rootless (the daemon is not root): refuses (ERR_PERMISSION) a data dir
 *   that group or others may read, write or search, or that is not owned
 *   by the daemon's uid, and one on a file system mounted without nosuid
 *   (statvfs ST_NOSUID): guests write their workspaces there as plain
 *   directories, and a set-id file they make must never work on the host;
 * - every mode: sets the data dir and every directory below it to 0700 and
 *   every regular file to 0600 (the store and its -wal/-shm files, images,
 *   logs). Symlinks are left alone; other file systems mounted below
 *   (workspace images) and the content of <dir>/mnt/<id> (a rootless
 *   workspace: the guest's files and modes) are not entered.
 * Returns 0 or -errno with err filled (what is wrong and how to fix it). */
int sbx_data_dir_secure(const char *dir, struct err *err);
