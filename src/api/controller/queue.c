/* Per-org concurrency budgets and queue mode (seed 003, "Concurrency
 * Budgets & Queue Mode"; issue 15 item 2).
 *
 * An org may hold so many sandboxes and run so many executions at once
 * (its plan's numbers, or the config's). A create or execute past that is
 * a 429 CONCURRENT_LIMIT_EXCEEDED, or in queue mode a 202 with a request
 * id: the request is written to the store (so it survives a restart) and
 * a runner thread starts it once a slot frees, oldest first per org; a new
 * request never overtakes a queued one of its org. The answer is kept for
 * GET /requests/:id. A queued request runs the route's own handler with a
 * request made here (no connection: no headers), as the caller who queued
 * it. Streams are never queued (nobody would be there to read them).
 *
 * Counting: executions are counted here while they run (in cluster mode
 * in the store, over every node: budget_shared.c); sandboxes are the org's
 * sandboxes in the store plus the creates running now. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "cluster/cluster.h"

#define QUEUE_POLL_MS 250        /* re-check while requests wait: a slot also frees by expiry */
#define QUEUE_IDLE_MS 5000
#define QUEUE_STATS_WINDOW_S 3600
#define QUEUE_KEEP_ANSWERS_MS (24ULL * 3600 * 1000)
#define QUEUE_DEFAULT_RUN_MS 2000

static const char *const slot_kind[_CTL_SLOT_MAX] = { "sandbox", "execute" };

/* The budgeted routes, registered before main runs (CTL_BUDGETED). */
#define BUDGET_ROUTES_MAX 16
static struct budget_route {
        enum ctl_slot kind;
        const char *pattern;
        http_handler fn;
} budget_routes[BUDGET_ROUTES_MAX];
static size_t nbudget_routes;

struct org_load {
        char org_id[STORE_ID_MAX];
        unsigned running[_CTL_SLOT_MAX];   /* creates and executions in progress */
};

struct ctl_queue {
        struct app *app;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t runner;
        bool runner_started, stop;
        struct org_load *orgs;
        size_t norgs, cap;
        unsigned inflight;                 /* queued requests being run */
        uint64_t avg_run_ms;               /* moving average of queued runs */
};

void ctl_budget_handler(enum ctl_slot kind, const char *pattern, http_handler fn)
{
        if (nbudget_routes < BUDGET_ROUTES_MAX)
                budget_routes[nbudget_routes++] = (struct budget_route){ kind, pattern, fn };
}

/* Whether path matches pattern segment by segment (":name" takes one);
 * the first capture goes to *cap (a copy, cap_len bytes). */
static bool path_match(const char *pattern, const char *path, char *cap, size_t cap_len)
{
        cap[0] = '\0';
        while (*pattern && *path) {
                if (*pattern == ':') {
                        size_t n = strcspn(path, "/");
                        if (n == 0 || n >= cap_len)
                                return false;
                        if (!cap[0])
                                snprintf(cap, cap_len, "%.*s", (int)n, path);
                        pattern += strcspn(pattern, "/");
                        path += n;
                } else if (*pattern++ != *path++) {
                        return false;
                }
        }
        return !*pattern && !*path;
}

/* The registered route of a queued request's path, its capture in cap. */
static const struct budget_route *route_of(const char *path, char *cap, size_t cap_len)
{
        for (size_t i = 0; i < nbudget_routes; i++)
                if (path_match(budget_routes[i].pattern, path, cap, cap_len))
                        return &budget_routes[i];
        return NULL;
}

/* ---- budgets ---- */

static const struct {
        const char *plan;
        uint64_t sandboxes, executes;
} plans[] = {
        { "hobby", 3, 5 }, { "pro", 10, 20 }, { "team", 25, 50 }, { "enterprise", 100, 200 },
};

struct budget {
        char plan[32];
        uint64_t max[_CTL_SLOT_MAX];
};

static void org_budget(struct ctl_queue *q, const char *org_id, struct budget *b)
{
        struct org_row org;
        const struct config *cfg = q->app->cfg;
        snprintf(b->plan, sizeof(b->plan), "hobby");
        if (store_org_get(q->app->store, org_id, &org) == 0 && org.plan[0])
                snprintf(b->plan, sizeof(b->plan), "%s", org.plan);
        b->max[CTL_SLOT_SANDBOX] = plans[0].sandboxes;
        b->max[CTL_SLOT_EXECUTE] = plans[0].executes;
        for (size_t i = 0; i < ARRAY_SIZE(plans); i++)
                if (!strcmp(plans[i].plan, b->plan)) {
                        b->max[CTL_SLOT_SANDBOX] = plans[i].sandboxes;
                        b->max[CTL_SLOT_EXECUTE] = plans[i].executes;
                }
        if (cfg->ctl_budget_sandboxes)
                b->max[CTL_SLOT_SANDBOX] = cfg->ctl_budget_sandboxes;
        if (cfg->ctl_budget_executes)
                b->max[CTL_SLOT_EXECUTE] = cfg->ctl_budget_executes;
}

/* The org's entry (made on first use); NULL when out of memory. Locked. */
static struct org_load *org_load(struct ctl_queue *q, const char *org_id)
{
        for (size_t i = 0; i < q->norgs; i++)
                if (!strcmp(q->orgs[i].org_id, org_id))
                        return &q->orgs[i];
        if (q->norgs == q->cap) {
                size_t cap = q->cap ? q->cap * 2 : 16;
                struct org_load *n = realloc(q->orgs, cap * sizeof(*n));
                if (!n)
                        return NULL;
                q->orgs = n;
                q->cap = cap;
        }
        struct org_load *o = &q->orgs[q->norgs++];
        *o = (struct org_load){ 0 };
        snprintf(o->org_id, sizeof(o->org_id), "%s", org_id);
        return o;
}

static void count_none(const struct sbx_info *info, void *userdata)
{
        (void)info;
        (void)userdata;
}

static uint64_t sandboxes_held(struct ctl_queue *q, const char *org_id)
{
        uint64_t total = 0;
        struct err err = { 0 };
        if (sbx_list_org(q->app->sandboxes, org_id, 1, 0, count_none, NULL, &total, &err) < 0)
                total = 0;
        err_done(&err);
        return total;
}

/* How many of kind the org uses now. Locked. */
static uint64_t in_use(struct ctl_queue *q, struct org_load *o, enum ctl_slot kind)
{
        uint64_t n = o->running[kind];
        if (kind == CTL_SLOT_SANDBOX)
                n += sandboxes_held(q, o->org_id);
        return n;
}

/* A slot taken: the store's row id when it is counted there, else "". */
struct ticket {
        char id[STORE_ID_MAX];
};

/* Takes a slot of kind for the org when one is free. */
static bool slot_take(struct ctl_queue *q, const char *org_id, enum ctl_slot kind, struct ticket *t)
{
        struct budget b;
        t->id[0] = '\0';
        org_budget(q, org_id, &b);
        if (ctl_slot_shared(q->app, kind))
                return ctl_slot_take_shared(q->app, org_id, slot_kind[kind], b.max[kind], t->id);
        pthread_mutex_lock(&q->lock);
        struct org_load *o = org_load(q, org_id);
        bool ok = o && in_use(q, o, kind) < b.max[kind];
        if (ok)
                o->running[kind]++;
        pthread_mutex_unlock(&q->lock);
        return ok;
}

static void slot_give(struct ctl_queue *q, const char *org_id, enum ctl_slot kind, const struct ticket *t)
{
        if (t->id[0])
                ctl_slot_give_shared(q->app, t->id);
        pthread_mutex_lock(&q->lock);
        struct org_load *o = t->id[0] ? NULL : org_load(q, org_id);
        if (o && o->running[kind] > 0)
                o->running[kind]--;
        pthread_cond_broadcast(&q->wake);
        pthread_mutex_unlock(&q->lock);
}

/* The org's queued requests (0 on a store failure: then nothing waits). */
static uint64_t queue_depth(struct ctl_queue *q, const char *org_id)
{
        uint64_t ahead = 0, depth = 0;
        /* No request has this id: ahead stays 0, depth is the org's count. */
        if (store_queue_position(q->app->store, org_id, "-", &ahead, &depth) < 0)
                return 0;
        return depth;
}

/* ---- who queued: kept with the request to run it as them later ---- */

static char *caller_json(const struct ctl_caller *c)
{
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I}", "org_id", c->who.org_id, "user_id", c->who.user_id,
                              "key_id", c->who.key_id, "session_id", c->who.session_id, "via", (json_int_t)c->via);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return text;
}

static void caller_from_json(const char *text, struct ctl_caller *c)
{
        json_t *j = json_loads(text, 0, NULL);
        *c = (struct ctl_caller){ .via = CTL_VIA_API_KEY };
        const char *v;
        if ((v = json_string_value(json_object_get(j, "org_id"))))
                snprintf(c->who.org_id, sizeof(c->who.org_id), "%s", v);
        if ((v = json_string_value(json_object_get(j, "user_id"))))
                snprintf(c->who.user_id, sizeof(c->who.user_id), "%s", v);
        if ((v = json_string_value(json_object_get(j, "key_id"))))
                snprintf(c->who.key_id, sizeof(c->who.key_id), "%s", v);
        if ((v = json_string_value(json_object_get(j, "session_id"))))
                snprintf(c->who.session_id, sizeof(c->who.session_id), "%s", v);
        c->via = (enum ctl_via)json_integer_value(json_object_get(j, "via"));
        json_decref(j);
}

/* ---- admission ---- */

static uint64_t estimated_wait_s(struct ctl_queue *q, uint64_t position, uint64_t slots)
{
        pthread_mutex_lock(&q->lock);
        uint64_t avg = q->avg_run_ms ? q->avg_run_ms : QUEUE_DEFAULT_RUN_MS;
        pthread_mutex_unlock(&q->lock);
        uint64_t ms = position * avg / (slots ? slots : 1);
        return ms / 1000 + 1;
}

static bool wants_stream(struct http_request *req)
{
        json_t *b = req->body_len ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
        bool stream = json_is_true(json_object_get(b, "stream"));
        json_decref(b);
        return stream;
}

static void answer_queued(struct ctl_queue *q, struct http_response *res, const char *id, uint64_t ahead,
                          uint64_t depth, uint64_t slots)
{
        uint64_t wait = estimated_wait_s(q, ahead + 1, slots);
        char pos[24], retry[24];
        snprintf(pos, sizeof(pos), "%llu", (unsigned long long)(ahead + 1));
        snprintf(retry, sizeof(retry), "%llu", (unsigned long long)wait);
        http_response_header(res, "X-Stateset-Queue-Status", "queued");
        http_response_header(res, "X-Stateset-Queue-Position", pos);
        http_response_header(res, "Retry-After", retry);
        http_json(res, 202, json_pack("{s:s, s:s, s:I, s:I, s:I}", "status", "queued", "requestId", id, "position",
                                      (json_int_t)(ahead + 1), "queue_depth", (json_int_t)depth,
                                      "estimated_wait_seconds", (json_int_t)wait));
}

static void enqueue(struct ctl_queue *q, struct http_request *req, struct http_response *res, enum ctl_slot kind,
                    uint64_t slots)
{
        const struct ctl_caller *c = ctl_caller(req);
        uint64_t depth = queue_depth(q, c->who.org_id), ahead = 0;
        if (depth >= q->app->cfg->ctl_queue_max_depth) {
                ctl_errorf(res, 429, "QUEUE_DEPTH_EXCEEDED", "The queue is full (%llu requests wait)",
                           (unsigned long long)depth);
                return;
        }
        struct queue_row row = { .response_status = 0, .created_at = wall_ms() };
        _cleanup_free_ char *caller = caller_json(c);
        if (tenant_id_new("req", row.id) < 0 || !caller) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot queue the request");
                return;
        }
        snprintf(row.org_id, sizeof(row.org_id), "%s", c->who.org_id);
        snprintf(row.kind, sizeof(row.kind), "%s", slot_kind[kind]);
        snprintf(row.route, sizeof(row.route), "%s", req->path);
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", req->captures[0] ? req->captures[0] : "");
        snprintf(row.status, sizeof(row.status), "queued");
        row.body = (char *)(req->body ? req->body : "");
        row.caller = caller;
        if (store_queue_insert(q->app->store, &row) < 0 ||
            store_queue_position(q->app->store, row.org_id, row.id, &ahead, &depth) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot queue the request");
                return;
        }
        pthread_mutex_lock(&q->lock);
        pthread_cond_broadcast(&q->wake);
        pthread_mutex_unlock(&q->lock);
        answer_queued(q, res, row.id, ahead, depth, slots);
}

void ctl_budgeted(struct http_request *req, struct http_response *res, enum ctl_slot kind, http_handler fn)
{
        struct app *app = req->app;
        struct ctl_queue *q = app->ctl_queue;
        const char *org = ctl_caller(req)->who.org_id;
        struct budget b;
        struct ticket t;
        if (queue_depth(q, org) == 0 && slot_take(q, org, kind, &t)) {
                fn(req, res);
                slot_give(q, org, kind, &t);
                return;
        }
        org_budget(q, org, &b);
        if (app->cfg->ctl_queue_mode && !wants_stream(req)) {
                enqueue(q, req, res, kind, b.max[kind]);
                return;
        }
        ctl_errorf(res, 429, "CONCURRENT_LIMIT_EXCEEDED",
                   "The %s plan allows %llu concurrent %s; %s", b.plan, (unsigned long long)b.max[kind],
                   kind == CTL_SLOT_SANDBOX ? "sandboxes" : "executions",
                   app->cfg->ctl_queue_mode ? "a stream cannot wait in the queue" : "try again when one ends");
        http_response_header(res, "Retry-After", "1");
}

/* ---- the runner ---- */

struct queued_run {
        struct ctl_queue *q;
        struct queue_row row;
        enum ctl_slot kind;
        struct ticket ticket;
        http_handler fn;
        char capture[STORE_ID_MAX];
};

static void record_answer(struct ctl_queue *q, struct queued_run *run, struct http_response *res, uint64_t ms)
{
        struct queue_row *row = &run->row;
        row->response_status = (uint32_t)(res->status ? res->status : 500);
        free(row->response_body);
        row->response_body = res->json ? json_dumps(res->json, JSON_COMPACT) : NULL;
        snprintf(row->status, sizeof(row->status), "%s", row->response_status < 400 ? "completed" : "failed");
        row->finished_at = wall_ms();
        if (store_queue_update(q->app->store, row) < 0)
                log_warn("msg=\"cannot record a queued request's answer\" id=%s", row->id);
        pthread_mutex_lock(&q->lock);
        q->avg_run_ms = q->avg_run_ms ? (q->avg_run_ms * 7 + ms) / 8 : ms;
        pthread_mutex_unlock(&q->lock);
}

static void *run_queued(void *arg)
{
        struct queued_run *run = arg;
        struct ctl_queue *q = run->q;
        struct ctl_caller caller;
        caller_from_json(run->row.caller, &caller);
        struct http_request req = {
                .method = "POST", .path = run->row.route, .body = run->row.body, .body_len = strlen(run->row.body),
                .app = q->app, .auth = &caller,
        };
        req.captures[0] = run->capture[0] ? run->capture : NULL;
        struct http_response res;
        http_response_init(&res);
        uint64_t start = now_ms();
        run->fn(&req, &res);
        record_answer(q, run, &res, now_ms() - start);
        http_response_done(&res);
        slot_give(q, run->row.org_id, run->kind, &run->ticket);
        queue_row_done(&run->row);
        free(run);
        pthread_mutex_lock(&q->lock);
        q->inflight--;
        pthread_cond_broadcast(&q->wake);
        pthread_mutex_unlock(&q->lock);
        return NULL;
}

static enum ctl_slot kind_of(const char *kind)
{
        return strcmp(kind, slot_kind[CTL_SLOT_SANDBOX]) ? CTL_SLOT_EXECUTE : CTL_SLOT_SANDBOX;
}

/* A queued path no budgeted route serves any more (a newer build): it can
 * never run, so it fails at once rather than blocking its org's queue. */
static void fail_unroutable(struct ctl_queue *q, const struct queue_row *head)
{
        struct queue_row row = *head;
        row.response_status = 500;
        row.response_body = (char *)"{\"error\":{\"code\":\"INTERNAL_ERROR\",\"message\":"
                                    "\"This request's route is no longer served\"}}";
        snprintf(row.status, sizeof(row.status), "failed");
        row.finished_at = wall_ms();
        if (store_queue_update(q->app->store, &row) < 0)
                log_warn("msg=\"cannot fail an unroutable queued request\" id=%s", head->id);
}

struct heads {
        struct ctl_queue *q;
        unsigned seen, started;
};

/* Cluster mode: a queued request about a sandbox another node owns is
 * that node's runner's to start (the queue is in the shared store; the
 * sandbox layer here would refuse it). A store failure: leave it too. */
static bool for_another_node(struct ctl_queue *q, const char *sandbox_id)
{
        char url[CLUSTER_URL_MAX];
        return q->app->cluster && sandbox_id[0] && cluster_route(q->app->cluster, sandbox_id, false, url) != CLUSTER_LOCAL;
}

/* One org's oldest request: started on a thread of its own when its slot
 * is free (it runs as long as the route's handler does). */
static void try_start(const struct queue_row *head, void *userdata)
{
        struct heads *h = userdata;
        struct ctl_queue *q = h->q;
        char capture[STORE_ID_MAX];
        const struct budget_route *route = route_of(head->route, capture, sizeof(capture));
        enum ctl_slot kind = route ? route->kind : kind_of(head->kind);
        h->seen++;
        if (!route) {
                fail_unroutable(q, head);
                return;
        }
        if (for_another_node(q, capture))
                return;
        /* Only this (the runner's) thread starts runs, and halt joins it
         * after setting stop: reading stop first is enough. */
        pthread_mutex_lock(&q->lock);
        bool stop = q->stop;
        pthread_mutex_unlock(&q->lock);
        struct ticket t;
        if (stop || !slot_take(q, head->org_id, kind, &t))
                return;
        pthread_mutex_lock(&q->lock);
        q->inflight++;
        pthread_mutex_unlock(&q->lock);
        struct queued_run *run = calloc(1, sizeof(*run));
        pthread_t th;
        pthread_attr_t attr;
        if (run) {
                run->q = q;
                run->kind = kind;
                run->ticket = t;
                run->fn = route->fn;
                snprintf(run->capture, sizeof(run->capture), "%s", capture);
                run->row = *head;
                run->row.body = strdup(head->body);
                run->row.caller = strdup(head->caller);
                run->row.response_body = NULL;
                snprintf(run->row.status, sizeof(run->row.status), "processing");
                run->row.started_at = wall_ms();
        }
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* The start is a compare-and-set: another node's runner may have
         * started this head since it was read (-EBUSY: not ours to run). */
        int r = run && run->row.body && run->row.caller ? store_queue_start(q->app->store, head->id, ctl_node_id(q->app),
                                                                              run->row.started_at) : -ENOMEM;
        if (r == 0 && pthread_create(&th, &attr, run_queued, run) == 0) {
                h->started++;
        } else {
                if (r != -EBUSY)
                        log_warn("msg=\"cannot start a queued request\" id=%s", head->id);
                if (run)
                        queue_row_done(&run->row);
                free(run);
                slot_give(q, head->org_id, kind, &t);
                pthread_mutex_lock(&q->lock);
                q->inflight--;
                pthread_mutex_unlock(&q->lock);
        }
        pthread_attr_destroy(&attr);
}

#define STOPPED_BODY \
        "{\"error\":{\"code\":\"SERVICE_UNAVAILABLE\",\"message\":\"The daemon stopped while this request ran\"}}"

/* In a cluster the processing rows are every node's: only this node's
 * (at its start) and dead nodes' runs fail (ctl_queue_fail_dead). */
static void settle(struct ctl_queue *q, bool at_start)
{
        uint64_t now = wall_ms();
        uint64_t ttl = q->app->cfg->ctl_queue_ttl_s * 1000;
        store_queue_settle(q->app->store, at_start && !q->app->cluster, 503, STOPPED_BODY, now,
                           now > ttl ? now - ttl : 0, now > QUEUE_KEEP_ANSWERS_MS ? now - QUEUE_KEEP_ANSWERS_MS : 0);
        if (q->app->cluster)
                ctl_queue_fail_dead(q->app, at_start, 503, STOPPED_BODY, now);
}

static void *runner(void *arg)
{
        struct ctl_queue *q = arg;
        pthread_mutex_lock(&q->lock);
        while (!q->stop) {
                pthread_mutex_unlock(&q->lock);
                struct heads h = { .q = q };
                settle(q, false);
                store_queue_heads(q->app->store, try_start, &h);
                pthread_mutex_lock(&q->lock);
                if (h.started > 0 || q->stop)
                        continue;
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                uint64_t ns = (uint64_t)until.tv_nsec + (h.seen ? QUEUE_POLL_MS : QUEUE_IDLE_MS) * 1000000ULL;
                until.tv_sec += (time_t)(ns / 1000000000ULL);
                until.tv_nsec = (long)(ns % 1000000000ULL);
                pthread_cond_timedwait(&q->wake, &q->lock, &until);
        }
        pthread_mutex_unlock(&q->lock);
        return NULL;
}

int ctl_queue_start(struct app *app)
{
        struct ctl_queue *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->app = app;
        pthread_mutex_init(&q->lock, NULL);
        pthread_cond_init(&q->wake, NULL);
        app->ctl_queue = q;
        settle(q, true);
        if (pthread_create(&q->runner, NULL, runner, q) != 0)
                return -EAGAIN;
        q->runner_started = true;
        return 0;
}

/* Before the engine kills what runs: no queued request starts any more
 * (one still queued stays queued for the next start). */
void ctl_queue_halt(struct app *app)
{
        struct ctl_queue *q = app->ctl_queue;
        if (!q)
                return;
        pthread_mutex_lock(&q->lock);
        q->stop = true;
        pthread_cond_broadcast(&q->wake);
        pthread_mutex_unlock(&q->lock);
        if (q->runner_started)
                pthread_join(q->runner, NULL);
        q->runner_started = false;
}

unsigned ctl_queue_running(struct app *app)
{
        struct ctl_queue *q = app->ctl_queue;
        if (!q)
                return 0;
        pthread_mutex_lock(&q->lock);
        unsigned n = q->inflight;
        pthread_mutex_unlock(&q->lock);
        return n;
}

/* After the HTTP server stopped (no budgeted handler runs any more, so
 * none can give a slot back): the queued requests still running end (the
 * engine killed their processes), then the queue goes. */
void ctl_queue_stop(struct app *app)
{
        struct ctl_queue *q = app->ctl_queue;
        if (!q)
                return;
        ctl_queue_halt(app);
        pthread_mutex_lock(&q->lock);
        while (q->inflight > 0)
                pthread_cond_wait(&q->wake, &q->lock);
        pthread_mutex_unlock(&q->lock);
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->wake);
        free(q->orgs);
        free(q);
        app->ctl_queue = NULL;
}

/* ---- routes ---- */

static json_t *request_json(struct ctl_queue *q, const struct queue_row *row)
{
        json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "requestId", row->id, "status", row->status, "kind", row->kind,
                              "route", row->route);
        ctl_put_time(j, "created_at", row->created_at);
        ctl_put_time(j, "started_at", row->started_at);
        ctl_put_time(j, "finished_at", row->finished_at);
        if (!strcmp(row->status, "queued")) {
                uint64_t ahead = 0, depth = 0;
                struct budget b;
                store_queue_position(q->app->store, row->org_id, row->id, &ahead, &depth);
                org_budget(q, row->org_id, &b);
                json_object_set_new(j, "position", json_integer((json_int_t)(ahead + 1)));
                json_object_set_new(j, "queue_depth", json_integer((json_int_t)depth));
                json_object_set_new(j, "estimated_wait_seconds",
                                    json_integer((json_int_t)estimated_wait_s(q, ahead + 1, b.max[kind_of(row->kind)])));
        }
        if (row->finished_at && row->response_status) {
                json_t *body = row->response_body ? json_loads(row->response_body, 0, NULL) : NULL;
                json_object_set_new(j, "response_status", json_integer(row->response_status));
                json_object_set_new(j, "response_body", body ? body : json_null());
        }
        return j;
}

static void h_request(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct queue_row row = { 0 };
        int r = store_queue_get(app->store, ctl_caller(req)->who.org_id, req->captures[0], &row);
        if (r == -ENOENT || r == -EINVAL || r == -ENAMETOOLONG)
                ctl_error(res, 404, "NOT_FOUND", "Request not found");
        else if (r < 0)
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot read the request");
        else
                http_json(res, 200, request_json(app->ctl_queue, &row));
        queue_row_done(&row);
}

struct listing {
        struct ctl_queue *q;
        json_t *data;
};

static void list_one(const struct queue_row *row, void *userdata)
{
        struct listing *l = userdata;
        json_array_append_new(l->data, request_json(l->q, row));
}

static int fill_requests(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                         struct err *err)
{
        struct app *app = req->app;
        struct listing l = { app->ctl_queue, data };
        int r = store_queue_each(app->store, ctl_caller(req)->who.org_id, p->limit, p->offset, list_one, &l,
                                 ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot read the queue") : 0;
}

/* GET /requests: the org's queued and finished requests, newest first. */
static void h_requests(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, fill_requests);
}

static void h_health(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct ctl_queue *q = app->ctl_queue;
        const char *org = ctl_caller(req)->who.org_id;
        struct queue_stats st;
        struct budget b;
        uint64_t now = wall_ms();
        if (store_queue_stats(app->store, org, now - QUEUE_STATS_WINDOW_S * 1000ULL, &st) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot read the queue");
                return;
        }
        org_budget(q, org, &b);
        pthread_mutex_lock(&q->lock);
        struct org_load *o = org_load(q, org);
        uint64_t executing = o ? o->running[CTL_SLOT_EXECUTE] : 0, creating = o ? o->running[CTL_SLOT_SANDBOX] : 0;
        pthread_mutex_unlock(&q->lock);
        if (ctl_slot_shared(app, CTL_SLOT_EXECUTE))
                executing = ctl_slots_in_use(app, org, slot_kind[CTL_SLOT_EXECUTE]);
        uint64_t oldest = st.oldest_created_at && now > st.oldest_created_at ? (now - st.oldest_created_at) / 1000 : 0;
        json_t *j = json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "queue_mode",
                              app->cfg->ctl_queue_mode, "queue_depth", (json_int_t)st.depth, "processing_count",
                              (json_int_t)st.processing, "oldest_queued_age_seconds", (json_int_t)oldest,
                              "estimated_wait_seconds",
                              (json_int_t)(st.depth ? estimated_wait_s(q, st.depth, b.max[CTL_SLOT_EXECUTE]) : 0),
                              "window_seconds", (json_int_t)QUEUE_STATS_WINDOW_S, "completed_count",
                              (json_int_t)st.completed, "failed_count", (json_int_t)st.failed, "expired_count",
                              (json_int_t)st.expired, "average_wait_ms", (json_int_t)st.avg_wait_ms, "p95_wait_ms",
                              (json_int_t)st.p95_wait_ms);
        json_object_set_new(j, "seconds_per_queue_position",
                            json_integer((json_int_t)estimated_wait_s(q, 1, b.max[CTL_SLOT_EXECUTE])));
        json_object_set_new(j, "budget",
                            json_pack("{s:s, s:I, s:I, s:I, s:I}", "plan", b.plan, "max_concurrent_sandboxes",
                                      (json_int_t)b.max[CTL_SLOT_SANDBOX], "max_concurrent_executes",
                                      (json_int_t)b.max[CTL_SLOT_EXECUTE], "sandboxes",
                                      (json_int_t)(sandboxes_held(q, org) + creating), "executing",
                                      (json_int_t)executing));
        http_json(res, 200, j);
}

const struct route *ctl_queue_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "GET", CTL_PREFIX "/requests", h_requests, ROUTE_BLOCKING, 0 },
                { "GET", CTL_PREFIX "/requests/:id", h_request, ROUTE_BLOCKING, 0 },
                { "GET", CTL_PREFIX "/queue/health", h_health, ROUTE_BLOCKING, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
