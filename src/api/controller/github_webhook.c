/* POST /api/v1/github/webhook: GitHub App deliveries (public: the
 * signature is the auth).
 *
 * Order: the secret must be configured (else 503); X-Hub-Signature-256
 * must be HMAC-SHA256 of the raw body under it (else 401: nothing in the
 * body is trusted, and it is recorded with no org and no delivery id, so a
 * forged delivery can neither reach an org's log nor take a real
 * delivery's id); X-GitHub-Event and X-GitHub-Delivery must be plain
 * tokens (400). Then the delivery is recorded, its delivery id unique: a
 * replay (GitHub's redelivery or an attacker's copy) is a 200 no-op.
 *
 * What a delivery does (a table by event): installation and
 * installation_repositories keep the installation row (pending until an
 * org connects it); pull_request runs the org's automation (settings in
 * github.c): opened / reopened / synchronize make one sandbox for the PR
 * when auto_create_sandbox_on_pr (none while one of that PR's runs) and
 * comment on the PR when auto_pr_comment_on_sandbox; closed stops the PR's
 * sandboxes when auto_stop_sandbox_on_pr_close. The sandbox gets the PR's
 * coordinates as env (GITHUB_REPOSITORY, GITHUB_PR_NUMBER, GITHUB_HEAD_SHA,
 * …) and an empty workspace: the daemon fetches nothing from GitHub. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "api/controller/github.h"
#include "api/controller/sandbox_limits.h"
#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

static int hexval(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

bool gh_signature_ok(const char *secret, const void *body, size_t len, const char *sig)
{
        static const char prefix[] = "sha256=";
        unsigned char mac[EVP_MAX_MD_SIZE], given[32];
        unsigned int maclen = 0;
        if (!sig || strncmp(sig, prefix, strlen(prefix)) != 0 || strlen(sig) != strlen(prefix) + 2 * sizeof(given))
                return false;
        sig += strlen(prefix);
        for (size_t i = 0; i < sizeof(given); i++) {
                int hi = hexval(sig[2 * i]), lo = hexval(sig[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return false;
                given[i] = (unsigned char)(hi << 4 | lo);
        }
        if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), body, len, mac, &maclen) || maclen != sizeof(given))
                return false;
        return CRYPTO_memcmp(mac, given, sizeof(given)) == 0;
}

/* One delivery being handled. */
struct hook {
        struct app *app;
        json_t *payload;
        struct gh_event_row *ev;
};

static const char *jstr(json_t *obj, const char *path0, const char *path1)
{
        json_t *v = json_object_get(obj, path0);
        if (path1)
                v = json_object_get(v, path1);
        return json_is_string(v) ? json_string_value(v) : "";
}

/* A header value that may be kept and shown: 1…cap-1 bytes of
 * [A-Za-z0-9._-]. */
static bool token_ok(const char *v, size_t cap)
{
        size_t n = v ? strlen(v) : 0;
        return n >= 1 && n < cap && strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* owner/name as GitHub allows them, so the name is safe in an API path. */
static bool repo_ok(const char *v)
{
        const char *slash = strchr(v, '/');
        size_t n = strlen(v);
        static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/";
        return slash && slash != v && slash[1] && !strchr(slash + 1, '/') && n < 256 && strspn(v, set) == n &&
               strcmp(slash + 1, ".") != 0 && strcmp(slash + 1, "..") != 0;
}

static void id_from_number(json_t *v, char *out, size_t cap)
{
        if (json_is_integer(v) && json_integer_value(v) > 0)
                snprintf(out, cap, "%lld", (long long)json_integer_value(v));
}

/* ---- installations ------------------------------------------------------ */

/* The full names of list's repository objects, appended to repos (a set). */
static void repos_add(json_t *repos, json_t *list)
{
        size_t i, k;
        json_t *r, *have;
        json_array_foreach(list, i, r)
        {
                const char *name = jstr(r, "full_name", NULL);
                bool dup = false;
                json_array_foreach(repos, k, have) dup |= !strcmp(json_string_value(have), name);
                if (repo_ok(name) && !dup)
                        json_array_append_new(repos, json_string(name));
        }
}

static void repos_remove(json_t *repos, json_t *list)
{
        size_t i;
        json_t *r;
        json_array_foreach(list, i, r)
        {
                const char *name = jstr(r, "full_name", NULL);
                for (size_t k = json_array_size(repos); k-- > 0;)
                        if (!strcmp(json_string_value(json_array_get(repos, k)), name))
                                json_array_remove(repos, k);
        }
}

/* Stores the installation as the payload describes it, its repositories
 * edited by edit (NULL: those the payload lists, else the stored ones). */
static int install_store(struct hook *h, const char *status, void (*edit)(struct hook *h, json_t *repos))
{
        _cleanup_(gh_install_row_done) struct gh_install_row old = {};
        struct gh_install_row row = { .created_at = h->ev->received_at, .updated_at = h->ev->received_at };
        json_t *inst = json_object_get(h->payload, "installation");
        snprintf(row.id, sizeof(row.id), "%s", h->ev->installation_id);
        /* GitHub's logins and account types are plain tokens; anything
         * else is not shown. */
        const char *login = jstr(inst, "account", "login"), *type = jstr(inst, "account", "type");
        if (token_ok(login, sizeof(row.account_login)))
                snprintf(row.account_login, sizeof(row.account_login), "%s", login);
        if (token_ok(type, sizeof(row.account_type)))
                snprintf(row.account_type, sizeof(row.account_type), "%s", type);
        snprintf(row.status, sizeof(row.status), "%s", status);
        bool known = store_gh_install_get(h->app->store, row.id, &old) == 0;
        _cleanup_json_ json_t *repos = known ? json_loads(old.repos_json, 0, NULL) : NULL;
        if (!json_is_array(repos) || (!edit && json_is_array(json_object_get(h->payload, "repositories")))) {
                json_decref(repos);
                repos = json_array();
                repos_add(repos, json_object_get(h->payload, "repositories"));
        }
        if (edit)
                edit(h, repos);
        _cleanup_free_ char *text = row.repos_json = json_dumps(repos, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        snprintf(h->ev->detail, sizeof(h->ev->detail), "installation %s (%s): %s, %zu repositories", row.id,
                 row.account_login, status, json_array_size(repos));
        return store_gh_install_put(h->app->store, &row);
}

static int on_installation(struct hook *h)
{
        const char *action = h->ev->action;
        if (!h->ev->installation_id[0])
                return -EINVAL;
        if (!strcmp(action, "deleted")) {
                int r = store_gh_install_delete(h->app->store, h->ev->installation_id);
                snprintf(h->ev->detail, sizeof(h->ev->detail), "installation %s removed", h->ev->installation_id);
                return r == -ENOENT ? 0 : r;
        }
        return install_store(h, !strcmp(action, "suspend") ? "suspended" : "active", NULL);
}

static void edit_repos(struct hook *h, json_t *repos)
{
        repos_add(repos, json_object_get(h->payload, "repositories_added"));
        repos_remove(repos, json_object_get(h->payload, "repositories_removed"));
}

static int on_install_repos(struct hook *h)
{
        return h->ev->installation_id[0] ? install_store(h, "active", edit_repos) : -EINVAL;
}

/* ---- pull requests -------------------------------------------------------- */

struct pr_sandboxes {
        struct app *app;
        const char *org_id;
        char running[STORE_ID_MAX];   /* one of them still exists */
        unsigned stopped;
        bool stop;
};

static void on_pr_sandbox(const struct gh_event_row *row, void *userdata)
{
        struct pr_sandboxes *p = userdata;
        struct err err = {};
        struct sbx_info info;
        if (p->stop) {
                p->stopped += sbx_destroy_org(p->app->sandboxes, p->org_id, row->sandbox_id, &err) == 0;
                return;
        }
        if (sbx_find(p->app->sandboxes, p->org_id, row->sandbox_id, &info, &err) == 0) {
                snprintf(p->running, sizeof(p->running), "%s", row->sandbox_id);
                sbx_info_done(&info);
        }
}

static json_t *pr_env(struct hook *h)
{
        json_t *pr = json_object_get(h->payload, "pull_request");
        char number[24];
        snprintf(number, sizeof(number), "%llu", (unsigned long long)h->ev->pr_number);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "GITHUB_REPOSITORY", h->ev->repo, "GITHUB_PR_NUMBER",
                         number, "GITHUB_HEAD_REF", jstr(pr, "head", "ref"), "GITHUB_HEAD_SHA",
                         jstr(pr, "head", "sha"), "GITHUB_BASE_REF", jstr(pr, "base", "ref"), "GITHUB_EVENT_ACTION",
                         h->ev->action);
}

/* The comment naming the sandbox, with a dashboard link when configured. */
static int comment(struct hook *h)
{
        const char *dash = h->app->cfg->ctl_github_dashboard_url;
        char text[1024];
        int n = snprintf(text, sizeof(text), "A sandbox is running for this pull request: `%s` (head %.7s).",
                         h->ev->sandbox_id, jstr(json_object_get(h->payload, "pull_request"), "head", "sha"));
        if (dash[0] && n > 0 && (size_t)n < sizeof(text))
                snprintf(text + n, sizeof(text) - (size_t)n, "\n\nDashboard: %s/sandboxes/%s", dash, h->ev->sandbox_id);
        struct err err = {};
        int r = gh_post_comment(h->app, h->ev->installation_id, h->ev->repo, h->ev->pr_number, text, &err);
        size_t used = strlen(h->ev->detail);
        if (r == -ENOKEY)
                snprintf(h->ev->detail + used, sizeof(h->ev->detail) - used, "; no comment: GitHub App not configured");
        else if (r < 0)
                snprintf(h->ev->error, sizeof(h->ev->error), "comment failed: %.400s", err.msg);
        else
                snprintf(h->ev->detail + used, sizeof(h->ev->detail) - used, "; comment posted");
        return r == -ENOKEY ? 0 : r;
}

/* Makes the PR's sandbox unless one made for it still runs. */
static int pr_sandbox(struct hook *h)
{
        struct pr_sandboxes p = { .app = h->app, .org_id = h->ev->org_id };
        int r = store_gh_event_sandboxes(h->app->store, p.org_id, h->ev->repo, h->ev->pr_number, on_pr_sandbox, &p);
        if (r < 0)
                return r;
        if (p.running[0]) {
                snprintf(h->ev->detail, sizeof(h->ev->detail), "sandbox %s already runs for this pull request",
                         p.running);
                return 0;
        }
        _cleanup_json_ json_t *env = pr_env(h);
        struct sbx_create_options o = { .org_id = p.org_id, .lifetime_ms = CTL_SANDBOX_TIMEOUT_DEFAULT_S * 1000,
                                        .env = env };
        struct err err = {};
        char id[37];
        if ((r = ctl_sandbox_id_new(id)) < 0)
                return r;
        if ((r = sbx_create(h->app->sandboxes, id, &o, NULL, &err)) < 0) {
                snprintf(h->ev->error, sizeof(h->ev->error), "sandbox: %.400s", err.msg);
                return r;
        }
        snprintf(h->ev->sandbox_id, sizeof(h->ev->sandbox_id), "%s", id);
        snprintf(h->ev->detail, sizeof(h->ev->detail), "sandbox %s created", id);
        return store_gh_event_update(h->app->store, h->ev);
}

static int pr_open(struct hook *h, const struct gh_settings *s)
{
        /* The check and the create are one step, the sandbox id on the
         * delivery's row before the next check reads it: two deliveries of
         * one PR at once make one sandbox. */
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        if (!s->auto_create_sandbox_on_pr) {
                snprintf(h->ev->detail, sizeof(h->ev->detail), "no sandbox: auto_create_sandbox_on_pr is off");
                return 0;
        }
        pthread_mutex_lock(&lock);
        int r = pr_sandbox(h);
        pthread_mutex_unlock(&lock);
        if (r < 0 || !h->ev->sandbox_id[0] || !s->auto_pr_comment_on_sandbox)
                return r;
        return comment(h);
}

static int pr_close(struct hook *h, const struct gh_settings *s)
{
        struct pr_sandboxes p = { .app = h->app, .org_id = h->ev->org_id, .stop = true };
        if (!s->auto_stop_sandbox_on_pr_close) {
                snprintf(h->ev->detail, sizeof(h->ev->detail), "kept: auto_stop_sandbox_on_pr_close is off");
                return 0;
        }
        int r = store_gh_event_sandboxes(h->app->store, p.org_id, h->ev->repo, h->ev->pr_number, on_pr_sandbox, &p);
        snprintf(h->ev->detail, sizeof(h->ev->detail), "stopped %u sandbox(es)", p.stopped);
        return r;
}

static int on_pull_request(struct hook *h)
{
        struct gh_settings s;
        uint64_t at;
        const char *a = h->ev->action;
        _cleanup_(gh_install_row_done) struct gh_install_row inst = {};
        if (!h->ev->org_id[0] || store_gh_install_get(h->app->store, h->ev->installation_id, &inst) < 0 ||
            strcmp(inst.status, "active") != 0) {
                snprintf(h->ev->detail, sizeof(h->ev->detail), "ignored: no active installation linked to an org");
                return 0;
        }
        if (!repo_ok(h->ev->repo) || !h->ev->pr_number) {
                snprintf(h->ev->error, sizeof(h->ev->error), "pull_request without a repository or a number");
                return -EINVAL;
        }
        int r = gh_settings_load(h->app, h->ev->org_id, &s, &at);
        if (r < 0)
                return r;
        if (!strcmp(a, "opened") || !strcmp(a, "reopened") || !strcmp(a, "synchronize"))
                return pr_open(h, &s);
        if (!strcmp(a, "closed"))
                return pr_close(h, &s);
        snprintf(h->ev->detail, sizeof(h->ev->detail), "ignored: action %s", a);
        return 0;
}

static int on_ping(struct hook *h)
{
        snprintf(h->ev->detail, sizeof(h->ev->detail), "pong");
        return 0;
}

static const struct {
        const char *event;
        int (*fn)(struct hook *h);
} handlers[] = {
        { "ping", on_ping },
        { "installation", on_installation },
        { "installation_repositories", on_install_repos },
        { "pull_request", on_pull_request },
};

/* ---- the receiver ---------------------------------------------------------- */

static int dispatch(struct hook *h)
{
        for (size_t i = 0; i < ARRAY_SIZE(handlers); i++)
                if (!strcmp(handlers[i].event, h->ev->event))
                        return handlers[i].fn(h);
        snprintf(h->ev->detail, sizeof(h->ev->detail), "ignored: event %.63s", h->ev->event);
        return 0;
}

/* The payload's coordinates into ev, and the org of its installation. */
static void describe(struct app *app, json_t *payload, struct gh_event_row *ev)
{
        _cleanup_(gh_install_row_done) struct gh_install_row inst = {};
        const char *action = jstr(payload, "action", NULL), *repo = jstr(payload, "repository", "full_name");
        if (token_ok(action, sizeof(ev->action)))
                snprintf(ev->action, sizeof(ev->action), "%s", action);
        if (repo_ok(repo))
                snprintf(ev->repo, sizeof(ev->repo), "%s", repo);
        id_from_number(json_object_get(json_object_get(payload, "installation"), "id"), ev->installation_id,
                       sizeof(ev->installation_id));
        json_t *num = json_object_get(json_object_get(payload, "pull_request"), "number");
        if (json_is_integer(num) && json_integer_value(num) > 0)
                ev->pr_number = (uint64_t)json_integer_value(num);
        if (ev->installation_id[0] && store_gh_install_get(app->store, ev->installation_id, &inst) == 0)
                snprintf(ev->org_id, sizeof(ev->org_id), "%s", inst.org_id);
}

/* Records a delivery refused before processing (no org, no delivery id)
 * and answers it. */
static void refuse(struct app *app, struct gh_event_row *ev, struct http_response *res, int status, const char *code,
                   const char *msg)
{
        snprintf(ev->status, sizeof(ev->status), "failure");
        snprintf(ev->error, sizeof(ev->error), "%s", msg);
        ev->delivery_id[0] = ev->org_id[0] = ev->installation_id[0] = '\0';
        int r = store_gh_event_insert(app->store, ev, app->cfg->ctl_github_events_keep);
        if (r < 0)
                log_warn("github: cannot record a refused delivery: %s", strerror(-r));
        ctl_error(res, status, code, msg);
}

void gh_webhook(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        const char *secret = app->cfg->ctl_github_webhook_secret, *event = http_header(req, "X-GitHub-Event"),
                   *delivery = http_header(req, "X-GitHub-Delivery");
        struct gh_event_row ev = { .received_at = wall_ms() };
        if (!secret[0]) {
                ctl_error(res, 503, "SERVICE_UNAVAILABLE", "The GitHub webhook secret is not configured");
                return;
        }
        if (tenant_id_new("ghe", ev.id) < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot make an event id");
                return;
        }
        if (token_ok(event, sizeof(ev.event)))
                snprintf(ev.event, sizeof(ev.event), "%s", event);
        _cleanup_json_ json_t *payload = NULL;
        if (!gh_signature_ok(secret, req->body ? req->body : "", req->body_len, http_header(req, "X-Hub-Signature-256"))) {
                refuse(app, &ev, res, 401, "INVALID_SIGNATURE", "Missing or invalid X-Hub-Signature-256");
                return;
        }
        if (!ev.event[0] || !token_ok(delivery, sizeof(ev.delivery_id))) {
                refuse(app, &ev, res, 400, "VALIDATION_ERROR", "X-GitHub-Event and X-GitHub-Delivery must be plain tokens");
                return;
        }
        payload = json_loadb(req->body ? req->body : "", req->body_len, 0, NULL);
        if (!json_is_object(payload)) {
                refuse(app, &ev, res, 400, "VALIDATION_ERROR", "The payload must be a JSON object");
                return;
        }
        snprintf(ev.delivery_id, sizeof(ev.delivery_id), "%s", delivery);
        snprintf(ev.status, sizeof(ev.status), "processing");
        describe(app, payload, &ev);
        int r = store_gh_event_insert(app->store, &ev, app->cfg->ctl_github_events_keep);
        if (r == -EEXIST) {
                http_json(res, 200, json_pack("{s:s, s:s}", "status", "duplicate", "delivery_id", delivery));
                return;
        }
        if (r < 0) {
                ctl_error(res, 500, "INTERNAL_ERROR", "Cannot record the delivery");
                return;
        }
        struct hook h = { .app = app, .payload = payload, .ev = &ev };
        r = dispatch(&h);
        if (r < 0 && !ev.error[0])
                snprintf(ev.error, sizeof(ev.error), "%s", strerror(-r));
        snprintf(ev.status, sizeof(ev.status), "%s", r < 0 ? "failure" : "success");
        if (store_gh_event_update(app->store, &ev) < 0)
                log_warn("github: delivery %s: cannot record its outcome", ev.delivery_id);
        json_t *j = json_pack("{s:s, s:s, s:s}", "status", r < 0 ? "failed" : "processed", "event_id", ev.id,
                              "delivery_id", ev.delivery_id);
        json_object_set_new(j, "detail", json_string(ev.detail));
        if (ev.error[0])
                json_object_set_new(j, "error", json_string(ev.error));
        if (ev.sandbox_id[0])
                json_object_set_new(j, "sandbox_id", json_string(ev.sandbox_id));
        http_json(res, 200, j);
}
