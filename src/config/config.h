/* All tunables in one table (house style R9): each has a default and bounds.
 * Read from --config FILE (key = value lines), then --set key=value and the
 * dedicated command-line flags. docs/limits.md documents every key. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_LANG_MAX 24
#define CONFIG_POOLS_MAX 16

struct config {
        char listen[256];
        char data_dir[4096];
        char store[4096];         /* store URL; "" = SQLite at <data_dir>/sandboxd.db */
        char kernels_dir[4096];
        char forkserver_dir[4096];
        char api_key[256];
        char log_level[16];
        char cgroup[8];           /* auto | v1 | v2 | none */
        bool insecure;
        uint64_t jail_id_base;    /* host ids of jails: [base, base + count) */
        uint64_t jail_id_count;
        bool jail_landlock;       /* false: test-only, as on kernels < 6.12 */
        bool jail_spawner;        /* false: jails cloned from the daemon (to measure the spawner) */

        uint64_t http_threads;
        uint64_t http_max_connections;
        uint64_t http_timeout_s;
        uint64_t http_header_bytes;
        uint64_t http_max_streams;
        uint64_t http_stream_buffer;
        bool http_inline;         /* blocking requests may skip the worker hand-off */

        uint64_t pool_size;       /* pre-started jailed interpreters per language */
        /* pool.<lang> overrides, in the order set. config/ knows no language:
         * main.c checks the names against the runtime table at start-up. */
        struct config_pool {
                char lang[CONFIG_LANG_MAX];
                uint64_t size;
        } pools[CONFIG_POOLS_MAX];
        size_t npools;
        uint64_t pool_refill_per_s; /* pool members started per second at most (0: no cap) */
        uint64_t pool_memory_budget; /* bytes all warm members may hold (0: no cap) */
        uint64_t pool_grow_idle_s;   /* a pool grown by demand shrinks after this idle (0: no growth) */
        bool zygote;              /* fork-server templates where the kernel has one */
        uint64_t exec_workers;    /* concurrent executions */
        uint64_t exec_queue;      /* waiting executions before 503 */
        uint64_t drain_timeout_ms;

        uint64_t code_bytes;
        uint64_t request_bytes;
        uint64_t files_request_bytes;
        uint64_t cpu_ms;
        uint64_t wall_ms;
        uint64_t memory_bytes;
        uint64_t pids;
        uint64_t output_bytes;
        uint64_t output_entries;
        uint64_t result_bytes;
        uint64_t file_bytes;
        uint64_t nofile;
        uint64_t tmp_bytes;
        uint64_t tmp_inodes;
        uint64_t workspace_bytes;
        uint64_t workspace_inodes;
        uint64_t files_max_depth;
        uint64_t bridge_workspace_bytes, bridge_workspace_inodes, bridge_file_bytes;
        uint64_t ctl_session_ttl_s;
        bool ctl_cookie_secure;
        uint64_t ctl_login_account_failures, ctl_login_addr_failures, ctl_login_window_s;
        char ctl_internal_token[256];  /* GET /api/v1/metrics; "": loopback clients only */
        bool ctl_repl_enabled;         /* the REPL routes (seed: REPL_ENABLED) */
        bool ctl_idempotency_enabled;  /* Idempotency-Key honoured (seed: IDEMPOTENCY_ENABLED) */
        /* Concurrency budgets and queue mode (issue 15). 0: the org's plan's. */
        uint64_t ctl_budget_sandboxes, ctl_budget_executes;
        bool ctl_queue_mode;
        uint64_t ctl_queue_max_depth, ctl_queue_ttl_s;
        char ctl_templates_dir[4096];  /* "": templates/ next to the binary's source tree */
        uint64_t ctl_checkpoints_max, ctl_checkpoint_bytes; /* per org */
        uint64_t ctl_events_retention, ctl_events_max_age_s, ctl_events_heartbeat_ms;
        bool ctl_audit_enabled;        /* the audit log (seed: AUDIT_LOGS_ENABLED) */
        uint64_t ctl_audit_retention_days;
        bool ctl_snapshots_enabled;      /* the internal snapshot profiles */
        uint64_t ctl_snapshot_max_warm;  /* warm sandboxes per profile */
        /* The GitHub integration (issue 15). */
        bool ctl_github_enabled;
        char ctl_github_webhook_secret[256]; /* "": the webhook receiver answers 503 */
        char ctl_github_api_url[512];
        char ctl_github_app_id[64];          /* "" or no key: no PR comments */
        char ctl_github_private_key[4096];   /* PEM file of the App's private key */
        char ctl_github_dashboard_url[512];  /* links in PR comments; "": none */
        uint64_t ctl_github_events_keep;
        uint64_t ctl_github_api_timeout_ms;
        /* Single sign-on through an OpenID Connect provider (issue 15; the
         * seed's WorkOS routes). On when issuer, client id and redirect URI
         * are all set. */
        char ctl_oidc_issuer[512];
        char ctl_oidc_client_id[256];
        char ctl_oidc_client_secret[512];
        char ctl_oidc_redirect_uri[1024];
        char ctl_oidc_org_claim[64];   /* the ID token claim naming the provider organization */
        bool ctl_webhooks_allow_private;   /* webhook targets on loopback/private addresses (tests) */
        uint64_t ctl_webhooks_max_per_org, ctl_webhooks_max_attempts, ctl_webhooks_retry_base_ms,
                ctl_webhooks_retry_max_ms, ctl_webhooks_connect_timeout_ms, ctl_webhooks_timeout_ms,
                ctl_webhooks_disable_after_s, ctl_webhooks_keep_deliveries;
        uint64_t mcp_session_idle_s;   /* /mcp sessions: idle expiry */
        uint64_t mcp_max_sessions;     /* /mcp sessions at once (LRU beyond) */
        /* Artifacts (issue 15). */
        uint64_t ctl_artifact_max_bytes, ctl_artifact_part_min_bytes, ctl_artifact_part_max_bytes;
        uint64_t ctl_artifact_max_parts, ctl_artifact_org_quota_bytes, ctl_artifact_upload_ttl_s;
        uint64_t ctl_artifact_max_ttl_s;
        char ctl_artifact_s3_endpoint[2048], ctl_artifact_s3_bucket[64], ctl_artifact_s3_prefix[1024];
        /* Egress policies (issue 15): tenants' sandboxes reach the network
         * only through the daemon's filtering proxy. */
        bool ctl_egress_enabled;       /* seed: EGRESS_POLICIES_ENABLED */
        char ctl_egress_mode[16];      /* off | monitor | enforce (seed: EGRESS_PROXY_MODE) */
        char ctl_egress_hosts[4096];   /* "name=addr,…": resolver override (tests) */
        uint64_t ctl_egress_proxy_port, ctl_egress_max_conns, ctl_egress_connect_timeout_ms,
                ctl_egress_idle_timeout_ms, ctl_egress_audit_days;

        /* Cluster mode (issue 16): on when cluster_node_id is set. */
        char cluster_node_id[128];
        char cluster_advertise_url[256];
        char cluster_secret[256];
        char cluster_replica[4096];    /* "" | dir:/path | s3://bucket/prefix (sandbox/replica.h) */
        uint64_t cluster_heartbeat_ms, cluster_dead_after_ms, cluster_replica_delay_ms;

        uint64_t idle_ttl_ms;
        uint64_t max_contexts;
        uint64_t max_sessions;
        uint64_t max_resident_contexts;
        uint64_t cpu_quota_percent;
        uint64_t max_resident_per_sandbox;
        uint64_t sandbox_memory_bytes; /* 0: max_resident_per_sandbox x memory_bytes */
        uint64_t sandbox_pids;         /* 0: max_resident_per_sandbox x pids */
        uint64_t resident_grace_ms;
        uint64_t replay_ms;
        uint64_t journal_bytes;
        char journal_sync[16];          /* group | none | always */
        uint64_t journal_sync_ms;
        uint64_t workspace_images;      /* pool.workspace_images */
        uint64_t warm_runtime;          /* sandbox.warm_runtime */
        uint64_t max_sandboxes;
        uint64_t max_disk_bytes;

        uint64_t bridge_exec_grace_ms;
        uint64_t bridge_exec_command_bytes;

        /* The bridge's warm pool of prepared sandboxes (WARM_POOL_*). */
        uint64_t warm_pool_target;
        uint64_t warm_pool_refresh_ms;
        uint64_t warm_pool_max_instances;
        uint64_t warm_pool_scale_batch;
};

/* Fills every field with its default. */
void config_defaults(struct config *c);
/* Sets one key from its textual value, checking type and bounds.
 * Returns 0, -ENOENT for an unknown key, -EINVAL/-ERANGE for a bad value,
 * -E2BIG when more distinct pool.<lang> keys are set than the table holds. */
int config_set(struct config *c, const char *key, const char *value);
/* The warm pool target for a language id (pool.<id>, else pool.size).
 * pool.<id> takes any id: validated by the caller (config_pool_at). */
uint64_t config_pool_size(const struct config *c, const char *lang);
/* Parses "key = value" lines ('#' comments). ret_line gets the failing line. */
int config_load_file(struct config *c, const char *path, int *ret_line);
/* Writes the table as markdown rows (used to keep docs/limits.md honest). */
void config_print_table(FILE *f);
/* Parses sizes like "64K", "16M", "1G" or plain numbers. */
int config_parse_u64(const char *s, uint64_t *ret);
