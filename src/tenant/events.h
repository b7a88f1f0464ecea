/* The event log (issue 15): what happened to an org's sandboxes
 * ("sandbox.created", "security.violation", …), appended durably to the
 * store (so a client can replay it after a restart) and announced to live
 * subscribers, who then read what is new from the store. Thread-safe; no
 * HTTP. Later parts (webhooks, artifacts, checkpoints, egress) emit into
 * it with events_emit. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

struct events;

struct events_options {
        uint64_t keep_per_org;   /* newest events kept per org (0: all) */
        uint64_t max_age_ms;     /* older ones are dropped (0: none) */
};

/* store must outlive the log. 0 or -errno (-ENOMEM, the store's). */
int events_new(struct store *store, const struct events_options *o, struct events **ret);
/* NULL-safe. Every subscriber must have returned from events_wait. */
void events_free(struct events *ev);

/* Appends {org, name, sandbox_id (NULL: none), data} with the current time
 * and wakes the subscribers. Takes data (a JSON object; NULL: {}). ev NULL:
 * nothing (an API that runs without an event log). The new id goes into
 * *ret_id when not NULL. 0 or -errno (the store's). */
int events_emit(struct events *ev, const char *org_id, const char *name, const char *sandbox_id, json_t *data,
                uint64_t *ret_id);

/* The newest id any org has been given (read from the store at start): a
 * subscriber remembers it before reading the store, then waits for it to
 * change; a new subscriber without a Last-Event-ID starts after it. */
uint64_t events_latest(struct events *ev);
/* Waits until an event newer than seen is emitted, *cancel becomes true
 * (set through events_cancel), or deadline_ns (CLOCK_MONOTONIC, now_ns())
 * passes. Returns true when there is something new, false on timeout or
 * cancel. */
bool events_wait(struct events *ev, uint64_t seen, const bool *cancel, uint64_t deadline_ns);
/* Sets *cancel and wakes every waiter: a subscriber's client is gone. */
void events_cancel(struct events *ev, bool *cancel);
