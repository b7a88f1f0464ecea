/* Cluster mode (issue 16) in the sandbox layer: which of the stored
 * sandboxes are this node's (the sweeps leave other nodes' alone), and the
 * fencing that drops a sandbox another node took over while this one was
 * stopped or cut off, so no sandbox is served by two nodes. */
#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "sandbox/internal.h"

/* Not ours: another node's row. A row nobody owns ("": written before
 * cluster mode) or one that is gone counts as ours here: the sweeps then
 * treat it as they always did. */
static bool owned_elsewhere(struct sandbox_mgr *m, const char *id)
{
        char node[STORE_ID_MAX];
        uint64_t epoch;

        if (store_sandbox_owner(m->store, id, node, &epoch) < 0)
                return false;
        return node[0] && strcmp(node, m->opt.node_id) != 0;
}

void ids_keep_owned(struct sandbox_mgr *m, struct id_list *l)
{
        size_t kept = 0;

        if (!m->opt.node_id[0])
                return;
        for (size_t i = 0; i < l->n; i++)
                if (!owned_elsewhere(m, l->ids[i]))
                        memmove(l->ids[kept++], l->ids[i], STORE_ID_MAX);
        l->n = kept;
}

int sandbox_check_owner(struct sandbox_mgr *m, const struct sandbox_row *row, struct err *err)
{
        if (!m->opt.node_id[0] || !row->node_id[0] || strcmp(row->node_id, m->opt.node_id) == 0)
                return 0;
        /* ERR_BUSY: each facade answers 503 (+ Retry-After): by then the
         * request's own routing sends it to the owner. */
        err_set(err, ERR_BUSY, EREMOTE, "Sandbox %s is served by node \"%.64s\", not this one; retry", row->id,
                row->node_id);
        err_detail(err, "node", row->node_id, (size_t)-1);
        return -EREMOTE;
}

size_t sbx_loaded_count(struct sandbox_mgr *m)
{
        _cleanup_(id_list_done) struct id_list l = { 0 };

        sandbox_loaded_ids(m, &l);
        return l.n;
}

/* 1 when id must go (its row names another node or is gone), 0 when it is
 * still ours, -errno when the store cannot tell (keep it: a store outage
 * must not drop every sandbox). */
static int moved_away(struct sandbox_mgr *m, const char *id)
{
        char node[STORE_ID_MAX];
        uint64_t epoch;
        int r = store_sandbox_owner(m->store, id, node, &epoch);

        if (r == -ENOENT)
                return 1;
        if (r < 0)
                return r;
        return node[0] && strcmp(node, m->opt.node_id) != 0;
}

static void release_one(struct sandbox_mgr *m, const char *id, uint64_t *dropped)
{
        struct err err = { 0 };
        struct sandbox *s = sandbox_get_existing(m, NULL, id, &err);

        err_done(&err);
        if (!s)
                return;
        log_warn("msg=\"sandbox owned by another node now; dropped here\" sandbox=%s", id);
        sandbox_release(m, s);
        sandbox_put(m, s);
        (*dropped)++;
}

int sbx_fence(struct sandbox_mgr *m, uint64_t *ret_dropped)
{
        _cleanup_(id_list_done) struct id_list l = { 0 };
        uint64_t dropped = 0;
        int r = 0;

        if (m->opt.node_id[0]) {
                sandbox_loaded_ids(m, &l);
                for (size_t i = 0; i < l.n; i++) {
                        int k = moved_away(m, l.ids[i]);
                        if (k > 0)
                                release_one(m, l.ids[i], &dropped);
                        else if (k < 0)
                                r = k;
                }
        }
        if (ret_dropped)
                *ret_dropped = dropped;
        return r;
}
