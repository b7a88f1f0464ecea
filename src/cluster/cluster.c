/* Cluster mode (issue 16): routing and placement from the store, the
 * cached node table, and adopting a sandbox (see cluster.h). */
#include "cluster/internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/sandbox.h"
#include "tenant/events.h"

/* ---- the node table ---------------------------------------------------- */

struct node_list {
        struct node_row *rows;
        size_t n, cap;
        int err;
};

static void node_collect(const struct node_row *row, void *userdata)
{
        struct node_list *l = userdata;

        if (l->err)
                return;
        if (l->n == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 8;
                struct node_row *np = reallocarray(l->rows, ncap, sizeof(*np));
                if (!np) {
                        l->err = -ENOMEM;
                        return;
                }
                l->rows = np;
                l->cap = ncap;
        }
        l->rows[l->n++] = *row;
}

int cluster_refresh(struct cluster *c)
{
        struct node_list l = {};
        int r = store_node_each(c->store, node_collect, &l);

        if (r >= 0)
                r = l.err;
        if (r < 0) {
                free(l.rows);
                return r;
        }
        pthread_mutex_lock(&c->lock);
        free(c->nodes);
        c->nodes = l.rows;
        c->n = l.n;
        pthread_mutex_unlock(&c->lock);
        return 0;
}

bool cluster_node_live(const struct cluster *c, const struct node_row *n, uint64_t now)
{
        return strcmp(n->state, "down") != 0 && n->heartbeat_at + c->opt.dead_after_ms >= now;
}

/* Thousandths of a CPU busy, a quarter CPU per live interpreter, a
 * thousandth per 16 MiB of memory in use and a twentieth per sandbox: the
 * interpreters are what a new sandbox competes with first. */
uint64_t cluster_load_score(const struct node_row *n)
{
        return n->cpu_millis + n->contexts * 250 + n->mem_bytes / (16u << 20) + n->sandboxes * 50;
}

/* Copies node id's row from the cache; false when it is not there. */
static bool node_find(struct cluster *c, const char *id, struct node_row *ret)
{
        bool found = false;

        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->n && !found; i++)
                if (strcmp(c->nodes[i].id, id) == 0) {
                        *ret = c->nodes[i];
                        found = true;
                }
        pthread_mutex_unlock(&c->lock);
        return found;
}

int cluster_nodes(struct cluster *c, struct cluster_node_info **ret, size_t *ret_n)
{
        uint64_t now = wall_ms();
        struct cluster_node_info *v;

        pthread_mutex_lock(&c->lock);
        v = calloc(c->n ? c->n : 1, sizeof(*v));
        for (size_t i = 0; v && i < c->n; i++) {
                const struct node_row *n = &c->nodes[i];
                v[i] = (struct cluster_node_info){ .row = *n,
                                                   .live = cluster_node_live(c, n, now),
                                                   .self = strcmp(n->id, c->opt.node_id) == 0,
                                                   .age_ms = now > n->heartbeat_at ? now - n->heartbeat_at : 0 };
        }
        *ret_n = v ? c->n : 0;
        pthread_mutex_unlock(&c->lock);
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

/* ---- placement and routing -------------------------------------------- */

int cluster_place(struct cluster *c, char url[static CLUSTER_URL_MAX])
{
        uint64_t now = wall_ms(), self_score = UINT64_MAX, best_score = UINT64_MAX;
        char best_url[CLUSTER_URL_MAX] = "";

        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->n; i++) {
                const struct node_row *n = &c->nodes[i];
                uint64_t score = cluster_load_score(n);
                if (strcmp(n->id, c->opt.node_id) == 0) {
                        self_score = score;
                        continue;
                }
                if (!cluster_node_live(c, n, now) || score >= best_score)
                        continue;
                best_score = score;
                snprintf(best_url, sizeof(best_url), "%s", n->url);
        }
        pthread_mutex_unlock(&c->lock);
        /* Another node only when clearly less loaded (a tenth and a bit):
         * loads read a heartbeat apart would otherwise bounce creates
         * between nearly equal nodes. */
        if (!best_url[0] || (self_score != UINT64_MAX && best_score + self_score / 10 + 100 >= self_score))
                return CLUSTER_LOCAL;
        snprintf(url, CLUSTER_URL_MAX, "%s", best_url);
        return CLUSTER_REMOTE;
}

/* The live owner's URL: true, or false when node is dead (or unknown even
 * after a fresh read of the table: a node that never beat). */
static bool owner_url(struct cluster *c, const char *node, char url[static CLUSTER_URL_MAX])
{
        struct node_row n;

        if (!node_find(c, node, &n) && (cluster_refresh(c) < 0 || !node_find(c, node, &n)))
                return false;
        if (!cluster_node_live(c, &n, wall_ms()))
                return false;
        snprintf(url, CLUSTER_URL_MAX, "%s", n.url);
        return true;
}

int cluster_route(struct cluster *c, const char *sandbox_id, bool may_create, char url[static CLUSTER_URL_MAX])
{
        char node[STORE_ID_MAX];
        uint64_t epoch;
        int r;

        if (!c || !sandbox_id || !sandbox_id[0])
                return -EINVAL;
        /* A lost claim means another node moved the lease meanwhile: look
         * again (a few times; then the caller retries later). */
        for (int attempt = 0; attempt < 3; attempt++) {
                r = store_sandbox_owner(c->store, sandbox_id, node, &epoch);
                if (r == -ENOENT)
                        return may_create ? cluster_place(c, url) : CLUSTER_LOCAL;
                if (r < 0)
                        return r;
                if (strcmp(node, c->opt.node_id) == 0)
                        return CLUSTER_LOCAL;
                if (node[0] && owner_url(c, node, url))
                        return CLUSTER_REMOTE;
                r = cluster_adopt(c, sandbox_id, node, epoch);
                if (r == 0)
                        return CLUSTER_LOCAL;
                if (r == -ENOENT)
                        return may_create ? cluster_place(c, url) : CLUSTER_LOCAL;
                if (r != -EBUSY)
                        return r;
        }
        return -EAGAIN;
}

/* ---- adopting ---------------------------------------------------------- */

static void emit_rehomed(struct cluster *c, const char *org_id, const char *id, const char *from)
{
        json_t *data = json_pack("{s:s, s:s}", "from", from, "to", c->opt.node_id);

        if (events_emit(c->events, org_id, "sandbox.rehomed", id, data, NULL) < 0)
                log_warn("msg=\"cannot record sandbox.rehomed\" sandbox=%s", id);
}

/* After winning the lease of a sandbox that came from a node: a warm one
 * (nobody's yet) is simply dropped — this node's pool makes its own — and
 * a tenant's gets its workspace back from the replica. */
static int take_over(struct cluster *c, const char *id, const char *from)
{
        _cleanup_(sandbox_row_done) struct sandbox_row row = {};
        struct err err = {};
        int r = store_sandbox_get(c->store, id, &row);

        if (r < 0)
                return r;
        if (strcmp(row.org_id, SBX_POOL_ORG) == 0)
                return store_sandbox_delete(c->store, id);
        r = c->restore ? c->restore(c->mgr, id, &err) : -ENOENT;
        if (r == -ENOENT)
                log_warn("msg=\"re-homed sandbox has no replica; its workspace starts empty\" sandbox=%s", id);
        else if (r < 0)
                log_warn("msg=\"cannot restore a re-homed sandbox's workspace\" sandbox=%s err=\"%s\"", id, err.msg);
        err_done(&err);
        __atomic_add_fetch(&c->rehomes, 1, __ATOMIC_RELAXED);
        log_info("msg=\"sandbox re-homed\" sandbox=%s from=%s to=%s", id, from, c->opt.node_id);
        emit_rehomed(c, row.org_id, id, from);
        return 0;
}

int cluster_adopt(struct cluster *c, const char *id, const char *from, uint64_t epoch)
{
        uint64_t won;
        int r = store_sandbox_claim(c->store, id, c->opt.node_id, epoch, &won);

        if (r < 0)
                return r;
        /* Nobody's before (written before cluster mode): just ours now. */
        return from[0] ? take_over(c, id, from) : 0;
}

/* ---- the handle -------------------------------------------------------- */

static void previous_epoch(const struct node_row *row, void *userdata)
{
        struct cluster *c = userdata;

        if (strcmp(row->id, c->opt.node_id) == 0)
                c->epoch = row->epoch;
}

static int options_check(const struct cluster_options *o, struct err *err)
{
        if (!o->node_id[0] || strnlen(o->node_id, sizeof(o->node_id)) >= sizeof(o->node_id))
                return err_set(err, ERR_INVALID, EINVAL, "cluster.node_id must be set");
        if (!o->secret[0])
                return err_set(err, ERR_INVALID, EINVAL, "cluster mode needs cluster.secret (or SANDBOXD_CLUSTER_SECRET)");
        if (!o->url[0])
                return err_set(err, ERR_INVALID, EINVAL, "cluster mode needs this node's URL");
        if (!o->heartbeat_ms || o->dead_after_ms <= o->heartbeat_ms)
                return err_set(err, ERR_INVALID, EINVAL, "cluster.dead_after_ms must exceed cluster.heartbeat_ms");
        return 0;
}

int cluster_new(const struct cluster_options *o, struct store *s, struct sandbox_mgr *m, struct events *ev,
                struct cluster **ret, struct err *err)
{
        struct cluster *c;
        int r;

        if (!o || !s || !m || !ret)
                return err_set(err, ERR_INVALID, EINVAL, "cluster_new: missing argument");
        if ((r = options_check(o, err)) < 0)
                return r;
        c = calloc(1, sizeof(*c));
        if (!c)
                return err_set(err, ERR_INTERNAL, ENOMEM, "Out of memory");
        *c = (struct cluster){ .opt = *o, .store = s, .mgr = m, .events = ev, .started_at = wall_ms() };
        pthread_mutex_init(&c->lock, NULL);
        /* A new epoch per start: what other nodes see of a restart. */
        r = store_node_each(s, previous_epoch, c);
        c->epoch++;
        /* Budget slots a previous run of this node held died with it. */
        if (r >= 0)
                r = store_slot_free_node(s, o->node_id, NULL);
        if (r >= 0)
                r = cluster_beat(c, "up");
        if (r >= 0)
                r = cluster_refresh(c);
        if (r >= 0)
                r = cluster_heartbeat_start(c);
        if (r < 0) {
                cluster_free(c);
                return err_set(err, ERR_INTERNAL, -r, "Cannot join the cluster: %s", strerror(-r));
        }
        log_info("msg=\"cluster node up\" node=%s epoch=%llu url=\"%s\"", o->node_id, (unsigned long long)c->epoch,
                 o->url);
        *ret = c;
        return 0;
}

void cluster_stop(struct cluster *c)
{
        if (c && c->bg.initialised)
                bg_thread_done(&c->bg);
}

void cluster_free(struct cluster *c)
{
        if (!c)
                return;
        cluster_stop(c);
        (void)cluster_beat(c, "down");
        free(c->nodes);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

const char *cluster_node_id(const struct cluster *c)
{
        return c ? c->opt.node_id : "";
}

const char *cluster_secret(const struct cluster *c)
{
        return c ? c->opt.secret : "";
}

uint64_t cluster_epoch(const struct cluster *c)
{
        return c ? c->epoch : 0;
}

uint64_t cluster_rehomes(const struct cluster *c)
{
        return c ? __atomic_load_n(&c->rehomes, __ATOMIC_RELAXED) : 0;
}

void cluster_set_restore_hook(struct cluster *c, cluster_restore_fn fn)
{
        if (c)
                c->restore = fn;
}
