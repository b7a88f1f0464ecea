/* The files API on one sandbox workspace: read write mkdir delete rename move
 * list exists, with the reference's request/response shapes. Every path is
 * resolved beneath the workspace root fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS) (and *at() calls on a parent fd resolved that way),
 * so a symlink planted by guest code can never make the daemon read or write
 * outside the sandbox. No HTTP here: callers map files_error to a response. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define FILES_ROOT "/workspace"

struct files_limits {
        uint64_t max_file_bytes;    /* per file → 413 FILE_TOO_LARGE (EFBIG) */
        uint64_t max_total_bytes;   /* whole workspace → 500 NO_SPACE (ENOSPC) */
        uint64_t max_entries;       /* files + dirs → 500 NO_SPACE (ENOSPC) */
};

struct files_error {
        int http_status;            /* 400, 403, 404, 409, 413, 500 */
        const char *code;           /* FILE_NOT_FOUND, PERMISSION_DENIED, … VALIDATION_FAILED */
        char message[512];
        json_t *context;            /* owned: {path, operation, errno, …} or NULL */
        const char *operation;      /* "file.read", "directory.create", … or NULL */
};
void files_error_done(struct files_error *e);

/* Normalises a user path against /workspace: "" and "." skipped, ".." pops.
 * Writes the absolute normalised path ("/workspace/…") into out. Returns 0,
 * -EACCES when it escapes /workspace (or does not start with it after
 * resolution), -ENAMETOOLONG, or -EINVAL (NUL byte, bad UTF-8). */
int files_normalize(const char *path, char *out, size_t outlen);

/* Executes one /files request object on the workspace rooted at root_fd (an
 * O_PATH or O_DIRECTORY fd of the workspace directory). created_at_ms is the
 * sandbox's createdAt (directories report it as modifiedAt). Returns the
 * response object (new reference) or NULL with err filled. When running as
 * root, file system access is done with fsuid/fsgid as_uid/as_gid so files
 * belong to the jail user and root-only objects stay unreachable. */
json_t *files_op(int root_fd, json_t *request, const struct files_limits *lim, uint64_t created_at_ms,
                 unsigned as_uid, unsigned as_gid, struct files_error *err);

/* Workspace totals (entries incl. directories, bytes of regular files). */
int files_usage(int root_fd, uint64_t *ret_entries, uint64_t *ret_bytes);
