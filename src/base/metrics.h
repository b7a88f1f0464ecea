/* Process-wide counters for GET /api/v1/metrics (Prometheus text format
 * 0.0.4): executions by API and outcome with a latency histogram, HTTP
 * replies by status class, and errors by kind. Updates are relaxed atomic
 * increments (no lock, no allocation), cheap enough for every request;
 * a scrape reads each counter once, so a scrape racing updates may see a
 * histogram a few events behind its _count, never ahead (see
 * metrics_render). Gauges (sandboxes, contexts, pools) are the facade's:
 * it reads them from their owners when scraped. */
#pragma once

#include <stdint.h>

#include "base/buf.h"

enum metrics_api {
        METRICS_API_RUNTIME,      /* the workers runtime API (stateless runs) */
        METRICS_API_GATEWAY,      /* the workers gateway (code contexts) */
        METRICS_API_BRIDGE,       /* the bridge's /exec */
        METRICS_API_CONTROLLER,   /* /api/v1 execute and REPL */
        _METRICS_API_MAX
};

enum metrics_outcome {
        METRICS_OUTCOME_OK,       /* ran to the end (exit 0, no error) */
        METRICS_OUTCOME_ERROR,    /* the guest's own failure (an exception, exit != 0) */
        METRICS_OUTCOME_LIMIT,    /* a limit or timeout ended it */
        METRICS_OUTCOME_FAILED,   /* could not run (engine, jail, internal) */
        _METRICS_OUTCOME_MAX
};

enum metrics_error {
        METRICS_ERROR_HTTP_5XX,   /* a reply with status >= 500 */
        METRICS_ERROR_EXECUTION,  /* an execution that could not run */
        METRICS_ERROR_SECRETS,    /* an org's secrets could not be opened */
        _METRICS_ERROR_MAX
};

/* Counts one execution and its wall time. */
void metrics_execution(enum metrics_api api, enum metrics_outcome outcome, uint64_t duration_ns);
/* Counts one HTTP reply (by class: 1xx … 5xx; 5xx also as an error). */
void metrics_http_status(int status);
void metrics_error(enum metrics_error kind);

/* Appends every counter above, with # HELP and # TYPE lines. 0 or -ENOMEM
 * (out's cap reached). */
int metrics_render(struct buf *out);
/* Names of the labels, for tests and facades. */
const char *metrics_api_name(enum metrics_api api);
const char *metrics_outcome_name(enum metrics_outcome o);
