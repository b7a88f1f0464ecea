/* Cluster mode's request routing (docs: issue 16): a request that names a
 * sandbox another node owns is forwarded there (http_forward) with the
 * caller's identity signed by this node, never with the caller's own
 * credentials; the receiving node's auth hooks accept that signed identity
 * in place of a key and serve the request locally (never forwarding it
 * again). Cluster mode off (app->cluster NULL): nothing is forwarded and
 * no signed identity is accepted.
 *
 * Between nodes:
 *   X-Sandboxd-Node          the sender's node id
 *   X-Sandboxd-Identity      base64url of {"facade","org","user","key","session","exp","addr"}
 *   X-Sandboxd-Cluster-Time  the sender's wall clock, ms
 *   X-Sandboxd-Body-SHA256   hex SHA-256 of the body (absent: the empty body)
 *   X-Sandboxd-Cluster-Sig   hex HMAC-SHA256(cluster secret, time "\n" method "\n"
 *                            target "\n" identity "\n" body digest)
 * where target is http_forward_target (path?query as forwarded). A
 * receiver accepts it within ±60 s of its own clock; "addr" (the client's
 * address) then stands for the connection's (http_client_addr), so the
 * owner's audit rows and rate limits see the real client. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/server.h"
#include "tenant/tenant.h"

struct app;

#define API_CLUSTER_SKEW_MS 60000
#define API_CLUSTER_SIG_HEX 64

/* ---- signing (cluster_sign.c; no cluster needed: unit-tested) ---- */
/* What a signature covers: the request as forwarded. Request bodies are
 * always buffered whole before a handler (or the forwarding) runs, so the
 * whole body is hashed, nothing streamed goes unsigned. The receiver's auth
 * hook runs before the body has arrived: it checks the signature over the
 * digest the sender put in X-Sandboxd-Body-SHA256, and the intercept hook
 * (api_cluster_intercept, before any handler) checks that the body that
 * arrived has that digest. */
struct api_cluster_msg {
        const char *time_ms;     /* the sender's wall clock, ms, decimal */
        const char *method;
        const char *target;      /* http_forward_target: path?query as forwarded */
        const char *identity;    /* the X-Sandboxd-Identity value */
        const char *body_sha256; /* hex SHA-256 of the body; NULL or "": the empty body's */
};
/* out = lower-case hex SHA-256 of body (that of "" when body_len is 0). */
void api_cluster_body_digest(const void *body, size_t body_len, char out[API_CLUSTER_SIG_HEX + 1]);
/* out = hex HMAC-SHA256(secret, time "\n" method "\n" target "\n"
 * identity "\n" body_sha256). 0 or -EINVAL/-EIO. */
int api_cluster_sign(const char *secret, const struct api_cluster_msg *msg, char out[API_CLUSTER_SIG_HEX + 1]);
/* 0 when sig is right (constant-time compare) and time_ms within
 * API_CLUSTER_SKEW_MS of now_ms; -EKEYEXPIRED outside it, -EPERM for a
 * wrong signature (any piece, the body included, changed), -EINVAL for a
 * malformed one or an empty secret. */
int api_cluster_verify(const char *secret, uint64_t now_ms, const struct api_cluster_msg *msg, const char *sig);
/* The X-Sandboxd-Identity value of who (NULL: nobody in particular, the
 * runtime and bridge facades' single key) on facade, calling from addr
 * (the client's address as the sending node saw it; NULL: unknown);
 * free(). NULL on ENOMEM. */
char *api_cluster_identity_encode(const struct tenant_principal *who, const char *facade, const char *addr);
/* Its inverse: 0, or -EINVAL for anything malformed or too long. */
int api_cluster_identity_decode(const char *value, struct tenant_principal *who, char *facade, size_t facadelen,
                                char *addr, size_t addrlen);

/* ---- routing (cluster_route.c) ---- */
/* Routes a request about sandbox_id: false = serve it here (cluster mode
 * off, the sandbox is or becomes ours, or req itself arrived forwarded);
 * true = res holds the answer (the owner's, relayed; or a 502/503 in the
 * group's envelope when the owner could not be reached). */
bool api_cluster_forward(struct app *app, struct http_request *req, struct http_response *res,
                         const char *sandbox_id, bool may_create);
/* Whether req carries a cluster signature at all (it must then be valid). */
bool api_cluster_signed(struct http_request *req);
/* true with *ret the caller the sending node vouched for, when req is
 * signed by a node of this cluster for this facade and fresh. */
bool api_cluster_identity(struct app *app, struct http_request *req, struct tenant_principal *ret);

/* A facade's routing, for its group's intercept op. */
struct api_cluster_facade {
        const char *name;              /* "runtime", "bridge", "controller": carried in the identity */
        /* Pattern prefixes of the routes that name a sandbox by ":id"
         * (e.g. "/v1/sandbox/:id": that route and everything under it). */
        const char *const *families;
        /* Exact patterns of creates without an id (placed by cluster_place). */
        const char *const *creates;
        void (*envelope)(void *cls, struct http_response *res, int status, const char *message);
};
/* The body of a group's intercept op: forwards when req's route is one of
 * f's and the sandbox lives elsewhere. who: the caller the auth hook found
 * (NULL for the single-key facades). */
bool api_cluster_intercept(const struct api_cluster_facade *f, void *cls, struct http_request *req,
                           struct http_response *res, const struct tenant_principal *who);
/* The same decision for a sandbox a handler found itself (in the body,
 * behind a checkpoint: routes api_cluster_intercept cannot read), as who
 * on f: true = res holds the answer (the owner's, or a 502/503 in f's
 * envelope); false = serve it here. */
bool api_cluster_forward_as(const struct api_cluster_facade *f, void *cls, struct http_request *req,
                            struct http_response *res, const char *sandbox_id, bool may_create,
                            const struct tenant_principal *who);
/* The facade a request is for, by its path (what the identity carries). */
const char *api_cluster_facade_of(const char *path);
