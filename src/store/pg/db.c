/* The PostgreSQL backend's connection pool, open/close, integrity check and
 * the ops table the store core dispatches to (see pg.h for the choices). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg/pg.h"

struct pgs_store {
        struct store base;   /* first: the core's part */
        pthread_mutex_t mu;
        pthread_cond_t freed;
        PGconn *conns[PGS_POOL_SIZE];   /* NULL: not opened yet */
        bool leased[PGS_POOL_SIZE];
        char *url;
};

/* Notices ("relation already exists, skipping") are not errors; libpq would
 * print them on stderr. */
static void quiet(void *arg, const char *msg)
{
        (void)arg;
        (void)msg;
}

/* Defaults the URL may override: libpq applies keywords in order, and the
 * URL (dbname, expanded) comes after these. Without a connect timeout, an
 * unreachable host would hold a lease, and the thread that asked, for the
 * kernel's TCP timeout (minutes). */
static PGconn *connect_url(const char *url, char *msg, size_t len)
{
        static const char *const keys[] = { "connect_timeout", "application_name", "dbname", NULL };
        const char *const values[] = { "10", "sandboxd", url, NULL };
        PGconn *db = PQconnectdbParams(keys, values, 1);

        if (!db) {
                store_set_msg(msg, len, "out of memory");
                return NULL;
        }
        if (PQstatus(db) != CONNECTION_OK) {
                store_set_msg(msg, len, "%s", PQerrorMessage(db));
                PQfinish(db);
                return NULL;
        }
        PQsetNoticeProcessor(db, quiet, NULL);
        return db;
}

struct pgs_lease pgs_lease(struct store *s)
{
        struct pgs_store *p = (struct pgs_store *)s;
        struct pgs_lease l = { .p = p };
        size_t i;

        pthread_mutex_lock(&p->mu);
        for (;;) {
                for (i = 0; i < PGS_POOL_SIZE && p->leased[i]; i++)
                        ;
                if (i < PGS_POOL_SIZE)
                        break;
                pthread_cond_wait(&p->freed, &p->mu);
        }
        p->leased[i] = true;
        pthread_mutex_unlock(&p->mu);
        l.slot = i;

        /* Connecting happens outside the pool lock: it may take a while. */
        if (!p->conns[i])
                p->conns[i] = connect_url(p->url, NULL, 0);
        else if (PQstatus(p->conns[i]) != CONNECTION_OK)
                PQreset(p->conns[i]);
        l.db = p->conns[i];
        if (l.db && PQstatus(l.db) != CONNECTION_OK)
                l.db = NULL;
        if (!l.db) {
                pthread_mutex_lock(&p->mu);
                p->leased[i] = false;
                pthread_cond_signal(&p->freed);
                pthread_mutex_unlock(&p->mu);
        }
        return l;
}

void pgs_lease_done(struct pgs_lease *l)
{
        struct pgs_store *p = l->p;

        if (!l->db)
                return;
        /* An op that returned mid-transaction (its cleanup rolled back) or a
         * connection the server dropped must not reach the next lease as is. */
        if (PQstatus(l->db) == CONNECTION_OK && PQtransactionStatus(l->db) != PQTRANS_IDLE)
                PQclear(PQexec(l->db, "ROLLBACK"));
        /* By slot, not by looking for db among conns[]: another thread may
         * be (re)connecting its own slot outside the lock. */
        pthread_mutex_lock(&p->mu);
        p->leased[l->slot] = false;
        pthread_cond_signal(&p->freed);
        pthread_mutex_unlock(&p->mu);
        l->db = NULL;
}

static void pgs_close(struct store *s)
{
        struct pgs_store *p = (struct pgs_store *)s;

        for (size_t i = 0; i < PGS_POOL_SIZE; i++)
                if (p->conns[i])
                        PQfinish(p->conns[i]);
        pthread_cond_destroy(&p->freed);
        pthread_mutex_destroy(&p->mu);
        free(p->url);
        free(p);
}

static void pgs_closep(struct pgs_store **p)
{
        if (*p)
                pgs_close(&(*p)->base);
}

static int pgs_open(const char *url, const char *rest, struct store **ret, struct err *err)
{
        _cleanup_(pgs_closep) struct pgs_store *p = NULL;
        char msg[512];
        int r;

        (void)rest;   /* libpq parses the whole postgres:// or postgresql:// URI */
        p = calloc(1, sizeof(*p));
        if (!p)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->freed, NULL);
        p->url = strdup(url);
        if (!p->url)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        /* One connection now: a wrong URL or an unreachable server fails
         * the open (and the daemon's start), not the first request. */
        p->conns[0] = connect_url(url, msg, sizeof(msg));
        if (!p->conns[0])
                return err_set(err, ERR_INTERNAL, EIO, "connect: %s", msg);
        r = pgs_migrate(p->conns[0], err);
        if (r < 0)
                return r;
        *ret = &TAKE_PTR(p)->base;
        return 0;
}

/* PostgreSQL checks its own pages; what can be wrong from here is a
 * server that refuses writes (a standby) or a schema we do not know. */
/* A PostgreSQL commit's durability is the server's (its
 * synchronous_commit): the daemon's setting does not change it, and a
 * killed daemon never loses a commit the server acknowledged. */
static int pgs_lazy_commit(struct store *s, bool on)
{
        (void)s;
        (void)on;
        return 0;
}

static int pgs_sync(struct store *s)
{
        (void)s;
        return 0;
}

static int pgs_integrity_check(struct store *s, char *msg, size_t len)
{
        _cleanup_res_ PGresult *res = NULL;
        PGS_CONN(s, db);
        int r = pgs_query_row(db, "SELECT pg_is_in_recovery()", &res, "");

        if (r < 0) {
                store_set_msg(msg, len, "query: %s", PQerrorMessage(db));
                return -EIO;
        }
        if (pgs_bool(res, 0, 0)) {
                store_set_msg(msg, len, "the server is a read-only standby");
                return -EIO;
        }
        r = pgs_schema_version_on(db);
        if (r < 0 || r > pgs_schema_latest()) {
                store_set_msg(msg, len, "schema version %d unknown to this build", r);
                return -EIO;
        }
        store_set_msg(msg, len, "ok");
        return 0;
}

/* Keep in step with store_ops in backend.h and with store_sqlite_ops. */
const struct store_ops store_pg_ops = {
        .name = "postgres",
        .serialize = false,
        .open = pgs_open,
        .close = pgs_close,
        .integrity_check = pgs_integrity_check,
        .lazy_commit = pgs_lazy_commit,
        .sync = pgs_sync,
        .schema_version = pgs_schema_version,
        .org_ensure = pgs_org_ensure,
        .org_get = pgs_org_get,
        .account_create = pgs_account_create,
        .user_get = pgs_user_get,
        .user_get_by_email = pgs_user_get_by_email,
        .apikey_create = pgs_apikey_create,
        .apikey_get_by_hash = pgs_apikey_get_by_hash,
        .apikey_get = pgs_apikey_get,
        .apikey_list = pgs_apikey_list,
        .apikey_delete = pgs_apikey_delete,
        .apikey_rehash = pgs_apikey_rehash,
        .session_create = pgs_session_create,
        .session_get = pgs_session_get,
        .session_revoke = pgs_session_revoke,
        .idem_get = pgs_idem_get,
        .idem_put = pgs_idem_put,
        .secret_create = pgs_secret_create,
        .secret_update = pgs_secret_update,
        .secret_delete = pgs_secret_delete,
        .secret_list = pgs_secret_list,
        .checkpoint_create = pgs_checkpoint_create,
        .checkpoint_get = pgs_checkpoint_get,
        .checkpoint_delete = pgs_checkpoint_delete,
        .checkpoint_list = pgs_checkpoint_list,
        .checkpoint_usage = pgs_checkpoint_usage,
        .queue_insert = pgs_queue_insert,
        .queue_get = pgs_queue_get,
        .queue_update = pgs_queue_update,
        .queue_start = pgs_queue_start,
        .queue_fail_node = pgs_queue_fail_node,
        .queue_list = pgs_queue_list,
        .queue_heads = pgs_queue_heads,
        .queue_position = pgs_queue_position,
        .queue_stats = pgs_queue_stats,
        .queue_settle = pgs_queue_settle,
        .event_append = pgs_event_append,
        .event_last = pgs_event_last,
        .event_list = pgs_event_list,
        .audit_append = pgs_audit_append,
        .audit_list = pgs_audit_list,
        .audit_summary = pgs_audit_summary,
        .sandbox_get = pgs_sandbox_get,
        .sandbox_put = pgs_sandbox_put,
        .sandbox_touch = pgs_sandbox_touch,
        .sandbox_set_env = pgs_sandbox_set_env,
        .sandbox_delete = pgs_sandbox_delete,
        .sandbox_list_expired = pgs_sandbox_list_expired,
        .sandbox_count = pgs_sandbox_count,
        .sandbox_ids_in_org = pgs_sandbox_ids_in_org,
        .sandbox_list_org = pgs_sandbox_list_org,
        .sandbox_disk_reserved = pgs_sandbox_disk_reserved,
        .sandbox_free_host_id = pgs_sandbox_free_host_id,
        .sandbox_claim = pgs_sandbox_claim,
        .sandbox_owner = pgs_sandbox_owner,
        .sandbox_list_on_node = pgs_sandbox_list_on_node,
        .sandbox_usage_on_node = pgs_sandbox_usage_on_node,
        .node_heartbeat = pgs_node_heartbeat,
        .slot_take = pgs_slot_take,
        .slot_give = pgs_slot_give,
        .slot_free_node = pgs_slot_free_node,
        .slot_count = pgs_slot_count,
        .node_list = pgs_node_list,
        .context_insert = pgs_context_insert,
        .context_update = pgs_context_update,
        .context_get = pgs_context_get,
        .context_delete = pgs_context_delete,
        .context_list = pgs_context_list,
        .context_count = pgs_context_count,
        .cell_append = pgs_cell_append,
        .cell_append_row = pgs_cell_append_row,
        .cell_list = pgs_cell_list,
        .cells_delete = pgs_cells_delete,
        .cell_stats = pgs_cell_stats,
        .gh_install_put = pgs_gh_install_put,
        .gh_install_get = pgs_gh_install_get,
        .gh_install_delete = pgs_gh_install_delete,
        .gh_install_link = pgs_gh_install_link,
        .gh_install_list = pgs_gh_install_list,
        .gh_settings_get = pgs_gh_settings_get,
        .gh_settings_put = pgs_gh_settings_put,
        .gh_event_insert = pgs_gh_event_insert,
        .gh_event_update = pgs_gh_event_update,
        .gh_event_list = pgs_gh_event_list,
        .gh_event_stats = pgs_gh_event_stats,
        .gh_event_sandboxes = pgs_gh_event_sandboxes,
        .egress_policy_create = pgs_egress_policy_create,
        .egress_policy_update = pgs_egress_policy_update,
        .egress_policy_delete = pgs_egress_policy_delete,
        .egress_policy_list = pgs_egress_policy_list,
        .egress_audit_insert = pgs_egress_audit_insert,
        .egress_audit_list = pgs_egress_audit_list,
        .egress_audit_prune = pgs_egress_audit_prune,
        .artifact_put = pgs_artifact_put,
        .artifact_get = pgs_artifact_get,
        .artifact_delete = pgs_artifact_delete,
        .artifact_list = pgs_artifact_list,
        .artifact_list_expired = pgs_artifact_list_expired,
        .artifact_bytes = pgs_artifact_bytes,
        .snapshot_profile_put = pgs_snapshot_profile_put,
        .snapshot_profile_get = pgs_snapshot_profile_get,
        .snapshot_profile_delete = pgs_snapshot_profile_delete,
        .snapshot_profile_list = pgs_snapshot_profile_list,
        .sandbox_ids_in_class = pgs_sandbox_ids_in_class,
        .sso_identity_get = pgs_sso_identity_get,
        .sso_identity_create = pgs_sso_identity_create,
        .sso_user_create = pgs_sso_user_create,
        .sso_link_get = pgs_sso_link_get,
        .sso_link_find = pgs_sso_link_find,
        .sso_link_put = pgs_sso_link_put,
        .sso_link_delete = pgs_sso_link_delete,
        .webhook_create = pgs_webhook_create,
        .webhook_get = pgs_webhook_get,
        .webhook_update = pgs_webhook_update,
        .webhook_set_active = pgs_webhook_set_active,
        .webhook_delete = pgs_webhook_delete,
        .webhook_list = pgs_webhook_list,
        .webhook_health = pgs_webhook_health,
        .webhook_enqueue = pgs_webhook_enqueue,
        .webhook_delivery_get = pgs_webhook_delivery_get,
        .webhook_delivery_update = pgs_webhook_delivery_update,
        .webhook_delivery_list = pgs_webhook_delivery_list,
        .webhook_delivery_heads = pgs_webhook_delivery_heads,
};
