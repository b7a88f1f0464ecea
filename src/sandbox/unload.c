/* Idle sandboxes cost no memory (issue 13): a sandbox whose state is all in
 * the store (its row, its contexts' rows and journals) leaves the registry
 * with its last reference, and its next request loads it again as a daemon
 * restart would. What lives only in memory keeps a sandbox loaded: a
 * mounted workspace, jails, its network namespace, egress link and cgroup,
 * bridge sessions, bucket mounts, resident interpreters (a spare jail,
 * spare.c, only exists while the workspace is mounted, and goes with the
 * sandbox: sandbox_free), and a context's
 * run-time facts (why it lost its interpreter, its last restore, a stale
 * reason, cells begun). So does being the warm pool's (pool.c counts and
 * prepares those) and cluster mode, whose heartbeats report loaded
 * sandboxes as the node's load and whose fencing walks them.
 *
 * The one row field that activity changes without writing it is last_used
 * (sandbox_touch persists it with the idle deadline, every tenth of the
 * TTL): a sandbox goes at once when the store's copy is within
 * SBX_UNLOAD_SLACK_MS, else the reaper writes it first (sbx_unload_idle),
 * off the request path, once the sandbox has been quiet that long. */
#include "sandbox/internal.h"

#include "base/time.h"

/* c holds nothing a load from its row would not rebuild. */
static bool context_as_loaded(const struct context *c)
{
        return !c->kp && !c->refs && !c->running && !c->interrupt_pending && c->cell_seq == 0 && !c->need_reseed &&
               c->lost == CONTEXT_LOST_RESTART && !c->stale_reason && !c->last_restore.restored &&
               !c->last_restore.fresh;
}

bool sandbox_nothing_live(const struct sandbox_mgr *m, const struct sandbox *s)
{
        if (m->opt.node_id[0] || s->warm)
                return false;
        if (s->ws.mounted || s->netns_fd >= 0 || s->egress || s->cgroup || s->sessions || s->mounts || s->njails ||
            s->resident)
                return false;
        for (const struct context *c = s->contexts; c; c = c->next)
                if (!context_as_loaded(c))
                        return false;
        return true;
}

bool sandbox_last_used_saved(const struct sandbox *s)
{
        uint64_t a = s->row.last_used, b = s->saved_last_used;
        return (a > b ? a - b : b - a) < SBX_UNLOAD_SLACK_MS;
}

/* A reference to id when it has nothing live, no other reference, an
 * unsaved last_used and has been quiet for the slack; else NULL. */
static struct sandbox *unload_candidate(struct sandbox_mgr *m, const char *id, uint64_t now)
{
        struct sandbox *s = sandbox_ref_loaded(m, id);
        if (!s)
                return NULL;
        pthread_mutex_lock(&m->lock);
        bool ok = s->refs == 1 && !s->deleted && sandbox_nothing_live(m, s) && !sandbox_last_used_saved(s) &&
                  s->row.last_used + SBX_UNLOAD_SLACK_MS <= now;
        pthread_mutex_unlock(&m->lock);
        if (ok)
                return s;
        sandbox_put(m, s);
        return NULL;
}

void sbx_unload_idle(struct sandbox_mgr *m)
{
        struct id_list l = { 0 };
        if (m->opt.node_id[0])
                return;
        sandbox_loaded_ids(m, &l);
        uint64_t now = wall_ms();
        for (size_t i = 0; i < l.n; i++) {
                struct sandbox *s = unload_candidate(m, l.ids[i], now);
                if (!s)
                        continue;
                pthread_mutex_lock(&s->lock);
                /* A failed write keeps it loaded: the next pass tries again. */
                if (!s->deleted && store_sandbox_touch(m->store, s->row.id, s->row.last_used, s->row.expires_at) == 0)
                        s->saved_last_used = s->row.last_used;
                pthread_mutex_unlock(&s->lock);
                sandbox_put(m, s); /* unloads it unless it was used meanwhile */
        }
        id_list_done(&l);
}
