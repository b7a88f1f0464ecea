/* The cell journal: what makes a context's state last. Every cell that ran
 * cleanly is appended (store) before the answer goes out; a context whose
 * interpreter is gone (eviction, limit, daemon restart) is rebuilt by
 * replaying its cells into a fresh interpreter whose /workspace is a
 * throw-away overlay, so replay never rewrites real files. */
#include "sandbox/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/thread.h"
#include "base/util.h"
#include "base/version.h"

void journal_build_id(const struct runtime *rt, char *buf, size_t len)
{
        /* A journal replayed by another interpreter or kernel build may not
         * rebuild the same state: the build is kept with the journal. */
        snprintf(buf, len, "%s:%s:kernel-%s", rt->id, rt->engine[0] ? rt->engine : rt->engine_name,
                 SANDBOXD_VERSION);
}

struct replay {
        struct context *c;
        struct exec_limits lim;
        uint64_t wall_ms;       /* one cell's own wall clock limit */
        uint64_t deadline_ns;   /* sandbox.replay_ms for the whole replay */
        size_t cells, bad;
        bool too_long;
        json_t *org_env;        /* the org's env, under each cell's own */
};

/* Re-runs one journaled cell; store_cell_each calls this without holding
 * the store lock, so a long replay blocks nobody else. Past the deadline
 * the remaining cells are skipped, and a cell still running at the
 * deadline is cut there (its wall clock limit is what is left). */
static void replay_cell(const struct cell_row *cell, void *userdata)
{
        struct replay *rp = userdata;
        rp->cells++;
        uint64_t now = now_ns();
        if (rp->too_long || now >= rp->deadline_ns) {
                rp->too_long = true;
                return;
        }
        if (!kproc_alive(rp->c->kp)) {
                rp->bad++;
                return;
        }
        uint64_t left_ms = (rp->deadline_ns - now) / 1000000 + 1;
        rp->lim.wall_ms = left_ms < rp->wall_ms ? left_ms : rp->wall_ms;
        json_t *cell_env = env_parse(cell->env_json);
        json_t *env = json_deep_copy(rp->org_env);
        env_merge(env, cell_env);
        json_decref(cell_env);
        json_t *req = exec_build_request(cell->code, env, cell->cwd, cell->typescript, rp->lim.result_bytes, true);
        struct exec_outcome o;
        if (kproc_run(rp->c->kp, req, &rp->lim, &o) < 0 || o.died || o.limit != EXEC_LIMIT_NONE)
                rp->bad++;
        if (o.limit == EXEC_LIMIT_WALL && now_ns() >= rp->deadline_ns)
                rp->too_long = true;
        exec_outcome_done(&o);
        json_decref(req);
        json_decref(env);
}

enum replay_verdict journal_replay(struct sandbox_mgr *m, struct context *c, const struct exec_limits *lim)
{
        if (c->row.snap_bytes > m->opt.journal_bytes)
                return REPLAY_TOO_BIG;
        struct replay rp = { .c = c, .lim = *lim, .wall_ms = lim->wall_ms,
                             .deadline_ns = now_ns() + m->opt.replay_ms * 1000000ULL };
        rp.lim.output_bytes *= 4; /* output is discarded; never fail on it */
        rp.lim.output_entries *= 4;
        struct err err = { 0 };
        if (sandbox_org_env(m, c->sbx, &rp.org_env, &err) < 0) {
                err_done(&err);
                return REPLAY_FAILED; /* without its secrets the journal cannot replay as it ran */
        }
        if (store_cell_each(m->store, c->row.id, replay_cell, &rp) < 0)
                rp.bad++; /* an unreadable journal cannot have rebuilt the state */
        json_decref(rp.org_env);
        if (rp.too_long)
                return REPLAY_TOO_LONG;
        /* Even after no cell (a journal deleted under it: its sandbox
         * destroyed meanwhile): the kernel must never keep the throw-away
         * workspace. */
        if (kproc_alive(c->kp) && kproc_end_replay(c->kp) < 0)
                rp.bad++;
        return rp.bad ? REPLAY_FAILED : REPLAY_OK;
}

void journal_reset(struct sandbox_mgr *m, struct context *c, const char *why)
{
        store_cells_delete(m->store, c->row.id);
        c->row.snap_cells = c->row.snap_bytes = 0;
        c->row.snap_stale = true;
        c->stale_reason = why;
        journal_sync(m, c);
}

void journal_sync(struct sandbox_mgr *m, struct context *c)
{
        uint64_t cells, bytes;
        if (store_cell_stats(m->store, c->row.id, &cells, &bytes) == 0) {
                c->row.snap_cells = cells;
                c->row.snap_bytes = bytes;
        }
}

/* ---- sandbox.journal_sync ---- */

int sbx_journal_sync_parse(const char *name, enum sbx_journal_sync *ret)
{
        static const char *const names[] = { [SBX_JOURNAL_GROUP] = "group", [SBX_JOURNAL_NONE] = "none",
                                             [SBX_JOURNAL_ALWAYS] = "always" };
        for (size_t i = 0; name && i < ARRAY_SIZE(names); i++)
                if (strcmp(name, names[i]) == 0) {
                        *ret = (enum sbx_journal_sync)i;
                        return 0;
                }
        return -EINVAL;
}

/* One fdatasync covers every cell committed before it: cells that come
 * while it runs, or within journal_sync_ms after it, share the next one. */
static void flusher_loop(void *arg)
{
        struct sandbox_mgr *m = arg;
        bg_thread_lock(&m->flusher);
        while (bg_thread_running(&m->flusher)) {
                if (!m->journal_dirty) {
                        bg_thread_wait(&m->flusher, 0);
                        continue;
                }
                m->journal_dirty = false;
                bg_thread_unlock(&m->flusher);
                int r = store_sync(m->store);
                if (r < 0)
                        log_warn("msg=\"journal flush failed\" error=\"%s\"", strerror(-r));
                bg_thread_lock(&m->flusher);
                uint64_t until = now_ns() + m->opt.journal_sync_ms * 1000000ULL;
                while (bg_thread_wait(&m->flusher, until) && now_ns() < until)
                        ;
        }
        bg_thread_unlock(&m->flusher);
}

/* A lazy journal write (a cell, a context row; store_set_journal_lazy)
 * happened: the flusher makes it durable soon. */
static void journal_written(void *userdata)
{
        struct sandbox_mgr *m = userdata;
        bg_thread_lock(&m->flusher);
        if (!m->journal_dirty) {
                m->journal_dirty = true;
                bg_thread_wake(&m->flusher);
        }
        bg_thread_unlock(&m->flusher);
}

int journal_flusher_start(struct sandbox_mgr *m)
{
        int r = bg_thread_init(&m->flusher, NULL);
        if (r < 0)
                return r;
        bool group = m->opt.journal_sync == SBX_JOURNAL_GROUP;
        store_set_journal_lazy(m->store, m->opt.journal_sync != SBX_JOURNAL_ALWAYS, group ? journal_written : NULL, m);
        if (!group)
                return 0;
        return bg_thread_start(&m->flusher, "sbx-journal", 1, flusher_loop, m);
}

void journal_flusher_stop(struct sandbox_mgr *m)
{
        /* Writes from here on (sandboxes freed below) wait for the disk
         * and call nothing of the flusher's. */
        if (m->store)
                store_set_journal_lazy(m->store, false, NULL, NULL);
        bg_thread_done(&m->flusher);
        /* A clean stop leaves nothing unflushed, whatever the mode. */
        if (m->store)
                store_sync(m->store);
}

/* Writes the cell and c's row as it is once the cell is in, in one
 * transaction (a second commit per cell cost as much as the first); the
 * row in memory moves on only if both landed. */
static int append_with_row(struct sandbox_mgr *m, struct context *c, const struct cell_row *cell)
{
        struct context_row next = c->row;   /* shares env_json: nothing frees it here */
        next.snap_cells = cell->seq;
        next.snap_bytes += strlen(cell->code);
        next.snap_taken_at = wall_ms();
        /* The build that last wrote it: it replays the whole journal. */
        journal_build_id(c->rt, next.build, sizeof(next.build));
        int r = store_cell_append_row(m->store, cell, &next);
        if (r == 0)
                c->row = next;
        return r;
}

void journal_append(struct sandbox_mgr *m, struct context *c, const char *code, json_t *env,
                    const char *cwd_before, bool ts, double *ret_ms)
{
        uint64_t t0 = now_ns();
        if (c->row.snap_bytes > m->opt.journal_bytes) {
                /* Past the bound the journal stops growing; the live state
                 * is fine, but a restore will start fresh: say so now. */
                c->row.snap_stale = true;
                c->stale_reason = "journal_size";
                store_context_update(m->store, &c->row);
                *ret_ms = -1;
                return;
        }
        char *env_text = json_dumps(env, JSON_COMPACT | JSON_SORT_KEYS);
        struct cell_row cell = { c->row.snap_cells + 1, code, env_text ? env_text : "{}", cwd_before, ts };
        int r = append_with_row(m, c, &cell);
        if (r == -EINVAL) {
                /* Our count lagged the journal: resynchronise and retry. */
                journal_sync(m, c);
                cell.seq = c->row.snap_cells + 1;
                r = append_with_row(m, c, &cell);
        }
        if (r < 0) {
                c->row.snap_stale = true;
                store_context_update(m->store, &c->row);
        }
        free(env_text);
        *ret_ms = (double)(now_ns() - t0) / 1e6;
}
