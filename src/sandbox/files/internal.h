/* Shared by the files in src/sandbox/files/ only (the public contract is
 * sandbox/files.h). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sandbox/files.h"

/* A list answers at most this many entries; a workspace within its limits
 * never gets near it, this only bounds memory when the guest went beyond. */
#define LIST_MAX_ENTRIES 100000
/* Reads are capped by max_file_bytes; this is the cap when that is 0. */
#define READ_HARD_MAX (256 * MiB)
#define FILE_MODE 0644
#define DIR_MODE 0755

struct identity {
        bool switched;
        uid_t old_uid;
        gid_t old_gid;
};

/* One operation in progress: its normalised path(s) ("/workspace/…"; rel
 * and new_rel point past "/workspace/", "" for the root), the fs identity
 * it runs under, and where its error goes. */
struct fop {
        const struct files_root *root;
        const char *op;
        struct err *err;
        const char *raw_path;       /* as given; the error path until normalised */
        char path[PATH_MAX];
        const char *rel;
        char new_path[PATH_MAX];
        const char *new_rel;
        struct identity id;
};

/* Normalises path (and new_path when non-NULL), then switches to the
 * guest's identity. Returns 0 or a negative errno with err filled; leave
 * with fop_end() either way (usually through _cleanup_(fop_end)). */
int fop_begin(struct fop *f, const struct files_root *root, const char *op, const char *path,
              const char *new_path, struct err *err);
void fop_end(struct fop *f);

/* Fills f->err for a file system failure (e: positive errno) and returns
 * the negative shown errno. A NULL fmt gives a default message naming
 * msg_path (or f->path). */
int fop_fail(struct fop *f, int e, const char *msg_path, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* ERR_TOO_LARGE with maxSize and actualSize. */
int fop_too_large(struct fop *f, uint64_t max, uint64_t actual);

/* openat2() beneath dir_fd, never following any symlink ("" is dir_fd
 * itself). A symlink or an escape on the way is -ELOOP. Returns the fd or
 * a negative errno. */
int resolve_at(int dir_fd, const char *rel, uint64_t flags);
/* Opens the parent directory of rel (non-empty) as an O_PATH fd and points
 * *ret_name at the final component inside rel. */
int open_parent(int root_fd, const char *rel, const char **ret_name);
/* lstat of one entry in dir_fd: never follows. */
int stat_entry(int dir_fd, const char *name, struct stat *st);
/* Makes entries created/removed under dir_fd durable (best effort when the
 * directory cannot be opened for reading). */
int fsync_dir(int dir_fd);

/* Calls fn for every entry below root_fd/rel (rel itself excluded);
 * rel_of_entry is relative to rel. Symlinks are reported, never entered.
 * fn returns 0, WALK_PRUNE (a directory is not entered) or a negative
 * errno (the walk stops with it). Parents are reported before children. */
#define WALK_PRUNE 1
typedef int (*walk_fn)(void *userdata, const char *rel_of_entry, const struct stat *st);
int walk_tree(int root_fd, const char *rel, bool recursive, bool include_hidden, walk_fn fn, void *userdata);

/* mkdir -p of rel beneath the root: walks the existing prefix (each step
 * confined), checks the entry limit for what is missing (-ENOSPC), then
 * creates the rest with DIR_MODE. Returns 0 or -errno (err untouched). */
int fop_mkdir_parents(const struct fop *f, const char *rel);

/* Hidden temp names of atomic replaces: FILES_TEMP_PREFIX + 16 hex + ".tmp". */
#define FILES_TEMP_PREFIX ".sandboxd-"
void files_temp_name(char out[static 40]);
/* Replaces dir_fd/name atomically with a temp file that fill(fd, ud)
 * writes (its mode too: it is created 0600); durable: fsync the file and
 * the directory. The temp file never outlives a failure. 0 or -errno. */
int atomic_replace(int dir_fd, const char *name, int (*fill)(int fd, void *ud), void *ud, bool durable);

/* Current usage, but only when a byte or entry limit needs it (else 0s). */
int fop_usage(const struct fop *f, uint64_t *entries, uint64_t *bytes);
/* -ENOSPC when count more entries would exceed max_entries. */
int fop_check_new_entries(const struct fop *f, uint64_t count);
