/* The heartbeat thread of a cluster node (issue 16): every heartbeat_ms it
 * fences (drops sandboxes another node took over), writes this node's row
 * with its load, re-reads the node table and re-homes the sandboxes of
 * dead nodes — the least-loaded live node first, the others a heartbeat
 * later each, so usually one node tries and the claim's compare-and-set
 * settles any race — and frees their budget slots. */
#include "cluster/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "base/util.h"
#include "sandbox/sandbox.h"

/* ---- load -------------------------------------------------------------- */

/* The 1-minute load average in thousandths of a CPU (0 when unreadable). */
static uint64_t read_cpu_millis(void)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/loadavg", "re");
        double load = 0;

        if (!f || fscanf(f, "%lf", &load) != 1 || load < 0)
                return 0;
        return (uint64_t)(load * 1000);
}

/* Memory in use on the host: MemTotal - MemAvailable (0 when unreadable). */
static uint64_t read_mem_bytes(void)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/meminfo", "re");
        unsigned long long total = 0, avail = 0, v;
        char line[256], key[64];

        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "%63s %llu", key, &v) == 2) {
                        if (strcmp(key, "MemTotal:") == 0)
                                total = v;
                        else if (strcmp(key, "MemAvailable:") == 0)
                                avail = v;
                }
        return total > avail ? (total - avail) * 1024 : 0;
}

/* A node going down reports no load: the manager may be gone already. */
int cluster_beat(struct cluster *c, const char *state)
{
        bool up = strcmp(state, "up") == 0;
        struct node_row n = { .epoch = c->epoch,
                              .started_at = c->started_at,
                              .heartbeat_at = wall_ms(),
                              .cpu_millis = up ? read_cpu_millis() : 0,
                              .mem_bytes = up ? read_mem_bytes() : 0,
                              .contexts = up ? sbx_resident_count(c->mgr) : 0,
                              .sandboxes = up ? sbx_loaded_count(c->mgr) : 0 };

        snprintf(n.id, sizeof(n.id), "%s", c->opt.node_id);
        snprintf(n.url, sizeof(n.url), "%s", c->opt.url);
        snprintf(n.state, sizeof(n.state), "%s", state);
        return store_node_heartbeat(c->store, &n);
}

/* ---- re-homing --------------------------------------------------------- */

/* This node's place among the live nodes by load (0: the least loaded;
 * ties by id), and the dead nodes other than itself. */
struct scan {
        size_t rank;
        struct node_row *dead;
        size_t ndead;
};

static int scan_nodes(struct cluster *c, uint64_t now, struct scan *ret)
{
        struct node_row self = { .cpu_millis = 0 };
        bool have_self = false;

        *ret = (struct scan){};
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->n; i++)
                if (strcmp(c->nodes[i].id, c->opt.node_id) == 0) {
                        self = c->nodes[i];
                        have_self = true;
                }
        ret->dead = calloc(c->n ? c->n : 1, sizeof(*ret->dead));
        for (size_t i = 0; ret->dead && i < c->n; i++) {
                const struct node_row *n = &c->nodes[i];
                uint64_t a = cluster_load_score(n), b = cluster_load_score(&self);
                if (strcmp(n->id, c->opt.node_id) == 0)
                        continue;
                if (!cluster_node_live(c, n, now))
                        ret->dead[ret->ndead++] = *n;
                else if (have_self && (a < b || (a == b && strcmp(n->id, self.id) < 0)))
                        ret->rank++;
        }
        pthread_mutex_unlock(&c->lock);
        return ret->dead ? 0 : -ENOMEM;
}

struct orphan {
        char id[STORE_ID_MAX];
        uint64_t epoch;
};

struct orphans {
        struct orphan *v;
        size_t n, cap;
};

static void orphan_add(const char *id, uint64_t epoch, void *userdata)
{
        struct orphans *l = userdata;

        if (l->n == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 16;
                struct orphan *np = reallocarray(l->v, ncap, sizeof(*np));
                if (!np)
                        return; /* the next scan picks it up */
                l->v = np;
                l->cap = ncap;
        }
        snprintf(l->v[l->n].id, STORE_ID_MAX, "%s", id);
        l->v[l->n++].epoch = epoch;
}

static void rehome_from(struct cluster *c, const struct node_row *dead)
{
        struct orphans l = {};

        if (store_sandbox_each_on_node(c->store, dead->id, orphan_add, &l) < 0) {
                free(l.v);
                return;
        }
        for (size_t i = 0; i < l.n; i++) {
                int r = cluster_adopt(c, l.v[i].id, dead->id, l.v[i].epoch);
                if (r < 0 && r != -EBUSY && r != -ENOENT)
                        log_warn("msg=\"cannot re-home a sandbox\" sandbox=%s from=%s err=%d", l.v[i].id, dead->id, r);
        }
        free(l.v);
}

/* The budget slots (store_slot_take) of a dead node's executions, which
 * died with it: any live node frees them, at once (idempotent). */
static void free_slots(struct cluster *c, const struct node_row *dead)
{
        uint64_t n = 0;
        int r = store_slot_free_node(c->store, dead->id, &n);

        if (r < 0)
                log_warn("msg=\"cannot free a dead node's budget slots\" node=%s err=%d", dead->id, r);
        else if (n > 0)
                log_info("msg=\"freed a dead node's budget slots\" node=%s slots=%llu", dead->id, (unsigned long long)n);
}

/* A dead node's sandboxes, once its silence passed dead_after_ms plus a
 * heartbeat per better-placed live node (their turn comes first). */
static void rehome(struct cluster *c)
{
        uint64_t now = wall_ms();
        struct scan s;

        if (scan_nodes(c, now, &s) < 0)
                return;
        for (size_t i = 0; i < s.ndead; i++) {
                const struct node_row *d = &s.dead[i];
                uint64_t dead_at = strcmp(d->state, "down") == 0 ? d->heartbeat_at
                                                                 : d->heartbeat_at + c->opt.dead_after_ms;
                if (now >= dead_at)
                        free_slots(c, d);
                if (now >= dead_at + s.rank * c->opt.heartbeat_ms)
                        rehome_from(c, d);
        }
        free(s.dead);
}

/* ---- the loop ---------------------------------------------------------- */

static void tick(struct cluster *c)
{
        uint64_t dropped = 0;
        int r;

        /* Fencing first: what moved away is not counted as ours below. */
        if (sbx_fence(c->mgr, &dropped) < 0)
                log_warn("msg=\"cluster fencing could not read the store\" node=%s", c->opt.node_id);
        if ((r = cluster_beat(c, "up")) < 0)
                log_warn("msg=\"cluster heartbeat failed\" node=%s err=%d", c->opt.node_id, r);
        if (cluster_refresh(c) >= 0)
                rehome(c);
}

static void heartbeat_loop(void *arg)
{
        struct cluster *c = arg;

        bg_thread_lock(&c->bg);
        while (bg_thread_wait(&c->bg, now_ns() + c->opt.heartbeat_ms * 1000000ULL)) {
                bg_thread_unlock(&c->bg);
                tick(c);
                bg_thread_lock(&c->bg);
        }
        bg_thread_unlock(&c->bg);
}

int cluster_heartbeat_start(struct cluster *c)
{
        int r = bg_thread_init(&c->bg, NULL);

        return r < 0 ? r : bg_thread_start(&c->bg, "cluster-beat", 1, heartbeat_loop, c);
}
