/* Shared by replica.c (the target's files) and replica_sched.c (the
 * manager's side: when to persist what) only. */
#pragma once

#include <stdint.h>

#include "sandbox/replica.h"

/* <id>.json */
struct replica_manifest {
        char sha256[65];             /* hex, of <id>.tar */
        uint64_t bytes, generation;  /* generation: 1 for the first write, +1 per changed one */
        uint64_t persisted_at;       /* epoch ms */
};

/* Writes the tar into fd (a fresh temp file); 0 or -errno with err filled. */
typedef int replica_writer_fn(void *userdata, int fd, struct err *err);
/* Writes id's tar with fn through a temp file, fsync and rename, then its
 * manifest the same way (generation + 1); content with the sha256 the
 * manifest already names is dropped (nothing written, *ret the old
 * manifest). 0 or -errno with err filled. */
int replica_write(const struct replica *r, const char *id, replica_writer_fn *fn, void *userdata,
                  struct replica_manifest *ret, struct err *err);
/* Opens id's tar for reading (*ret_fd owned by the caller). ERR_NOT_FOUND
 * (-ENOENT) when there is none. */
int replica_read(const struct replica *r, const char *id, int *ret_fd, struct err *err);
/* 0, -ENOENT (none), -EBADMSG (unreadable), -ENAMETOOLONG. */
int replica_manifest_read(const struct replica *r, const char *id, struct replica_manifest *ret);
/* Removes id's tar and manifest (missing ones are fine). */
void replica_delete(const struct replica *r, const char *id);
