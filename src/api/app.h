/* The application context every facade handler receives (req->app). */
#pragma once

#include "config/config.h"
#include "engine/exec.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "tenant/events.h"
#include "tenant/tenant.h"
#include "http/server.h"

struct ctl_templates;
struct webhooks;
struct cluster;

struct app {
        const struct config *cfg;
        struct engine *engine;
        struct store *store;
        struct sandbox_mgr *sandboxes;
        struct tenant *tenant;      /* the controller API's orgs, users, keys, sessions */
        struct events *events;      /* the event log (tenant/events.h) */
        struct http_server *srv;
        struct ctl_queue *ctl_queue;  /* the controller's budgets and queue mode (api/controller/queue.c) */
        struct ctl_templates *templates; /* the controller's sandbox templates (read-only) */
        struct webhooks *webhooks;  /* the webhook dispatcher (tenant/webhooks.h) */
        struct api_mcp *mcp;        /* the /mcp facade's sessions (api/mcp/) */
        struct cluster *cluster;    /* cluster mode (cluster/cluster.h); NULL: off */
        uint64_t started_ms;
};

/* Route tables of the facades. */
const struct route *api_runtime_routes(size_t *ret_n);
const struct route *api_gateway_routes(size_t *ret_n);
