#include "api/workers/views.h"

#include "base/util.h"

json_t *workers_snapshot_json(const struct sbx_snapshot *s)
{
        if (s->cells == 0)
                return json_null();
        uint64_t pages = (s->bytes + SBX_JOURNAL_PAGE_BYTES - 1) / SBX_JOURNAL_PAGE_BYTES;
        json_t *o = json_pack("{s:I, s:b, s:s, s:I, s:I, s:I, s:I, s:s}", "takenAt", (json_int_t)s->taken_at, "stale",
                              s->stale, "kind", "journal", "cells", (json_int_t)s->cells, "bytes",
                              (json_int_t)s->bytes, "storedBytes", (json_int_t)s->bytes, "pages", (json_int_t)pages,
                              "build", s->build);
        if (o && s->stale_reason)
                json_object_set_new(o, "staleReason", json_string(s->stale_reason));
        return o;
}

/* How the interpreter was rebuilt from its journal (issue 10 rows 7, 8):
 * {reason, at, replayMs, fresh, stale, staleReason?}, or null. */
json_t *workers_restore_json(const struct sbx_restore *r)
{
        if (!r->restored)
                return json_null();
        json_t *o = json_pack("{s:s, s:I, s:I, s:b, s:b}", "reason", r->reason ? r->reason : "restart", "at",
                              (json_int_t)r->at, "replayMs", (json_int_t)r->replay_ms, "fresh", r->fresh, "stale",
                              r->stale_reason != NULL);
        if (o && r->stale_reason)
                json_object_set_new(o, "staleReason", json_string(r->stale_reason));
        return o;
}

json_t *workers_context_brief_json(const struct sbx_context_info *c)
{
        char created[32], used[32];
        iso8601_ms(c->created_at, created);
        iso8601_ms(c->last_used, used);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", c->id, "binding", c->binding, "language",
                         c->language, "cwd", c->cwd, "createdAt", created, "lastUsed", used);
}

json_t *workers_context_info_json(const struct sbx_context_info *c)
{
        json_t *o = workers_context_brief_json(c);
        if (!o)
                return NULL;
        json_object_set_new(o, "engine", json_string(c->engine));
        json_object_set_new(o, "executions", json_integer((json_int_t)c->executions));
        json_object_set_new(o, "resident", json_boolean(c->resident));
        json_object_set_new(o, "snapshot", workers_snapshot_json(&c->snap));
        json_object_set_new(o, "lastRestore", workers_restore_json(&c->last_restore));
        return o;
}

static json_t *epoch_or_null(uint64_t ms)
{
        return ms ? json_integer((json_int_t)ms) : json_null();
}

json_t *workers_sandbox_info_json(const struct sbx_info *info)
{
        char created[32], used[32];
        iso8601_ms(info->created_at, created);
        iso8601_ms(info->last_used, used);
        json_t *ctxs = json_array();
        for (size_t i = 0; ctxs && i < info->ncontexts; i++)
                json_array_append_new(ctxs, workers_context_info_json(&info->contexts[i]));
        return json_pack("{s:s, s:s, s:s, s:s, s:O, s:o, s:{s:I, s:I}, s:b, s:o}", "id", info->id, "orgId",
                         info->org_id, "createdAt", created, "lastUsed", used, "envVars", info->env, "contexts", ctxs,
                         "workspace", "files", (json_int_t)info->ws_files, "bytes", (json_int_t)info->ws_bytes,
                         "fileApi", 1, "expiresAt", epoch_or_null(info->expires_at));
}

void workers_add_context_block(json_t *result, const struct sbx_exec_result *r)
{
        json_t *ctx = json_pack("{s:s, s:s, s:I}", "id", r->context_id, "cwd", r->cwd, "executions",
                                (json_int_t)r->executions);
        if (!ctx)
                return;
        if (r->snapshot_ms >= 0)
                json_object_set_new(ctx, "snapshotMs", json_real(r->snapshot_ms));
        if (r->expires_at)
                json_object_set_new(ctx, "expiresAt", json_integer((json_int_t)r->expires_at));
        /* Said on every answer, so a client never mistakes recomputed state
         * for the state it built. */
        json_object_set_new(ctx, "restored", json_boolean(r->restore.restored));
        if (r->restore.restored)
                json_object_set_new(ctx, "restore", workers_restore_json(&r->restore));
        json_object_set_new(result, "executionCount", json_integer((json_int_t)r->executions));
        json_object_set_new(result, "context", ctx);
}
