/* The store's public functions for code contexts and their journal of
 * cells: argument checks once for every backend, the backend's op under
 * the guard, and the journal's commit mode (store_set_journal_lazy, kept
 * in journal_mode.c) for each journal write. Split from store.c; the
 * frame is core.h's. */
#include "store/store.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "base/util.h"
#include "store/core.h"

static void store_cell_done(void *item)
{
        free(((struct store_cell *)item)->buf);
}

static void context_item_done(void *item)
{
        context_row_done(item);
}

static int check_context_state(const struct context_row *row)
{
        int r;

        if ((r = store_core_check_id(row->id)) < 0 ||
            (r = store_core_check_str(row->cwd, sizeof(row->cwd))) < 0 ||
            (r = store_core_check_str(row->build, sizeof(row->build))) < 0)
                return r;
        return 0;
}

/* ---- contexts --------------------------------------------------------- */

int store_context_insert(struct store *s, const struct context_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_context_state(row)) < 0 ||
            (r = store_core_check_id(row->sandbox_id)) < 0 ||
            (r = store_core_check_str(row->binding, sizeof(row->binding))) < 0 ||
            (r = store_core_check_str(row->language, sizeof(row->language))) < 0)
                return r;
        SCOPED_JOURNAL_WRITE(s);
        return s->ops->context_insert(s, row);
}

int store_context_update(struct store *s, const struct context_row *row)
{
        int r;

        if (!s || !row)
                return -EINVAL;
        if ((r = check_context_state(row)) < 0)
                return r;
        JOURNAL_WRITE(s);
        return s->ops->context_update(s, row);
}

int store_context_get(struct store *s, const char *id, struct context_row *ret)
{
        STORE_CALL(s, ret, id, s->ops->context_get(s, id, ret));
}

int store_context_delete(struct store *s, const char *id)
{
        STORE_CALL(s, true, id, s->ops->context_delete(s, id));
}

/* Reads the rows listed under an id while holding the guard; the caller
 * walks them after it is released. */
static int list_by_id(struct store *s, const char *id,
                      int (*list)(struct store *s, const char *id, struct store_rows *out), struct store_rows *l)
{
        STORE_CALL(s, true, id, list(s, id, l));
}

int store_context_each(struct store *s, const char *sandbox_id,
                       void (*fn)(const struct context_row *row, void *userdata), void *userdata)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct context_row),
                                                           .done = context_item_done };
        if (!s || !fn)
                return -EINVAL;
        int r = list_by_id(s, sandbox_id, s->ops->context_list, &l);
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_context_count(struct store *s, const char *sandbox_id, uint64_t *ret)
{
        STORE_CALL(s, ret, sandbox_id, s->ops->context_count(s, sandbox_id, ret));
}

/* ---- cells ------------------------------------------------------------ */

static bool cell_ok(const struct store *s, const struct cell_row *cell)
{
        return s && cell && cell->code && cell->cwd;
}

int store_cell_append(struct store *s, const char *context_id, const struct cell_row *cell)
{
        int r = cell_ok(s, cell) ? store_core_check_id(context_id) : -EINVAL;
        if (r < 0)
                return r;
        JOURNAL_WRITE(s);
        return s->ops->cell_append(s, context_id, cell);
}

int store_cell_append_row(struct store *s, const struct cell_row *cell, const struct context_row *row)
{
        int r = cell_ok(s, cell) && row ? store_core_check_id(row->id) : -EINVAL;
        if (r < 0 || (r = check_context_state(row)) < 0)
                return r;
        JOURNAL_WRITE(s);
        return s->ops->cell_append_row(s, cell, row);
}

/* Replaying a journal runs user code for a long time: it must not hold
 * the lock every other store user needs. */
int store_cell_each(struct store *s, const char *context_id,
                    void (*fn)(const struct cell_row *cell, void *userdata), void *userdata)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct store_cell),
                                                           .done = store_cell_done };
        if (!s || !fn)
                return -EINVAL;
        int r = list_by_id(s, context_id, s->ops->cell_list, &l);
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(&((struct store_cell *)store_core_row(&l, i))->row, userdata);
        return r;
}

int store_cells_delete(struct store *s, const char *context_id)
{
        STORE_CALL(s, true, context_id, s->ops->cells_delete(s, context_id));
}

int store_cell_stats(struct store *s, const char *context_id, uint64_t *ret_count, uint64_t *ret_bytes)
{
        STORE_CALL(s, ret_count && ret_bytes, context_id, s->ops->cell_stats(s, context_id, ret_count, ret_bytes));
}
