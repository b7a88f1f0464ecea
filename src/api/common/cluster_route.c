/* Where a request that names a sandbox is served (cluster_route.h): here,
 * or — forwarded with a signed identity — on the node that owns it. */
#include "api/common/cluster_route.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/app.h"
#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "cluster/cluster.h"

#define H_NODE "X-Sandboxd-Node"
#define H_IDENTITY "X-Sandboxd-Identity"
#define H_TIME "X-Sandboxd-Cluster-Time"
#define H_SIG "X-Sandboxd-Cluster-Sig"
#define H_BODY "X-Sandboxd-Body-SHA256"

const char *api_cluster_facade_of(const char *path)
{
        if (strncmp(path, "/api/v1/", 8) == 0)
                return "controller";
        if (strncmp(path, "/v1/", 4) == 0)
                return "bridge";
        return "runtime";
}

bool api_cluster_signed(struct http_request *req)
{
        return http_header(req, H_SIG) != NULL;
}

/* The signed message of req with body digest digest. */
static struct api_cluster_msg message_of(struct http_request *req, const char *time_ms, const char *target,
                                         const char *identity, const char *digest)
{
        return (struct api_cluster_msg){ .time_ms = time_ms, .method = req->method, .target = target,
                                         .identity = identity, .body_sha256 = digest };
}

/* Whether the body that arrived is the one the sender signed (its auth
 * hook checked the signature before the body was read). */
static bool body_as_signed(struct http_request *req)
{
        char have[API_CLUSTER_SIG_HEX + 1], empty[API_CLUSTER_SIG_HEX + 1];
        const char *want = http_header(req, H_BODY);
        api_cluster_body_digest(req->body, req->body_len, have);
        if (!want || !want[0]) {
                api_cluster_body_digest(NULL, 0, empty);
                want = empty;
        }
        return strlen(want) == API_CLUSTER_SIG_HEX && strcasecmp(want, have) == 0;
}

bool api_cluster_identity(struct app *app, struct http_request *req, struct tenant_principal *ret)
{
        if (!app->cluster || !api_cluster_signed(req))
                return false;
        _cleanup_free_ char *target = http_forward_target(req);
        const char *identity = http_header(req, H_IDENTITY);
        const struct api_cluster_msg msg = message_of(req, http_header(req, H_TIME), target, identity,
                                                      http_header(req, H_BODY));
        int r = target ? api_cluster_verify(cluster_secret(app->cluster), wall_ms(), &msg, http_header(req, H_SIG))
                       : -ENOMEM;
        char facade[32], addr[sizeof(req->client_addr)];
        struct tenant_principal who;
        if (r == 0)
                r = api_cluster_identity_decode(identity, &who, facade, sizeof(facade), addr, sizeof(addr));
        if (r == 0 && strcmp(facade, api_cluster_facade_of(req->path)) != 0)
                r = -EPERM; /* vouched for on another facade */
        if (r < 0) {
                log_warn("cluster: refused a forwarded %s %s from node \"%.64s\": %s", req->method, req->path,
                         http_header(req, H_NODE) ? http_header(req, H_NODE) : "", strerror(-r));
                return false;
        }
        /* Signed: the sender saw the client at addr; audit rows and rate
         * limits here count that client, not the sending node. */
        if (addr[0])
                memcpy(req->client_addr, addr, sizeof(addr));
        *ret = who;
        return true;
}

/* The headers that vouch for who on this very request (and its body). */
static int sign_request(struct app *app, struct http_request *req, const struct tenant_principal *who,
                        char **identity, char time_ms[24], char digest[API_CLUSTER_SIG_HEX + 1],
                        char sig[API_CLUSTER_SIG_HEX + 1])
{
        _cleanup_free_ char *target = http_forward_target(req);
        char addr[sizeof(req->client_addr)];
        http_client_addr(req, addr, sizeof(addr));
        *identity = api_cluster_identity_encode(who, api_cluster_facade_of(req->path), addr);
        if (!target || !*identity)
                return -ENOMEM;
        snprintf(time_ms, 24, "%llu", (unsigned long long)wall_ms());
        api_cluster_body_digest(req->body, req->body_len, digest);
        const struct api_cluster_msg msg = message_of(req, time_ms, target, *identity, digest);
        return api_cluster_sign(cluster_secret(app->cluster), &msg, sig);
}

/* An error in the facade's envelope (a plain {"error"} without one). */
static void fail(const struct api_cluster_facade *f, void *cls, struct http_response *res, int status,
                 const char *msg)
{
        if (f && f->envelope)
                f->envelope(cls, res, status, msg);
        else
                http_json(res, status, json_pack("{s:s}", "error", msg));
}

/* Forwards req to url as who: res holds the owner's reply, or a 502 in
 * the facade's envelope when it could not be signed, sent or read. */
static void forward_to(struct app *app, struct http_request *req, struct http_response *res, const char *url,
                       const struct tenant_principal *who, const struct api_cluster_facade *f, void *cls)
{
        /* The controller's finish hook sets its own X-Request-Id. */
        static const char *const drop[] = { "X-Request-Id", NULL };
        _cleanup_free_ char *identity = NULL;
        char time_ms[24], digest[API_CLUSTER_SIG_HEX + 1], sig[API_CLUSTER_SIG_HEX + 1];
        int r = sign_request(app, req, who, &identity, time_ms, digest, sig);
        if (r == 0) {
                const struct http_forward_header h[] = {
                        { H_NODE, cluster_node_id(app->cluster) },
                        { H_IDENTITY, identity },
                        { H_TIME, time_ms },
                        { H_BODY, digest },
                        { H_SIG, sig },
                };
                struct http_forward_headers extra = { h, ARRAY_SIZE(h), drop };
                r = http_forward(req, res, url, &extra);
        }
        if (r == 0)
                return;
        char msg[CLUSTER_URL_MAX + 64];
        snprintf(msg, sizeof(msg), "The node that owns this sandbox (%s) cannot be reached", url);
        fail(f, cls, res, 502, msg);
}

/* A 503 the client should retry. */
static void unavailable(const struct api_cluster_facade *f, void *cls, struct http_response *res, const char *msg)
{
        fail(f, cls, res, 503, msg);
        res->retry_after = 1;
}

static bool route_and_forward(struct app *app, struct http_request *req, struct http_response *res,
                              const char *sandbox_id, bool may_create, const struct tenant_principal *who,
                              const struct api_cluster_facade *f, void *cls)
{
        if (!app->cluster)
                return false;
        char url[CLUSTER_URL_MAX];
        int r = sandbox_id ? cluster_route(app->cluster, sandbox_id, may_create, url) : cluster_place(app->cluster, url);
        if (api_cluster_signed(req)) {
                /* Forwarded here: never a second hop (no loops). The route
                 * above claimed the sandbox if it was unowned; if a live
                 * node took it since the sender looked, serving it here
                 * would make two owners: the client retries instead (and
                 * its node routes afresh). A create is served where the
                 * sender placed it. */
                if (!sandbox_id || r != CLUSTER_REMOTE)
                        return false;
                unavailable(f, cls, res, "The sandbox moved to another node; retry");
                return true;
        }
        if (r < 0) {
                log_warn("cluster: cannot route %s %s: %s", req->method, req->path, strerror(-r));
                unavailable(f, cls, res, "The cluster's store cannot be reached; retry later");
                return true;
        }
        if (r == CLUSTER_LOCAL)
                return false;
        forward_to(app, req, res, url, who, f, cls);
        return true;
}

bool api_cluster_forward(struct app *app, struct http_request *req, struct http_response *res,
                         const char *sandbox_id, bool may_create)
{
        return route_and_forward(app, req, res, sandbox_id, may_create, NULL, NULL, NULL);
}

bool api_cluster_forward_as(const struct api_cluster_facade *f, void *cls, struct http_request *req,
                            struct http_response *res, const char *sandbox_id, bool may_create,
                            const struct tenant_principal *who)
{
        return route_and_forward(req->app, req, res, sandbox_id, may_create, who, f, cls);
}

/* Which capture of pattern is its ":id" (-1: none). */
static int id_capture(const char *pattern)
{
        int n = 0;
        for (const char *p = pattern; *p; p++) {
                if (p[0] != '/' || (p[1] != ':' && p[1] != '*'))
                        continue;
                if (strncmp(p + 1, ":id", 3) == 0 && (p[4] == '/' || p[4] == '\0'))
                        return n;
                n++;
        }
        return -1;
}

static bool in_family(const char *route, const char *family)
{
        size_t n = strlen(family);
        return strncmp(route, family, n) == 0 && (route[n] == '\0' || route[n] == '/');
}

bool api_cluster_intercept(const struct api_cluster_facade *f, void *cls, struct http_request *req,
                           struct http_response *res, const struct tenant_principal *who)
{
        struct app *app = req->app;
        if (!app || !app->cluster || !req->route)
                return false;
        if (api_cluster_signed(req) && !body_as_signed(req)) {
                log_warn("cluster: refused a forwarded %s %s from node \"%.64s\": its body is not the one signed",
                         req->method, req->path, http_header(req, H_NODE) ? http_header(req, H_NODE) : "");
                fail(f, cls, res, 401, "Invalid cluster signature");
                return true;
        }
        bool may_create = strcmp(req->method, "GET") != 0 && strcmp(req->method, "DELETE") != 0;
        for (const char *const *fam = f->families; fam && *fam; fam++) {
                int i = in_family(req->route, *fam) ? id_capture(*fam) : -1;
                if (i >= 0 && i < HTTP_MAX_CAPTURES && req->captures[i])
                        return route_and_forward(app, req, res, req->captures[i], may_create, who, f, cls);
        }
        for (const char *const *c = f->creates; c && *c; c++)
                if (strcmp(req->route, *c) == 0 && strcmp(req->method, "POST") == 0)
                        return route_and_forward(app, req, res, NULL, true, who, f, cls);
        return false;
}
