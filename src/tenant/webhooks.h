/* Webhooks (issue 15): an org's HTTP endpoints that receive its events,
 * signed. webhooks.c holds what the API needs (the signing secret, made
 * and sealed at rest under the secrets key like an org's secrets, and
 * opened only to sign; the URL rules against server-side request forgery;
 * the signature); webhook_dispatch.c the background dispatcher that follows
 * the event log and POSTs with libcurl, retrying with backoff. No HTTP
 * server, no JSON views. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "store/store.h"
#include "tenant/events.h"
#include "tenant/tenant.h"

/* "whsec_" + 43 base64url characters (32 random bytes), NUL. */
#define WEBHOOK_SECRET_MAX 64
/* "t=<unix seconds>,v1=<64 hex>", NUL. */
#define WEBHOOK_SIGNATURE_MAX 96
#define WEBHOOK_URL_MAX 2048

/* A fresh secret into ret, sealed (bound to org and webhook id) into
 * row->sealed_secret (replacing it) and row->key_id. 0 or -errno. */
int webhook_secret_new(struct tenant *t, struct webhook_row *row, char ret[WEBHOOK_SECRET_MAX]);
/* The row's secret, opened into ret (wipe it after use). -EKEYREJECTED:
 * sealed under another key; -EBADMSG: changed or moved. */
int webhook_secret_open(struct tenant *t, const struct webhook_row *row, char ret[WEBHOOK_SECRET_MAX]);
/* X-Sandboxd-Signature's value: t=<t>,v1=hex(HMAC-SHA256(secret, "<t>.<body>")). */
int webhook_sign(const char *secret, uint64_t t, const char *body, size_t len, char out[WEBHOOK_SIGNATURE_MAX]);

/* A URL a webhook may have: http or https, a host, no user info, at most
 * WEBHOOK_URL_MAX bytes; and unless allow_private, a host that is not (and
 * does not resolve to) a loopback, private, link-local, shared,
 * multicast or unspecified address. A name that does not resolve now
 * passes (delivery checks again). ERR_INVALID with a message, or 0. */
int webhook_url_check(const char *url, bool allow_private, struct err *err);

/* ---- the dispatcher (webhook_dispatch.c) ---- */

struct webhook_options {
        bool allow_private;            /* loopback/private targets allowed (tests) */
        uint32_t max_attempts;         /* attempts of one delivery before it is failed */
        uint64_t base_delay_ms;        /* first retry after about this long, doubling */
        uint64_t max_delay_ms;         /* cap of one retry delay */
        uint64_t connect_timeout_ms, timeout_ms;
        uint64_t disable_after_ms;     /* failing this long without a success: disabled (0: never) */
        uint64_t keep_deliveries;      /* finished deliveries kept per webhook (0: all) */
};
struct webhooks;

/* Starts the dispatcher thread. store, ev and t must outlive it. 0 or -errno. */
int webhooks_start(struct store *store, struct events *ev, struct tenant *t, const struct webhook_options *o,
                   struct webhooks **ret);
/* Stops the thread (an attempt in flight ends within its timeout), joins
 * it and frees. NULL-safe. What is pending stays pending for the next run. */
void webhooks_stop(struct webhooks *w);
/* Something was queued outside the event log (a test, a redelivery, a
 * re-enabled webhook): look now rather than at the next tick. NULL-safe. */
void webhooks_kick(struct webhooks *w);
/* Epoch ms as an ISO 8601 JSON string; 0 as null. */
json_t *webhook_time_json(uint64_t ms);
/* The delivery body of an event row ({id, event, created_at, org_id,
 * sandbox_id, data}), malloc'd JSON text, or NULL (out of memory). */
char *webhook_event_body(const struct event_row *row);
/* A new pending delivery row for webhook row (ids and times filled, an
 * empty error and log; takes payload). 0 or -errno; either way *ret is
 * released with webhook_delivery_row_done. */
int webhook_delivery_new(const struct webhook_row *hook, const char *origin, uint64_t event_id, const char *event,
                         char *payload, struct webhook_delivery_row *ret);
