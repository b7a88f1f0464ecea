/* The internal snapshot API (seed 003 "Internal Snapshot API"; issue 15
 * item 7) under /api/v1/internal/snapshots, behind the internal token
 * (ctl_internal_allowed, as /metrics):
 *
 *   GET    /internal/snapshots                 {snapshots, total, enabled}
 *   GET    /internal/snapshots/status          {enabled, snapshotCount, snapshotDir, …}
 *   POST   /internal/snapshots                 {profile, vcpu_count, mem_size_mib,
 *          kernel_path?, rootfs_path?} → 201 view (200 when it replaced one)
 *   POST   /internal/snapshots/warm            {count?, profile?}
 *   POST   /internal/snapshots/cleanup         {keep_most_recent?, max_age_seconds?, dry_run?}
 *   GET    /internal/snapshots/:profileKey     view
 *   DELETE /internal/snapshots/:profileKey     {profileKey, deleted, warmRemoved}
 *   POST   /internal/snapshots/:profileKey/restore  a sandbox of the profile
 *
 * The seed's snapshots are Firecracker memory images; here a profile is a
 * class of warm sandboxes (sandbox.h "warm classes"): its vcpu_count and
 * mem_size_mib become the CPU quota and memory limit of the sandboxes
 * prepared for it, "warm" prepares them ahead, "restore" hands one (or a
 * new one when none is warm) to the default org, as the bridge's pool
 * take does. No memory is saved or restored: memoryPath and statePath are
 * null, kernel_path and rootfs_path are stored and echoed, never used. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"
#include "api/controller/sandbox_limits.h"
#include "base/time.h"
#include "base/util.h"
#include "config/config.h"
#include "sandbox/sandbox.h"

#define SNAP_KEY_MAX 64
#define SNAP_TYPE "warm-pool"
#define SNAP_BACKEND "none"

/* Changes of profiles and their warm sandboxes one at a time, so a warm
 * never fills a profile that a delete is removing. */
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;

/* ^[a-z0-9][a-z0-9._-]{0,63}$, and not one of the routes' own words. */
static bool key_valid(const char *k)
{
        static const char *const reserved[] = { "status", "warm", "cleanup" };
        size_t n = k ? strlen(k) : 0;
        if (n < 1 || n > SNAP_KEY_MAX || !strchr("abcdefghijklmnopqrstuvwxyz0123456789", k[0]) ||
            strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789._-") != n)
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(reserved); i++)
                if (strcmp(k, reserved[i]) == 0)
                        return false;
        return true;
}

static struct sbx_warm_class profile_class(const struct snapshot_profile_row *p)
{
        return (struct sbx_warm_class){ .name = p->key, .cpu_millis = p->vcpu_count * 1000,
                                        .memory_bytes = p->mem_size_mib << 20 };
}

static json_t *string_or_null(const char *s)
{
        return s[0] ? json_string(s) : json_null();
}

static json_t *profile_json(struct app *app, const struct snapshot_profile_row *p)
{
        char at[32];
        uint64_t warm = 0;
        struct err err = {};
        iso8601_ms(p->created_at, at);
        (void)sbx_warm_count(app->sandboxes, p->key, &warm, &err);
        err_done(&err);
        return json_pack("{s:s, s:n, s:n, s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:o, s:I}", "profileKey", p->key,
                         "memoryPath", "statePath", "createdAt", at, "vcpuCount", (json_int_t)p->vcpu_count,
                         "memSizeMib", (json_int_t)p->mem_size_mib, "snapshotType", SNAP_TYPE, "memoryBackend",
                         SNAP_BACKEND, "version", (json_int_t)p->version, "kernelPath",
                         string_or_null(p->kernel_path), "rootfsPath", string_or_null(p->rootfs_path), "warmCount",
                         (json_int_t)warm);
}

/* ---- guards and bodies ---- */

/* The internal token (401), and for changes the feature itself (503). */
static bool allowed(struct http_request *req, struct http_response *res, bool change)
{
        struct app *app = req->app;
        if (!ctl_internal_allowed(req)) {
                ctl_error(res, 401, "AUTH_REQUIRED", "An internal token is required");
                return false;
        }
        if (change && !app->cfg->ctl_snapshots_enabled) {
                ctl_error(res, 503, "SERVICE_UNAVAILABLE", "Snapshots are disabled (controller.snapshots_enabled)");
                return false;
        }
        return true;
}

/* The body as an object; an empty body is {} (the seed's optional bodies). */
static bool body_or_empty(struct http_request *req, struct http_response *res, json_t **ret)
{
        if (req->body_len == 0) {
                *ret = json_object();
                return true;
        }
        return ctl_body_object(req, res, ret);
}

/* An optional integer member in [lo, hi]; *present says whether it was
 * there (absent or null: not, *ret untouched). */
static bool opt_uint(json_t *b, const char *name, uint64_t lo, uint64_t hi, uint64_t *ret, bool *present,
                     struct http_response *res)
{
        json_t *v = json_object_get(b, name);
        *present = v && !json_is_null(v);
        if (!*present)
                return true;
        if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < lo ||
            (uint64_t)json_integer_value(v) > hi) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be an integer from %llu to %llu", name,
                           (unsigned long long)lo, (unsigned long long)hi);
                return false;
        }
        *ret = (uint64_t)json_integer_value(v);
        return true;
}

static bool load_profile(struct app *app, const char *key, struct snapshot_profile_row *ret,
                         struct http_response *res)
{
        int r = key_valid(key) ? store_snapshot_profile_get(app->store, key, ret) : -ENOENT;
        if (r == -ENOENT)
                ctl_errorf(res, 404, "NOT_FOUND", "Snapshot profile not found: %s", key);
        else if (r < 0)
                ctl_errorf(res, 500, "INTERNAL_ERROR", "Cannot read snapshot profiles: %s", strerror(-r));
        return r == 0;
}

/* ---- list, status, get ---- */

struct collect {
        struct app *app;
        json_t *views;                  /* profile views, or NULL */
        struct snapshot_profile_row *rows; /* copies, or NULL */
        size_t n, cap;
        int r;
};

static void collect_one(const struct snapshot_profile_row *row, void *userdata)
{
        struct collect *c = userdata;
        if (c->views)
                json_array_append_new(c->views, profile_json(c->app, row));
        if (c->r == 0 && c->n == c->cap) {
                size_t ncap = c->cap ? 2 * c->cap : 16;
                void *np = reallocarray(c->rows, ncap, sizeof(*c->rows));
                if (!np) {
                        c->r = -ENOMEM;
                        return;
                }
                c->rows = np;
                c->cap = ncap;
        }
        if (c->r == 0)
                c->rows[c->n++] = *row;
}

/* Every profile, newest first, into c (rows always; views when c->views). */
static bool collect(struct app *app, struct collect *c, struct http_response *res)
{
        c->app = app;
        int r = store_snapshot_profile_each(app->store, collect_one, c);
        r = r < 0 ? r : c->r;
        if (r < 0)
                ctl_errorf(res, 500, "INTERNAL_ERROR", "Cannot read snapshot profiles: %s", strerror(-r));
        return r == 0;
}

static void collect_done(struct collect *c)
{
        json_decref(c->views);
        free(c->rows);
}

static void h_list(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_(collect_done) struct collect c = { .views = json_array() };
        if (!allowed(req, res, false) || !collect(app, &c, res))
                return;
        http_json(res, 200, json_pack("{s:O, s:I, s:b}", "snapshots", c.views, "total", (json_int_t)c.n, "enabled",
                                      app->cfg->ctl_snapshots_enabled));
}

static void h_status(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_(collect_done) struct collect c = { 0 };
        if (!allowed(req, res, false) || !collect(app, &c, res))
                return;
        json_t *warm = json_object();
        uint64_t total = 0;
        for (size_t i = 0; i < c.n; i++) {
                uint64_t n = 0;
                struct err err = {};
                (void)sbx_warm_count(app->sandboxes, c.rows[i].key, &n, &err);
                err_done(&err);
                total += n;
                json_object_set_new(warm, c.rows[i].key, json_integer((json_int_t)n));
        }
        char dir[4200];
        snprintf(dir, sizeof(dir), "%s/sandboxes", app->cfg->data_dir);
        http_json(res, 200,
                  json_pack("{s:b, s:I, s:s, s:s, s:s, s:o, s:I, s:I}", "enabled", app->cfg->ctl_snapshots_enabled,
                            "snapshotCount", (json_int_t)c.n, "snapshotDir", dir, "memoryBackend", SNAP_BACKEND,
                            "snapshotType", SNAP_TYPE, "warm", warm, "warmTotal", (json_int_t)total,
                            "maxWarmPerProfile", (json_int_t)app->cfg->ctl_snapshot_max_warm));
}

static void h_get(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct snapshot_profile_row p;
        if (allowed(req, res, false) && load_profile(app, req->captures[0], &p, res))
                http_json(res, 200, profile_json(app, &p));
}

/* ---- create ---- */

static bool opt_path(json_t *b, const char *name, char *out, size_t len, struct http_response *res)
{
        const char *v;
        if (!ctl_opt_string(b, name, &v, res))
                return false;
        if (v && strlen(v) >= len) {
                ctl_errorf(res, 400, "VALIDATION_ERROR", "%s must be shorter than %zu bytes", name, len);
                return false;
        }
        snprintf(out, len, "%s", v ? v : "");
        return true;
}

/* vcpu_count and mem_size_mib within what a sandbox may be given (as
 * POST /sandbox/create's cpus and memory). */
static bool parse_sizes(json_t *b, struct snapshot_profile_row *p, struct http_response *res)
{
        bool had_cpu, had_mem;
        const char *msg;
        uint64_t v;
        if (!opt_uint(b, "vcpu_count", 1, 4096, &p->vcpu_count, &had_cpu, res) ||
            !opt_uint(b, "mem_size_mib", 16, UINT32_MAX, &p->mem_size_mib, &had_mem, res))
                return false;
        if (!had_cpu || !had_mem) {
                ctl_error(res, 400, "VALIDATION_ERROR", "vcpu_count and mem_size_mib are required");
                return false;
        }
        _cleanup_json_ json_t *cpus = json_integer((json_int_t)p->vcpu_count);
        _cleanup_json_ json_t *mem = json_integer((json_int_t)(p->mem_size_mib << 20));
        if (ctl_parse_cpus(cpus, &v, &msg) < 0) {
                ctl_error(res, 400, "VALIDATION_ERROR", "vcpu_count must be at most the host's CPUs");
                return false;
        }
        if (ctl_parse_memory(mem, &v, &msg) < 0) {
                ctl_error(res, 400, "VALIDATION_ERROR", "mem_size_mib must be at most half the host's memory");
                return false;
        }
        return true;
}

static bool parse_profile(struct http_request *req, struct http_response *res, struct snapshot_profile_row *p)
{
        _cleanup_json_ json_t *b = NULL;
        const char *key;
        if (!ctl_body_object(req, res, &b) || !ctl_opt_string(b, "profile", &key, res))
                return false;
        if (!key_valid(key)) {
                ctl_error(res, 400, "VALIDATION_ERROR",
                          "profile must match ^[a-z0-9][a-z0-9._-]{0,63}$ (not status, warm or cleanup)");
                return false;
        }
        snprintf(p->key, sizeof(p->key), "%s", key);
        return parse_sizes(b, p, res) && opt_path(b, "kernel_path", p->kernel_path, sizeof(p->kernel_path), res) &&
               opt_path(b, "rootfs_path", p->rootfs_path, sizeof(p->rootfs_path), res);
}

/* Removes profile key and its warm sandboxes (its class: the store row
 * goes last, so a failure leaves the profile to retry). */
static int remove_profile(struct app *app, const char *key, uint64_t *ret_warm, struct err *err)
{
        int r = sbx_warm_drop(app->sandboxes, key, ret_warm, err);
        if (r == 0 && (r = store_snapshot_profile_delete(app->store, key)) < 0 && r != -ENOENT)
                return err_set(err, ERR_INTERNAL, -r, "Cannot delete snapshot profile: %s", strerror(-r));
        return r == -ENOENT ? 0 : r;
}

static void h_create(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct snapshot_profile_row p = { 0 }, old, stored;
        if (!allowed(req, res, true) || !parse_profile(req, res, &p))
                return;
        p.created_at = wall_ms();
        pthread_mutex_lock(&snap_lock);
        bool replaced = store_snapshot_profile_get(app->store, p.key, &old) == 0;
        struct err err = {};
        /* A new version: the sandboxes warmed for the old sizes go. */
        int r = replaced ? sbx_warm_drop(app->sandboxes, p.key, NULL, &err) : 0;
        if (r == 0 && (r = store_snapshot_profile_put(app->store, &p, &stored)) < 0)
                err_set(&err, ERR_INTERNAL, -r, "Cannot store snapshot profile: %s", strerror(-r));
        pthread_mutex_unlock(&snap_lock);
        if (r < 0)
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
        else
                http_json(res, replaced ? 200 : 201, profile_json(app, &stored));
}

static void h_delete(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct snapshot_profile_row p;
        if (!allowed(req, res, true))
                return;
        pthread_mutex_lock(&snap_lock);
        uint64_t warm = 0;
        struct err err = {};
        bool found = load_profile(app, req->captures[0], &p, res);
        int r = found ? remove_profile(app, p.key, &warm, &err) : 0;
        pthread_mutex_unlock(&snap_lock);
        if (r < 0)
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
        else if (found)
                http_json(res, 200, json_pack("{s:s, s:b, s:I}", "profileKey", p.key, "deleted", 1, "warmRemoved",
                                              (json_int_t)warm));
}

/* ---- warm and restore ---- */

/* Tops p up to count warm sandboxes; appends its line to out. */
static int warm_one(struct app *app, const struct snapshot_profile_row *p, uint64_t count, json_t *out,
                    uint64_t *total, struct err *err)
{
        struct sbx_warm_class c = profile_class(p);
        uint64_t made = 0, now = 0;
        int r = sbx_warm_fill(app->sandboxes, &c, count, &made, err);
        if (r == 0)
                r = sbx_warm_count(app->sandboxes, p->key, &now, err);
        if (r < 0)
                return r;
        *total += made;
        json_array_append_new(out, json_pack("{s:s, s:I, s:I, s:b}", "profileKey", p->key, "prepared",
                                             (json_int_t)made, "warm", (json_int_t)now, "complete", now >= count));
        return 0;
}

static void h_warm(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_json_ json_t *b = NULL;
        _cleanup_(collect_done) struct collect c = { 0 };
        uint64_t count = 1, total = 0;
        bool given;
        const char *only;
        if (!allowed(req, res, true) || !body_or_empty(req, res, &b) ||
            !opt_uint(b, "count", 1, app->cfg->ctl_snapshot_max_warm, &count, &given, res) ||
            !ctl_opt_string(b, "profile", &only, res))
                return;
        pthread_mutex_lock(&snap_lock);
        struct snapshot_profile_row one;
        bool ok = only ? load_profile(app, only, &one, res) : collect(app, &c, res);
        const struct snapshot_profile_row *rows = only ? &one : c.rows;
        size_t n = only ? 1 : c.n;
        json_t *out = json_array();
        struct err err = {};
        int r = 0;
        for (size_t i = 0; ok && r == 0 && i < n; i++)
                r = warm_one(app, &rows[i], count, out, &total, &err);
        pthread_mutex_unlock(&snap_lock);
        if (!ok)
                json_decref(out);
        else if (r < 0) {
                json_decref(out);
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
        } else
                http_json(res, 200, json_pack("{s:s, s:I, s:I, s:o}", "message", "Snapshot cache warmed", "count",
                                              (json_int_t)count, "prepared", (json_int_t)total, "profiles", out));
}

/* POST /sandbox/create's answer for it: its id and the limits it got. */
static json_t *restored_json(struct app *app, const struct snapshot_profile_row *p, const char *id, bool warm,
                             double ms)
{
        struct sbx_info info = { 0 };
        struct err err = {};
        (void)sbx_find(app->sandboxes, SBX_DEFAULT_ORG, id, &info, &err);
        err_done(&err);
        json_t *j = json_pack("{s:s, s:b, s:s, s:s, s:b, s:f, s:I, s:I, s:o, s:o}", "profileKey", p->key,
                              "restored", 1, "sandboxId", id, "orgId", SBX_DEFAULT_ORG, "warm", warm, "restoreMs",
                              ms, "vcpuCount", (json_int_t)p->vcpu_count, "memSizeMib",
                              (json_int_t)p->mem_size_mib, "cpus",
                              info.cpu_millis ? json_real((double)info.cpu_millis / 1000) : json_null(),
                              "memory_bytes",
                              info.memory_bytes ? json_integer((json_int_t)info.memory_bytes) : json_null());
        sbx_info_done(&info);
        return j;
}

static void h_restore(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        struct snapshot_profile_row p;
        if (!allowed(req, res, true) || !load_profile(app, req->captures[0], &p, res))
                return;
        struct sbx_warm_class c = profile_class(&p);
        char id[STORE_ID_MAX];
        bool warm = false;
        struct err err = {};
        uint64_t t0 = now_ns();
        if (sbx_warm_take(app->sandboxes, &c, id, &warm, &err) < 0) {
                ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return;
        }
        http_json(res, 200, restored_json(app, &p, id, warm, (double)(now_ns() - t0) / 1e6));
}

/* ---- cleanup ---- */

struct cleanup_plan {
        bool has_keep, has_age, dry_run;
        uint64_t keep, max_age_s;
};

static bool parse_cleanup(struct http_request *req, struct http_response *res, struct cleanup_plan *p)
{
        _cleanup_json_ json_t *b = NULL;
        json_t *dry;
        if (!body_or_empty(req, res, &b) ||
            !opt_uint(b, "keep_most_recent", 0, UINT32_MAX, &p->keep, &p->has_keep, res) ||
            !opt_uint(b, "max_age_seconds", 0, UINT32_MAX, &p->max_age_s, &p->has_age, res))
                return false;
        dry = json_object_get(b, "dry_run");
        if (dry && !json_is_null(dry) && !json_is_boolean(dry)) {
                ctl_error(res, 400, "VALIDATION_ERROR", "dry_run must be a boolean");
                return false;
        }
        p->dry_run = json_is_true(dry);
        if (!p->has_keep && !p->has_age) {
                ctl_error(res, 400, "VALIDATION_ERROR", "Give keep_most_recent, max_age_seconds or both");
                return false;
        }
        return true;
}

struct cleanup_result {
        json_t *removed;                /* keys */
        uint64_t by_age, by_keep, kept;
};

/* Profiles (newest first) past max_age_seconds go first; of the rest, those
 * past the keep_most_recent newest. Each is counted once, by the first rule
 * that removes it. */
static int cleanup_run(struct app *app, const struct cleanup_plan *plan, const struct collect *c,
                       struct cleanup_result *out, struct err *err)
{
        uint64_t now = wall_ms();
        for (size_t i = 0; i < c->n; i++) {
                const struct snapshot_profile_row *p = &c->rows[i];
                bool old = plan->has_age && now > p->created_at && now - p->created_at > plan->max_age_s * 1000;
                bool over = !old && plan->has_keep && out->kept >= plan->keep;
                if (!old && !over) {
                        out->kept++;
                        continue;
                }
                out->by_age += old;
                out->by_keep += over;
                json_array_append_new(out->removed, json_string(p->key));
                int r = plan->dry_run ? 0 : remove_profile(app, p->key, NULL, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void h_cleanup(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        _cleanup_(collect_done) struct collect c = { 0 };
        struct cleanup_plan plan = { 0 };
        if (!allowed(req, res, true) || !parse_cleanup(req, res, &plan))
                return;
        struct cleanup_result out = { .removed = json_array() };
        struct err err = {};
        pthread_mutex_lock(&snap_lock);
        bool listed = collect(app, &c, res);
        int r = listed ? cleanup_run(app, &plan, &c, &out, &err) : 0;
        pthread_mutex_unlock(&snap_lock);
        if (!listed || r < 0) {
                json_decref(out.removed);
                if (r < 0)
                        ctl_error_done(res, &err, ERR_OK, 0, NULL);
                return;
        }
        http_json(res, 200,
                  json_pack("{s:s, s:b, s:I, s:o, s:I, s:I, s:I, s:I}", "message", "Snapshot cleanup completed",
                            "dry_run", plan.dry_run, "profiles_removed", (json_int_t)(out.by_age + out.by_keep),
                            "removed_profiles", out.removed, "profiles_removed_by_age", (json_int_t)out.by_age,
                            "profiles_removed_by_keep_limit", (json_int_t)out.by_keep, "total_found",
                            (json_int_t)c.n, "total_remaining", (json_int_t)out.kept));
}

/* Literal paths before :profileKey: the first matching route wins. */
static const struct route routes[] = {
        { "GET", CTL_PREFIX "/internal/snapshots", h_list, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/internal/snapshots", h_create, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/internal/snapshots/status", h_status, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/internal/snapshots/warm", h_warm, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/internal/snapshots/cleanup", h_cleanup, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "GET", CTL_PREFIX "/internal/snapshots/:profileKey", h_get, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "DELETE", CTL_PREFIX "/internal/snapshots/:profileKey", h_delete, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
        { "POST", CTL_PREFIX "/internal/snapshots/:profileKey/restore", h_restore, ROUTE_PUBLIC | ROUTE_BLOCKING, 0 },
};

const struct route *ctl_snapshot_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
