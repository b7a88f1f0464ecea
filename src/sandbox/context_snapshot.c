/* Code contexts as data, for checkpoints (checkpoint.h): a context is its
 * row and its cell journal, so saving one is reading both, and bringing
 * one back is storing both again. The interpreter is not saved: the next
 * cell rebuilds it by replaying the journal (context.c, journal.c), as
 * after an eviction or a daemon restart, with the same staleness rules. */
#include "sandbox/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "sandbox/checkpoint.h"

static void on_cell(const struct cell_row *cell, void *userdata)
{
        json_array_append_new(userdata, json_pack("{s:s, s:s, s:s, s:b}", "code", cell->code, "env", cell->env_json,
                                                  "cwd", cell->cwd, "typescript", cell->typescript));
}

static json_t *context_json(struct sandbox_mgr *m, const struct context *c)
{
        json_t *cells = json_array(), *env = env_parse(c->row.env_json);
        if (store_cell_each(m->store, c->row.id, on_cell, cells) < 0) {
                json_decref(cells);
                json_decref(env);
                return NULL;
        }
        return json_pack("{s:s, s:s, s:s, s:s, s:o, s:I, s:s, s:b, s:o}", "id", c->row.id, "binding", c->row.binding,
                         "language", c->row.language, "cwd", c->row.cwd, "env", env ? env : json_object(),
                         "executions", (json_int_t)c->row.executions, "build", c->row.build, "stale",
                         c->row.snap_stale, "cells", cells);
}

int sbx_contexts_export(struct sandbox_mgr *m, const char *org_id, const char *id, json_t **ret, struct err *err)
{
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        json_t *all = json_array();
        int r = 0;
        for (struct context *c = s->contexts; r == 0 && c; c = c->next) {
                json_t *j = context_json(m, c);
                r = j ? json_array_append_new(all, j) : -ENOMEM;
        }
        sandbox_leave(m, s);
        if (r < 0) {
                json_decref(all);
                return err_set(err, ERR_INTERNAL, ENOMEM, "Cannot read the code contexts' journals");
        }
        *ret = all;
        return 0;
}

static const char *str(json_t *o, const char *name)
{
        const char *v = json_string_value(json_object_get(o, name));
        return v ? v : "";
}

/* The saved journal of j into c's, then c's row brought in line with it. */
static int import_cells(struct sandbox_mgr *m, struct context *c, json_t *j)
{
        size_t i;
        json_t *cell;
        json_array_foreach(json_object_get(j, "cells"), i, cell)
        {
                struct cell_row row = { i + 1, str(cell, "code"), str(cell, "env"), str(cell, "cwd"),
                                        json_is_true(json_object_get(cell, "typescript")) };
                int r = store_cell_append(m->store, c->row.id, &row);
                if (r < 0)
                        return r;
        }
        journal_sync(m, c);
        c->row.executions = (uint64_t)json_integer_value(json_object_get(j, "executions"));
        c->row.snap_stale = json_is_true(json_object_get(j, "stale"));
        c->row.snap_taken_at = c->row.snap_cells ? wall_ms() : 0;
        snprintf(c->row.build, sizeof(c->row.build), "%s", str(j, "build"));
        return store_context_update(m->store, &c->row);
}

static int import_one(struct sandbox_mgr *m, struct sandbox *s, json_t *j, bool keep_ids, struct err *err)
{
        const struct runtime *rt = runtime_find(str(j, "language"));
        if (!rt) {
                err_set(err, ERR_UNAVAILABLE, 0, "A code context's language is not served: %.32s", str(j, "language"));
                err->op = "checkpoint.contexts";
                return -EIO;
        }
        json_t *env = json_object_get(j, "env");
        struct context *c = context_new(m, s, rt, str(j, "binding"), str(j, "cwd"), env,
                                        keep_ids ? str(j, "id") : NULL, err);
        if (!c && keep_ids) { /* the id is taken elsewhere: a fresh one */
                err_done(err);
                c = context_new(m, s, rt, str(j, "binding"), str(j, "cwd"), env, NULL, err);
        }
        if (!c)
                return err_ret(err);
        int r = import_cells(m, c, j);
        if (r < 0)
                return err_set(err, ERR_INTERNAL, -r, "Cannot store a code context's journal: %s", strerror(-r));
        return 0;
}

int sbx_contexts_import(struct sandbox_mgr *m, const char *org_id, const char *id, json_t *saved, bool keep_ids,
                        struct err *err)
{
        struct sandbox *s = sandbox_enter_org(m, org_id, id, err);
        if (!s)
                return err_ret(err);
        while (s->contexts)
                context_remove(m, s, s->contexts);
        size_t i;
        json_t *j;
        int r = 0;
        json_array_foreach(saved, i, j) if (r == 0) r = import_one(m, s, j, keep_ids, err);
        sandbox_leave(m, s);
        return r;
}
