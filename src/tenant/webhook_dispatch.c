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
 * One thread sends for every org, one request at a time (each bounded by
 * its timeouts): simple and ordered, but a slow endpoint delays the
 * others. */
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

struct webhooks {
        struct store *store;
        struct events *ev;
        struct tenant *t;
        struct webhook_options o;
        pthread_t thread;
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

/* Queues what the webhook wants of its org's events above its cursor;
 * then the cursor moves to upto (every id up to it is in the store). */
struct scan_all {
        struct webhooks *w;
        uint64_t upto;
};

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

/* ---- one attempt ---- */

struct attempt {
        struct webhooks *w;
        long status;          /* HTTP status; 0: none */
        char error[ERR_MSG_MAX];   /* "" on success */
        char response[RESPONSE_KEEP + 1];
        size_t response_len;
        uint64_t duration_ms;
        uint64_t retry_after_s;   /* the receiver's Retry-After (seconds), 0: none */
        bool cut;             /* stopped by webhooks_stop: not an attempt */
};

static size_t on_body(char *p, size_t size, size_t n, void *userdata)
{
        struct attempt *a = userdata;
        size_t len = size * n, room = RESPONSE_KEEP - a->response_len;
        memcpy(a->response + a->response_len, p, len < room ? len : room);
        a->response_len += len < room ? len : room;
        a->response[a->response_len] = '\0';
        return len;
}

static int on_progress(void *userdata, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
        (void)dt, (void)dn, (void)ut, (void)un;
        struct attempt *a = userdata;
        a->cut = __atomic_load_n(&a->w->stop, __ATOMIC_RELAXED);
        return a->cut;
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

static void post(struct attempt *a, const char *url, const char *pin, struct curl_slist *hdrs, const char *body)
{
        CURL *h = curl_easy_init();
        if (!h) {
                snprintf(a->error, sizeof(a->error), "out of memory");
                return;
        }
        struct curl_slist *resolve = pin ? curl_slist_append(NULL, pin) : NULL;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_RESOLVE, resolve);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_PROXY, "");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "sandboxd-webhooks/1");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)a->w->o.connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)a->w->o.timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, a);
        uint64_t t0 = now_ms();
        CURLcode rc = curl_easy_perform(h);
        a->duration_ms = now_ms() - t0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
        curl_off_t ra = 0;
        if (curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
                a->retry_after_s = (uint64_t)ra;
        if (rc != CURLE_OK)
                snprintf(a->error, sizeof(a->error), "%s", curl_easy_strerror(rc));
        else if (a->status < 200 || a->status > 299)
                snprintf(a->error, sizeof(a->error), "HTTP %ld", a->status);
        curl_slist_free_all(resolve);
        curl_easy_cleanup(h);
}

/* Signs and sends d to hook's URL, pinned to the address just checked. */
static void attempt_send(struct attempt *a, const struct webhook_row *hook, const struct webhook_delivery_row *d)
{
        struct webhook_target tg;
        struct err err = {};
        if (webhook_target_parse(hook->url, &tg, &err) < 0 ||
            webhook_target_resolve(&tg, a->w->o.allow_private, &err) < 0) {
                snprintf(a->error, sizeof(a->error), "%s", err.msg);
                err_done(&err);
                return;
        }
        char secret[WEBHOOK_SECRET_MAX], signature[WEBHOOK_SIGNATURE_MAX], pin[600];
        int r = webhook_secret_open(a->w->t, hook, secret);
        if (r == 0)
                r = webhook_sign(secret, wall_ms() / 1000, d->payload, strlen(d->payload), signature);
        OPENSSL_cleanse(secret, sizeof(secret));
        if (r < 0) {
                snprintf(a->error, sizeof(a->error), "cannot sign: the secret does not open (errno %d)", -r);
                return;
        }
        struct curl_slist *hdrs = headers_for(d, signature);
        bool pinned = webhook_target_pin(&tg, pin, sizeof(pin));
        if (hdrs)
                post(a, hook->url, pinned ? pin : NULL, hdrs, d->payload);
        else
                snprintf(a->error, sizeof(a->error), "out of memory");
        curl_slist_free_all(hdrs);
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

struct due {
        struct webhooks *w;
        uint64_t now, next;   /* next: the earliest due time not yet reached */
};

static void on_head(const struct webhook_delivery_row *row, void *userdata)
{
        struct due *du = userdata;
        struct webhooks *w = du->w;
        if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
                return;
        if (row->next_attempt_at > du->now) {
                if (!du->next || row->next_attempt_at < du->next)
                        du->next = row->next_attempt_at;
                return;
        }
        struct webhook_row hook;
        if (store_webhook_get(w->store, row->org_id, row->webhook_id, &hook) < 0)
                return;
        struct attempt a = { .w = w };
        attempt_send(&a, &hook, row);
        /* The row is the store's borrowed copy; the record takes a copy. */
        struct webhook_delivery_row d = *row;
        d.payload = strdup(row->payload);
        d.last_error = strdup(row->last_error);
        d.log_json = strdup(row->log_json);
        if (!a.cut && d.payload && d.last_error && d.log_json)
                attempt_record(w, &hook, &d, &a);
        webhook_delivery_row_done(&d);
        webhook_row_done(&hook);
        du->next = du->now;   /* look again at once: the next one may be due */
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
                uint64_t wait_ms = TICK_MS;
                if (du.next && du.next - du.now < wait_ms)
                        wait_ms = du.next > du.now ? du.next - du.now : 0;
                if (wait_ms && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
                        events_wait(w->ev, seen, &w->kick, now_ns() + wait_ms * 1000000ULL);
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
        *w = (struct webhooks){ .store = store, .ev = ev, .t = t, .o = *o };
        int r = pthread_create(&w->thread, NULL, dispatcher, w);
        if (r != 0) {
                free(w);
                return -r;
        }
        *ret = w;
        return 0;
}

void webhooks_kick(struct webhooks *w)
{
        if (w)
                events_cancel(w->ev, &w->kick);
}

void webhooks_stop(struct webhooks *w)
{
        if (!w)
                return;
        __atomic_store_n(&w->stop, true, __ATOMIC_RELAXED);
        events_cancel(w->ev, &w->kick);
        pthread_join(w->thread, NULL);
        free(w);
}
