/* Egress policies (seed "Egress Policies", "Optional Features"; issue 15
 * item 3). Registered only with controller.egress_enabled:
 *   /egress/policies[/:id]        an org's policies (CRUD; this API's own
 *                                 routes: the seed gives the model only)
 *   /egress/audit                 the org's proxied requests and denials
 *   /internal/egress/authorize    the decision for {organizationId, host, port}
 *   /internal/egress/audit        ingest of a record (an external proxy)
 *   /internal/egress/policies     snapshot of every org's policies
 * The internal ones take the internal token as /metrics does.
 *
 * With egress_mode monitor or enforce, this file also starts the data path
 * (sandbox/egress/) and hands it to the sandbox manager: every tenant
 * sandbox then has network through it, decided here (authorize) and
 * audited here (record). egress_mode off: no sandbox has network. */
#include <string.h>

#include "api/app.h"
#include "tenant/events.h"
#include "api/controller/controller.h"
#include "api/controller/egress.h"
#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/egress/egress.h"

#define POLICIES_PER_ORG 100

struct ctl_egress {
        struct app *app;
        struct egress *eg;
        bool enforce;
};

/* ---- decisions (the data path's ops) ---------------------------------- */

struct docs {
        json_t *v[POLICIES_PER_ORG];
        size_t n;
};

static void on_doc(const struct egress_policy_row *row, void *userdata)
{
        struct docs *d = userdata;
        json_t *doc = d->n < ARRAY_SIZE(d->v) ? json_loads(row->doc, 0, NULL) : NULL;
        if (json_is_object(doc))
                d->v[d->n++] = doc;
        else
                json_decref(doc);
}

static void docs_done(struct docs *d)
{
        for (size_t i = 0; i < d->n; i++)
                json_decref(d->v[i]);
}

/* The org's verdict for host:port (0: DNS, no port). A store failure
 * decides as if the org had no policy: denied when enforcing. */
static void decide(struct store *store, bool enforce, const char *org_id, const char *host, unsigned port,
                   struct egress_verdict *ret)
{
        _cleanup_(docs_done) struct docs d = { .n = 0 };
        (void)store_egress_policy_each(store, org_id, on_doc, &d);
        egress_policy_decide(d.v, d.n, host, port, enforce, ret);
}

static void authorize(void *userdata, const struct egress_request *rq, struct egress_verdict *ret)
{
        struct ctl_egress *ce = userdata;
        decide(ce->app->store, ce->enforce, rq->org_id, rq->host, rq->port, ret);
}

static const char *mode_name(bool enforce)
{
        return enforce ? "enforce" : "monitor";
}

#define PRUNE_EVERY 1000

/* Stores row; every PRUNE_EVERY records, drops those past
 * controller.egress_audit_days. */
static void audit_put(const struct app *app, struct egress_audit_row *row)
{
        static unsigned long puts;
        row->at = wall_ms();
        int r = store_egress_audit_insert(app->store, row);
        if (r < 0)
                log_warn("org=%s sandbox=%s msg=\"cannot store an egress audit record\" err=\"%s\"", row->org_id,
                         row->sandbox_id, strerror(-r));
        uint64_t days = app->cfg->ctl_egress_audit_days;
        if (days && __atomic_add_fetch(&puts, 1, __ATOMIC_RELAXED) % PRUNE_EVERY == 0 && row->at > days * 86400000ULL)
                (void)store_egress_audit_prune(app->store, row->at - days * 86400000ULL);
}

static void record(void *userdata, const struct egress_request *rq, const struct egress_verdict *v, uint64_t out,
                   uint64_t in)
{
        struct ctl_egress *ce = userdata;
        struct egress_audit_row row = { .port = rq->port, .violation = v->violation, .bytes_out = out, .bytes_in = in };
        snprintf(row.org_id, sizeof(row.org_id), "%s", rq->org_id);
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", rq->sandbox_id);
        snprintf(row.host, sizeof(row.host), "%s", rq->host);
        snprintf(row.protocol, sizeof(row.protocol), "%s", egress_proto_name(rq->proto));
        snprintf(row.decision, sizeof(row.decision), "%s", v->allow ? "allowed" : "denied");
        snprintf(row.mode, sizeof(row.mode), "%s", mode_name(v->enforce));
        snprintf(row.reason, sizeof(row.reason), "%s", v->reason);
        if (v->violation) {
                log_info("org=%s sandbox=%s msg=\"egress violation\" host='%s' port=%u decision=%s reason=\"%s\"",
                         row.org_id, row.sandbox_id, row.host, row.port, row.decision, row.reason);
                (void)events_emit(ce->app->events, row.org_id, "security.violation", row.sandbox_id,
                                  json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "kind", "egress", "host", row.host,
                                            "port", (int)row.port, "protocol", row.protocol, "decision",
                                            row.decision, "mode", row.mode, "reason", row.reason),
                                  NULL);
        }
        audit_put(ce->app, &row);
}

static struct ctl_egress the_egress;

int ctl_egress_start(struct app *app)
{
        const struct config *cfg = app->cfg;
        if (!cfg->ctl_egress_enabled || strcmp(cfg->ctl_egress_mode, "off") == 0)
                return 0;
        if (cfg->ctl_egress_proxy_port == 53)
                return -EINVAL;
        the_egress = (struct ctl_egress){ .app = app, .enforce = strcmp(cfg->ctl_egress_mode, "enforce") == 0 };
        static const struct egress_ops ops = { authorize, record };
        const struct egress_options opt = {
                .proxy_port = (unsigned)cfg->ctl_egress_proxy_port,
                .max_conns = (unsigned)cfg->ctl_egress_max_conns,
                .connect_timeout_ms = (unsigned)cfg->ctl_egress_connect_timeout_ms,
                .idle_timeout_ms = (unsigned)cfg->ctl_egress_idle_timeout_ms,
                .hosts = cfg->ctl_egress_hosts,
        };
        int r = egress_new(&opt, &ops, &the_egress, &the_egress.eg);
        if (r < 0)
                return r;
        sbx_mgr_set_egress(app->sandboxes, the_egress.eg);
        log_info("msg=\"egress proxy on\" mode=%s proxy_port=%u", cfg->ctl_egress_mode, opt.proxy_port);
        return 0;
}

void ctl_egress_stop(void)
{
        egress_free(the_egress.eg);
        the_egress.eg = NULL;
}

/* ---- routes: policies --------------------------------------------------- */

static void fail(struct http_response *res, int r, const char *what)
{
        if (r == -ENOENT)
                ctl_errorf(res, 404, "NOT_FOUND", "%s not found", what);
        else
                ctl_errorf(res, 500, "INTERNAL_ERROR", "Cannot access the %s (%s)", what, strerror(-r));
}

struct found {
        const char *id;
        struct egress_policy_row row;
        bool hit;
        size_t n;
};

static void on_find(const struct egress_policy_row *row, void *userdata)
{
        struct found *f = userdata;
        f->n++;
        if (f->id && !f->hit && strcmp(row->id, f->id) == 0) {
                f->row = *row;
                f->row.doc = strdup(row->doc);
                f->hit = f->row.doc != NULL;
        }
}

/* The caller's policy id (another org's: -ENOENT); *ret's doc owned. */
static int policy_find(struct app *app, const char *org_id, const char *id, struct found *ret)
{
        *ret = (struct found){ .id = id };
        int r = store_egress_policy_each(app->store, org_id, on_find, ret);
        return r < 0 ? r : ret->hit ? 0 : -ENOENT;
}

static void on_view(const struct egress_policy_row *row, void *userdata)
{
        json_array_append_new(userdata, ctl_egress_policy_view(row));
}

static void h_policies(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct ctl_page p;
        if (!ctl_page_parse(req, res, &p))
                return;
        json_t *all = json_array();
        int r = store_egress_policy_each(app->store, ctl_caller(req)->who.org_id, on_view, all);
        if (r < 0) {
                json_decref(all);
                return fail(res, r, "egress policies");
        }
        json_t *data = json_array();
        for (size_t i = p.offset; i < json_array_size(all) && i - p.offset < p.limit; i++)
                json_array_append(data, json_array_get(all, i));
        uint64_t total = json_array_size(all);
        json_decref(all);
        http_json(res, 200, ctl_page_body(data, total, &p));
}

/* The body's policy document (over base's members when given), or false
 * with a 400. */
static bool body_doc(struct http_request *req, struct http_response *res, json_t *base, json_t **ret)
{
        _cleanup_json_ json_t *b = NULL;
        if (!ctl_body_object(req, res, &b))
                return false;
        if (base) {
                json_t *merged = json_deep_copy(base);
                json_object_update(merged, b);
                json_decref(b);
                b = merged;
        }
        char why[160];
        *ret = ctl_egress_policy_doc(b, why, sizeof(why));
        if (!*ret)
                ctl_error(res, 400, "VALIDATION_ERROR", why);
        return *ret != NULL;
}

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *org = ctl_caller(req)->who.org_id;
        _cleanup_json_ json_t *doc = NULL;
        if (!body_doc(req, res, NULL, &doc))
                return;
        struct found f;
        int r = policy_find(app, org, NULL, &f);
        if (r != -ENOENT)
                return fail(res, r < 0 ? r : -EIO, "egress policies");
        if (f.n >= POLICIES_PER_ORG)
                return ctl_errorf(res, 429, "QUOTA_EXCEEDED", "An org has at most %d egress policies", POLICIES_PER_ORG);
        _cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT);
        struct egress_policy_row row = { .doc = text, .created_at = wall_ms() };
        row.updated_at = row.created_at;
        snprintf(row.org_id, sizeof(row.org_id), "%s", org);
        if (!text || tenant_id_new("pol", row.id) < 0)
                return ctl_error(res, 500, "INTERNAL_ERROR", "Cannot make the policy");
        if ((r = store_egress_policy_create(app->store, &row)) < 0)
                return fail(res, r, "egress policy");
        http_json(res, 201, ctl_egress_policy_view(&row));
}
CTL_IDEMPOTENT(h_create_idem, h_create)

static void h_get(struct http_request *req, struct http_response *res)
{
        struct found f;
        int r = policy_find(req->app, ctl_caller(req)->who.org_id, req->captures[0], &f);
        if (r < 0)
                return fail(res, r, "Egress policy");
        http_json(res, 200, ctl_egress_policy_view(&f.row));
        egress_policy_row_done(&f.row);
}

static void h_update(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct found f;
        int r = policy_find(app, ctl_caller(req)->who.org_id, req->captures[0], &f);
        if (r < 0)
                return fail(res, r, "Egress policy");
        _cleanup_json_ json_t *old = json_loads(f.row.doc, 0, NULL);
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *text = NULL;
        if (body_doc(req, res, old, &doc) && (text = json_dumps(doc, JSON_COMPACT))) {
                free(f.row.doc);
                f.row.doc = TAKE_PTR(text);
                f.row.updated_at = wall_ms();
                if ((r = store_egress_policy_update(app->store, &f.row)) < 0)
                        fail(res, r, "Egress policy");
                else
                        http_json(res, 200, ctl_egress_policy_view(&f.row));
        }
        egress_policy_row_done(&f.row);
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        int r = store_egress_policy_delete(app->store, ctl_caller(req)->who.org_id, req->captures[0]);
        if (r < 0)
                return fail(res, r, "Egress policy");
        http_json(res, 200, json_pack("{s:s, s:b}", "id", req->captures[0], "deleted", 1));
}

/* ---- routes: audit ------------------------------------------------------ */

static void on_audit(const struct egress_audit_row *row, void *userdata)
{
        char at[32];
        iso8601_ms(row->at, at);
        json_array_append_new(
                userdata,
                json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:b, s:s, s:I, s:I}", "id", (json_int_t)row->seq,
                          "timestamp", at, "organizationId", row->org_id, "sandboxId", row->sandbox_id, "host",
                          row->host, "port", (json_int_t)row->port, "protocol", row->protocol, "decision",
                          row->decision, "mode", row->mode, "violation", row->violation, "reason", row->reason,
                          "bytesOut", (json_int_t)row->bytes_out, "bytesIn", (json_int_t)row->bytes_in));
}

static int list_audit(struct http_request *req, const struct ctl_page *p, json_t *data, uint64_t *ret_total,
                      struct err *err)
{
        struct app *app = req->app;
        int r = store_egress_audit_each(app->store, ctl_caller(req)->who.org_id, p->limit, p->offset, on_audit, data,
                                        ret_total);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot read the egress audit") : 0;
}

static void h_audit(struct http_request *req, struct http_response *res)
{
        ctl_page_reply(req, res, list_audit);
}

/* ---- routes: internal --------------------------------------------------- */

static bool internal(struct http_request *req, struct http_response *res)
{
        if (ctl_internal_allowed(req))
                return true;
        ctl_error(res, 401, "AUTH_REQUIRED", "An internal token is required");
        return false;
}

/* An internal route's body: organizationId (an existing org), host, and
 * port (0 when absent). */
struct internal_req {
        json_t *body;
        const char *org, *host;
        unsigned port;
};

static void internal_req_done(struct internal_req *in)
{
        json_decref(in->body);
}

static bool port_of(json_t *b, struct http_response *res, unsigned *ret)
{
        json_t *p = json_object_get(b, "port");
        *ret = 0;
        if (!p || json_is_null(p))
                return true;
        if (!json_is_integer(p) || json_integer_value(p) < 0 || json_integer_value(p) > 65535) {
                ctl_error(res, 400, "VALIDATION_ERROR", "port must be an integer 0-65535");
                return false;
        }
        *ret = (unsigned)json_integer_value(p);
        return true;
}

static bool internal_body(struct http_request *req, struct http_response *res, struct internal_req *in)
{
        if (!internal(req, res) || !ctl_body_object(req, res, &in->body))
                return false;
        in->org = json_string_value(json_object_get(in->body, "organizationId"));
        in->host = json_string_value(json_object_get(in->body, "host"));
        struct app *app = req->app;
        struct org_row o;
        if (!in->org || !in->host || !*in->host || strlen(in->host) >= 254) {
                ctl_error(res, 400, "VALIDATION_ERROR", "organizationId and host are required (strings)");
                return false;
        }
        if (store_org_get(app->store, in->org, &o) < 0) {
                ctl_error(res, 404, "NOT_FOUND", "Organization not found");
                return false;
        }
        return port_of(in->body, res, &in->port);
}

static bool enforcing(const struct app *app)
{
        return strcmp(app->cfg->ctl_egress_mode, "enforce") == 0;
}

static void h_authorize(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_(internal_req_done) struct internal_req in = { 0 };
        if (!internal_body(req, res, &in))
                return;
        char lower[256];
        snprintf(lower, sizeof(lower), "%s", in.host);
        for (char *c = lower; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        struct egress_verdict v;
        decide(app->store, enforcing(app), in.org, lower, in.port, &v);
        http_json(res, 200,
                  json_pack("{s:b, s:s, s:b, s:b, s:s, s:s}", "allowed", v.allow, "decision",
                            v.allow ? "allowed" : "denied", "violation", v.violation, "log", v.log, "mode",
                            app->cfg->ctl_egress_mode, "reason", v.reason));
}

static void h_ingest(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_(internal_req_done) struct internal_req in = { 0 };
        if (!internal_body(req, res, &in))
                return;
        json_t *b = in.body;
        const char *decision = json_string_value(json_object_get(b, "decision"));
        if (!decision || (strcmp(decision, "allowed") != 0 && strcmp(decision, "denied") != 0))
                return ctl_error(res, 400, "VALIDATION_ERROR", "decision must be allowed or denied");
        struct egress_audit_row row = { .port = in.port, .violation = json_is_true(json_object_get(b, "violation")) };
        const char *sbx = json_string_value(json_object_get(b, "sandboxId"));
        const char *proto = json_string_value(json_object_get(b, "protocol"));
        const char *reason = json_string_value(json_object_get(b, "reason"));
        json_int_t bout = json_integer_value(json_object_get(b, "bytesOut"));
        json_int_t bin = json_integer_value(json_object_get(b, "bytesIn"));
        row.bytes_out = bout > 0 ? (uint64_t)bout : 0;
        row.bytes_in = bin > 0 ? (uint64_t)bin : 0;
        snprintf(row.org_id, sizeof(row.org_id), "%s", in.org);
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%.*s", STORE_ID_MAX - 1, sbx ? sbx : "");
        snprintf(row.host, sizeof(row.host), "%s", in.host);
        snprintf(row.protocol, sizeof(row.protocol), "%.15s", proto ? proto : "http");
        snprintf(row.decision, sizeof(row.decision), "%s", decision);
        snprintf(row.mode, sizeof(row.mode), "%s", app->cfg->ctl_egress_mode);
        snprintf(row.reason, sizeof(row.reason), "%.127s", reason ? reason : "");
        audit_put(app, &row);
        http_json(res, 201, json_pack("{s:b}", "recorded", 1));
}

static void h_snapshot(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        if (!internal(req, res))
                return;
        const char *org = http_query(req, "organizationId");
        json_t *data = json_array();
        int r = store_egress_policy_each(app->store, org && *org ? org : NULL, on_view, data);
        if (r < 0) {
                json_decref(data);
                return fail(res, r == -EINVAL ? -ENOENT : r, "egress policies");
        }
        http_json(res, 200,
                  json_pack("{s:b, s:s, s:o}", "enabled", app->cfg->ctl_egress_enabled, "mode", app->cfg->ctl_egress_mode,
                            "policies", data));
}

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/egress/policies", h_policies, ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/egress/policies", h_create_idem, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/egress/policies/:id", h_get, ROUTE_BLOCKING, 0 },
        { "PUT", CTL_PREFIX "/egress/policies/:id", h_update, ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/egress/policies/:id", h_delete, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/egress/audit", h_audit, ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/internal/egress/authorize", h_authorize, ROUTE_PUBLIC | ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/internal/egress/audit", h_ingest, ROUTE_PUBLIC | ROUTE_JSON | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/internal/egress/policies", h_snapshot, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
};

const struct route *ctl_egress_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
