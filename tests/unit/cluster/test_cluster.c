/* Cluster mode's decisions (src/cluster/): where a request goes (the live
 * owner's URL, adopting from a dead owner or from nobody, placement of a
 * create), and the sandbox layer's fencing. A real manager and SQLite store
 * (sandbox_fixture.h); the other nodes are rows written into the store.
 * The heartbeat thread runs once a minute here, so the rows stay as the
 * test wrote them. Needs root (skips otherwise). */
#include <jansson.h>

#include "cluster/internal.h"
#include "sandbox/sandbox_fixture.h"
#include "base/time.h"
#include "tenant/events.h"

static struct cluster *g_c;
static struct events *g_ev;

static void cluster_done(void)
{
        cluster_free(g_c);
        events_free(g_ev);
}

/* Node "a" on a manager that stamps "a" on what it creates. */
static struct cluster *start(void)
{
        struct sandbox_options opt = {
                .idle_ttl_ms = 0, .max_contexts = 3, .max_resident_contexts = 4,
                .workspace_bytes = 16 * MiB, .workspace_inodes = 1024, .file_bytes = 1 * MiB, .limits = LIM,
        };
        struct cluster_options o = { .node_id = "a", .url = "http://a.test", .secret = "s",
                                     .heartbeat_ms = 60000, .dead_after_ms = 120000 };
        const struct events_options evo = { 1000, 0 };
        struct err e = { 0 };

        snprintf(opt.node_id, sizeof(opt.node_id), "a");
        mgr_start(&opt, false);
        ASSERT_OK(events_new(g.store, &evo, &g_ev));
        ASSERT_OK(cluster_new(&o, g.store, g.mgr, g_ev, &g_c, &e));
        atexit(cluster_done);
        return g_c;
}

/* A node row: heartbeat age_ms ago, with cpu thousandths of a CPU busy. */
static void node(const char *id, uint64_t age_ms, uint64_t cpu)
{
        struct node_row n = { .epoch = 1, .heartbeat_at = wall_ms() - age_ms, .cpu_millis = cpu };
        snprintf(n.id, sizeof(n.id), "%s", id);
        snprintf(n.url, sizeof(n.url), "http://%s.test", id);
        snprintf(n.state, sizeof(n.state), "up");
        ASSERT_OK(store_node_heartbeat(g.store, &n));
        ASSERT_OK(cluster_refresh(g_c));
}

static void sandbox_row(const char *id, const char *owner)
{
        struct sandbox_row row = { .created_at = 1, .last_used = 1 };
        snprintf(row.id, sizeof(row.id), "%s", id);
        snprintf(row.org_id, sizeof(row.org_id), "%s", SBX_DEFAULT_ORG);
        snprintf(row.node_id, sizeof(row.node_id), "%s", owner);
        ASSERT_OK(store_org_ensure(g.store, SBX_DEFAULT_ORG, "Default"));
        ASSERT_OK(store_sandbox_put(g.store, &row));
}

static const char *owner_of(const char *id, uint64_t *epoch)
{
        static char node_id[STORE_ID_MAX];
        ASSERT_OK(store_sandbox_owner(g.store, id, node_id, epoch));
        return node_id;
}

static int count_rehomed;
static void on_event(const struct event_row *r, void *userdata)
{
        json_t *p = json_loads(r->payload, 0, NULL);
        if (strcmp(r->name, "sandbox.rehomed") == 0) {
                ASSERT_STREQ(json_string_value(json_object_get(p, "from")), "dead");
                ASSERT_STREQ(json_string_value(json_object_get(p, "to")), "a");
                ASSERT_STREQ(r->sandbox_id, "s1");
                count_rehomed++;
        }
        json_decref(p);
        (void)userdata;
}

TEST(cluster_route_sends_a_live_owners_sandbox_to_its_url)
{
        struct cluster *c = start();
        char url[CLUSTER_URL_MAX] = "";
        uint64_t epoch;

        node("b", 10, 0);
        sandbox_row("s1", "b");
        ASSERT_EQ(cluster_route(c, "s1", false, url), CLUSTER_REMOTE);
        ASSERT_STREQ(url, "http://b.test");
        ASSERT_STREQ(owner_of("s1", &epoch), "b");
        ASSERT_U64_EQ(epoch, 0);
        ASSERT_EQ(cluster_route(c, "s1", true, url), CLUSTER_REMOTE);
}

TEST(cluster_route_adopts_a_dead_owners_sandbox_once)
{
        struct cluster *c = start();
        char url[CLUSTER_URL_MAX] = "";
        uint64_t epoch;

        node("dead", 10 * 60000, 0);
        sandbox_row("s1", "dead");
        ASSERT_EQ(cluster_route(c, "s1", false, url), CLUSTER_LOCAL);
        ASSERT_STREQ(owner_of("s1", &epoch), "a");
        ASSERT_U64_EQ(epoch, 1);
        ASSERT_U64_EQ(cluster_rehomes(c), 1);
        /* Ours now: no second claim. */
        ASSERT_EQ(cluster_route(c, "s1", false, url), CLUSTER_LOCAL);
        ASSERT_STREQ(owner_of("s1", &epoch), "a");
        ASSERT_U64_EQ(epoch, 1);
        ASSERT_U64_EQ(cluster_rehomes(c), 1);
        ASSERT_OK(store_event_each(g.store, SBX_DEFAULT_ORG, 0, 100, on_event, NULL));
        ASSERT_EQ(count_rehomed, 1);
}

TEST(cluster_route_claims_an_unowned_sandbox_without_calling_it_rehomed)
{
        struct cluster *c = start();
        char url[CLUSTER_URL_MAX] = "";
        uint64_t epoch;

        sandbox_row("s1", "");
        ASSERT_EQ(cluster_route(c, "s1", false, url), CLUSTER_LOCAL);
        ASSERT_STREQ(owner_of("s1", &epoch), "a");
        ASSERT_U64_EQ(epoch, 1);
        ASSERT_U64_EQ(cluster_rehomes(c), 0);
}

TEST(cluster_route_of_a_missing_sandbox_is_local_or_placed)
{
        struct cluster *c = start();
        char url[CLUSTER_URL_MAX] = "";

        ASSERT_EQ(cluster_route(c, "nope", false, url), CLUSTER_LOCAL);
        node("a", 0, 8000);          /* this node: busy */
        node("idle", 10, 0);
        node("gone", 10 * 60000, 0); /* idle but dead: never chosen */
        ASSERT_EQ(cluster_route(c, "nope", true, url), CLUSTER_REMOTE);
        ASSERT_STREQ(url, "http://idle.test");
        ASSERT_EQ(cluster_place(c, url), CLUSTER_REMOTE);
        ASSERT_STREQ(url, "http://idle.test");
        /* Nearly as loaded as this node: stays here. */
        node("a", 0, 1000);
        node("idle", 10, 950);
        ASSERT_EQ(cluster_place(c, url), CLUSTER_LOCAL);
}

TEST(cluster_nodes_reports_liveness_as_seen_from_here)
{
        struct cluster *c = start();
        struct cluster_node_info *v = NULL;
        size_t n = 0;

        node("b", 10, 0);
        node("dead", 10 * 60000, 0);
        ASSERT_OK(cluster_nodes(c, &v, &n));
        ASSERT_EQ(n, 3);
        ASSERT_STREQ(v[0].row.id, "a");
        ASSERT_TRUE(v[0].self && v[0].live);
        ASSERT_STREQ(v[1].row.id, "b");
        ASSERT_TRUE(!v[1].self && v[1].live);
        ASSERT_STREQ(v[2].row.id, "dead");
        ASSERT_FALSE(v[2].live);
        ASSERT_TRUE(v[2].age_ms >= 10 * 60000);
        ASSERT_U64_EQ(cluster_epoch(c), 1);
        free(v);
}

TEST(cluster_fencing_drops_a_sandbox_another_node_took)
{
        start();
        struct err e = { 0 };
        bool created = false;
        uint64_t epoch, won, dropped = 9;

        ASSERT_OK(sbx_create(g.mgr, "s1", NULL, &created, &e));
        ASSERT_TRUE(created);
        ASSERT_STREQ(owner_of("s1", &epoch), "a");   /* stamped at creation */
        ASSERT_EQ(sbx_loaded_count(g.mgr), 1);
        ASSERT_OK(sbx_fence(g.mgr, &dropped));
        ASSERT_U64_EQ(dropped, 0);
        ASSERT_OK(store_sandbox_claim(g.store, "s1", "b", epoch, &won));
        ASSERT_OK(sbx_fence(g.mgr, &dropped));
        ASSERT_U64_EQ(dropped, 1);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 0);
        /* The row is b's and stays. */
        ASSERT_STREQ(owner_of("s1", &epoch), "b");
}
