/* JSON views of the sandbox domain in the sandbox-workers wire shapes
 * (seed 000: SandboxInfo, CodeContext, SnapshotInfo, the context block of an
 * ExecutionResult). Each returns a new reference, or NULL on ENOMEM. */
#pragma once

#include <jansson.h>

#include "sandbox/sandbox.h"

json_t *workers_sandbox_info_json(const struct sbx_info *info);
/* {id, binding, language, cwd, createdAt, lastUsed} */
json_t *workers_context_brief_json(const struct sbx_context_info *c);
/* the brief plus {engine, executions, resident, snapshot, lastRestore} */
json_t *workers_context_info_json(const struct sbx_context_info *c);
/* SnapshotInfo, or JSON null before the first journaled cell. */
json_t *workers_snapshot_json(const struct sbx_snapshot *s);
/* How an interpreter was rebuilt from its journal, or JSON null. */
json_t *workers_restore_json(const struct sbx_restore *r);
/* Adds executionCount and context {id, cwd, executions, snapshotMs?,
 * expiresAt?, restored, restore?} to an ExecutionResult. */
void workers_add_context_block(json_t *result, const struct sbx_exec_result *r);
