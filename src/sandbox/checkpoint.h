/* Checkpoints of a sandbox's workspace (issue 15): a tar of the part of
 * /workspace a filter selects (sandbox/archive.h, struct files_filter),
 * streamed to <data_dir>/checkpoints/<org>/<id>.tar (0600, never whole in
 * memory), described by a store row (store.h, struct checkpoint_row) with
 * its size, regular-file count and SHA-256, and optionally the sandbox's
 * env. A checkpoint belongs to an org and outlives its sandbox; it can be
 * restored into that sandbox or any other of the org's (a clone).
 *
 * meta_json of the row: {"include_paths": [..], "exclude_paths": [..],
 * "env": {..} (only when taken with include_env)}. Errors are struct err
 * with op "checkpoint.*"; a cap of the org is ERR_TOO_LARGE with op
 * SBX_CHECKPOINT_OP_QUOTA. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "sandbox/archive.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define SBX_CHECKPOINT_OP_QUOTA "checkpoint.quota"
#define SBX_CHECKPOINT_ID_PREFIX "ckpt_"

struct sbx_checkpoint_spec {
        const char *org_id, *sandbox_id;
        const char *name;                /* required */
        const char *description;         /* NULL: "" */
        struct files_filter filter;      /* patterns relative to /workspace */
        bool include_env;
        bool include_contexts;           /* the code contexts' journals too */
        uint64_t max_count, max_bytes;   /* the org's caps; 0: none */
};

/* Takes a checkpoint of org_id's sandbox. *ret: its row (owned:
 * checkpoint_row_done). ERR_NOT_FOUND: no such sandbox; ERR_TOO_LARGE (op
 * SBX_CHECKPOINT_OP_QUOTA): the org holds max_count checkpoints, or this
 * one would take it past max_bytes (nothing is kept then). */
int sbx_checkpoint_create(struct sandbox_mgr *m, const struct sbx_checkpoint_spec *spec, struct checkpoint_row *ret,
                          struct err *err);
/* org_id's checkpoint id (ERR_NOT_FOUND for another org's, as a missing one). */
int sbx_checkpoint_get(struct sandbox_mgr *m, const char *org_id, const char *id, struct checkpoint_row *ret,
                       struct err *err);
/* One page, newest first (sandbox_id NULL: all the org's). */
int sbx_checkpoint_list(struct sandbox_mgr *m, const char *org_id, const char *sandbox_id, uint64_t limit,
                        uint64_t offset, void (*fn)(const struct checkpoint_row *row, void *userdata), void *userdata,
                        uint64_t *ret_total, struct err *err);
/* Deletes the row and its tar. */
int sbx_checkpoint_delete(struct sandbox_mgr *m, const char *org_id, const char *id, struct err *err);
/* Makes the checkpoint's scope of org_id's sandbox target exactly the
 * checkpoint (files_restore) after checking the tar against its SHA-256
 * (a mismatch is ERR_INTERNAL: nothing is touched); with_env and a
 * checkpoint that holds env: the sandbox's env becomes that env. */
int sbx_checkpoint_restore(struct sandbox_mgr *m, const char *org_id, const char *id, const char *target,
                           bool with_env, struct err *err);
/* Every entry of the checkpoint's tar (files_tar_each). */
int sbx_checkpoint_entries(struct sandbox_mgr *m, const char *org_id, const char *id,
                           int (*fn)(void *userdata, const struct files_tar_entry *e), void *userdata,
                           struct err *err);

/* ---- code contexts as data (context_snapshot.c) ----
 * [{id, binding, language, cwd, env, executions, build, stale, cells:
 * [{code, env (JSON text), cwd, typescript}]}]: each context's row and
 * cell journal (the interpreter itself is rebuilt from the journal). */
int sbx_contexts_export(struct sandbox_mgr *m, const char *org_id, const char *id, json_t **ret, struct err *err);
/* Replaces every code context of org_id's sandbox id (their interpreters
 * killed) by those saved; keep_ids: they keep their saved ids where free.
 * Each is rebuilt from its journal on its next cell. */
int sbx_contexts_import(struct sandbox_mgr *m, const char *org_id, const char *id, json_t *saved, bool keep_ids,
                        struct err *err);

/* ---- hook for the event log (issue 15, item 1) ----
 * fn is called after a checkpoint was created (event "checkpoint.created",
 * sandbox_id its sandbox) or restored ("checkpoint.restored", sandbox_id
 * the sandbox restored into or cloned to), on the request's thread, with
 * a borrowed row. Set it once, before the first request (as
 * sbx_mgr_set_org_env); none is set until the event log exists. */
void sbx_mgr_set_checkpoint_events(struct sandbox_mgr *m, sbx_checkpoint_event_fn fn, void *userdata);
