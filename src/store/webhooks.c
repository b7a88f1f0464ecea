/* The store's public functions for webhooks and their deliveries (issue
 * 15): the frame of store.c (arguments checked once for every backend, the
 * backend serialised when it needs it, callbacks run after the rows were
 * read), in a file of its own as logs.c is. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/core.h"


void webhook_row_done(struct webhook_row *r)
{
        if (!r)
                return;
        free(r->url);
        free(r->events_json);
        free(r->description);
        free(r->sealed_secret);
        r->url = r->events_json = r->description = r->sealed_secret = NULL;
}

static void webhook_item_done(void *item)
{
        webhook_row_done(item);
}

static int check_webhook(const struct webhook_row *row)
{
        int r;

        if (!row || !row->url || !row->events_json || !row->description || !row->sealed_secret ||
            row->cursor > INT64_MAX || row->failing_since > INT64_MAX || row->created_at > INT64_MAX ||
            row->updated_at > INT64_MAX)
                return -EINVAL;
        if ((r = store_core_check_id(row->id)) < 0 || (r = store_core_check_id(row->org_id)) < 0 ||
            (r = CHECK_FIELD(row, key_id)) < 0 || (r = CHECK_FIELD(row, disabled_reason)) < 0)
                return r;
        return 0;
}

int store_webhook_create(struct store *s, const struct webhook_row *row)
{
        int r = s ? check_webhook(row) : -EINVAL;
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_create(s, row);
}

int store_webhook_update(struct store *s, const struct webhook_row *row)
{
        int r = s ? check_webhook(row) : -EINVAL;
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_update(s, row);
}

/* 0 when both ids are ids. */
static int check_ids(const char *a, const char *b)
{
        int r = store_core_check_id(a);
        return r < 0 ? r : store_core_check_id(b);
}

int store_webhook_get(struct store *s, const char *org_id, const char *id, struct webhook_row *ret)
{
        int r = !s || !ret ? -EINVAL : check_ids(org_id, id);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_get(s, org_id, id, ret);
}

int store_webhook_set_active(struct store *s, const char *org_id, const char *id, bool active)
{
        int r = !s ? -EINVAL : check_ids(org_id, id);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_set_active(s, org_id, id, active);
}

int store_webhook_delete(struct store *s, const char *org_id, const char *id)
{
        int r = !s ? -EINVAL : check_ids(org_id, id);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_delete(s, org_id, id);
}

int store_webhook_each(struct store *s, const char *org_id, uint64_t limit, uint64_t offset,
                       void (*fn)(const struct webhook_row *row, void *userdata), void *userdata,
                       uint64_t *ret_total)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct webhook_row), .done = webhook_item_done };
        int r = !s || !fn || !ret_total || limit > INT64_MAX || offset > INT64_MAX ? -EINVAL : 0;
        if (r == 0 && org_id)
                r = store_core_check_id(org_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->webhook_list(s, org_id, limit, offset, &l, ret_total);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_webhook_health(struct store *s, const char *id, uint64_t failing_since, bool disable, const char *reason)
{
        int r = !s || failing_since > INT64_MAX || (disable && !reason) ? -EINVAL : store_core_check_id(id);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_health(s, id, failing_since, disable, reason ? reason : "");
}

/* ---- deliveries ---- */

void webhook_delivery_row_done(struct webhook_delivery_row *r)
{
        if (!r)
                return;
        free(r->payload);
        free(r->last_error);
        free(r->log_json);
        r->payload = r->last_error = r->log_json = NULL;
}

static void delivery_item_done(void *item)
{
        webhook_delivery_row_done(item);
}

static int check_delivery(const struct webhook_delivery_row *row)
{
        int r;

        if (!row->payload || row->event_id > INT64_MAX || row->next_attempt_at > INT64_MAX ||
            row->created_at > INT64_MAX || row->delivered_at > INT64_MAX || row->last_duration_ms > INT64_MAX)
                return -EINVAL;
        if ((r = check_ids(row->id, row->webhook_id)) < 0 || (r = store_core_check_id(row->org_id)) < 0 ||
            (r = CHECK_FIELD(row, origin)) < 0 || (r = CHECK_FIELD(row, event)) < 0 || (r = CHECK_FIELD(row, status)) < 0)
                return r;
        return 0;
}

int store_webhook_enqueue(struct store *s, const char *webhook_id, uint64_t cursor,
                          const struct webhook_delivery_row *row, uint64_t keep)
{
        int r = !s || cursor > INT64_MAX || keep > INT64_MAX ? -EINVAL : store_core_check_id(webhook_id);
        if (r == 0 && row)
                r = check_delivery(row);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_enqueue(s, webhook_id, cursor, row, keep);
}

int store_webhook_delivery_get(struct store *s, const char *org_id, const char *webhook_id, const char *id,
                               struct webhook_delivery_row *ret)
{
        int r = !s || !ret ? -EINVAL : check_ids(org_id, webhook_id);
        if (r == 0)
                r = store_core_check_id(id);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_delivery_get(s, org_id, webhook_id, id, ret);
}

int store_webhook_delivery_update(struct store *s, const struct webhook_delivery_row *row)
{
        int r = !s || !row || !row->last_error || !row->log_json ? -EINVAL : check_delivery(row);
        if (r < 0)
                return r;
        STORE_GUARD(s);
        return s->ops->webhook_delivery_update(s, row);
}

int store_webhook_delivery_each(struct store *s, const char *org_id, const char *webhook_id, uint64_t limit,
                                uint64_t offset, void (*fn)(const struct webhook_delivery_row *row, void *userdata),
                                void *userdata, uint64_t *ret_total)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct webhook_delivery_row), .done = delivery_item_done };
        int r = !s || !fn || !ret_total || limit > INT64_MAX || offset > INT64_MAX ? -EINVAL
                                                                                  : check_ids(org_id, webhook_id);
        if (r < 0)
                return r;
        {
                STORE_GUARD(s);
                r = s->ops->webhook_delivery_list(s, org_id, webhook_id, limit, offset, &l, ret_total);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}

int store_webhook_delivery_heads(struct store *s, void (*fn)(const struct webhook_delivery_row *row, void *userdata),
                                 void *userdata)
{
        _cleanup_rows_ struct store_rows l = { .size = sizeof(struct webhook_delivery_row), .done = delivery_item_done };
        if (!s || !fn)
                return -EINVAL;
        int r;
        {
                STORE_GUARD(s);
                r = s->ops->webhook_delivery_heads(s, &l);
        }
        for (size_t i = 0; r == 0 && i < l.n; i++)
                fn(store_core_row(&l, i), userdata);
        return r;
}
