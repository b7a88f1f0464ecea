/* Artifacts of the controller API (issue 15; seed 003 "Optional Features"):
 * an org's durable objects kept outside sandboxes. Shared by
 * artifacts.c (upload from a sandbox, list, get, download, delete,
 * download into a sandbox), artifact_uploads.c (multipart uploads) and
 * artifact_blob.c (the bytes).
 *
 * Bytes: <data_dir>/artifacts/<org>/<id> (0600, written under a temp name,
 * fsynced and renamed), parts of an upload under
 * <data_dir>/artifacts/<org>/uploads/<upload_id>/<part_number>. Metadata:
 * the store's artifacts table (state "ready"; "uploading" for a multipart
 * upload; "writing" while bytes are being written, which reserves their
 * size against the org's quota and expires like an upload if the daemon
 * dies meanwhile). Expired rows read as absent at once and are swept
 * (bytes and row) at start and by artifact requests (at most once a
 * second). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/err.h"
#include "store/store.h"

#define ART_STATE_READY "ready"
#define ART_STATE_UPLOADING "uploading"
#define ART_STATE_WRITING "writing"
#define ART_SHA_HEX 65

/* Serialises quota checks and state changes of artifact rows. */
void art_lock(void);
void art_unlock(void);

/* ---- bytes (artifact_blob.c) ---- */
/* Writes artifact id's bytes: exactly len bytes of src_fd (from its
 * offset), SHA-256 into sha. 0 or -errno with err filled. */
int art_blob_write_fd(const struct app *app, const char *org, const char *id, int src_fd, uint64_t len,
                      char sha[ART_SHA_HEX], struct err *err);
/* Opens artifact id's bytes (O_RDONLY) and their size. -ENOENT when gone. */
int art_blob_open(const struct app *app, const char *org, const char *id, int *ret_fd, uint64_t *ret_size);
/* Removes artifact id's bytes; a missing file is fine. */
void art_blob_remove(const struct app *app, const char *org, const char *id);
/* The SHA-256 of data in lowercase hex. */
void art_sha256_hex(const void *data, size_t len, char out[ART_SHA_HEX]);
/* Writes part n of upload up from data (sha: its SHA-256, kept for
 * listings); *ret_total: the bytes of all the upload's parts now. */
int art_part_write(const struct app *app, const char *org, const char *up, unsigned n, const void *data,
                   size_t len, const char *sha, uint64_t *ret_total, struct err *err);
struct art_part_info {
        unsigned number;
        uint64_t size;
        char etag[ART_SHA_HEX];     /* "" when unknown */
};
/* The parts of upload up so far, by number (*ret: free()). */
int art_parts_list(const struct app *app, const char *org, const char *up, struct art_part_info **ret,
                   size_t *ret_n);
struct art_part {
        unsigned number;
        char etag[ART_SHA_HEX];     /* lowercase hex, as the client gave it */
};
/* Joins parts (sorted by number, no duplicates) of upload up into artifact
 * id, checking each part's SHA-256 against its etag (ERR_INVALID), that
 * every part but the last has at least min_part bytes (ERR_INVALID) and
 * that the whole fits max_total (ERR_TOO_LARGE); the whole's SHA-256 into
 * sha, its size into *ret_size. */
int art_parts_join(const struct app *app, const char *org, const char *up, const struct art_part *parts,
                   size_t n, uint64_t min_part, uint64_t max_total, const char *id, char sha[ART_SHA_HEX],
                   uint64_t *ret_size, struct err *err);
/* Removes upload up's parts directory. */
void art_parts_remove(const struct app *app, const char *org, const char *up);

/* ---- rows and views (artifacts.c) ---- */
/* Removes the bytes and rows of every expired artifact and upload
 * (at most once a second unless force). */
void art_sweep(struct app *app, bool force);
/* org's row id in state (any state when NULL); an expired one or another
 * org's is ERR_NOT_FOUND. */
int art_get(struct app *app, const char *org, const char *id, const char *state, struct artifact_row *ret,
            struct err *err);
/* ERR_TOO_LARGE when len > max, ERR_QUOTA when the org's rows would then
 * hold more than its quota. Call under art_lock(). */
int art_quota_check(struct app *app, const char *org, uint64_t len, uint64_t max, struct err *err);
/* Options of a new artifact or upload from a request body: name,
 * content_type (default from the name), ttl_seconds → *ret_ttl_s (0:
 * none), metadata (an object) → row->metadata. false with a 400 in res. */
bool art_parse_options(struct app *app, json_t *body, const char *default_name, struct artifact_row *row,
                       struct http_response *res);
/* The JSON view of a ready artifact. */
json_t *art_view(const struct artifact_row *row);
/* The artifact.uploaded event of a new artifact: {artifact: its view}. */
void art_uploaded_event(struct app *app, const struct artifact_row *row);
