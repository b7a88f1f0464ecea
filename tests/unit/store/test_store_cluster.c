/* The store contract for cluster mode (issue 16): node heartbeats (upsert,
 * listing), sandbox ownership kept by put/get, and the lease claim — a
 * compare-and-set of which exactly one of several racing claims wins.
 * Public store.h functions only (STORE_URL: both backends). */
#include <pthread.h>

#include "store_fixture.h"

static struct node_row node(const char *name, uint64_t beat, uint64_t cpu)
{
        struct node_row n = { .epoch = 1, .started_at = 100, .heartbeat_at = beat, .cpu_millis = cpu,
                              .mem_bytes = 1 << 20, .contexts = 2, .sandboxes = 3 };
        snprintf(n.id, sizeof(n.id), "%s", id(name));
        snprintf(n.url, sizeof(n.url), "http://127.0.0.1:%llu", (unsigned long long)(8000 + cpu));
        snprintf(n.state, sizeof(n.state), "up");
        return n;
}

static void on_node(const struct node_row *n, void *userdata)
{
        char item[512];
        const char *name = unid(n->id);

        if (!name)
                return;
        snprintf(item, sizeof(item), "%s:%s:%llu:%llu:%llu:%llu:%llu:%llu:%s", name, n->url,
                 (unsigned long long)n->epoch, (unsigned long long)n->heartbeat_at,
                 (unsigned long long)n->cpu_millis, (unsigned long long)n->mem_bytes,
                 (unsigned long long)n->contexts, (unsigned long long)n->sandboxes, n->state);
        seen_add(userdata, item);
}

TEST(cluster_node_heartbeat_inserts_then_updates_and_lists_by_id)
{
        struct store *s = open_store();
        struct seen v = {};
        struct node_row b = node("b", 1000, 1), a = node("a", 2000, 2);

        ASSERT_OK(store_node_heartbeat(s, &b));
        ASSERT_OK(store_node_heartbeat(s, &a));
        a.heartbeat_at = 3000;
        a.epoch = 2;
        a.contexts = 7;
        snprintf(a.state, sizeof(a.state), "draining");
        ASSERT_OK(store_node_heartbeat(s, &a));
        ASSERT_OK(store_node_each(s, on_node, &v));
        ASSERT_STREQ(v.buf, "a:http://127.0.0.1:8002:2:3000:2:1048576:7:3:draining,"
                            "b:http://127.0.0.1:8001:1:1000:1:1048576:2:3:up");
        store_close(s);
}

TEST(cluster_node_heartbeat_checks_its_arguments)
{
        struct store *s = open_store();
        struct node_row n = node("n", 1, 1);

        ASSERT_ERR(store_node_heartbeat(s, NULL), EINVAL);
        ASSERT_ERR(store_node_heartbeat(NULL, &n), EINVAL);
        n.id[0] = 0;
        ASSERT_ERR(store_node_heartbeat(s, &n), EINVAL);
        ASSERT_ERR(store_node_each(s, NULL, NULL), EINVAL);
        store_close(s);
}

TEST(cluster_sandbox_owner_is_stored_by_put_and_kept_by_later_puts)
{
        struct store *s = open_store();
        struct sandbox_row row = { .created_at = 1, .last_used = 1 }, got = {};
        char owner[STORE_ID_MAX];
        uint64_t epoch = 99;

        snprintf(row.id, sizeof(row.id), "%s", id("sb"));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o1"));
        snprintf(row.node_id, sizeof(row.node_id), "%s", id("a"));
        row.lease_epoch = 4;
        ASSERT_OK(store_org_ensure(s, id("o1"), "Org"));
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_OK(store_sandbox_get(s, id("sb"), &got));
        ASSERT_STREQ(got.node_id, id("a"));
        ASSERT_U64_EQ(got.lease_epoch, 4);
        sandbox_row_done(&got);

        /* A stale writer's put (another node, an old epoch) moves nothing. */
        snprintf(row.node_id, sizeof(row.node_id), "%s", id("b"));
        row.lease_epoch = 0;
        row.last_used = 5;
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_OK(store_sandbox_owner(s, id("sb"), owner, &epoch));
        ASSERT_STREQ(owner, id("a"));
        ASSERT_U64_EQ(epoch, 4);
        ASSERT_OK(store_sandbox_get(s, id("sb"), &got));
        ASSERT_U64_EQ(got.last_used, 5);
        sandbox_row_done(&got);
        ASSERT_ERR(store_sandbox_owner(s, id("none"), owner, &epoch), ENOENT);
        store_close(s);
}

TEST(cluster_claim_moves_the_lease_only_from_the_expected_epoch)
{
        struct store *s = open_store();
        char owner[STORE_ID_MAX];
        uint64_t epoch = 0, e;

        put_sandbox(s, "sb", 1, 0);
        ASSERT_OK(store_sandbox_owner(s, id("sb"), owner, &epoch));
        ASSERT_STREQ(owner, "");
        ASSERT_U64_EQ(epoch, 0);
        ASSERT_OK(store_sandbox_claim(s, id("sb"), id("a"), 0, &e));
        ASSERT_U64_EQ(e, 1);
        ASSERT_ERR(store_sandbox_claim(s, id("sb"), id("b"), 0, &e), EBUSY);
        ASSERT_U64_EQ(e, 1);   /* untouched on failure */
        ASSERT_OK(store_sandbox_owner(s, id("sb"), owner, &epoch));
        ASSERT_STREQ(owner, id("a"));
        ASSERT_OK(store_sandbox_claim(s, id("sb"), id("b"), 1, &e));
        ASSERT_U64_EQ(e, 2);
        ASSERT_OK(store_sandbox_owner(s, id("sb"), owner, &epoch));
        ASSERT_STREQ(owner, id("b"));
        ASSERT_U64_EQ(epoch, 2);
        ASSERT_ERR(store_sandbox_claim(s, id("gone"), id("a"), 0, &e), ENOENT);
        ASSERT_ERR(store_sandbox_claim(s, id("sb"), NULL, 0, &e), EINVAL);
        ASSERT_ERR(store_sandbox_claim(s, "", id("a"), 0, &e), EINVAL);
        store_close(s);
}

static void on_owned(const char *full, uint64_t epoch, void *userdata)
{
        char item[128];
        const char *name = unid(full);

        if (!name)
                return;
        snprintf(item, sizeof(item), "%s@%llu", name, (unsigned long long)epoch);
        seen_add(userdata, item);
}

TEST(cluster_each_on_node_lists_a_nodes_sandboxes_by_id)
{
        struct store *s = open_store();
        struct seen a = {}, none = {};
        uint64_t e;

        put_sandbox(s, "s2", 1, 0);
        put_sandbox(s, "s1", 2, 0);
        put_sandbox(s, "s3", 3, 0);
        ASSERT_OK(store_sandbox_claim(s, id("s2"), id("a"), 0, &e));
        ASSERT_OK(store_sandbox_claim(s, id("s1"), id("a"), 0, &e));
        ASSERT_OK(store_sandbox_claim(s, id("s1"), id("a"), 1, &e));
        ASSERT_OK(store_sandbox_claim(s, id("s3"), id("b"), 0, &e));
        ASSERT_OK(store_sandbox_each_on_node(s, id("a"), on_owned, &a));
        ASSERT_STREQ(a.buf, "s1@2,s2@1");
        ASSERT_OK(store_sandbox_each_on_node(s, id("c"), on_owned, &none));
        ASSERT_EQ(none.n, 0);
        store_close(s);
}

/* Racers on their own connections (their own store handles: separate
 * processes in real life) claim one sandbox from the same epoch. */
#define RACERS 8
static int g_won, g_busy;

static void *racer(void *arg)
{
        struct store *s = open_store();
        char node_name[16];
        uint64_t e;
        int r;

        snprintf(node_name, sizeof(node_name), "n%ld", (long)(intptr_t)arg);
        r = store_sandbox_claim(s, id("race"), id(node_name), 0, &e);
        if (r == 0)
                __atomic_add_fetch(&g_won, 1, __ATOMIC_SEQ_CST);
        else if (r == -EBUSY)
                __atomic_add_fetch(&g_busy, 1, __ATOMIC_SEQ_CST);
        store_close(s);
        return NULL;
}

TEST(cluster_racing_claims_from_one_epoch_exactly_one_wins)
{
        struct store *s = open_store();
        pthread_t th[RACERS];
        char owner[STORE_ID_MAX];
        uint64_t epoch;

        put_sandbox(s, "race", 1, 0);
        for (long i = 0; i < RACERS; i++)
                ASSERT_EQ(pthread_create(&th[i], NULL, racer, (void *)(intptr_t)i), 0);
        for (int i = 0; i < RACERS; i++)
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
        ASSERT_EQ(g_won, 1);
        ASSERT_EQ(g_busy, RACERS - 1);
        ASSERT_OK(store_sandbox_owner(s, id("race"), owner, &epoch));
        ASSERT_U64_EQ(epoch, 1);
        ASSERT_TRUE(unid(owner) && unid(owner)[0] == 'n');
        store_close(s);
}

TEST(cluster_usage_on_node_counts_and_sums_only_that_nodes_sandboxes)
{
        struct store *s = open_store();
        struct sandbox_row row = { .created_at = 1, .workspace_bytes = 1000 };
        uint64_t n = 99, bytes = 99;

        ASSERT_OK(store_org_ensure(s, id("o1"), "Org"));
        snprintf(row.org_id, sizeof(row.org_id), "%s", id("o1"));
        snprintf(row.node_id, sizeof(row.node_id), "%s", id("a"));
        snprintf(row.id, sizeof(row.id), "%s", id("s1"));
        ASSERT_OK(store_sandbox_put(s, &row));
        row.workspace_bytes = 0;   /* the default's */
        snprintf(row.id, sizeof(row.id), "%s", id("s2"));
        ASSERT_OK(store_sandbox_put(s, &row));
        snprintf(row.node_id, sizeof(row.node_id), "%s", id("b"));
        snprintf(row.id, sizeof(row.id), "%s", id("s3"));
        ASSERT_OK(store_sandbox_put(s, &row));
        ASSERT_OK(store_sandbox_usage_on_node(s, id("a"), 7, &n, &bytes));
        ASSERT_U64_EQ(n, 2);
        ASSERT_U64_EQ(bytes, 1007);
        ASSERT_OK(store_sandbox_usage_on_node(s, id("c"), 7, &n, &bytes));
        ASSERT_U64_EQ(n, 0);
        ASSERT_U64_EQ(bytes, 0);
        store_close(s);
}
