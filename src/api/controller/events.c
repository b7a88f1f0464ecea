/* GET /events/stream (seed 003, "Real-time Events (SSE)"): the caller's
 * org's events as Server-Sent Events, each as
 *
 *   event: sandbox.created
 *   id: 42
 *   data: {"id":42,"event":"sandbox.created","sandboxId":"…","orgId":"…","timestamp":"…",…}
 *
 * Ids are the event log's (tenant/events.h): increasing, never reused, kept
 * across restarts. A client that gives Last-Event-ID (or ?lastEventId=;
 * "evt_42" is read as 42) first gets every event of its org after that id
 * the log still holds, then the live ones; without it, only live ones. A
 * ":heartbeat" comment goes out after controller.events_heartbeat_ms
 * without an event. ?types=a,b keeps only those event names.
 *
 * Auth: every way the group takes, plus ?token= and ?apiKey=&orgId= on
 * this route only (auth.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/time.h"
#include "base/util.h"

/* Rows read from the store at a time: a long replay goes out in pieces,
 * and a stalled client holds at most this many in memory. */
#define REPLAY_BATCH 100
#define TYPES_MAX 512

struct subscriber {
        struct app *app;
        char org_id[STORE_ID_MAX];
        uint64_t after;          /* the last id sent (or skipped) */
        size_t got;              /* rows of the current read */
        char types[TYPES_MAX];   /* ",a,b," or "" for every event */
        bool gone;               /* events lock: the client left */
        int werr;                /* a write failed: the client left */
        struct http_stream *s;
};

static bool wanted(const struct subscriber *sub, const char *name)
{
        char key[80];
        if (!sub->types[0])
                return true;
        snprintf(key, sizeof(key), ",%s,", name);
        return strstr(sub->types, key) != NULL;
}

/* The seed's shape: the log's fields, then the payload's members beside
 * them (a payload never overrides them). */
static json_t *event_json(const struct event_row *row)
{
        char at[32];
        iso8601_ms(row->created_at, at);
        json_t *j = json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)row->id, "event", row->name, "orgId",
                              row->org_id, "timestamp", at);
        json_object_set_new(j, "sandboxId", row->sandbox_id[0] ? json_string(row->sandbox_id) : json_null());
        json_t *payload = json_loads(row->payload, 0, NULL);
        const char *k;
        json_t *v;
        json_object_foreach(payload, k, v)
        {
                if (!json_object_get(j, k))
                        json_object_set(j, k, v);
        }
        json_decref(payload);
        return j;
}

static void on_event(const struct event_row *row, void *userdata)
{
        struct subscriber *sub = userdata;
        sub->after = row->id;
        sub->got++;
        if (sub->werr || !wanted(sub, row->name))
                return;
        json_t *j = event_json(row);
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        char id[24];
        snprintf(id, sizeof(id), "%llu", (unsigned long long)row->id);
        if (!text || http_sse_event(sub->s, row->name, id, text) < 0)
                sub->werr = -EPIPE;
}

/* Everything after sub->after, a batch at a time. 0, or -EPIPE / the
 * store's error. */
static int send_new(struct subscriber *sub)
{
        for (;;) {
                sub->got = 0;
                int r = store_event_each(sub->app->store, sub->org_id, sub->after, REPLAY_BATCH, on_event, sub);
                if (r < 0 || sub->werr)
                        return r < 0 ? r : sub->werr;
                if (sub->got < REPLAY_BATCH)
                        return 0; /* caught up */
        }
}

static void stream_run(struct http_stream *s, void *ctx)
{
        struct subscriber *sub = ctx;
        struct events *ev = sub->app->events;
        uint64_t beat_ms = sub->app->cfg->ctl_events_heartbeat_ms;
        sub->s = s;
        static const char hello[] = ":connected\n\n";
        if (http_stream_write(s, hello, sizeof(hello) - 1) < 0)
                return;
        for (;;) {
                /* Taken before the read: an event stored after it moves the
                 * counter, so the wait below cannot sleep through it. */
                uint64_t seen = events_latest(ev);
                if (send_new(sub) < 0)
                        return;
                if (events_wait(ev, seen, &sub->gone, now_ns() + beat_ms * 1000000ULL))
                        continue;
                /* A timeout or a cancel: the write tells which (a gone
                 * client's stream answers -EPIPE). */
                static const char beat[] = ":heartbeat\n\n";
                if (http_stream_write(s, beat, sizeof(beat) - 1) < 0)
                        return;
        }
}

static void stream_disconnect(void *ctx)
{
        struct subscriber *sub = ctx;
        events_cancel(sub->app->events, &sub->gone);
}

static const struct http_stream_ops event_stream_ops = { stream_run, stream_disconnect, free };

/* "42" or "evt_42"; false when neither. */
static bool parse_last_id(const char *v, uint64_t *ret)
{
        if (strncmp(v, "evt_", 4) == 0)
                v += 4;
        char *end;
        if (*v < '0' || *v > '9')
                return false;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || *end || n > INT64_MAX)
                return false;
        *ret = n;
        return true;
}

/* ?types=a,b → ",a,b,"; names of [a-z0-9._] only. */
static bool parse_types(const char *v, char out[TYPES_MAX])
{
        size_t n = strlen(v);
        if (!n || n + 3 > TYPES_MAX || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789._,") != n || strstr(v, ",,") ||
            v[0] == ',' || v[n - 1] == ',')
                return false;
        snprintf(out, TYPES_MAX, ",%s,", v);
        return true;
}

static bool parse_stream(struct http_request *req, struct http_response *res, struct subscriber *sub)
{
        const char *last = http_header(req, "Last-Event-ID");
        const char *q = http_query(req, "lastEventId");
        const char *types = http_query(req, "types");
        if (!last || !*last)
                last = q;
        if (last && *last && !parse_last_id(last, &sub->after)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "Last-Event-ID must be an event id (e.g. 42 or evt_42)");
                return false;
        }
        if (!last || !*last)
                sub->after = events_latest(sub->app->events);
        if (types && !parse_types(types, sub->types)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "types must be a comma-separated list of event names");
                return false;
        }
        return true;
}

static void h_stream(struct http_request *req, struct http_response *res)
{
        struct subscriber *sub = calloc(1, sizeof(*sub));
        if (!sub) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Out of memory");
                return;
        }
        sub->app = req->app;
        snprintf(sub->org_id, sizeof(sub->org_id), "%s", ctl_caller(req)->who.org_id);
        if (!parse_stream(req, res, sub)) {
                free(sub);
                return;
        }
        if (http_stream(res, 200, "text/event-stream", &event_stream_ops, sub) == 0) {
                http_response_header(res, "Cache-Control", "no-cache");
                http_response_header(res, "X-Accel-Buffering", "no");
        }
}

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/events/stream", h_stream, 0, 0 }, /* = CTL_EVENTS_STREAM */
};

const struct route *ctl_event_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
