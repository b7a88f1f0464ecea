/* The webhook dispatcher: one thread that follows the event log and sends.
 *
 * Queueing: each webhook has a cursor (the last event id it has looked
 * at). For every event of its org above the cursor that its filter wants,
 * a delivery row is queued in the same store transaction that moves the
 * cursor (store_webhook_enqueue), so a restart neither loses an event
 * (the cursor had not moved) nor queues one twice (a unique index).
 *
 * Sending: the oldest pending delivery of each active webhook is sent when
 * it is due; the next one waits until it succeeds or fails for good, so
 * one webhook receives in event order. A 2xx is success; any other status
 * or a transport error is retried after base * 2^(n-1) (capped, with
 * jitter: a random point in the second half of that delay) until
 * max_attempts, then the delivery is failed. A webhook that has failed
 * every attempt for disable_after_ms is switched off. A delivery whose
 * attempt was cut by a stop (or a crash) is sent again at the next start:
 * at least once, with the event id as the receiver's idempotency key.
 *
 * One thread does it all: it queues, and it sends through one libcurl
 * multi handle, up to MAX_FLIGHTS transfers at once, one per webhook, so a
 * slow endpoint (up to its timeout) delays only its own deliveries. The
 * name of a target is resolved on this thread (getaddrinfo blocks). A
 * stop cuts the transfers in flight: they were not attempts and stay
 * pending. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/log.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/util.h"
#include "tenant/webhook_net.h"
#include "tenant/webhooks.h"

#define SCAN_BATCH 100
#define TICK_MS 1000
#define RESPONSE_KEEP 512
#define MAX_FLIGHTS 32       /* transfers at once (each to another webhook) */
#define FLIGHT_POLL_MS 200   /* a new event is seen this late while transfers run */

struct webhooks {
        struct store *store;
        struct events *ev;
        struct tenant *t;
        struct webhook_options o;
        pthread_t thread;
        CURLM *multi;            /* the transfers in flight, one per webhook at most */
        struct flight *flights;  /* the dispatcher thread's */
        size_t nflights;
        bool stop;   /* atomic */
        bool kick;   /* the events_wait "cancel": set by events_cancel, cleared by the thread */
};

/* ---- queueing ---- */

/* true when the webhook's filter (a JSON array of names, "*" for all,
 * "prefix.*" for a family) takes name. */
static bool filter_wants(const char *events_json, const char *name)
{
        json_t *list = json_loads(events_json, 0, NULL);
        size_t i;
        json_t *v;
        bool yes = false;
        json_array_foreach(list, i, v)
        {
                const char *f = json_string_value(v);
                size_t n = f ? strlen(f) : 0;
                if (f && (strcmp(f, "*") == 0 || strcmp(f, name) == 0 ||
                          (n >= 2 && strcmp(f + n - 2, ".*") == 0 && strncmp(f, name, n - 1) == 0)))
                        yes = true;
        }
        json_decref(list);
        return yes;
}

struct scan {
        struct webhooks *w;
        const struct webhook_row *hook;
        uint64_t last;     /* the highest event id read */
        size_t n;          /* rows read in this batch */
        int r;
};

static void on_event(const struct event_row *row, void *userdata)
{
        struct scan *sc = userdata;
        sc->n++;
        if (sc->r < 0)
                return;
        sc->last = row->id;
        if (!sc->hook->active || !filter_wants(sc->hook->events_json, row->name))
                return;
        struct webhook_delivery_row d;
        int r = webhook_delivery_new(sc->hook, "event", row->id, row->name, webhook_event_body(row), &d);
        if (r == 0)
                r = store_webhook_enqueue(sc->w->store, sc->hook->id, row->id, &d, sc->w->o.keep_deliveries);
        webhook_delivery_row_done(&d);
        sc->r = r;
}

struct scan_all {
        struct webhooks *w;
        uint64_t upto;
};

/* Queues what the webhook wants of its org's events above its cursor;
 * then the cursor moves to upto (every id up to it is in the store). */
static void scan_hook(const struct webhook_row *hook, void *userdata)
{
        struct webhooks *w = ((struct scan_all *)userdata)->w;
        uint64_t upto = ((struct scan_all *)userdata)->upto;
        struct scan sc = { .w = w, .hook = hook, .last = hook->cursor };
        if (hook->cursor >= upto)
                return;
        do {
                sc.n = 0;
                if (store_event_each(w->store, hook->org_id, sc.last, SCAN_BATCH, on_event, &sc) < 0)
                        return;
        } while (sc.r == 0 && sc.n == SCAN_BATCH && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED));
        if (sc.r == -ENOENT)   /* deleted meanwhile */
                return;
        if (sc.r < 0) {
                log_warn("msg=\"webhook: cannot queue a delivery\" webhook=%s errno=%d", hook->id, -sc.r);
                return;
        }
        if (sc.n < SCAN_BATCH)
                (void)store_webhook_enqueue(w->store, hook->id, sc.last > upto ? sc.last : upto, NULL, 0);
}

static void scan_all(struct webhooks *w, uint64_t upto)
{
        struct scan_all top = { .w = w, .upto = upto };
        uint64_t total;
        (void)store_webhook_each(w->store, NULL, INT64_MAX, 0, scan_hook, &top, &total);
}

/* ---- one attempt: a "flight" on the multi handle ---- */

struct attempt {
        long status;          /* HTTP status; 0: none */
        char error[ERR_MSG_MAX];   /* "" on success */
        char response[RESPONSE_KEEP + 1];
        size_t response_len;
        uint64_t duration_ms;
        uint64_t retry_after_s;   /* the receiver's Retry-After (seconds), 0: none */
};

/* A delivery being sent: its own copies of the rows, the easy handle and
 * what the handle points at. */
struct flight {
        struct flight *next;
        struct webhook_row hook;
        struct webhook_delivery_row d;
        struct attempt a;
        CURL *h;
        struct curl_slist *hdrs, *resolve;
        uint64_t t0;
        char curl_error[CURL_ERROR_SIZE];   /* libcurl's own words, with the address */
};

static void flight_free(struct flight *f)
{
        if (!f)
                return;
        curl_easy_cleanup(f->h);
        curl_slist_free_all(f->hdrs);
        curl_slist_free_all(f->resolve);
        webhook_row_done(&f->hook);
        webhook_delivery_row_done(&f->d);
        free(f);
}

static size_t on_body(char *p, size_t size, size_t n, void *userdata)
{
        struct attempt *a = userdata;
        size_t len = size * n, room = RESPONSE_KEEP - a->response_len;
        memcpy(a->response + a->response_len, p, len < room ? len : room);
        a->response_len += len < room ? len : room;
        a->response[a->response_len] = '\0';
        return len;
}

static struct curl_slist *headers_for(const struct webhook_delivery_row *d, const char *signature)
{
        char line[3][256];
        snprintf(line[0], sizeof(line[0]), "X-Sandboxd-Signature: %s", signature);
        snprintf(line[1], sizeof(line[1]), "X-Sandboxd-Event: %s", d->event);
        snprintf(line[2], sizeof(line[2]), "X-Sandboxd-Delivery: %s", d->id);
        struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json");
        for (size_t i = 0; l && i < ARRAY_SIZE(line); i++)
                l = curl_slist_append(l, line[i]);
        if (l)
                l = curl_slist_append(l, "Expect:");
        return l;
}

static int easy_setup(struct webhooks *w, struct flight *f, const char *pin)
{
        if (!(f->h = curl_easy_init()) || (pin && !(f->resolve = curl_slist_append(NULL, pin))))
                return -ENOMEM;
        CURL *h = f->h;
        curl_easy_setopt(h, CURLOPT_PRIVATE, f);
        curl_easy_setopt(h, CURLOPT_URL, f->hook.url);
        curl_easy_setopt(h, CURLOPT_RESOLVE, f->resolve);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_PROXY, "");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "sandboxd-webhooks/1");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, f->hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, f->d.payload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(f->d.payload));
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)w->o.connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)w->o.timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &f->a);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, f->curl_error);
        return 0;
}

/* Checks the target again (the name is resolved now and the handle pinned
 * to what passed), signs, and makes the handle; 0, or -errno with the
 * reason in f->a.error (a failed attempt that never left). */
static int flight_prepare(struct webhooks *w, struct flight *f)
{
        struct webhook_target tg;
        struct err err = {};
        if (webhook_target_parse(f->hook.url, &tg, &err) < 0 || webhook_target_resolve(&tg, w->o.allow_private, &err) < 0) {
                snprintf(f->a.error, sizeof(f->a.error), "%s", err.msg);
                err_done(&err);
                return -EHOSTUNREACH;
        }
        char secret[WEBHOOK_SECRET_MAX], signature[WEBHOOK_SIGNATURE_MAX], pin[600];
        int r = webhook_secret_open(w->t, &f->hook, secret);
        if (r == 0)
                r = webhook_sign(secret, wall_ms() / 1000, f->d.payload, strlen(f->d.payload), signature);
        OPENSSL_cleanse(secret, sizeof(secret));
        if (r < 0) {
                snprintf(f->a.error, sizeof(f->a.error), "cannot sign: the secret does not open (errno %d)", -r);
                return r;
        }
        f->hdrs = headers_for(&f->d, signature);
        bool pinned = webhook_target_pin(&tg, pin, sizeof(pin));
        r = f->hdrs ? easy_setup(w, f, pinned ? pin : NULL) : -ENOMEM;
        if (r < 0)
                snprintf(f->a.error, sizeof(f->a.error), "out of memory");
        return r;
}

/* What a finished transfer says, into f->a. */
static void flight_result(struct flight *f, CURLcode rc)
{
        struct attempt *a = &f->a;
        a->duration_ms = now_ms() - f->t0;
        curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &a->status);
        curl_off_t ra = 0;
        if (curl_easy_getinfo(f->h, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
                a->retry_after_s = (uint64_t)ra;
        if (rc != CURLE_OK)
                snprintf(a->error, sizeof(a->error), "%s", f->curl_error[0] ? f->curl_error : curl_easy_strerror(rc));
        else if (a->status < 200 || a->status > 299)
                snprintf(a->error, sizeof(a->error), "HTTP %ld", a->status);
}

/* ---- recording ---- */

static uint64_t backoff_ms(const struct webhook_options *o, uint32_t attempts)
{
        uint64_t d = o->base_delay_ms;
        for (uint32_t i = 1; i < attempts && d < o->max_delay_ms; i++)
                d *= 2;
        if (d > o->max_delay_ms)
                d = o->max_delay_ms;
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                rnd = 0;
        return d / 2 + (d / 2 ? rnd % (d / 2 + 1) : 0);
}

/* Appends this attempt to d's log (JSON text). */
static void log_append(struct webhook_delivery_row *d, const struct attempt *a, uint64_t now)
{
        json_t *log = json_loads(d->log_json, 0, NULL);
        if (!json_is_array(log)) {
                json_decref(log);
                log = json_array();
        }
        /* A response cut at RESPONSE_KEEP, or not text, is not kept. */
        size_t rlen = utf8_valid(a->response, a->response_len) ? a->response_len : 0;
        json_array_append_new(
                log, json_pack("{s:I, s:o, s:o, s:I, s:o, s:o, s:s%}", "attempt", (json_int_t)d->attempts,
                               "status_code", a->status ? json_integer(a->status) : json_null(), "error",
                               a->error[0] ? json_string(a->error) : json_null(), "duration_ms",
                               (json_int_t)a->duration_ms, "at", webhook_time_json(now), "next_retry_at",
                               webhook_time_json(d->next_attempt_at), "response", a->response, rlen));
        char *text = json_dumps(log, JSON_COMPACT);
        json_decref(log);
        if (text) {
                free(d->log_json);
                d->log_json = text;
        }
}

static void health_record(struct webhooks *w, const struct webhook_row *hook, bool ok, uint64_t now)
{
        if (ok) {
                if (hook->failing_since)
                        (void)store_webhook_health(w->store, hook->id, 0, false, NULL);
                return;
        }
        uint64_t since = hook->failing_since ? hook->failing_since : now;
        bool disable = w->o.disable_after_ms && now - since >= w->o.disable_after_ms;
        if (disable)
                log_warn("msg=\"webhook disabled: failing too long\" webhook=%s org=%s", hook->id, hook->org_id);
        if (since != hook->failing_since || disable)
                (void)store_webhook_health(w->store, hook->id, since, disable,
                                           "every delivery failed for longer than the disable window");
}

static void attempt_record(struct webhooks *w, const struct webhook_row *hook, struct webhook_delivery_row *d,
                           const struct attempt *a)
{
        uint64_t now = wall_ms();
        bool ok = !a->error[0];
        d->attempts++;
        d->last_status = (uint32_t)a->status;
        d->last_duration_ms = a->duration_ms;
        char *e = strdup(a->error);
        if (e) {
                free(d->last_error);
                d->last_error = e;
        }
        if (ok) {
                snprintf(d->status, sizeof(d->status), "succeeded");
                d->delivered_at = now;
                d->next_attempt_at = 0;
        } else if (d->attempts >= w->o.max_attempts) {
                snprintf(d->status, sizeof(d->status), "failed");
                d->next_attempt_at = 0;
        } else {
                /* A receiver that asks for a pause (429/503 + Retry-After)
                 * gets it, up to the longest delay. */
                uint64_t delay = backoff_ms(&w->o, d->attempts);
                uint64_t asked = a->retry_after_s > w->o.max_delay_ms / 1000 ? w->o.max_delay_ms
                                                                              : a->retry_after_s * 1000;
                d->next_attempt_at = now + (asked > delay ? asked : delay);
        }
        log_append(d, a, now);
        int r = store_webhook_delivery_update(w->store, d);
        if (r < 0 && r != -ENOENT)
                log_warn("msg=\"webhook: cannot record an attempt\" delivery=%s errno=%d", d->id, -r);
        health_record(w, hook, ok, now);
}

/* ---- the loop ---- */

static bool in_flight(const struct webhooks *w, const char *webhook_id)
{
        for (const struct flight *f = w->flights; f; f = f->next)
                if (strcmp(f->hook.id, webhook_id) == 0)
                        return true;
        return false;
}

struct due {
        struct webhooks *w;
        uint64_t now, next;   /* next: the earliest due time not yet reached */
};

/* Starts sending row (the head of its webhook's queue) unless its webhook
 * has a flight already (one at a time keeps the order) or it is not due. */
static void on_head(const struct webhook_delivery_row *row, void *userdata)
{
        struct due *du = userdata;
        struct webhooks *w = du->w;
        if (row->next_attempt_at > du->now) {
                if (!du->next || row->next_attempt_at < du->next)
                        du->next = row->next_attempt_at;
                return;
        }
        if (w->nflights >= MAX_FLIGHTS || in_flight(w, row->webhook_id))
                return;
        struct flight *f = calloc(1, sizeof(*f));
        if (!f || store_webhook_get(w->store, row->org_id, row->webhook_id, &f->hook) < 0) {
                free(f);
                return;
        }
        /* The row is the store's borrowed copy: the flight keeps its own. */
        f->d = *row;
        f->d.payload = strdup(row->payload);
        f->d.last_error = strdup(row->last_error);
        f->d.log_json = strdup(row->log_json);
        if (!f->d.payload || !f->d.last_error || !f->d.log_json) {
                flight_free(f);
                return;
        }
        f->t0 = now_ms();
        if (flight_prepare(w, f) < 0 || curl_multi_add_handle(w->multi, f->h) != CURLM_OK) {
                attempt_record(w, &f->hook, &f->d, &f->a);
                du->next = du->now;   /* look again at once: the next one may be due */
                flight_free(f);
                return;
        }
        f->next = w->flights;
        w->flights = f;
        w->nflights++;
}

static void flight_unlink(struct webhooks *w, struct flight *f)
{
        for (struct flight **p = &w->flights; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        w->nflights--;
                        break;
                }
        curl_multi_remove_handle(w->multi, f->h);
}

/* Moves the transfers along and records the finished ones; true when one
 * finished (its webhook's next delivery may be due now). */
static bool flights_run(struct webhooks *w)
{
        int running = 0, left = 0;
        bool done = false;
        curl_multi_perform(w->multi, &running);
        for (CURLMsg *m; (m = curl_multi_info_read(w->multi, &left));) {
                struct flight *f = NULL;
                if (m->msg != CURLMSG_DONE || curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &f) != CURLE_OK || !f)
                        continue;
                flight_result(f, m->data.result);
                flight_unlink(w, f);
                attempt_record(w, &f->hook, &f->d, &f->a);
                flight_free(f);
                done = true;
        }
        return done;
}

/* Sleeps until there is something to do: a transfer moved (or a kick,
 * through curl_multi_wakeup) while any is in flight; else a new event, a
 * kick (events_cancel on w->kick) or the next due retry. */
static void idle(struct webhooks *w, uint64_t seen, uint64_t wait_ms)
{
        if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED) || !wait_ms)
                return;
        if (w->nflights) {
                curl_multi_poll(w->multi, NULL, 0, (int)(wait_ms < FLIGHT_POLL_MS ? wait_ms : FLIGHT_POLL_MS), NULL);
                return;
        }
        events_wait(w->ev, seen, &w->kick, now_ns() + wait_ms * 1000000ULL);
}

static void *dispatcher(void *arg)
{
        struct webhooks *w = arg;
        while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
                /* Cleared before reading the store: a kick that comes while
                 * this round runs makes the wait below return at once. */
                __atomic_store_n(&w->kick, false, __ATOMIC_RELAXED);
                uint64_t seen = events_latest(w->ev);
                scan_all(w, seen);
                struct due du = { .w = w, .now = wall_ms() };
                (void)store_webhook_delivery_heads(w->store, on_head, &du);
                if (flights_run(w))
                        du.next = du.now;
                uint64_t wait_ms = TICK_MS;
                if (du.next && du.next - du.now < wait_ms)
                        wait_ms = du.next > du.now ? du.next - du.now : 0;
                idle(w, seen, wait_ms);
        }
        /* Cut short: not attempts. They stay pending for the next start. */
        while (w->flights) {
                struct flight *f = w->flights;
                flight_unlink(w, f);
                flight_free(f);
        }
        return NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_start(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

int webhooks_start(struct store *store, struct events *ev, struct tenant *t, const struct webhook_options *o,
                   struct webhooks **ret)
{
        if (!store || !ev || !t || !o || !o->max_attempts)
                return -EINVAL;
        pthread_once(&curl_once, curl_start);
        struct webhooks *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct webhooks){ .store = store, .ev = ev, .t = t, .o = *o, .multi = curl_multi_init() };
        int r = w->multi ? pthread_create(&w->thread, NULL, dispatcher, w) : ENOMEM;
        if (r != 0) {
                curl_multi_cleanup(w->multi);
                free(w);
                return -r;
        }
        *ret = w;
        return 0;
}

void webhooks_kick(struct webhooks *w)
{
        if (!w)
                return;
        events_cancel(w->ev, &w->kick);
        curl_multi_wakeup(w->multi);
}

void webhooks_stop(struct webhooks *w)
{
        if (!w)
                return;
        __atomic_store_n(&w->stop, true, __ATOMIC_RELAXED);
        webhooks_kick(w);
        pthread_join(w->thread, NULL);
        curl_multi_cleanup(w->multi);
        free(w);
}
