/* The sandbox layer's events (issue 15): a sandbox made or destroyed, and
 * what an execution in one of its contexts ran into (a limit, refused
 * system calls), whichever API did it. The pool's warm sandboxes belong to
 * no tenant and emit nothing until one is handed out. */
#include <string.h>

#include "sandbox/internal.h"
#include "tenant/events.h"

void sbx_mgr_set_events(struct sandbox_mgr *m, struct events *ev)
{
        m->events = ev;
}

void sandbox_emit(struct sandbox_mgr *m, const struct sandbox *s, const char *name, json_t *data)
{
        /* Best effort: a full disk must not fail the sandbox operation that
         * is already done; the store logs at debug. */
        (void)events_emit(m->events, s->row.org_id, name, s->row.id, data, NULL);
}

void sandbox_emit_gone(struct sandbox_mgr *m, const struct sandbox *s)
{
        /* This daemon has no stopped-but-kept state: a stop destroys, so
         * both events go out, the first saying why. */
        bool expired = s->row.expires_at && s->row.expires_at <= wall_ms();
        sandbox_emit(m, s, "sandbox.stopped", json_pack("{s:s}", "reason", expired ? "expired" : "requested"));
        sandbox_emit(m, s, "sandbox.deleted", NULL);
}

static const char *const limit_names[_EXEC_LIMIT_MAX] = {
        [EXEC_LIMIT_CPU] = "cpu",   [EXEC_LIMIT_WALL] = "wall",  [EXEC_LIMIT_MEMORY] = "memory",
        [EXEC_LIMIT_OUTPUT] = "output", [EXEC_LIMIT_PIDS] = "pids",
};

void sandbox_emit_outcome(struct sandbox_mgr *m, const struct sandbox *s, const char *context_id,
                          const struct exec_outcome *o)
{
        if (o->limit > EXEC_LIMIT_NONE && o->limit < _EXEC_LIMIT_MAX)
                sandbox_emit(m, s, "resources.limit_warning",
                             json_pack("{s:s, s:s, s:I}", "limit", limit_names[o->limit], "contextId", context_id,
                                       "memoryPeakBytes", (json_int_t)o->memory_peak));
        if (o->refused_syscalls)
                sandbox_emit(m, s, "security.violation",
                             json_pack("{s:s, s:s, s:I}", "kind", "refused_syscalls", "contextId", context_id,
                                       "refusedSyscalls", (json_int_t)o->refused_syscalls));
}
