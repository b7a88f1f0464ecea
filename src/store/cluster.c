/* The store's cluster functions (issue 16): the node table every daemon
 * heartbeats into and the sandbox ownership lease that moves only by a
 * compare-and-set on lease_epoch. Argument checks and locking as in
 * store.c; the SQL lives in the backends' cluster.c. */
#include <errno.h>
#include <string.h>

#include "store/core.h"

int store_node_heartbeat(struct store *s, const struct node_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = store_core_check_id(row->id)) < 0 || (r = CHECK_FIELD(row, url)) < 0 ||
            (r = CHECK_FIELD(row, state)) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->node_heartbeat(s, row);
}

int store_node_each(struct store *s, void (*fn)(const struct node_row *row, void *userdata), void *userdata)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct node_row) };
        int r;

        if (!s || !fn)
                return -EINVAL;
        {
                STORE_GUARD(s);
                r = s->ops->node_list(s, &l);
        }
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return 0;
}

int store_sandbox_claim(struct store *s, const char *id, const char *node_id, uint64_t expected_epoch,
                        uint64_t *ret_epoch)
{
        int r;

        if (!s || !node_id || !ret_epoch)
                return -EINVAL;
        if ((r = store_core_check_id(id)) < 0 || (r = store_core_check_str(node_id, STORE_ID_MAX)) < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->sandbox_claim(s, id, node_id, expected_epoch);
        }
        if (r < 0)
                return r;
        *ret_epoch = expected_epoch + 1;
        return 0;
}

int store_sandbox_owner(struct store *s, const char *id, char ret_node[static STORE_ID_MAX], uint64_t *ret_epoch)
{
        struct store_owner o = {};
        int r;

        if (!s || !ret_node || !ret_epoch)
                return -EINVAL;
        if ((r = store_core_check_id(id)) < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->sandbox_owner(s, id, &o);
        }
        if (r < 0)
                return r;
        memcpy(ret_node, o.node_id, STORE_ID_MAX);
        *ret_epoch = o.lease_epoch;
        return 0;
}

int store_sandbox_each_on_node(struct store *s, const char *node_id,
                               void (*fn)(const char *id, uint64_t lease_epoch, void *userdata), void *userdata)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct store_owner) };
        int r;

        if (!s || !fn || !node_id)
                return -EINVAL;
        if ((r = store_core_check_str(node_id, STORE_ID_MAX)) < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->sandbox_list_on_node(s, node_id, &l);
        }
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++) {
                const struct store_owner *o = store_core_row(&l, i);
                fn(o->id, o->lease_epoch, userdata);
        }
        return 0;
}

int store_sandbox_usage_on_node(struct store *s, const char *node_id, uint64_t default_bytes, uint64_t *ret_count,
                                uint64_t *ret_reserved)
{
        STORE_CALL(s, ret_count && ret_reserved, node_id,
                   s->ops->sandbox_usage_on_node(s, node_id, default_bytes, ret_count, ret_reserved));
}

/* ---- execution slots (the controller's budget across a cluster) ---- */

int store_slot_take(struct store *s, const struct slot_row *row, uint64_t limit)
{
        STORE_CALL(s, row && (store_core_check_id(row->org_id) ?: CHECK_FIELD(row, node_id) ?: CHECK_FIELD(row, kind)) == 0,
                   row ? row->id : NULL, s->ops->slot_take(s, row, limit));
}

int store_slot_give(struct store *s, const char *id)
{
        STORE_CALL(s, true, id, s->ops->slot_give(s, id));
}

int store_slot_free_node(struct store *s, const char *node_id, uint64_t *ret_n)
{
        uint64_t n = 0;
        int r;

        if (!s || !node_id || store_core_check_str(node_id, STORE_ID_MAX) < 0)
                return -EINVAL;
        {
                STORE_GUARD(s);
                r = s->ops->slot_free_node(s, node_id, &n);
        }
        if (r >= 0 && ret_n)
                *ret_n = n;
        return r;
}

int store_slot_count(struct store *s, const char *org_id, const char *kind, uint64_t *ret)
{
        STORE_CALL(s, kind && ret && store_core_check_str(kind, sizeof(((struct slot_row *)0)->kind)) == 0, org_id,
                   s->ops->slot_count(s, org_id, kind, ret));
}
