/* Tar archives of a sandbox workspace (the bridge's /persist and
 * /hydrate), with libarchive and never a host `tar`. Raw bytes in and out;
 * errors are struct err (base/err.h) with op FILES_OP_PERSIST or
 * FILES_OP_HYDRATE. Both run with the guest's file system identity (as the
 * files operations of sandbox/files.h do) and never follow a symlink.
 * Rules and limits: docs/bridge/files.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/files.h"

#define FILES_OP_PERSIST "workspace.persist"
#define FILES_OP_HYDRATE "workspace.hydrate"

/* Entries one archive may hold (also bounded by the workspace's entries). */
#define ARCHIVE_MAX_ENTRIES 100000
/* The decompressed tar stream may be at most this many times the archive
 * it came from (or ARCHIVE_RATIO_FLOOR, whichever is larger). */
#define ARCHIVE_MAX_RATIO 1000
#define ARCHIVE_RATIO_FLOOR (64 * 1024 * 1024ULL)

/* Writes an uncompressed tar (pax-restricted: ustar, pax headers only when
 * needed) of the whole workspace to out_fd: "./" first, then "./<rel>" for
 * every directory, regular file and symlink (stored as a link, never
 * followed); FIFOs, sockets and devices are left out. Owners are the
 * sandbox user as the jail sees it (65534, "sandbox"). An entry is left out
 * with its subtree when its path relative to /workspace matches one of
 * the n excludes as an fnmatch(3) pattern without flags (a plain name
 * matches itself). A file that shrinks while it is read is padded with
 * zeros, one that grows is cut at its size when it was opened. Failures:
 * ERR_PERMISSION (unreadable), ERR_FILESYSTEM (I/O, out_fd). */
int files_persist(const struct files_root *root, const char *const *excludes, size_t n, int out_fd,
                  struct err *err);

/* Which part of a workspace a checkpoint covers (its scope). Patterns are
 * fnmatch(3) patterns without flags on paths relative to /workspace ("*"
 * crosses "/": "*.py" is every .py file at any depth; "src" is src and all
 * below it). A path is in scope unless it or a parent matches an exclude,
 * and, when there are includes, it or a parent matches one of them. */
struct files_filter {
        const char *const *include;
        size_t ninclude;             /* 0: everything */
        const char *const *exclude;
        size_t nexclude;
};
bool files_filter_match(const struct files_filter *f, const char *rel);

/* files_persist of the scope of f: directories outside it are walked for
 * included entries below them but get no entry of their own. *ret_files
 * (may be NULL): the regular files written. */
int files_persist_filtered(const struct files_root *root, const struct files_filter *f, int out_fd,
                           uint64_t *ret_files, struct err *err);

/* Makes the scope of f in the workspace exactly the tar in data[0..len)
 * (a files_persist_filtered of the same f): entries in scope the archive
 * does not hold (or holds as another kind, file vs directory) are deleted,
 * then the archive is extracted as by files_hydrate (its refusals apply,
 * and are checked before anything is deleted). Entries outside the scope
 * are left alone. op FILES_OP_RESTORE. */
#define FILES_OP_RESTORE "workspace.restore"
int files_restore(const struct files_root *root, const struct files_filter *f, const void *data, size_t len,
                  struct err *err);

/* One entry of a tar read by files_tar_each: rel without "./", the root
 * itself skipped; sha256 (hex) of a regular file's bytes, "" otherwise. */
struct files_tar_entry {
        const char *rel;
        char type;                   /* 'f' file, 'd' directory, 'l' symlink, 'h' hardlink, '?' other */
        uint64_t size;
        char sha256[65];
};
/* SHA-256 (hex) of fd's bytes from offset 0 to its end, streamed with
 * pread (fd's offset is left alone). 0 or -errno. */
int files_sha256_fd(int fd, char out[65]);
/* Reads the (uncompressed or gzip) tar of fd from its current offset to
 * its end, streaming: fn per entry (< 0 stops with that value). */
int files_tar_each(int fd, int (*fn)(void *userdata, const struct files_tar_entry *e), void *userdata,
                   struct err *err);

/* Extracts a tar (optionally gzip-compressed) held in data[0..len) into
 * the workspace, merging with what is there (files are replaced).
 *
 * Every header is validated before anything is written, and the whole
 * archive is refused (ERR_INVALID unless said otherwise) when one entry is:
 * unreadable or truncated, an absolute path or one with a ".." segment,
 * not valid UTF-8, too long (PATH_MAX, NAME_MAX per segment) or deeper
 * than limits.max_depth, a duplicate, a device, FIFO, socket or other
 * special type, a symlink whose target leaves /workspace, a hardlink to
 * anything but a regular file entry earlier in the same archive, beneath a
 * symlink or a file (of the archive or of the workspace), a directory where
 * the workspace has a non-directory or the reverse, a file over
 * limits.max_file_bytes (ERR_TOO_LARGE), more than ARCHIVE_MAX_ENTRIES
 * entries or a decompressed stream over the ratio cap (ERR_LIMIT), or when
 * the result would exceed the workspace's byte or entry quota
 * (ERR_NO_SPACE).
 *
 * Then entries are written with the guest's identity beneath the root fd:
 * files through a hidden temp file renamed over the target, symlinks and
 * hardlinks likewise, directories made as needed; modes keep their
 * permission bits only (no set-id, no sticky), directory modes and
 * modification times are applied last. A failure while writing
 * (ERR_FILESYSTEM, ERR_NO_SPACE: e.g. guest code racing the extraction)
 * leaves the entries written before it, and no temp file. */
int files_hydrate(const struct files_root *root, const void *data, size_t len, struct err *err);
