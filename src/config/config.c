#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "base/util.h"

enum cfg_type { CFG_U64, CFG_STR, CFG_BOOL };

struct cfg_opt {
        const char *key;
        enum cfg_type type;
        size_t offset;
        size_t size;       /* string capacity */
        uint64_t def, min, max;
        const char *sdef;
        const char *doc;
};

#define U64(k, field, d, lo, hi, doc) \
        { k, CFG_U64, offsetof(struct config, field), 0, d, lo, hi, NULL, doc }
#define STR(k, field, d, doc) \
        { k, CFG_STR, offsetof(struct config, field), sizeof(((struct config *)0)->field), 0, 0, 0, d, doc }
#define BOOL(k, field, d, doc) \
        { k, CFG_BOOL, offsetof(struct config, field), 0, d, 0, 1, NULL, doc }

#define POOL_DEFAULT 2
#define POOL_MAX 64
#define POOL_PREFIX "pool."
#define POOL_DOC "warm pool size for one language, e.g. pool.python (overrides pool.size when set after it)"

static const struct cfg_opt opts[] = {
        STR("listen", listen, "127.0.0.1:8787", "HOST:PORT to listen on"),
        STR("data_dir", data_dir, "./data", "where sandboxes, the store and run files live"),
        STR("store", store, "", "store URL: sqlite:PATH or postgres://USER@HOST/DB (docs/store.md); empty: <data_dir>/sandboxd.db"),
        STR("kernels_dir", kernels_dir, "", "language kernels (default: next to the binary's source tree)"),
        STR("forkserver_dir", forkserver_dir, "", "dir of libsandboxd-forkserver.so (default: the binary's dir)"),
        STR("api_key", api_key, "", "bearer key required on every route but /health; env SANDBOXD_API_KEY"),
        STR("log_level", log_level, "info", "debug | info | warn | error"),
        STR("cgroup", cgroup, "auto", "auto | v1 | v2 | none"),
        /* Host ids of jails (root mode): one per sandbox, a rotating set for
         * stateless runs; checked at start against the accounts of the host. */
        U64("jail.id_base", jail_id_base, 1000000000, 1, 4294967294ULL, "first host uid/gid of the range jails run as (no account may use one; rootless: uids only, within the daemon user's /etc/subuid range, else its start)"),
        U64("jail.id_count", jail_id_count, 65536, 66, 1U << 30, "host ids in that range: 1 for templates, 64 rotating for stateless runs, the rest one per sandbox"),
        /* Test-only: the attack suite switches Landlock off to play a
         * kernel older than 6.12 (issue 10's rootless rows). */
        BOOL("jail.landlock", jail_landlock, 1, "use Landlock scoping when the kernel has it (0: only to test older kernels)"),
        BOOL("jail.spawner", jail_spawner, 1, "clone jails from a small spawner process forked at start-up, not from the daemon (0: only to measure what it saves)"),
        BOOL("insecure", insecure, 0, "allow a non-loopback listen address without an API key"),
        U64("http.threads", http_threads, 4, 1, 64, "HTTP polling threads"),
        U64("http.max_connections", http_max_connections, 4096, 16, 65536, "open connections at once"),
        U64("http.timeout_s", http_timeout_s, 30, 1, 3600, "idle/read timeout per connection"),
        U64("http.header_bytes", http_header_bytes, 32 * KiB, 4 * KiB, 1 * MiB, "per-connection header memory"),
        U64("http.max_streams", http_max_streams, 64, 1, 4096, "open streamed replies and WebSockets at once (each has a thread; 503 beyond)"),
        BOOL("http.inline", http_inline, 1, "run a blocking request on its polling thread when that thread serves no other connection and another thread is free (no worker hand-off)"),
        U64("http.stream_buffer", http_stream_buffer, 64 * KiB, 4 * KiB, 16 * MiB, "bytes buffered per streamed reply before its producer waits"),
        BOOL("pool.zygote", zygote, 1, "fork executions from a warm, jailed template (python, perl)"),
        U64("pool.size", pool_size, POOL_DEFAULT, 0, POOL_MAX, "warm jailed interpreters per language (0 disables); sets every pool.<lang>"),
        U64("pool.refill_per_s", pool_refill_per_s, 50, 0, 100000, "pool members started per second at most (0: no cap)"),
        U64("pool.workspace_images", workspace_images, 4, 0, 64, "ready workspace images formatted ahead (sparse) per default quota (limits.workspace_* and bridge.workspace_*): a new sandbox mounts one instead of running mkfs (0 disables)"),
        U64("pool.grow_idle_s", pool_grow_idle_s, 60, 0, 86400, "a pool a burst drained grows by one member per request it could not serve (up to 64, within pool.memory_budget); it shrinks back to pool.<lang> after this many seconds without a request (0: pools never grow)"),
        U64("pool.memory_budget", pool_memory_budget, 1 * GiB, 0, UINT64_MAX / 2, "memory all warm pool members may hold (0: no cap)"),
        U64("exec.workers", exec_workers, 8, 1, 1024, "executions running at once"),
        U64("exec.queue", exec_queue, 64, 0, 100000, "executions waiting before 503 + Retry-After"),
        U64("exec.drain_timeout_ms", drain_timeout_ms, 30000, 0, 3600000, "SIGTERM waits this long for in-flight work"),
        U64("limits.code_bytes", code_bytes, 64 * KiB, 1, 16 * MiB, "code size (UTF-8 bytes) → 413"),
        U64("limits.request_bytes", request_bytes, 96 * KiB, 1 * KiB, 64 * MiB, "request body → 413"),
        U64("limits.files_request_bytes", files_request_bytes, 4 * MiB, 1 * KiB, 256 * MiB, "/files request body → 413"),
        U64("limits.cpu_ms", cpu_ms, 10000, 10, 3600000, "CPU time per execution (fuel: 1 unit = 1 CPU µs)"),
        U64("limits.wall_ms", wall_ms, 30000, 10, 3600000, "wall clock per execution"),
        U64("limits.memory_bytes", memory_bytes, 256 * MiB, 16 * MiB, 64 * GiB, "memory (cgroup) per execution"),
        U64("limits.pids", pids, 64, 4, 65536, "processes+threads per execution"),
        U64("limits.output_bytes", output_bytes, 32 * KiB, 1 * KiB, 64 * MiB, "stdout+stderr bytes"),
        U64("limits.output_entries", output_entries, 200, 1, 1000000, "stdout+stderr lines"),
        U64("limits.result_bytes", result_bytes, 64 * KiB, 1 * KiB, 64 * MiB, "result size"),
        U64("limits.file_bytes", file_bytes, 1 * MiB, 4 * KiB, 16 * GiB, "largest file a guest may write (RLIMIT_FSIZE)"),
        U64("limits.nofile", nofile, 256, 16, 65536, "open files per process"),
        U64("limits.tmp_bytes", tmp_bytes, 64 * MiB, 1 * MiB, 16 * GiB, "private /tmp size (counts toward memory)"),
        U64("limits.tmp_inodes", tmp_inodes, 4096, 64, 1000000, "private /tmp inodes"),
        U64("limits.workspace_bytes", workspace_bytes, 16 * MiB, 64 * KiB, 64 * GiB, "workspace quota"),
        U64("limits.workspace_inodes", workspace_inodes, 4096, 16, 10000000, "workspace entries"),
        /* Bounds a recursive delete's memory and re-walks (row 14 of issue 10). */
        U64("limits.files_max_depth", files_max_depth, 4096, 1, 1 << 20, "nested directory levels a files API recursive delete enters (deeper → 400)"),
        U64("sandbox.idle_ttl_ms", idle_ttl_ms, 86400000, 0, UINT64_MAX / 2, "idle sandbox expiry; 0 disables"),
        U64("sandbox.max_contexts", max_contexts, 8, 1, 64, "code contexts per sandbox"),
        U64("sandbox.max_sessions", max_sessions, 64, 1, 4096, "bridge shell sessions per sandbox (more → 400)"),
        U64("sandbox.max_resident_contexts", max_resident_contexts, 32, 1, 100000, "live context interpreters before LRU eviction"),
        /* Issue 10 "fair resources": every jail's cgroup is throttled at all
         * times; caps per sandbox and in total; replay bounded. */
        U64("sandbox.cpu_quota_percent", cpu_quota_percent, 100, 0, 6400, "CPU quota of every stateless jail and of every sandbox (all its contexts together, between requests included), % of one CPU; 0: none"),
        U64("sandbox.max_resident_per_sandbox", max_resident_per_sandbox, 4, 1, 64, "live context interpreters one sandbox may hold (it evicts its own beyond)"),
        /* One parent cgroup per sandbox holds the CPU quota above and these
         * for all its interpreters together (each keeps its own limits). */
        U64("sandbox.memory_bytes", sandbox_memory_bytes, 0, 0, UINT64_MAX / 2, "memory (cgroup) of all one sandbox's context interpreters together; 0: max_resident_per_sandbox x limits.memory_bytes"),
        U64("sandbox.pids", sandbox_pids, 0, 0, 1 << 22, "processes+threads of all one sandbox's context interpreters together; 0: max_resident_per_sandbox x limits.pids"),
        U64("sandbox.resident_grace_ms", resident_grace_ms, 600000, 0, UINT64_MAX / 2, "an interpreter idle longer may be evicted for any sandbox (0: only for smaller ones)"),
        U64("sandbox.replay_ms", replay_ms, 10000, 100, 3600000, "total time a context restore may replay its journal before it starts fresh (stale)"),
        U64("sandbox.journal_bytes", journal_bytes, 4 * MiB, 1 * KiB, 1 * GiB, "journal size past which a context restores fresh (stale) and stops journaling"),
        /* Issue 13: every mode survives a kill -9 of the daemon; they
         * differ on a power loss (docs/contexts.md). */
        STR("sandbox.journal_sync", journal_sync, "group", "when a journaled context cell reaches the disk: group (flushed off the reply path within journal_sync_ms), none (when the kernel writes back) or always (fsync before the reply); all three survive kill -9 of the daemon (docs/contexts.md)"),
        U64("sandbox.journal_sync_ms", journal_sync_ms, 100, 0, 60000, "journal_sync=group: the longest a cell waits for its flush (one fdatasync per period at most)"),
        U64("sandbox.warm_runtime", warm_runtime, 2, 0, 64, "sandboxes kept ready for the runtime API's implicit creation (a new id's first call), each with a python kernel started in it: the first call costs what a warm context's does (0 disables; docs/contexts.md)"),
        U64("sandbox.max_sandboxes", max_sandboxes, 1000, 1, 1000000, "sandboxes at once (429 SANDBOX_LIMIT_EXCEEDED beyond)"),
        U64("sandbox.max_disk_bytes", max_disk_bytes, 64 * GiB, 64 * KiB, UINT64_MAX / 2, "workspace quotas of all sandboxes together, reserved in full when each is created (507 INSUFFICIENT_STORAGE beyond)"),
        /* Issue 11: a bridge sandbox stands in for a container, whose
         * clients PUT files of up to 32 MiB and restore whole trees. */
        U64("bridge.workspace_bytes", bridge_workspace_bytes, 256 * MiB, 64 * KiB, 64 * GiB, "workspace quota of a sandbox the bridge API creates"),
        U64("bridge.workspace_inodes", bridge_workspace_inodes, 65536, 16, 10000000, "workspace entries of a sandbox the bridge API creates"),
        U64("bridge.file_bytes", bridge_file_bytes, 256 * MiB, 4 * KiB, 16 * GiB, "largest file in a sandbox the bridge API creates (RLIMIT_FSIZE and file writes)"),
        /* The bridge's /exec (issue 11): a timed-out command gets SIGTERM, then
         * SIGKILL after this grace (the anchor's 5 s); its quoted argv is capped. */
        U64("bridge.exec_grace_ms", bridge_exec_grace_ms, 5000, 0, 600000, "bridge /exec: SIGTERM to SIGKILL grace of a timed-out command"),
        U64("bridge.exec_command_bytes", bridge_exec_command_bytes, 1 * MiB, 1 * KiB, 16 * MiB, "bridge /exec: the quoted command line (argv joined) at most → 400"),
        /* The bridge's warm pool (docs/bridge/pool.md); the anchor's
         * variables override these (main.c). */
        U64("bridge.warm_pool_target", warm_pool_target, 0, 0, 10000, "prepared sandboxes kept warm for POST /v1/sandbox (0 disables); env WARM_POOL_TARGET"),
        U64("bridge.warm_pool_refresh_ms", warm_pool_refresh_ms, 10000, 100, 3600000, "the warm pool re-checks its size this often (it also refills at once after each take); env WARM_POOL_REFRESH_INTERVAL"),
        U64("bridge.warm_pool_max_instances", warm_pool_max_instances, 0, 0, 1000000, "warm + assigned sandboxes the pool fills up to (0: sandbox.max_sandboxes and the disk cap only); env WARM_POOL_MAX_INSTANCES"),
        U64("bridge.warm_pool_scale_batch", warm_pool_scale_batch, 5, 1, 20, "warm sandboxes prepared before the caps are checked again; env WARM_POOL_SCALE_BATCH_SIZE (clamped to 1-20)"),
        /* Issue 12: the controller API's sessions and login rate limit. */
        U64("controller.session_ttl_s", ctl_session_ttl_s, 86400, 1, 30 * 86400, "lifetime of a controller login session (JWT exp and the stateset_session cookie)"),
        BOOL("controller.cookie_secure", ctl_cookie_secure, 0, "mark the session and CSRF cookies Secure (set behind HTTPS)"),
        U64("controller.login_account_failures", ctl_login_account_failures, 5, 1, 1000, "failed logins per account per window before 429"),
        U64("controller.login_addr_failures", ctl_login_addr_failures, 20, 1, 100000, "failed logins per client address per window before 429"),
        U64("controller.login_window_s", ctl_login_window_s, 900, 1, 86400, "the failed-login window (fixed, starts at the first failure)"),
        STR("controller.internal_token", ctl_internal_token, "", "token of GET /api/v1/metrics (X-Internal-Token or Bearer); env INTERNAL_API_TOKEN; empty: loopback clients only"),
        BOOL("controller.repl_enabled", ctl_repl_enabled, 1, "the controller's REPL session routes (off: 404); env REPL_ENABLED"),
        BOOL("controller.idempotency_enabled", ctl_idempotency_enabled, 1, "honour Idempotency-Key on controller POSTs (off: the header is ignored); env IDEMPOTENCY_ENABLED"),
        /* Issue 15: per-org concurrency budgets and queue mode. */
        U64("controller.budget_sandboxes", ctl_budget_sandboxes, 0, 0, 1000000, "sandboxes an org may hold at once (0: its plan's: hobby 3, pro 10, team 25, enterprise 100); env ORG_BUDGET__MAX_CONCURRENT_SANDBOXES"),
        U64("controller.budget_executes", ctl_budget_executes, 0, 0, 1000000, "executions an org may run at once (0: its plan's: hobby 5, pro 20, team 50, enterprise 200); env ORG_BUDGET__MAX_CONCURRENT_EXECUTES"),
        BOOL("controller.queue_mode", ctl_queue_mode, 0, "over budget: queue the request (202) instead of 429 CONCURRENT_LIMIT_EXCEEDED; env QUEUE_MODE_ENABLED"),
        U64("controller.queue_max_depth", ctl_queue_max_depth, 100, 1, 1000000, "queued requests per org before 429 QUEUE_DEPTH_EXCEEDED; env QUEUE_MAX_DEPTH"),
        U64("controller.queue_ttl_s", ctl_queue_ttl_s, 3600, 1, 7 * 86400, "a queued request not started within this many seconds expires"),
        /* Issue 15: templates shipped as data files, checkpoints in the data dir. */
        STR("controller.templates_dir", ctl_templates_dir, "", "sandbox templates (<id>/template.json + files/; default: templates/ of the binary's source tree)"),
        U64("controller.checkpoints_max", ctl_checkpoints_max, 100, 1, 1000000, "checkpoints one org may keep (413 CHECKPOINT_QUOTA_EXCEEDED beyond)"),
        U64("controller.checkpoint_bytes", ctl_checkpoint_bytes, 1 * GiB, 64 * KiB, UINT64_MAX / 2, "bytes of checkpoint archives one org may keep (413 CHECKPOINT_QUOTA_EXCEEDED beyond)"),
        /* Issue 15: the event log behind GET /api/v1/events/stream, and the audit log. */
        U64("controller.events_retention", ctl_events_retention, 10000, 0, 10000000, "events kept per org for replay (the oldest beyond are dropped on insert; 0: no cap)"),
        U64("controller.events_max_age_s", ctl_events_max_age_s, 7 * 86400, 0, 365 * 86400, "events older than this are dropped on insert (0: no age cap)"),
        U64("controller.events_heartbeat_ms", ctl_events_heartbeat_ms, 20000, 50, 600000, "GET /api/v1/events/stream: a ':heartbeat' comment after this long without an event"),
        BOOL("controller.audit_enabled", ctl_audit_enabled, 1, "record every authenticated controller write in the audit log (off: nothing recorded, /audit answers empty); env AUDIT_LOGS_ENABLED"),
        U64("controller.audit_retention_days", ctl_audit_retention_days, 90, 0, 3650, "audit rows older than this are dropped on insert (0: kept forever)"),
        BOOL("controller.snapshots_enabled", ctl_snapshots_enabled, 1, "the internal snapshot profiles (/api/v1/internal/snapshots; off: enabled false, changes 503)"),
        U64("controller.snapshot_max_warm", ctl_snapshot_max_warm, 4, 1, 64, "warm sandboxes one snapshot profile may hold (POST /internal/snapshots/warm count above: 400)"),
        BOOL("controller.github_enabled", ctl_github_enabled, 1, "the GitHub integration's routes (off: 404); env GITHUB_INTEGRATION_ENABLED"),
        STR("controller.github_webhook_secret", ctl_github_webhook_secret, "", "secret of X-Hub-Signature-256 on POST /api/v1/github/webhook (empty: deliveries answer 503); env GITHUB_WEBHOOK_SECRET"),
        STR("controller.github_api_url", ctl_github_api_url, "https://api.github.com", "base URL of GitHub's REST API (PR comments, installation tokens); env GITHUB_API_URL"),
        STR("controller.github_app_id", ctl_github_app_id, "", "the GitHub App's id (the iss of its JWT; empty: no PR comments); env GITHUB_APP_ID"),
        STR("controller.github_private_key", ctl_github_private_key, "", "PEM file of the GitHub App's RSA private key; env GITHUB_APP_PRIVATE_KEY_PATH"),
        STR("controller.github_dashboard_url", ctl_github_dashboard_url, "", "base URL linked from PR comments (<url>/sandboxes/<id>; empty: no link); env GITHUB_DASHBOARD_URL"),
        U64("controller.github_events_keep", ctl_github_events_keep, 10000, 1, 10000000, "webhook deliveries kept (all orgs; the oldest go first)"),
        U64("controller.github_api_timeout_ms", ctl_github_api_timeout_ms, 10000, 100, 120000, "timeout of each call to GitHub's API"),
        STR("controller.oidc_issuer", ctl_oidc_issuer, "", "single sign-on: the OpenID Connect provider's issuer URL (https, or http on a loopback host); discovery at <issuer>/.well-known/openid-configuration; env OIDC_ISSUER"),
        STR("controller.oidc_client_id", ctl_oidc_client_id, "", "single sign-on: this service's client id at the provider; env WORKOS_CLIENT_ID"),
        STR("controller.oidc_client_secret", ctl_oidc_client_secret, "", "single sign-on: the client secret (token endpoint auth; HS256 ID tokens); env WORKOS_API_KEY"),
        STR("controller.oidc_redirect_uri", ctl_oidc_redirect_uri, "", "single sign-on: the callback URL registered at the provider (…/api/v1/auth/workos/callback); env WORKOS_REDIRECT_URI"),
        STR("controller.oidc_org_claim", ctl_oidc_org_claim, "org_id", "single sign-on: the ID token claim that names the user's organization at the provider (matched against /auth/workos/link)"),
        /* Issue 15: webhooks, delivered by a dispatcher thread. */
        BOOL("controller.webhooks_allow_private", ctl_webhooks_allow_private, 0, "webhook URLs may point at loopback, private and link-local addresses (refused by default: server-side request forgery)"),
        U64("controller.webhooks_max_per_org", ctl_webhooks_max_per_org, 20, 1, 10000, "webhooks one org may have (400 beyond)"),
        U64("controller.webhooks_max_attempts", ctl_webhooks_max_attempts, 8, 1, 100, "attempts of one webhook delivery before it is marked failed"),
        U64("controller.webhooks_retry_base_ms", ctl_webhooks_retry_base_ms, 30000, 1, 86400000, "first retry of a failed webhook delivery after about this long, doubling each time (with jitter)"),
        U64("controller.webhooks_retry_max_ms", ctl_webhooks_retry_max_ms, 3600000, 1, 86400000, "the longest wait between two attempts of a webhook delivery"),
        U64("controller.webhooks_connect_timeout_ms", ctl_webhooks_connect_timeout_ms, 5000, 100, 60000, "a webhook delivery's TCP+TLS connect timeout"),
        U64("controller.webhooks_timeout_ms", ctl_webhooks_timeout_ms, 10000, 100, 120000, "a webhook delivery's whole-request timeout"),
        U64("controller.webhooks_disable_after_s", ctl_webhooks_disable_after_s, 3 * 86400, 0, 365 * 86400, "a webhook whose every delivery failed for this long is disabled (0: never)"),
        U64("controller.webhooks_keep_deliveries", ctl_webhooks_keep_deliveries, 1000, 0, 1000000, "finished deliveries kept per webhook in its delivery log (0: all)"),
        /* Issue 17: the daemon's own MCP endpoint (/mcp) keeps one MCP
         * session per client; each holds little, but clients rarely end them. */
        U64("mcp.session_idle_s", mcp_session_idle_s, 3600, 1, 30 * 86400, "an MCP session of /mcp unused this long ends (its client re-initializes)"),
        U64("mcp.max_sessions", mcp_max_sessions, 256, 1, 100000, "MCP sessions of /mcp at once (beyond: the least recently used idle one ends)"),
        /* Issue 15: artifacts. */
        U64("controller.artifact_max_bytes", ctl_artifact_max_bytes, 5ull << 30, 1, 1ull << 40, "largest artifact (an upload from a sandbox, or a multipart upload's total) before 413 PAYLOAD_TOO_LARGE"),
        U64("controller.artifact_part_min_bytes", ctl_artifact_part_min_bytes, 5ull << 20, 0, 1ull << 30, "smallest part of a multipart upload but its last (checked at complete: 400)"),
        U64("controller.artifact_part_max_bytes", ctl_artifact_part_max_bytes, 64ull << 20, 1, 1ull << 30, "largest part of a multipart upload (its body, which the HTTP layer holds in memory while it arrives) before 413"),
        U64("controller.artifact_max_parts", ctl_artifact_max_parts, 10000, 1, 100000, "part numbers of a multipart upload run from 1 to this"),
        U64("controller.artifact_org_quota_bytes", ctl_artifact_org_quota_bytes, 10ull << 30, 1, 1ull << 50, "bytes an org's artifacts and unfinished uploads may hold before 429 QUOTA_EXCEEDED"),
        U64("controller.artifact_upload_ttl_s", ctl_artifact_upload_ttl_s, 86400, 1, 30 * 86400, "a multipart upload not completed within this many seconds is dropped with its parts"),
        U64("controller.artifact_max_ttl_s", ctl_artifact_max_ttl_s, 0, 0, 1ull << 32, "longest ttl_seconds an artifact may ask for (0: no limit; no ttl: kept until deleted)"),
        STR("controller.artifact_s3_bucket", ctl_artifact_s3_bucket, "", "keep artifacts in this S3-compatible bucket (mounted with s3fs; root and FUSE) instead of <data_dir>/artifacts; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, else R2_ACCESS_KEY_ID/R2_SECRET_ACCESS_KEY"),
        STR("controller.artifact_s3_endpoint", ctl_artifact_s3_endpoint, "", "the bucket's endpoint URL (http:// or https://)"),
        STR("controller.artifact_s3_prefix", ctl_artifact_s3_prefix, "", "a key prefix in the bucket (\"/…\"); empty: the bucket's root"),
        /* Issue 16: the workspace replica. */
        STR("cluster.replica", cluster_replica, "", "keep a copy of every sandbox's workspace outside this node: \"\" (none), dir:/path (a directory every node sees) or s3://bucket/prefix (mounted with s3fs; endpoint controller.artifact_s3_endpoint, credentials as for artifacts)"),
        U64("cluster.replica_delay_ms", cluster_replica_delay_ms, 2000, 0, 3600000, "a written workspace is copied to the replica at most this long after its first write (a burst of writes makes one copy)"),
        /* Issue 15: egress policies. */
        BOOL("controller.egress_enabled", ctl_egress_enabled, 0, "egress policies: the /egress routes, and network through the filtering proxy when egress_mode is not off; env EGRESS_POLICIES_ENABLED"),
        STR("controller.egress_mode", ctl_egress_mode, "off", "off (sandboxes have no network at all), monitor (allowed, violations logged) or enforce (violations blocked: EGRESS_DENIED); env EGRESS_PROXY_MODE"),
        STR("controller.egress_hosts", ctl_egress_hosts, "", "name=addr,... resolved to these addresses instead of by the host's resolver (a test/override hook; the address checks still apply)"),
        U64("controller.egress_proxy_port", ctl_egress_proxy_port, 3128, 1, 65535, "port of the HTTP proxy on each sandbox's loopback (HTTP_PROXY); not 53"),
        U64("controller.egress_max_conns", ctl_egress_max_conns, 64, 1, 4096, "proxied connections at once per sandbox (more are refused)"),
        U64("controller.egress_connect_timeout_ms", ctl_egress_connect_timeout_ms, 5000, 100, 120000, "an upstream connect of the egress proxy"),
        U64("controller.egress_audit_days", ctl_egress_audit_days, 30, 0, 36500, "egress audit records older than this many days are dropped (0: kept forever)"),
        U64("controller.egress_idle_timeout_ms", ctl_egress_idle_timeout_ms, 300000, 1000, 86400000, "a proxied connection with no byte either way this long is closed"),
        /* Issue 16: cluster mode (docs/cluster.md) — on when node_id is set. */
        STR("cluster.node_id", cluster_node_id, "", "this daemon's id in a cluster sharing one PostgreSQL store (\"\": cluster mode off)"),
        STR("cluster.advertise_url", cluster_advertise_url, "", "the base URL other nodes forward this node's requests to (\"\": http://<listen>)"),
        STR("cluster.secret", cluster_secret, "", "shared secret signing requests between nodes (required with node_id); env SANDBOXD_CLUSTER_SECRET wins"),
        U64("cluster.heartbeat_ms", cluster_heartbeat_ms, 1000, 50, 60000, "how often a node writes its heartbeat (and fences, and looks for dead nodes' sandboxes)"),
        U64("cluster.dead_after_ms", cluster_dead_after_ms, 5000, 200, 3600000, "a node whose last heartbeat is older than this is dead: its sandboxes are re-homed"),
};

static void *field(struct config *c, const struct cfg_opt *o)
{
        return (char *)c + o->offset;
}

static int set_string(char *dst, size_t cap, const char *v)
{
        size_t n = strlen(v);
        if (n >= cap)
                return -ERANGE;
        memcpy(dst, v, n + 1);
        return 0;
}

void config_defaults(struct config *c)
{
        memset(c, 0, sizeof(*c));
        for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
                const struct cfg_opt *o = &opts[i];
                if (o->type == CFG_U64)
                        *(uint64_t *)field(c, o) = o->def;
                else if (o->type == CFG_BOOL)
                        *(bool *)field(c, o) = o->def != 0;
                else
                        set_string(field(c, o), o->size, o->sdef);
        }
}

int config_parse_u64(const char *s, uint64_t *ret)
{
        if (!s || !isdigit((unsigned char)*s))
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno)
                return -ERANGE;
        uint64_t mul = 1;
        switch (toupper((unsigned char)*end)) {
        case 'K': mul = KiB; end++; break;
        case 'M': mul = MiB; end++; break;
        case 'G': mul = GiB; end++; break;
        default: break;
        }
        /* "iB" only after a multiplier ("64KiB"); a bare "B" anywhere. A
         * stray "i" ("16i", "16Ki") is a typo, not a unit. */
        if (mul > 1 && end[0] == 'i' && end[1] == 'B')
                end += 2;
        else if (*end == 'B')
                end++;
        if (*end != '\0')
                return -EINVAL;
        if (v > UINT64_MAX / mul)
                return -ERANGE;
        *ret = v * mul;
        return 0;
}

static int parse_bool(const char *v, bool *ret)
{
        if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
                *ret = true;
        else if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

/* "pool.<lang>": a language id is lower-case letters, digits, '_' or '-'. */
static const char *pool_lang_of(const char *key)
{
        if (strncmp(key, POOL_PREFIX, strlen(POOL_PREFIX)) != 0)
                return NULL;
        const char *lang = key + strlen(POOL_PREFIX);
        size_t n = strlen(lang);
        if (n == 0 || n >= CONFIG_LANG_MAX || strspn(lang, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n)
                return NULL;
        return lang;
}

static struct config_pool *pool_entry(struct config *c, const char *lang)
{
        for (size_t i = 0; i < c->npools; i++)
                if (strcmp(c->pools[i].lang, lang) == 0)
                        return &c->pools[i];
        return NULL;
}

static int set_pool(struct config *c, const char *lang, const char *value)
{
        uint64_t v;
        int r = config_parse_u64(value, &v);
        if (r < 0)
                return r;
        if (v > POOL_MAX)
                return -ERANGE;
        struct config_pool *p = pool_entry(c, lang);
        if (!p) {
                if (c->npools >= CONFIG_POOLS_MAX)
                        return -E2BIG;
                p = &c->pools[c->npools++];
                snprintf(p->lang, sizeof(p->lang), "%s", lang);
        }
        p->size = v;
        return 0;
}

/* String options that take one word of a few: refused at start, not
 * misread later. */
static const struct {
        const char *key, *words;   /* "a|b|c" */
} choices[] = {
        { "controller.egress_mode", "off|monitor|enforce" },
        { "sandbox.journal_sync", "group|none|always" },
};

static bool is_choice(const char *key, const char *value)
{
        for (size_t i = 0; i < ARRAY_SIZE(choices); i++) {
                if (strcmp(choices[i].key, key) != 0)
                        continue;
                size_t n = strlen(value);
                for (const char *w = choices[i].words; n && *w; w += strcspn(w, "|"), w += *w == '|')
                        if (strncmp(w, value, n) == 0 && (w[n] == '|' || w[n] == '\0'))
                                return true;
                return false;
        }
        return true;
}

static int set_option(struct config *c, const struct cfg_opt *o, const char *value)
{
        if (o->type == CFG_STR && !is_choice(o->key, value))
                return -EINVAL;
        if (o->type == CFG_STR)
                return set_string(field(c, o), o->size, value);
        if (o->type == CFG_BOOL)
                return parse_bool(value, field(c, o));
        uint64_t v;
        int r = config_parse_u64(value, &v);
        if (r < 0)
                return r;
        if (v < o->min || v > o->max)
                return -ERANGE;
        *(uint64_t *)field(c, o) = v;
        if (strcmp(o->key, "pool.size") == 0) /* the shorthand: later pool.<lang> keys still win */
                c->npools = 0;
        return 0;
}

int config_set(struct config *c, const char *key, const char *value)
{
        for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
                if (strcmp(opts[i].key, key) == 0)
                        return set_option(c, &opts[i], value);
        const char *lang = pool_lang_of(key);
        return lang ? set_pool(c, lang, value) : -ENOENT;
}

uint64_t config_pool_size(const struct config *c, const char *lang)
{
        for (size_t i = 0; i < c->npools; i++)
                if (strcmp(c->pools[i].lang, lang) == 0)
                        return c->pools[i].size;
        return c->pool_size;
}

int config_load_file(struct config *c, const char *path, int *ret_line)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char line[8192];
        int lineno = 0, r = 0;
        while (fgets(line, sizeof(line), f)) {
                lineno++;
                char *hash = strchr(line, '#');
                if (hash)
                        *hash = '\0';
                char *s = text_trim(line);
                if (*s == '\0')
                        continue;
                char *eq = strchr(s, '=');
                if (!eq) {
                        r = -EINVAL;
                        break;
                }
                *eq = '\0';
                if ((r = config_set(c, text_trim(s), text_trim(eq + 1))) < 0)
                        break;
        }
        fclose(f);
        if (r < 0 && ret_line)
                *ret_line = lineno;
        return r;
}

void config_print_table(FILE *f)
{
        fprintf(f, "| key | default | bounds | meaning |\n| --- | --- | --- | --- |\n");
        for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
                const struct cfg_opt *o = &opts[i];
                if (o->type == CFG_U64)
                        fprintf(f, "| `%s` | %llu | %llu … %llu | %s |\n", o->key, (unsigned long long)o->def,
                                (unsigned long long)o->min, (unsigned long long)o->max, o->doc);
                else if (o->type == CFG_BOOL)
                        fprintf(f, "| `%s` | %s | bool | %s |\n", o->key, o->def ? "true" : "false", o->doc);
                else
                        fprintf(f, "| `%s` | `%s` | string | %s |\n", o->key, o->sdef, o->doc);
                if (strcmp(o->key, "pool.size") == 0)
                        fprintf(f, "| `pool.<lang>` | pool.size | 0 … %d | %s |\n", POOL_MAX, POOL_DOC);
        }
}
