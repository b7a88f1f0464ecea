/* The audit log (seed 003, "Audit"; AUDIT_LOGS_ENABLED): who did what to
 * an org, when, with which key or user, from which address.
 *
 * Recording: the group's finish hook (routes.c) hands every reply here;
 * an authenticated write (any method but GET/HEAD/OPTIONS) becomes one row
 * {action, method, path, status, user, key, sandbox, ip, request id} —
 * never a body, a query string or a header, so no secret is ever kept.
 * The action is named from the route, not the path: the pattern's words
 * (captures dropped) joined by '.', and a verb for the method unless the
 * route ends in one: POST /sandbox/create → sandbox.create, POST
 * /sandbox/:id/execute → sandbox.execute, DELETE /sandbox/:id →
 * sandbox.delete, POST /secrets → secrets.create, PUT /secrets/:name →
 * secrets.update.
 *
 * Reading: GET /audit (paginated, newest first; filters action,
 * sandbox_id, user_id, api_key_id, from, to) and GET
 * /sandbox/:id/audit/summary (per action: count, first, last). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "base/log.h"
#include "base/time.h"
#include "base/util.h"

#define AUDIT_WORDS "abcdefghijklmnopqrstuvwxyz0123456789_-"

/* ---- recording ---- */

static bool safe_method(const char *m)
{
        return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0;
}

static const char *method_verb(const char *m)
{
        return strcmp(m, "DELETE") == 0 ? "delete" : strcmp(m, "POST") == 0 ? "create" : "update";
}

/* Actions the seed names itself (its WorkOS link routes). */
static void rename_action(char action[64])
{
        static const struct {
                const char *from, *to;
        } names[] = {
                { "auth.workos.link", "auth.sso.link" },
                { "auth.workos.link.delete", "auth.sso.unlink" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (!strcmp(action, names[i].from)) {
                        snprintf(action, 64, "%s", names[i].to);
                        return;
                }
}

/* The action from the route's pattern (see the top of the file), and the
 * sandbox it names (the capture after a "sandbox" word), if any. */
static void action_of(const struct http_request *req, char action[64], char sandbox_id[STORE_ID_MAX])
{
        const char *p = req->route + strlen(CTL_PREFIX);
        size_t n = 0, words = 0, caps = 0;
        bool last_word = false, after_sandbox = false;
        action[0] = sandbox_id[0] = '\0';
        while (*p == '/') {
                const char *seg = ++p;
                size_t len = strcspn(seg, "/");
                p += len;
                last_word = seg[0] != ':' && seg[0] != '*';
                if (!last_word) {
                        if (after_sandbox && caps < HTTP_MAX_CAPTURES && req->captures[caps])
                                snprintf(sandbox_id, STORE_ID_MAX, "%s", req->captures[caps]);
                        caps++;
                        after_sandbox = false;
                        continue;
                }
                after_sandbox = len == 7 && strncmp(seg, "sandbox", 7) == 0;
                n += (size_t)snprintf(action + n, n < 64 ? 64 - n : 0, "%s%.*s", words++ ? "." : "", (int)len, seg);
                if (n >= 64)
                        n = 63;
        }
        /* A POST to a route that ends in a word after others names its verb
         * (…/create, …/execute, …/stop); anything else gets the method's. */
        if (!(last_word && words > 1 && strcmp(req->method, "POST") == 0) && n < 64)
                snprintf(action + n, 64 - n, "%s%s", words ? "." : "", method_verb(req->method));
        rename_action(action);
}

/* The sandbox a create made: its id is only in the answer. */
static void created_sandbox(const struct http_response *res, char sandbox_id[STORE_ID_MAX])
{
        const char *id = json_string_value(json_object_get(res->json, "sandbox_id"));
        if (!sandbox_id[0] && id && res->status >= 200 && res->status < 300 && strlen(id) < STORE_ID_MAX)
                snprintf(sandbox_id, STORE_ID_MAX, "%s", id);
}

void ctl_audit_record(struct app *app, struct http_request *req, const struct http_response *res,
                      const char *request_id)
{
        const struct ctl_caller *c = ctl_caller(req);
        if (!app->cfg->ctl_audit_enabled || !c || !req->route || safe_method(req->method))
                return;
        struct audit_row row = { .status = res->status, .created_at = wall_ms() };
        snprintf(row.org_id, sizeof(row.org_id), "%s", c->who.org_id);
        snprintf(row.user_id, sizeof(row.user_id), "%s", c->who.user_id);
        snprintf(row.key_id, sizeof(row.key_id), "%s", c->who.key_id);
        snprintf(row.method, sizeof(row.method), "%s", req->method);
        snprintf(row.path, sizeof(row.path), "%s", req->path);
        snprintf(row.request_id, sizeof(row.request_id), "%s", request_id);
        http_client_addr(req, row.ip, sizeof(row.ip));
        action_of(req, row.action, row.sandbox_id);
        created_sandbox(res, row.sandbox_id);
        uint64_t keep_ms = app->cfg->ctl_audit_retention_days * 86400000ULL;
        int r = store_audit_append(app->store, &row, keep_ms && row.created_at > keep_ms ? row.created_at - keep_ms : 0);
        if (r < 0)
                log_warn("req=%llu msg=\"audit row not stored\" action=%s err=%d", (unsigned long long)req->id,
                         row.action, r);
}

/* ---- reading ---- */

static void put_time(json_t *j, const char *name, uint64_t ms)
{
        char at[32];
        iso8601_ms(ms, at);
        json_object_set_new(j, name, json_string(at));
}

static json_t *or_null(const char *s)
{
        return s[0] ? json_string(s) : json_null();
}

static json_t *audit_json(const struct audit_row *row)
{
        char id[32];
        snprintf(id, sizeof(id), "aud_%llu", (unsigned long long)row->id);
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s}", "id", id, "org_id", row->org_id, "action",
                              row->action, "method", row->method, "status", row->status, "path", row->path,
                              "ip_address", row->ip, "request_id", row->request_id);
        json_object_set_new(j, "user_id", or_null(row->user_id));
        json_object_set_new(j, "api_key_id", or_null(row->key_id));
        json_object_set_new(j, "actor", json_pack("{s:s, s:s}", "type", row->key_id[0] ? "api_key" : "user", "id",
                                                  row->key_id[0] ? row->key_id : row->user_id));
        json_object_set_new(j, "sandbox_id", or_null(row->sandbox_id));
        put_time(j, "created_at", row->created_at);
        return j;
}

/* Epoch ms, or ISO 8601 UTC ("2026-02-27T12:00:00Z", optional .fff). */
static bool parse_time(const char *v, uint64_t *ret)
{
        char *end;
        errno = 0;
        if (v[0] >= '0' && v[0] <= '9' && strspn(v, "0123456789") == strlen(v)) {
                unsigned long long n = strtoull(v, &end, 10);
                *ret = n;
                return !errno && n <= INT64_MAX;
        }
        struct tm tm = { 0 };
        const char *p = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return false;
        unsigned ms = 0;
        if (*p == '.') {
                size_t digits = strspn(p + 1, "0123456789");
                if (digits < 1 || digits > 9)
                        return false;
                char frac[4] = "000";
                memcpy(frac, p + 1, digits < 3 ? digits : 3);
                ms = (unsigned)atoi(frac);
                p += 1 + digits;
        }
        time_t t = timegm(&tm);
        if (strcmp(p, "Z") != 0 || t < 0)
                return false;
        *ret = (uint64_t)t * 1000 + ms;
        return true;
}

/* A filter value: NULL when absent; false with a 400 when it is not a
 * plain token (an action of [a-z0-9_-.], an id of at most 128 chars). */
static bool token_query(struct http_request *req, struct http_response *res, const char *name, const char *alias,
                        const char **ret)
{
        const char *v = http_query(req, name);
        if (!v && alias)
                v = http_query(req, alias);
        *ret = v;
        size_t n = v ? strlen(v) : 1;
        if (n >= 1 && n <= 128 && (!v || strspn(v, AUDIT_WORDS "ABCDEFGHIJKLMNOPQRSTUVWXYZ.:") == n))
                return true;
        ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be a non-empty id or name of at most 128 characters", name);
        return false;
}

static bool time_query(struct http_request *req, struct http_response *res, const char *name, uint64_t *ret)
{
        const char *v = http_query(req, name);
        if (!v || parse_time(v, ret))
                return true;
        ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be an ISO 8601 UTC time (2026-02-27T12:00:00Z) or epoch ms",
                   name);
        return false;
}

static bool parse_filter(struct http_request *req, struct http_response *res, struct audit_filter *f)
{
        if (!token_query(req, res, "action", NULL, &f->action) ||
            !token_query(req, res, "sandbox_id", "sandboxId", &f->sandbox_id) ||
            !token_query(req, res, "user_id", "userId", &f->user_id) ||
            !token_query(req, res, "api_key_id", "apiKeyId", &f->key_id) || !time_query(req, res, "from", &f->from) ||
            !time_query(req, res, "to", &f->to))
                return false;
        if (f->to && f->from >= f->to) {
                ctl_error(res, 400, "VALIDATION_ERROR", "from must be before to");
                return false;
        }
        return true;
}

static void on_row(const struct audit_row *row, void *userdata)
{
        json_array_append_new(userdata, audit_json(row));
}

static void h_list(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct audit_filter f = { 0 };
        struct ctl_page p;
        if (!ctl_page_parse(req, res, &p) || !parse_filter(req, res, &f))
                return;
        json_t *data = json_array();
        uint64_t total = 0;
        int r = store_audit_each(app->store, ctl_caller(req)->who.org_id, &f, p.limit, p.offset, on_row, data, &total);
        if (r < 0) {
                json_decref(data);
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot read the audit log");
                return;
        }
        http_json(res, 200, ctl_page_body(data, total, &p));
}

struct summary {
        json_t *actions;
        uint64_t total, first, last;
};

static void on_count(const struct audit_count *c, void *userdata)
{
        struct summary *s = userdata;
        json_t *j = json_pack("{s:s, s:I}", "action", c->action, "count", (json_int_t)c->count);
        put_time(j, "first_at", c->first_at);
        put_time(j, "last_at", c->last_at);
        json_array_append_new(s->actions, j);
        s->total += c->count;
        if (!s->first || c->first_at < s->first)
                s->first = c->first_at;
        if (c->last_at > s->last)
                s->last = c->last_at;
}

/* A sandbox the org has no row about is a 404: another org's sandbox
 * looks the same as one that never existed. */
static void h_summary(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *id = req->captures[0];
        struct summary s = { .actions = json_array() };
        int r = strlen(id) < STORE_ID_MAX
                        ? store_audit_summary(app->store, ctl_caller(req)->who.org_id, id, on_count, &s)
                        : 0;
        if (r < 0 || !s.total) {
                json_decref(s.actions);
                if (r < 0)
                        ctl_error(res, 500, "INTERNAL_ERROR", "Cannot read the audit log");
                else
                        ctl_error(res, 404, "NOT_FOUND", "No audit records for this sandbox");
                return;
        }
        json_t *j = json_pack("{s:s, s:I, s:o}", "sandbox_id", id, "total", (json_int_t)s.total, "actions", s.actions);
        put_time(j, "first_at", s.first);
        put_time(j, "last_at", s.last);
        http_json(res, 200, j);
}

static const struct route routes[] = {
        { "GET", CTL_PREFIX "/audit", h_list, ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/sandbox/:id/audit/summary", h_summary, ROUTE_BLOCKING, 0 },
};

const struct route *ctl_audit_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
