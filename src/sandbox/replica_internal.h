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
/* A tar being written: a hidden temp file beside its final name. */
struct replica_stage {
        char tmp[4096];
        int fd;                      /* -1 once committed or dropped */
};
/* The two halves of replica_write, so the caller can hold its lock while
 * fn reads the workspace (open) and not while the bytes travel to a
 * bucket (commit: fsync, hash, rename, manifest). Both drop the stage on
 * failure; commit always consumes it. */
int replica_stage_open(const struct replica *r, const char *id, replica_writer_fn *fn, void *userdata,
                       struct replica_stage *ret, struct err *err);
int replica_stage_commit(const struct replica *r, const char *id, struct replica_stage *st,
                         struct replica_manifest *ret, struct err *err);
/* Removes an uncommitted stage. Idempotent. */
void replica_stage_drop(struct replica_stage *st);
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
