/* Typed file operations on one sandbox workspace: read write mkdir delete
 * rename move list exists, plus usage and path normalisation. Raw bytes in
 * and out: no JSON, no encodings, no HTTP (the facades in api/ parse their
 * requests, build their views and map the errors).
 *
 * Every path is resolved beneath the workspace root fd with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)
 * (and *at() calls on a parent fd resolved that way), so a symlink planted
 * by guest code can never make the daemon read or write outside the
 * sandbox; the files API follows no symlink at all. Running as root, every
 * operation uses fsuid/fsgid uid/gid (the guest's), so new files belong to
 * the guest and root-only objects stay unreachable.
 *
 * Paths are user paths: absolute under /workspace or relative to it;
 * "" and "." are skipped, ".." pops. Failures fill a struct err (base/err.h)
 * whose op is the operation name ("file.read", "directory.create", …) and
 * whose details are, in this order: path (normalised, or as given when it
 * could not be normalised), operation, newPath (rename/move), maxSize and
 * actualSize (ERR_TOO_LARGE), errno (the errno name, ELOOP shown as EACCES).
 * Reasons: ERR_NOT_FOUND, ERR_EXISTS, ERR_PERMISSION (escape, symlink, DAC,
 * special file), ERR_IS_DIR, ERR_NOT_DIR, ERR_TOO_LARGE, ERR_NO_SPACE, ERR_INVALID
 * (a path that is not valid UTF-8 or too long; no errno detail) and
 * ERR_FILESYSTEM for the rest. Every failed mkdir is ERR_FILESYSTEM unless
 * it is a permission or space failure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/err.h"

#define FILES_ROOT "/workspace"

/* Limits of 0 mean "no limit". */
struct files_limits {
        uint64_t max_file_bytes;    /* per file → ERR_TOO_LARGE */
        uint64_t max_total_bytes;   /* whole workspace → ERR_NO_SPACE */
        uint64_t max_entries;       /* files + dirs → ERR_NO_SPACE */
        uint64_t max_depth;         /* nested levels a recursive delete enters → ERR_LIMIT */
};

/* The workspace an operation acts on (filled by the caller, e.g. from a
 * struct sbx_workspace). */
struct files_root {
        int fd;                     /* O_PATH or O_DIRECTORY fd of the workspace directory */
        struct files_limits limits;
        unsigned uid, gid;          /* file system identity used when running as root */
};

enum {
        FILES_RECURSIVE = 1 << 0,       /* mkdir -p, rm -r, list the subtree */
        FILES_FORCE = 1 << 1,           /* delete: a missing path is success */
        FILES_INCLUDE_HIDDEN = 1 << 2,  /* list: entries whose relative path has a dot segment */
};

/* Operation names (struct err op and the "operation" detail). */
#define FILES_OP_READ "file.read"
#define FILES_OP_WRITE "file.write"
#define FILES_OP_MKDIR "directory.create"
#define FILES_OP_DELETE "file.delete"
#define FILES_OP_RENAME "file.rename"
#define FILES_OP_MOVE "file.move"
#define FILES_OP_LIST "directory.list"
#define FILES_OP_STAT "file.stat"

/* Normalises a user path against /workspace into out ("/workspace/…").
 * Returns 0, -EACCES when it escapes /workspace, -ENAMETOOLONG, or -EINVAL
 * (bad UTF-8). No file system access. */
int files_normalize(const char *path, char *out, size_t outlen);

/* Fills err as an operation op on path would report errnum (a positive
 * errno; reason, message and details as above), for failures found by a
 * caller on the operation's behalf (e.g. content that does not decode). A
 * NULL fmt gives the default message. Returns -errnum. */
int files_fail(struct err *err, const char *op, const char *path, int errnum, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

/* A whole file's bytes. */
struct files_blob {
        unsigned char *data;        /* owned, NUL-terminated (not counted in len) */
        size_t len;
};
void files_blob_done(struct files_blob *b);

/* Reads a regular file of at most limits.max_file_bytes (256 MiB when 0).
 * Directories are ERR_IS_DIR, other non-regular files ERR_PERMISSION. */
int files_read(const struct files_root *root, const char *path, struct files_blob *ret, struct err *err);
/* Opens a regular file for streaming: *ret_fd (blocking, O_CLOEXEC, owned
 * by the caller) and its size at open time. No size limit (nothing is
 * buffered); the same refusals as files_read. */
int files_open_read(const struct files_root *root, const char *path, int *ret_fd, uint64_t *ret_size,
                    struct err *err);
/* Replaces (or creates) a regular file atomically and durably with data,
 * within the file, byte and entry limits. */
int files_write(const struct files_root *root, const char *path, const void *data, size_t len,
                struct err *err);
/* files_write, and FILES_RECURSIVE creates missing parent directories
 * first (after the byte quota is checked, so a refused write makes none). */
int files_put(const struct files_root *root, const char *path, const void *data, size_t len, unsigned flags,
              struct err *err);
/* files_put of len bytes read from src_fd (from its offset; nothing is
 * buffered whole): a host file streamed into the workspace (an artifact).
 * A source that ends early fails (ERR_FILESYSTEM, EIO) and writes nothing. */
int files_put_fd(const struct files_root *root, const char *path, int src_fd, uint64_t len, unsigned flags,
                 struct err *err);
/* FILES_RECURSIVE: create missing parents, an existing directory is fine.
 * The root is always a no-op success. */
int files_mkdir(const struct files_root *root, const char *path, unsigned flags, struct err *err);
/* FILES_RECURSIVE deletes directories (never following links), FILES_FORCE
 * makes a missing path a success. The root cannot be deleted. */
int files_delete(const struct files_root *root, const char *path, unsigned flags, struct err *err);
/* rename(2) of one entry (a symlink is moved itself); the two differ only in
 * the operation name they report. */
int files_rename(const struct files_root *root, const char *from, const char *to, struct err *err);
int files_move(const struct files_root *root, const char *from, const char *to, struct err *err);

struct files_entry {
        char *rel;                  /* relative to the listed directory, owned */
        bool dir;
        uint64_t size;              /* regular files only, else 0 */
        struct timespec mtime;
};
struct files_list {
        struct files_entry *v;      /* sorted by rel (strcmp) */
        size_t n, cap;
};
void files_list_done(struct files_list *l);
/* Entries of the directory at path (FILES_RECURSIVE, FILES_INCLUDE_HIDDEN).
 * Symlinks and special files are listed as empty non-directories and never
 * entered. */
int files_list(const struct files_root *root, const char *path, unsigned flags, struct files_list *ret,
               struct err *err);
/* Whether path names an entry (a symlink itself counts; nothing behind one
 * does). Any lookup failure is "false"; only a path that cannot be
 * normalised is an error. */
int files_exists(const struct files_root *root, const char *path, bool *ret, struct err *err);

/* Replaces dir_fd/name atomically and durably with what fill writes into
 * a new 0600 file (a hidden temp file in the same directory, fsynced,
 * renamed over name, the directory fsynced; on failure nothing is left):
 * the primitive every write above uses, for host files too (artifacts).
 * fill returns 0 or -errno. */
int files_replace_at(int dir_fd, const char *name, int (*fill)(int fd, void *ud), void *ud);

/* Workspace totals (entries incl. directories, bytes of regular files). */
int files_usage(int root_fd, uint64_t *ret_entries, uint64_t *ret_bytes);

/* rm -r of a tree guest code may have shaped (also the workspace's own
 * cleanup): rm -r of parent_fd/name with a bounded number of open fds (about 64,
 * whatever the depth), never following symlinks (each level is re-opened
 * confined). More than max_depth nested levels (name itself is level 1; 0:
 * no cap) → -EMLINK, with what was removed before meeting that level
 * removed. Returns 0 or -errno. */
int files_rm_tree(int parent_fd, const char *name, size_t max_depth);

/* The MIME type for a file name by its extension (case-insensitive), else
 * application/octet-stream for binary data and text/plain otherwise. */
const char *files_mime_type(const char *path, bool binary);
/* Binary: not valid UTF-8, or contains a NUL byte. */
bool files_is_binary(const void *data, size_t len);
