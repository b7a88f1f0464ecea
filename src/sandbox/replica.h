/* The workspace replica (issue 16, scale-out): a copy of each sandbox's
 * workspace kept outside the node, so another node can adopt the sandbox
 * when this one dies. A replica target is a directory every node sees: a
 * shared directory (`dir:/path`) or an S3-compatible bucket mounted once
 * with s3fs (`s3://bucket/prefix`). Per sandbox it holds `<id>.tar` (an
 * uncompressed tar of the whole workspace, as the bridge's /persist
 * writes) and `<id>.json`, its manifest: {"id", "sha256" (of the tar),
 * "bytes", "generation" (1, 2, … one per change written), "persisted_at"
 * (epoch ms)}. Both are written to a hidden temp file, fsynced and renamed
 * into place, so a reader never sees half a file; the tar goes first.
 *
 * When the manager has no replica (the default) nothing here runs: no
 * thread, no file, no cost. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

struct sandbox_mgr;
struct replica;

struct replica_options {
        /* For an s3:// target: where the bucket is mounted
         * (<data_dir>/replica-s3, private to the daemon) and the endpoint
         * URL; credentials as for bucket mounts (AWS_ACCESS_KEY_ID /
         * AWS_SECRET_ACCESS_KEY, else R2_…, from the daemon's environment). */
        const char *data_dir;
        const char *s3_endpoint;
};

/* Opens target ("dir:/abs/path": made if missing; "s3://bucket[/prefix]":
 * mounted now). ERR_INVALID for another form, ERR_UNAVAILABLE when the
 * bucket cannot be mounted, ERR_FILESYSTEM when the directory cannot be
 * made. The caller owns *ret (replica_free, after the manager using it). */
int replica_open(const char *target, const struct replica_options *o, struct replica **ret, struct err *err);
/* Unmounts a bucket. NULL-safe. */
void replica_free(struct replica *r);
/* The directory the replica files live in. */
const char *replica_dir(const struct replica *r);

/* Gives the manager r: from now on a sandbox marked dirty is persisted by
 * one background thread at most delay_ms after its first mark (bursts
 * coalesce; never more often than every delay_ms per sandbox), every dirty
 * one at sbx_mgr_free (daemon shutdown), and a deleted sandbox's replica
 * is deleted. Call once, before the first request; r must outlive m. */
void sbx_mgr_set_replica(struct sandbox_mgr *m, struct replica *r, uint64_t delay_ms);
/* Called by the sandbox layer itself after anything that may write the
 * workspace (an execution, a command, a file operation, a checkpoint
 * restore): persists at most delay_ms later, coalescing bursts. No-op
 * without a replica. Never blocks on I/O. */
void sbx_replica_dirty(struct sandbox_mgr *m, const char *id);
/* Persists id now (the caller's thread). Unchanged content (same sha256
 * as the manifest) writes nothing. ERR_NOT_FOUND: no such sandbox;
 * ERR_UNAVAILABLE: no replica configured. */
int sbx_replica_persist_now(struct sandbox_mgr *m, const char *id, struct err *err);
/* Fills the (new, empty) local workspace of id from its replica: the
 * workspace becomes exactly the tar (files_restore of everything).
 * -ENOENT with ERR_NOT_FOUND when it has none (or the sandbox does not
 * exist). A tar whose checksum differs from its manifest is still
 * used (logged): it is always whole, and a writer that died between its
 * two renames leaves a tar newer than its manifest. Does not mark the
 * sandbox dirty. */
int sbx_replica_restore(struct sandbox_mgr *m, const char *id, struct err *err);

/* ---- the debounce rule (pure; replica_sched.c, tested alone) ---- */
struct replica_mark {
        bool dirty;
        uint64_t due_ns;             /* dirty: when it is persisted */
};
/* A write at now_ns: the first mark since the last persist sets the due
 * time now_ns + delay_ns; later ones leave it (bounded delay). */
void replica_mark_dirty(struct replica_mark *k, uint64_t now_ns, uint64_t delay_ns);
/* Whether k is due at now_ns (then the caller clears it and persists). */
bool replica_mark_due(const struct replica_mark *k, uint64_t now_ns);
