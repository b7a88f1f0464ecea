/* The event log: the store holds the events (durable, replayable); this
 * file adds the wake-up. One condition variable for every subscriber and a
 * counter of emitted events: a subscriber sleeps until the counter moves,
 * then reads its org's new rows from the store. Waking every subscriber on
 * any org's event costs one indexed read each, and spares a list of
 * subscribers per org (and the races of keeping it). */
#include "tenant/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/time.h"
#include "base/util.h"

struct events {
        struct store *store;
        struct events_options opt;
        pthread_mutex_t lock;
        pthread_cond_t cond;   /* CLOCK_MONOTONIC */
        uint64_t latest;       /* lock: the newest id emitted in this run */
};

int events_new(struct store *store, const struct events_options *o, struct events **ret)
{
        struct events *ev = calloc(1, sizeof(*ev));
        if (!ev)
                return -ENOMEM;
        ev->store = store;
        ev->opt = *o;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&ev->cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&ev->lock, NULL);
        /* A subscriber that gives no Last-Event-ID starts after the newest
         * event, whichever run stored it. */
        int r = store_event_last(store, &ev->latest);
        if (r < 0) {
                events_free(ev);
                return r;
        }
        *ret = ev;
        return 0;
}

void events_free(struct events *ev)
{
        if (!ev)
                return;
        pthread_cond_destroy(&ev->cond);
        pthread_mutex_destroy(&ev->lock);
        free(ev);
}

static int event_append(struct events *ev, struct event_row *row, uint64_t *ret_id)
{
        uint64_t now = row->created_at;
        uint64_t not_before = ev->opt.max_age_ms && now > ev->opt.max_age_ms ? now - ev->opt.max_age_ms : 0;
        /* Appending under the lock keeps `latest` in id order even when two
         * threads emit at once. */
        pthread_mutex_lock(&ev->lock);
        int r = store_event_append(ev->store, row, ev->opt.keep_per_org, not_before, ret_id);
        if (r == 0 && *ret_id > ev->latest) {
                ev->latest = *ret_id;
                pthread_cond_broadcast(&ev->cond);
        }
        pthread_mutex_unlock(&ev->lock);
        return r;
}

int events_emit(struct events *ev, const char *org_id, const char *name, const char *sandbox_id, json_t *data,
                uint64_t *ret_id)
{
        if (!ev) {
                json_decref(data);
                return 0;
        }
        struct event_row row = { .created_at = wall_ms() };
        snprintf(row.org_id, sizeof(row.org_id), "%s", org_id ? org_id : "");
        snprintf(row.name, sizeof(row.name), "%s", name ? name : "");
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", sandbox_id ? sandbox_id : "");
        row.payload = data ? json_dumps(data, JSON_COMPACT) : strdup("{}");
        json_decref(data);
        if (!row.payload)
                return -ENOMEM;
        uint64_t id = 0;
        int r = event_append(ev, &row, &id);
        event_row_done(&row);
        if (r == 0 && ret_id)
                *ret_id = id;
        return r;
}

uint64_t events_latest(struct events *ev)
{
        pthread_mutex_lock(&ev->lock);
        uint64_t v = ev->latest;
        pthread_mutex_unlock(&ev->lock);
        return v;
}

bool events_wait(struct events *ev, uint64_t seen, const bool *cancel, uint64_t deadline_ns)
{
        struct timespec ts = { .tv_sec = (time_t)(deadline_ns / 1000000000ULL),
                               .tv_nsec = (long)(deadline_ns % 1000000000ULL) };
        pthread_mutex_lock(&ev->lock);
        int r = 0;
        while (ev->latest == seen && !*cancel && r != ETIMEDOUT)
                r = pthread_cond_timedwait(&ev->cond, &ev->lock, &ts);
        bool fresh = ev->latest != seen && !*cancel;
        pthread_mutex_unlock(&ev->lock);
        return fresh;
}

void events_cancel(struct events *ev, bool *cancel)
{
        pthread_mutex_lock(&ev->lock);
        *cancel = true;
        pthread_cond_broadcast(&ev->cond);
        pthread_mutex_unlock(&ev->lock);
}
