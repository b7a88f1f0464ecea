/* POST /v1/sandbox/:id/mount and /unmount: an S3-compatible bucket mounted
 * by the daemon (s3fs on the host) and attached in the sandbox's jails
 * (sandbox/mount.c; docs/bridge/mount.md). The anchor answers every error,
 * validation included, with 502; as the issue asks, malformed requests get
 * 400 invalid_request here and only a failed (un)mount gets 502. An R2
 * Worker binding means nothing outside Cloudflare: only endpoint mounts. */
#include <string.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

#define MAX_S3FS_OPTIONS 32

struct mount_req {
        struct sbx_mount_spec spec;
        const char *binding;
        const char *opts[MAX_S3FS_OPTIONS];
};

/* A string member (or absent: NULL). false: present with another type. */
static bool opt_string(json_t *obj, const char *key, const char **ret)
{
        json_t *v = json_object_get(obj, key);
        *ret = json_string_value(v);
        return !v || json_is_string(v);
}

static bool opt_bool(json_t *obj, const char *key, bool *ret)
{
        json_t *v = json_object_get(obj, key);
        *ret = json_is_true(v);
        return !v || json_is_boolean(v);
}

static const char *parse_credentials(json_t *options, struct mount_req *q)
{
        json_t *c = json_object_get(options, "credentials");
        if (!c)
                return NULL;
        if (!json_is_object(c) || !opt_string(c, "accessKeyId", &q->spec.access_key_id) ||
            !opt_string(c, "secretAccessKey", &q->spec.secret_access_key) || !q->spec.access_key_id ||
            !q->spec.secret_access_key)
                return "options.credentials must be {accessKeyId: string, secretAccessKey: string}";
        return NULL;
}

static const char *parse_s3fs_options(json_t *options, struct mount_req *q)
{
        json_t *a = json_object_get(options, "s3fsOptions");
        if (!a)
                return NULL;
        if (!json_is_array(a) || json_array_size(a) > MAX_S3FS_OPTIONS)
                return "options.s3fsOptions must be an array of at most 32 strings";
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v)
        {
                if (!json_is_string(v))
                        return "options.s3fsOptions must be an array of strings";
                q->opts[i] = json_string_value(v);
        }
        q->spec.options = q->opts;
        q->spec.noptions = json_array_size(a);
        return NULL;
}

static const char *parse_options(json_t *options, struct mount_req *q)
{
        bool proxy;
        if (!json_is_object(options))
                return "options must be an object";
        if (!opt_string(options, "endpoint", &q->spec.endpoint) || !opt_bool(options, "readOnly", &q->spec.readonly) ||
            !opt_string(options, "prefix", &q->spec.prefix) || !opt_bool(options, "credentialProxy", &proxy))
                return "options: endpoint and prefix must be strings, readOnly and credentialProxy booleans";
        /* credentialProxy keeps credentials out of the container: here
         * they never enter the jail anyway, so it changes nothing. */
        const char *why = parse_credentials(options, q);
        return why ? why : parse_s3fs_options(options, q);
}

/* The anchor's checks, in its order; NULL when the request is well formed. */
static const char *parse_mount(json_t *root, struct mount_req *q)
{
        if (!json_is_object(root))
                return "Invalid JSON body";
        if (!opt_string(root, "bucket", &q->spec.bucket) || !opt_string(root, "binding", &q->binding) ||
            !opt_string(root, "mountPath", &q->spec.path))
                return "bucket, binding and mountPath must be strings";
        if (q->spec.bucket && !q->spec.bucket[0])
                return "bucket must not be empty";
        if (!q->spec.path || q->spec.path[0] != '/')
                return "mountPath must be a non-empty absolute path";
        json_t *options = json_object_get(root, "options");
        if (!options)
                return "options is required";
        const char *why = parse_options(options, q);
        if (why)
                return why;
        if (q->binding && q->spec.endpoint)
                return "binding and options.endpoint are mutually exclusive";
        if (q->spec.endpoint && !q->spec.bucket)
                return "bucket is required with options.endpoint";
        if (!q->spec.endpoint && !q->binding)
                return "binding is required without options.endpoint";
        if (!q->spec.endpoint)
                return "R2 bindings are not supported here: only endpoint mounts (an S3-compatible URL in "
                       "options.endpoint) are";
        return NULL;
}

static void mount_failed(struct http_response *res, const struct err *err, const char *code, const char *prefix)
{
        switch (err->reason) {
        case ERR_INVALID: bridge_error(res, 400, "invalid_request", err->msg); return;
        case ERR_QUOTA:
        case ERR_STORAGE:
        case ERR_BUSY: bridge_error_from(res, err, code); return;
        default: bridge_errorf(res, 502, code, "%s%s", prefix, err->msg); return;
        }
}

static void h_mount(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, NULL);
        struct mount_req q = { 0 };
        const char *why = parse_mount(root, &q);
        if (why) {
                bridge_error(res, 400, "invalid_request", why);
                json_decref(root);
                return;
        }
        struct err err = { 0 };
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                ; /* answered */
        else if (sbx_mount(app->sandboxes, req->captures[0], &q.spec, &err) < 0)
                mount_failed(res, &err, "mount_error", "mount failed: ");
        else
                http_json(res, 200, json_pack("{s:b}", "ok", 1));
        err_done(&err);
        json_decref(root);
}

static void h_unmount(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, NULL);
        const char *path = json_string_value(json_object_get(root, "mountPath"));
        if (!path || path[0] != '/') {
                bridge_error(res, 400, "invalid_request", "mountPath must be a non-empty absolute path");
                json_decref(root);
                return;
        }
        struct err err = { 0 };
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                ; /* answered */
        else if (sbx_unmount(app->sandboxes, req->captures[0], path, &err) < 0)
                mount_failed(res, &err, "unmount_error", "");
        else
                http_json(res, 200, json_pack("{s:b}", "ok", 1));
        err_done(&err);
        json_decref(root);
}

const struct route *bridge_mount_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "POST", "/v1/sandbox/:id/mount", h_mount, ROUTE_BLOCKING, 0 },
                { "POST", "/v1/sandbox/:id/unmount", h_unmount, ROUTE_BLOCKING, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
