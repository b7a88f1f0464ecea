/* `sandboxd cp`'s archives (cli/cp_tar.c), for cli/cp.c only.
 *
 * Every archive goes through one copy loop with a renaming rule:
 * uploads rename entries under the remote path (relative to /workspace),
 * downloads keep only the remote path's subtree of the persist tar and
 * rename it to LEAF/…, refusing what could land outside the destination. */
#pragma once

#include <stdint.h>

#include "base/err.h"
#include "cli/cli.h"

struct cp_stats {
        uint64_t bytes;         /* file data moved */
        uint64_t files;         /* regular files */
        unsigned refused;       /* entries refused (each said on stderr) */
        unsigned matched;       /* entries of the wanted subtree (downloads) */
};

/* Where an upload's archive goes: written to fd (a temp file) and handed
 * to flush in parts of about 24 MiB (the server takes 32 MiB per body), cut
 * between entries; after each flush fd is emptied for the next part. A
 * non-zero flush (an exit status, already said) stops the upload: the
 * functions below then return -ECANCELED. */
struct cp_sink {
        int fd;
        int (*flush)(void *cls, int fd);
        void *cls;
};

/* A tar of the local file or folder src, every entry renamed to
 * prefix[/sub], into the sink (flushed at the end too). */
int cp_tar_local(const char *src, const char *prefix, const struct cp_sink *sink, struct cli_progress *p,
                 struct cp_stats *st, struct err *err);
/* The same from a tar (gzip, bzip2, xz too) read from in_fd (stdin). */
int cp_tar_stream(int in_fd, const char *prefix, const struct cp_sink *sink, struct cli_progress *p,
                  struct cp_stats *st, struct err *err);

/* From the persist tar in tar_fd, the entries at rel ("" = all of
 * /workspace) and below, as leaf[/sub]: extracted beneath the directory
 * dest_dir (when out_fd < 0), or written as a tar to out_fd. Refused, each
 * said on stderr: absolute or `..` names, symlinks whose target is
 * absolute or leaves leaf, hardlinks out of the subtree, special files,
 * and (libarchive's secure flags) anything written through a symlink. */
int cp_tar_extract(int tar_fd, const char *rel, const char *dest_dir, const char *leaf, int out_fd,
                   struct cli_progress *p, struct cp_stats *st, struct err *err);

/* A path inside an archive or the workspace, normalised: no leading "./"
 * or "/", no empty or "." segments, no trailing "/". -EINVAL for an
 * absolute path (when absolute_ok is false) or a ".." segment. */
int cp_norm_path(const char *in, bool absolute_ok, char *out, size_t len);
/* Does a symlink at sub (a normalised path inside the copied tree, "" for
 * its top) with this target stay inside the tree? Read from the link's own
 * directory (a real one: extraction never goes through links), leading
 * ".." segments each one level up, then names only (a ".." after a name
 * would depend on where that name leads). Never for an absolute target or
 * the top itself. Links checked so all point inside, by induction. */
bool cp_link_inside(const char *sub, const char *target);
