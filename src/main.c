/* sandboxd: argument parsing, start-up checks, signals and graceful drain. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/app.h"
#include "cluster/cluster.h"
#include "api/workers/result_json.h"
#include "api/bridge/bridge.h"
#include "api/controller/controller.h"
#include "api/controller/template_catalog.h"
#include "api/mcp/mcp_http.h"
#include "api/web/web.h"
#include "api/workers/routes.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/util.h"
#include "base/version.h"
#include "cli/cli.h"
#include "runtimes/runtime.h"
#include "sandbox/checkpoint.h"
#include "sandbox/datadir.h"
#include "sandbox/replica.h"


static void usage(FILE *f)
{
        fprintf(f,
                "Usage: sandboxd [serve] [OPTIONS]\n"
                "       sandboxd COMMAND [ARGS]   (the client: sandboxd help lists the commands)\n"
                "Runs untrusted code for AI agents in Linux jails, behind HTTP APIs.\n\n"
                "  --listen HOST:PORT   address to listen on (default 127.0.0.1:8787)\n"
                "  --data-dir DIR       data directory (default ./data)\n"
                "  --store URL          metadata store: sqlite:PATH or postgres://... (default DIR/sandboxd.db)\n"
                "  --config FILE        key = value configuration file (see docs/limits.md)\n"
                "  --set KEY=VALUE      override one configuration key (repeatable)\n"
                "  --insecure           allow a non-loopback address without an API key\n"
                "  --rotate-session-key make a new controller session signing key (ends every session)\n"
                "  --log-level LEVEL    debug | info | warn | error\n"
                "  --print-config       print the configuration table (markdown) and exit\n"
                "  --help               this text\n"
                "  --version            print the version\n");
}

struct cli {
        const char *config_file;
        const char *listen, *data_dir, *log_level, *store;
        bool insecure, print_config, rotate_session_key;
        const char *sets[64];
        size_t nsets;
};

static int parse_cli(int argc, char **argv, struct cli *cli)
{
        static const struct option longopts[] = {
                { "listen", required_argument, NULL, 'l' },  { "data-dir", required_argument, NULL, 'd' },
                { "config", required_argument, NULL, 'c' },  { "set", required_argument, NULL, 's' },
                { "insecure", no_argument, NULL, 'i' },      { "log-level", required_argument, NULL, 'L' },
                { "print-config", no_argument, NULL, 'P' },  { "help", no_argument, NULL, 'h' },
                { "rotate-session-key", no_argument, NULL, 'R' }, { "store", required_argument, NULL, 'S' },
                { "version", no_argument, NULL, 'V' },       { NULL, 0, NULL, 0 },
        };
        int c;
        while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (c) {
                case 'l': cli->listen = optarg; break;
                case 'd': cli->data_dir = optarg; break;
                case 'S': cli->store = optarg; break;
                case 'c': cli->config_file = optarg; break;
                case 'L': cli->log_level = optarg; break;
                case 'i': cli->insecure = true; break;
                case 'P': cli->print_config = true; break;
                case 'R': cli->rotate_session_key = true; break;
                case 's':
                        if (cli->nsets >= ARRAY_SIZE(cli->sets))
                                return -E2BIG;
                        cli->sets[cli->nsets++] = optarg;
                        break;
                case 'h': usage(stdout); exit(0);
                case 'V': printf("sandboxd %s\n", SANDBOXD_VERSION); exit(0);
                default: return -EINVAL;
                }
        }
        return optind < argc ? -EINVAL : 0;
}

static int apply_set(struct config *cfg, const char *kv)
{
        char key[128];
        const char *eq = strchr(kv, '=');
        if (!eq || (size_t)(eq - kv) >= sizeof(key))
                return -EINVAL;
        snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
        return config_set(cfg, key, eq + 1);
}

/* The directory of our own binary, or "." if it cannot be told. */
static void exe_dir(char *out, size_t len)
{
        ssize_t n = readlink("/proc/self/exe", out, len - 1);
        if (n <= 0) {
                snprintf(out, len, ".");
                return;
        }
        out[n] = '\0';
        char *slash = strrchr(out, '/');
        if (slash)
                *slash = '\0';
}

/* Default kernels directory: the source tree next to the binary
 * (build/sandboxd → src/runtimes/kernels). */
static void default_kernels_dir(char *out, size_t len)
{
        char exe[PATH_MAX - 64];
        exe_dir(exe, sizeof(exe));
        snprintf(out, len, "%s/../src/runtimes/kernels", exe);
}

/* Settings under the names other deployments give them (the seeds' own
 * environment variables), applied after the config file and before --set.
 * A later row wins: SANDBOXD_API_KEY over SANDBOX_API_KEY (the bridge's
 * name for the same key). The warm pool's batch size is clamped to 1-20,
 * as the anchor does; every other value is checked like the file's. */
static const struct {
        const char *env, *key;
        bool clamp;
} env_settings[] = {
        { "SANDBOX_API_KEY", "api_key", false },
        { "SANDBOXD_API_KEY", "api_key", false },
        { "INTERNAL_API_TOKEN", "controller.internal_token", false },
        { "REPL_ENABLED", "controller.repl_enabled", false },
        { "IDEMPOTENCY_ENABLED", "controller.idempotency_enabled", false },
        { "ORG_BUDGET__MAX_CONCURRENT_SANDBOXES", "controller.budget_sandboxes", false },
        { "ORG_BUDGET__MAX_CONCURRENT_EXECUTES", "controller.budget_executes", false },
        { "QUEUE_MODE_ENABLED", "controller.queue_mode", false },
        { "EGRESS_POLICIES_ENABLED", "controller.egress_enabled", false },
        { "EGRESS_PROXY_MODE", "controller.egress_mode", false },
        { "QUEUE_MAX_DEPTH", "controller.queue_max_depth", false },
        { "AUDIT_LOGS_ENABLED", "controller.audit_enabled", false },
        { "GITHUB_INTEGRATION_ENABLED", "controller.github_enabled", false },
        { "GITHUB_WEBHOOK_SECRET", "controller.github_webhook_secret", false },
        { "GITHUB_API_URL", "controller.github_api_url", false },
        { "GITHUB_APP_ID", "controller.github_app_id", false },
        { "GITHUB_APP_PRIVATE_KEY_PATH", "controller.github_private_key", false },
        { "GITHUB_DASHBOARD_URL", "controller.github_dashboard_url", false },
        { "WORKOS_API_KEY", "controller.oidc_client_secret", false },
        { "WORKOS_CLIENT_ID", "controller.oidc_client_id", false },
        { "WORKOS_REDIRECT_URI", "controller.oidc_redirect_uri", false },
        { "OIDC_ISSUER", "controller.oidc_issuer", false },
        { "WARM_POOL_TARGET", "bridge.warm_pool_target", false },
        { "WARM_POOL_REFRESH_INTERVAL", "bridge.warm_pool_refresh_ms", false },
        { "WARM_POOL_MAX_INSTANCES", "bridge.warm_pool_max_instances", false },
        { "WARM_POOL_SCALE_BATCH_SIZE", "bridge.warm_pool_scale_batch", true },
};

static int config_from_env(struct config *cfg)
{
        for (size_t i = 0; i < ARRAY_SIZE(env_settings); i++) {
                const char *v = getenv(env_settings[i].env);
                uint64_t n;
                if (!v || !*v)
                        continue;
                char clamped[32];
                if (env_settings[i].clamp && config_parse_u64(v, &n) == 0) {
                        snprintf(clamped, sizeof(clamped), "%llu", (unsigned long long)(n < 1 ? 1 : n > 20 ? 20 : n));
                        v = clamped;
                }
                int r = config_set(cfg, env_settings[i].key, v);
                if (r < 0) {
                        fprintf(stderr, "sandboxd: %s=%s: %s\n", env_settings[i].env, v, strerror(-r));
                        return r;
                }
        }
        return 0;
}

static int build_config(const struct cli *cli, struct config *cfg)
{
        int line = 0, r;
        config_defaults(cfg);
        if (cli->config_file && (r = config_load_file(cfg, cli->config_file, &line)) < 0) {
                fprintf(stderr, "sandboxd: %s:%d: %s\n", cli->config_file, line, strerror(-r));
                return r;
        }
        if ((r = config_from_env(cfg)) < 0)
                return r;
        for (size_t i = 0; i < cli->nsets; i++)
                if ((r = apply_set(cfg, cli->sets[i])) < 0) {
                        fprintf(stderr, "sandboxd: --set %s: %s\n", cli->sets[i],
                                r == -ENOENT ? "unknown key" : strerror(-r));
                        return r;
                }
        if ((cli->listen && config_set(cfg, "listen", cli->listen) < 0) ||
            (cli->data_dir && config_set(cfg, "data_dir", cli->data_dir) < 0) ||
            (cli->store && config_set(cfg, "store", cli->store) < 0) ||
            (cli->log_level && config_set(cfg, "log_level", cli->log_level) < 0))
                return -EINVAL;
        if (cli->insecure)
                cfg->insecure = true;
        if (!cfg->kernels_dir[0])
                default_kernels_dir(cfg->kernels_dir, sizeof(cfg->kernels_dir));
        if (!cfg->ctl_templates_dir[0]) { /* the repo's templates/, as the kernels */
                char exe[PATH_MAX - 64];
                exe_dir(exe, sizeof(exe));
                snprintf(cfg->ctl_templates_dir, sizeof(cfg->ctl_templates_dir), "%s/../templates", exe);
        }
        if (!cfg->forkserver_dir[0]) /* the build puts the shim next to the binary */
                exe_dir(cfg->forkserver_dir, sizeof(cfg->forkserver_dir));
        /* The cluster secret from the environment wins over the file and
         * --set: it is kept out of process listings and config files. */
        const char *csecret = getenv("SANDBOXD_CLUSTER_SECRET");
        if (csecret && csecret[0] && (r = config_set(cfg, "cluster.secret", csecret)) < 0) {
                fprintf(stderr, "sandboxd: SANDBOXD_CLUSTER_SECRET: %s\n", strerror(-r));
                return r;
        }
        return 0;
}

/* Cluster mode needs the shared secret; its store should be PostgreSQL
 * (SQLite serves one box only: nodes on one host sharing a file, tests). */
static int check_cluster(const struct config *cfg)
{
        if (!cfg->cluster_node_id[0])
                return 0;
        if (!cfg->cluster_secret[0]) {
                fprintf(stderr, "sandboxd: cluster.node_id is set but cluster.secret (or SANDBOXD_CLUSTER_SECRET) is not\n");
                return -EINVAL;
        }
        if (strncmp(cfg->store, "postgres", 8) != 0)
                log_warn("msg=\"cluster mode on a SQLite store: every node must run on this host\" node=%s",
                         cfg->cluster_node_id);
        return 0;
}


/* pool.<lang> takes any name in the config; only runtime ids mean something. */
static int check_pool_langs(const struct config *cfg)
{
        for (size_t i = 0; i < cfg->npools; i++)
                if (!runtime_find(cfg->pools[i].lang)) {
                        fprintf(stderr, "sandboxd: pool.%s: unknown language\n", cfg->pools[i].lang);
                        return -ENOENT;
                }
        return 0;
}

static int cgroup_force_of(const char *name)
{
        if (strcmp(name, "v1") == 0)
                return CGROUP_V1;
        if (strcmp(name, "v2") == 0)
                return CGROUP_V2;
        if (strcmp(name, "none") == 0)
                return CGROUP_NONE;
        return -1;
}

/* The engine's view of the configuration. */
static void engine_options_from_config(const struct config *cfg, struct engine_options *o)
{
        *o = (struct engine_options){
                .cgroup_force = cgroup_force_of(cfg->cgroup),
                .templates = cfg->zygote,
                .file_bytes = cfg->file_bytes, .nofile = cfg->nofile,
                .tmp_bytes = cfg->tmp_bytes, .tmp_inodes = cfg->tmp_inodes,
                .workspace_bytes = cfg->workspace_bytes, .workspace_inodes = cfg->workspace_inodes,
                .workers = (unsigned)cfg->exec_workers,
                .pool_refill_per_s = cfg->pool_refill_per_s,
                .pool_memory_budget = cfg->pool_memory_budget,
                .pool_grow_idle_s = cfg->pool_grow_idle_s,
                .id_base = cfg->jail_id_base, .id_count = cfg->jail_id_count,
                .no_landlock = !cfg->jail_landlock,
                .no_spawner = !cfg->jail_spawner,
                .cpu_quota_percent = (uint32_t)cfg->cpu_quota_percent,
                .sandbox_memory_bytes = cfg->sandbox_memory_bytes ? cfg->sandbox_memory_bytes
                                                                  : cfg->max_resident_per_sandbox * cfg->memory_bytes,
                .sandbox_pids = cfg->sandbox_pids ? cfg->sandbox_pids : cfg->max_resident_per_sandbox * cfg->pids,
        };
        snprintf(o->run_dir, sizeof(o->run_dir), "%s/run", cfg->data_dir);
        snprintf(o->kernels_dir, sizeof(o->kernels_dir), "%s", cfg->kernels_dir);
        snprintf(o->forkserver_dir, sizeof(o->forkserver_dir), "%s", cfg->forkserver_dir);
        exec_limits_from_config(cfg, &o->limits);
        for (size_t i = 0; i < runtime_count() && i < ENGINE_MAX_RUNTIMES; i++)
                o->pool_size[i] = config_pool_size(cfg, runtime_at(i)->id);
}

/* Refuses to expose an unauthenticated daemon beyond this machine. */
static int check_listen_policy(const struct config *cfg)
{
        char host[256];
        unsigned port;
        if (http_parse_listen(cfg->listen, host, sizeof(host), &port) < 0) {
                log_error("msg=\"invalid listen address\" listen=\"%s\"", cfg->listen);
                return -EINVAL;
        }
        if (!http_host_is_loopback(host) && !cfg->api_key[0] && !cfg->insecure) {
                log_error("msg=\"refusing to listen on a non-loopback address without an API key "
                          "(set api_key / SANDBOXD_API_KEY, or pass --insecure)\" listen=\"%s\"",
                          cfg->listen);
                return -EPERM;
        }
        return 0;
}

/* Many connections need many fds: raise the soft limit to the hard one. */
static void raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
}

static void drain_and_stop(struct app *app)
{
        uint64_t deadline = now_ms() + app->cfg->drain_timeout_ms;
        http_server_drain(app->srv);
        /* No queued request starts during the drain: one started when a
         * draining execution gave its slot back would be killed below and
         * recorded as answered, instead of staying queued for the next
         * start. Those already running are waited for like requests. */
        ctl_queue_halt(app);
        log_info("msg=\"draining\" busy=%zu queued_running=%u timeout_ms=%llu", http_server_busy(app->srv),
                 ctl_queue_running(app), (unsigned long long)app->cfg->drain_timeout_ms);
        while ((http_server_busy(app->srv) > 0 || ctl_queue_running(app) > 0) && now_ms() < deadline)
                usleep(20000);
        if (http_server_busy(app->srv) > 0 || ctl_queue_running(app) > 0)
                log_warn("msg=\"drain timeout; killing remaining executions\" busy=%zu queued_running=%u",
                         http_server_busy(app->srv), ctl_queue_running(app));
        engine_kill_all(app->engine);
        http_server_stop(app->srv);
        app->srv = NULL;
        /* After the stop: no handler (budgeted request, artifact upload,
         * webhook change, MCP call) is running any more. */
        ctl_queue_stop(app);
        ctl_artifacts_stop(app);
        ctl_webhooks_stop(app);
        api_mcp_free(app);
}

/* The sandbox layer's options: main turns the one config table into
 * per-module option structs, so no layer below api/ reads the config. */
static void sandbox_options_from_config(const struct config *cfg, struct sandbox_options *ret)
{
        *ret = (struct sandbox_options){
                .idle_ttl_ms = cfg->idle_ttl_ms,
                .max_contexts = cfg->max_contexts,
                .max_sessions = cfg->max_sessions,
                .max_resident_contexts = cfg->max_resident_contexts,
                .max_resident_per_sandbox = cfg->max_resident_per_sandbox,
                .resident_grace_ms = cfg->resident_grace_ms,
                .replay_ms = cfg->replay_ms,
                .journal_bytes = cfg->journal_bytes,
                .journal_sync_ms = cfg->journal_sync_ms,
                .max_sandboxes = cfg->max_sandboxes,
                .max_disk_bytes = cfg->max_disk_bytes,
                /* Not in cluster mode: a take re-keys a row that placement
                 * and the lease epoch own, and heartbeats would count the
                 * warm sandboxes as load (docs/contexts.md). */
                .warm_runtime = cfg->cluster_node_id[0] ? 0 : cfg->warm_runtime,
                .workspace_bytes = cfg->workspace_bytes,
                .workspace_inodes = cfg->workspace_inodes,
                .workspace_images = cfg->workspace_images,
                .file_bytes = cfg->file_bytes,
                .files_max_depth = cfg->files_max_depth,
                /* Warm sandboxes are the bridge's: its ids. */
                .pool = { .target = cfg->warm_pool_target, .refresh_ms = cfg->warm_pool_refresh_ms,
                          .max_instances = cfg->warm_pool_max_instances, .batch = cfg->warm_pool_scale_batch,
                          .create = { .workspace_bytes = cfg->bridge_workspace_bytes,
                                      .workspace_inodes = cfg->bridge_workspace_inodes,
                                      .file_bytes = cfg->bridge_file_bytes },
                          .new_id = bridge_id_new },
        };
        /* config_set only takes a known word. */
        sbx_journal_sync_parse(cfg->journal_sync, &ret->journal_sync);
        snprintf(ret->data_dir, sizeof(ret->data_dir), "%s", cfg->data_dir);
        snprintf(ret->node_id, sizeof(ret->node_id), "%s", cfg->cluster_node_id);
        exec_limits_from_config(cfg, &ret->limits);
}

static int start_server(struct app *app, sigset_t *sigs)
{
        struct http_options opt = {
                .listen = app->cfg->listen,
                .threads = (unsigned)app->cfg->http_threads,
                .max_connections = (unsigned)app->cfg->http_max_connections,
                .timeout_s = (unsigned)app->cfg->http_timeout_s,
                .header_bytes = app->cfg->http_header_bytes,
                .default_max_body = app->cfg->request_bytes,
                .workers = (unsigned)app->cfg->exec_workers,
                .queue = (unsigned)app->cfg->exec_queue,
                .max_streams = (unsigned)app->cfg->http_max_streams,
                .stream_buffer = app->cfg->http_stream_buffer,
                .inline_blocking = app->cfg->http_inline,
        };
        /* app->srv is set before listening: a request may reach it at once
         * through the app (GET /ready). */
        int r = http_server_new(&opt, app, &app->srv);
        if (r >= 0)
                r = api_workers_register(app->srv, app);
        if (r >= 0)
                r = api_bridge_register(app->srv, app);
        if (r >= 0)
                r = api_controller_register(app->srv, app);
        if (r >= 0)
                r = api_mcp_register(app->srv, app);
        if (r >= 0)
                r = api_web_register(app->srv, app);
        if (r >= 0)
                r = http_server_start(app->srv);
        if (r < 0) {
                http_server_stop(app->srv);
                app->srv = NULL;
                ctl_queue_stop(app);
                ctl_artifacts_stop(app);
                ctl_webhooks_stop(app);
                api_mcp_free(app);
                return log_error_errno(r, "msg=\"cannot listen\" listen=\"%s\"", app->cfg->listen);
        }
        log_info("msg=\"listening\" listen=\"%s\" port=%u cgroup=%s version=%s", app->cfg->listen,
                 http_server_port(app->srv), cgroup_backend_name(engine_cgroup_backend(app->engine)),
                 SANDBOXD_VERSION);
        int sig = 0;
        sigwait(sigs, &sig);
        log_info("msg=\"signal received; shutting down\" signal=%d", sig);
        drain_and_stop(app);
        return 0;
}

static int tenant_start(const struct config *cfg, bool rotate, struct store *store, struct tenant **ret)
{
        struct tenant_options o = {
                .session_ttl_s = cfg->ctl_session_ttl_s,
                .login_account_failures = (unsigned)cfg->ctl_login_account_failures,
                .login_addr_failures = (unsigned)cfg->ctl_login_addr_failures,
                .login_window_s = cfg->ctl_login_window_s,
                .rotate_session_key = rotate,
        };
        struct err err = { 0 };
        snprintf(o.data_dir, sizeof(o.data_dir), "%s", cfg->data_dir);
        /* Not a config key: a key in a config file would sit beside the
         * database it protects. */
        const char *skey = getenv("SANDBOXD_SECRETS_KEY");
        if (skey && snprintf(o.secrets_key, sizeof(o.secrets_key), "%s", skey) >= (int)sizeof(o.secrets_key))
                o.secrets_key[0] = '?'; /* too long: refused by tenant_new as malformed */
        int r = tenant_new(&o, store, ret, &err);
        explicit_bzero(o.secrets_key, sizeof(o.secrets_key));
        if (r < 0) {
                log_error("msg=\"cannot start the tenant layer\" err=\"%s\"", err.msg);
                err_done(&err);
        } else if (rotate) {
                log_info("msg=\"new session signing key: every controller session has ended\"");
        }
        return r;
}

static void add_secret(const char *name, const char *value, void *userdata)
{
        json_object_set_new(userdata, name, json_string(value));
}

/* The sandbox layer's org env hook: an org's secrets, opened. */
static int org_secrets_env(void *userdata, const char *org_id, json_t *env, struct err *err)
{
        int r = tenant_secret_values(userdata, org_id, add_secret, env, err);
        if (r < 0)
                metrics_error(METRICS_ERROR_SECRETS);
        return r;
}

/* The sandbox layer's checkpoint hook: checkpoint.created / .restored
 * into the event log (userdata). */
static void checkpoint_event(void *userdata, const char *event, const struct checkpoint_row *row,
                             const char *sandbox_id)
{
        (void)events_emit(userdata, row->org_id, event, sandbox_id,
                          json_pack("{s:s, s:s, s:s, s:I, s:I}", "checkpointId", row->id, "name",
                                    row->name ? row->name : "", "checksum", row->checksum, "sizeBytes",
                                    (json_int_t)row->size_bytes, "fileCount", (json_int_t)row->file_count),
                          NULL);
}

/* One log line for a start-up step that failed with err (then done). */
/* The workspace replica (cluster.replica), when one is configured: NULL
 * and nothing running otherwise. -errno when it cannot be opened. */
static int start_replica(const struct config *cfg, struct sandbox_mgr *m, struct replica **ret)
{
        *ret = NULL;
        if (!cfg->cluster_replica[0])
                return 0;
        const struct replica_options o = { .data_dir = cfg->data_dir, .s3_endpoint = cfg->ctl_artifact_s3_endpoint };
        struct err err = { 0 };
        int r = replica_open(cfg->cluster_replica, &o, ret, &err);
        if (r < 0) {
                log_error("msg=\"cannot open the workspace replica\" target=\"%s\" error=\"%s\"", cfg->cluster_replica,
                          err.msg);
                err_done(&err);
                return r;
        }
        sbx_mgr_set_replica(m, *ret, cfg->cluster_replica_delay_ms);
        log_info("msg=\"workspace replica\" target=\"%s\" dir=\"%s\" delay_ms=%llu", cfg->cluster_replica,
                 replica_dir(*ret), (unsigned long long)cfg->cluster_replica_delay_ms);
        return 0;
}

static void log_start_failure(const char *what, const char *path, struct err *err)
{
        log_error("msg=\"%s\"%s%s%s reason=%s err=\"%s\"", what, path ? " path=\"" : "", path ? path : "",
                  path ? "\"" : "", err_reason_name(err->reason), err->msg);
        err_done(err);
}

static int cluster_start(struct app *app)
{
        const struct config *cfg = app->cfg;
        struct cluster_options o = { .heartbeat_ms = cfg->cluster_heartbeat_ms,
                                     .dead_after_ms = cfg->cluster_dead_after_ms };
        struct err err = { 0 };

        if (!cfg->cluster_node_id[0])
                return 0;
        snprintf(o.node_id, sizeof(o.node_id), "%s", cfg->cluster_node_id);
        snprintf(o.secret, sizeof(o.secret), "%s", cfg->cluster_secret);
        if (cfg->cluster_advertise_url[0])
                snprintf(o.url, sizeof(o.url), "%s", cfg->cluster_advertise_url);
        else
                snprintf(o.url, sizeof(o.url), "http://%.200s", cfg->listen);
        int r = cluster_new(&o, app->store, app->sandboxes, app->events, &app->cluster, &err);
        if (r < 0) {
                log_start_failure("cannot start cluster mode", NULL, &err);
                return r;
        }
        /* An adopted sandbox's workspace comes back from the replica (a
         * no-op -ENOENT without one: the contexts still replay). */
        cluster_set_restore_hook(app->cluster, sbx_replica_restore);
        return 0;
}

int main(int argc, char **argv)
{
        /* `sandboxd COMMAND …` is the client; `sandboxd serve …` and a bare
         * `sandboxd --listen …` serve. */
        if (argc > 1 && !strcmp(argv[1], "serve")) {
                argv[1] = argv[0];
                argc--, argv++;
        } else if (argc > 1 && cli_take_command(argc, argv)) {
                return cli_main(argc, argv);
        }
        struct cli cli = { 0 };
        static struct config cfg;
        if (parse_cli(argc, argv, &cli) < 0) {
                usage(stderr);
                return 2;
        }
        if (build_config(&cli, &cfg) < 0)
                return 2;
        if (cli.print_config) {
                config_print_table(stdout);
                return 0;
        }
        enum log_level lvl;
        if (log_parse_level(cfg.log_level, &lvl) < 0) {
                fprintf(stderr, "sandboxd: invalid log level '%s'\n", cfg.log_level);
                return 2;
        }
        log_set_level(lvl);
        if (check_listen_policy(&cfg) < 0 || check_pool_langs(&cfg) < 0 || check_cluster(&cfg) < 0)
                return 2;

        /* Block the shutdown signals in every thread; main waits for them. */
        sigset_t sigs;
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
        signal(SIGPIPE, SIG_IGN);
        raise_nofile();

        /* Data at rest: nothing the daemon creates is for other users
         * (the store holds every tenant's env). */
        umask(077);
        int r = mkdir_p(cfg.data_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "msg=\"cannot create data dir\" dir=\"%s\"", cfg.data_dir), 1;
        struct err derr = { 0 };
        if (sbx_data_dir_secure(cfg.data_dir, &derr) < 0)
                return log_start_failure("refusing the data dir", cfg.data_dir, &derr), 1;
        char missing[128];
        runtime_probe_versions(missing, sizeof(missing));
        if (missing[0])
                log_warn("msg=\"interpreters not found; those languages are disabled\" missing=\"%s\"", missing);

        struct app app = { .cfg = &cfg, .started_ms = wall_ms() };
        struct err err = { 0 };
        static struct engine_options eopt;
        engine_options_from_config(&cfg, &eopt);
        /* The jail root's mount point (/run/sandboxd/PID/jailroot) must stay
         * searchable by template jails (their own uid). */
        umask(022);
        r = engine_new(&eopt, &app.engine, &err);
        umask(077);
        if (r < 0)
                return log_start_failure("cannot start the engine", NULL, &err), 1;
        char dbpath[4200];
        if (cfg.store[0])
                snprintf(dbpath, sizeof(dbpath), "%s", cfg.store);
        else   /* "sqlite:" so a data dir with a ':' in its name stays a path */
                snprintf(dbpath, sizeof(dbpath), "sqlite:%s/sandboxd.db", cfg.data_dir);
        if ((r = store_open(dbpath, &app.store, &err)) < 0) {
                /* A URL may carry a password: name only the backend's scheme. */
                log_start_failure("cannot open the store", strchr(dbpath, '@') ? "(a URL with credentials)" : dbpath,
                                  &err);
                engine_free(app.engine);
                return 1;
        }
        const struct events_options evopt = { cfg.ctl_events_retention, cfg.ctl_events_max_age_s * 1000 };
        struct sandbox_options sbx_opt;
        sandbox_options_from_config(&cfg, &sbx_opt);
        if ((r = events_new(app.store, &evopt, &app.events)) < 0 ||
            (r = sbx_mgr_new(&sbx_opt, app.engine, app.store, &app.sandboxes)) < 0) {
                log_error_errno(r, "msg=\"cannot start the sandbox manager\"");
                events_free(app.events);
                store_close(app.store);
                engine_free(app.engine);
                return 1;
        }
        sbx_mgr_set_events(app.sandboxes, app.events);
        sbx_mgr_set_checkpoint_events(app.sandboxes, checkpoint_event, app.events);
        struct replica *replica = NULL;
        r = start_replica(&cfg, app.sandboxes, &replica);
        if (r >= 0)
                r = tenant_start(&cfg, cli.rotate_session_key, app.store, &app.tenant);
        if (r >= 0 && (r = ctl_templates_load(cfg.ctl_templates_dir, &app.templates, &err)) < 0)
                log_start_failure("cannot load the sandbox templates", cfg.ctl_templates_dir, &err);
        if (r >= 0)
                sbx_mgr_set_org_env(app.sandboxes, org_secrets_env, app.tenant);
        if (r >= 0)
                r = cluster_start(&app);
        if (r >= 0)
                r = start_server(&app, &sigs);
        cluster_stop(app.cluster);   /* its heartbeats use the manager */
        ctl_templates_free(app.templates);
        tenant_free(app.tenant);
        sbx_mgr_free(app.sandboxes); /* persists what is dirty, before the replica goes */
        replica_free(replica);
        cluster_free(app.cluster);   /* down only now: the others re-home at once */
        events_free(app.events);
        ctl_egress_stop();
        store_close(app.store);
        engine_free(app.engine);
        log_info("msg=\"stopped\"");
        return r < 0 ? 1 : 0;
}
