/* The store's public functions for the append-only logs of issue 15 (the
 * event log and the audit log): the same frame as store.c (arguments
 * checked once for every backend, the backend serialised when it needs it,
 * callbacks run after the rows were read), kept apart so store.c stays one
 * screenful of table families smaller. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/core.h"


/* ---- events ---- */

void event_row_done(struct event_row *r)
{
        if (!r)
                return;
        free(r->payload);
        r->payload = NULL;
}

static void event_item_done(void *item)
{
        event_row_done(item);
}

int store_event_append(struct store *s, const struct event_row *row, uint64_t keep, uint64_t not_before,
                       uint64_t *ret_id)
{
        int r;

        if (!s || !row || !ret_id || !row->payload || !row->name[0] || keep > INT64_MAX || not_before > INT64_MAX ||
            row->created_at > INT64_MAX)
                return -EINVAL;
        if ((r = store_core_check_id(row->org_id)) < 0 || (r = store_core_check_str(row->name, sizeof(row->name))) < 0 ||
            (r = store_core_check_str(row->sandbox_id, sizeof(row->sandbox_id))) < 0)
                return r;
        SCOPED_JOURNAL_WRITE(s);
        return s->ops->event_append(s, row, keep, not_before, ret_id);
}

int store_event_last(struct store *s, uint64_t *ret)
{
        if (!s || !ret)
                return -EINVAL;
        STORE_GUARD(s);
        return s->ops->event_last(s, ret);
}

int store_event_each(struct store *s, const char *org_id, uint64_t after, uint64_t limit,
                     void (*fn)(const struct event_row *row, void *userdata), void *userdata)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct event_row), .done = event_item_done };
        int r;

        if (!s || !fn || after > INT64_MAX || limit > INT64_MAX)
                return -EINVAL;
        if ((r = store_core_check_id(org_id)) < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->event_list(s, org_id, after, limit, &l);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

/* ---- audit ---- */

static int check_audit(const struct audit_row *row)
{
        const struct {
                const char *v;
                size_t size;
        } fields[] = {
                { row->user_id, sizeof(row->user_id) },       { row->key_id, sizeof(row->key_id) },
                { row->action, sizeof(row->action) },         { row->method, sizeof(row->method) },
                { row->path, sizeof(row->path) },             { row->sandbox_id, sizeof(row->sandbox_id) },
                { row->ip, sizeof(row->ip) },                 { row->request_id, sizeof(row->request_id) },
        };
        int r = store_core_check_id(row->org_id);
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(fields); i++)
                r = store_core_check_str(fields[i].v, fields[i].size);
        if (r == 0 && (!row->action[0] || !row->method[0] || row->status < 0 || row->created_at > INT64_MAX))
                r = -EINVAL;
        return r;
}

int store_audit_append(struct store *s, const struct audit_row *row, uint64_t not_before)
{
        int r;

        if (!s || !row || not_before > INT64_MAX)
                return -EINVAL;
        if ((r = check_audit(row)) < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->audit_append(s, row, not_before);
}

static const char *or_any(const char *v)
{
        return v ? v : "";
}

int store_audit_each(struct store *s, const char *org_id, const struct audit_filter *f, uint64_t limit,
                     uint64_t offset, void (*fn)(const struct audit_row *row, void *userdata), void *userdata,
                     uint64_t *ret_total)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct audit_row) };
        int r;

        if (!s || !f || !fn || !ret_total || limit > INT64_MAX || offset > INT64_MAX || f->from > INT64_MAX)
                return -EINVAL;
        if ((r = store_core_check_id(org_id)) < 0)
                return r;
        const struct audit_filter any = {
                .action = or_any(f->action), .sandbox_id = or_any(f->sandbox_id), .user_id = or_any(f->user_id),
                .key_id = or_any(f->key_id), .from = f->from, .to = f->to && f->to < INT64_MAX ? f->to : INT64_MAX,
        };
        {
                STORE_GUARD(s);
                r = s->ops->audit_list(s, org_id, &any, limit, offset, &l, ret_total);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_audit_summary(struct store *s, const char *org_id, const char *sandbox_id,
                        void (*fn)(const struct audit_count *c, void *userdata), void *userdata)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct audit_count) };
        int r;

        if (!s || !fn)
                return -EINVAL;
        if ((r = store_core_check_id(org_id)) < 0 || (r = store_core_check_id(sandbox_id)) < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->audit_summary(s, org_id, sandbox_id, &l);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}
