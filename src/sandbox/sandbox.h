/* Sandboxes: a durable workspace, env vars and up to N code contexts (live
 * REPL interpreters rebuilt from their cell journal when evicted or after a
 * daemon restart), each owned by an org. The domain layer of the gateway
 * facade: no HTTP here; failures come back as sbx_error. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "config/config.h"
#include "engine/exec.h"
#include "base/err.h"
#include "runtimes/runtime.h"
#include "sandbox/files.h"
#include "store/store.h"

#define SBX_DEFAULT_ORG "default"

struct sandbox_mgr;

struct sbx_error {
        int status;           /* HTTP status to use */
        const char *code;     /* ErrorResponse code */
        char message[512];
        json_t *context;      /* owned, may be NULL */
        const char *operation;
};
void sbx_error_done(struct sbx_error *e);

int sbx_mgr_new(const struct config *cfg, struct engine *engine, struct store *store,
                struct sandbox_mgr **ret);
/* Stops the reaper, kills every resident interpreter, unmounts workspaces. */
void sbx_mgr_free(struct sandbox_mgr *m);

/* ^[A-Za-z0-9._-]{1,63}$, no leading/trailing '-', not all dots, not a
 * reserved name. */
bool sbx_id_valid(const char *id);

/* Every call creates the sandbox on first use and counts as activity.
 * Each returns a new response object, or NULL with err filled. */
json_t *sbx_info(struct sandbox_mgr *m, const char *id, struct sbx_error *err);
json_t *sbx_destroy(struct sandbox_mgr *m, const char *id, struct sbx_error *err);
/* env values: string sets, null unsets. Already validated. */
json_t *sbx_set_env(struct sandbox_mgr *m, const char *id, json_t *env, struct sbx_error *err);
json_t *sbx_context_create(struct sandbox_mgr *m, const char *id, const struct runtime *rt,
                           const char *binding, const char *cwd, json_t *env, struct sbx_error *err);
json_t *sbx_context_list(struct sandbox_mgr *m, const char *id, struct sbx_error *err);
json_t *sbx_context_delete(struct sandbox_mgr *m, const char *id, const char *context_id,
                           struct sbx_error *err);
/* Runs code in context_id, or in the binding's oldest context (created
 * lazily at /workspace). call_env may hold nulls (unset). */
json_t *sbx_execute(struct sandbox_mgr *m, const char *id, const struct runtime *rt, const char *binding,
                    const char *code, const char *context_id, json_t *call_env, struct sbx_error *err);
json_t *sbx_files(struct sandbox_mgr *m, const char *id, json_t *request, struct sbx_error *err);

/* A sandbox's workspace held open (and its sandbox locked) for file
 * operations: created and mounted on first use, like every call here. */
struct sbx_workspace {
        int root_fd;                 /* O_PATH|O_DIRECTORY fd of /workspace */
        struct files_limits limits;
        uint64_t created_at;         /* the sandbox's createdAt, epoch ms */
        unsigned uid, gid;           /* file system identity of the guest */
        void *sbx;                   /* private */
};
/* Returns 0 or a negative errno with err filled. */
int sbx_workspace_acquire(struct sandbox_mgr *m, const char *id, struct sbx_workspace *ret, struct err *err);
/* Closes the fd and unlocks. NULL-safe on a failed acquire (sbx NULL). */
void sbx_workspace_release(struct sandbox_mgr *m, struct sbx_workspace *ws);

/* Number of resident (live) context interpreters. */
size_t sbx_resident_count(struct sandbox_mgr *m);
/* Runs one expiry pass now (tests and the reaper thread). */
void sbx_reap_expired(struct sandbox_mgr *m);
