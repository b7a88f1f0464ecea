/* The store contract for the concurrency slots of cluster mode (issue 16):
 * a take fails at the org's limit, give and free_node release, counts are
 * per org and kind, racing takers never exceed the limit, and a queued
 * request is started by exactly one runner. Public store.h functions only
 * (STORE_URL: both backends). */
#include <pthread.h>

#include "store_fixture.h"

static struct slot_row slot(const char *name, const char *org, const char *node)
{
        struct slot_row r = { .started_at = 1000 };

        snprintf(r.id, sizeof(r.id), "%s", id(name));
        snprintf(r.org_id, sizeof(r.org_id), "%s", id(org));
        snprintf(r.node_id, sizeof(r.node_id), "%s", id(node));
        snprintf(r.kind, sizeof(r.kind), "execute");
        return r;
}

static uint64_t count(struct store *s, const char *org)
{
        uint64_t n = 99;

        ASSERT_OK(store_slot_count(s, id(org), "execute", &n));
        return n;
}

TEST(slots_take_stops_at_the_limit_and_give_frees_one)
{
        struct store *s = open_store();
        struct slot_row a = slot("a", "o", "n1"), b = slot("b", "o", "n2"), c = slot("c", "o", "n1");
        struct slot_row other = slot("x", "other", "n1");

        ASSERT_OK(store_slot_take(s, &a, 2));
        ASSERT_OK(store_slot_take(s, &b, 2));
        ASSERT_ERR(store_slot_take(s, &c, 2), EBUSY);
        ASSERT_OK(store_slot_take(s, &other, 1));   /* another org's budget */
        ASSERT_U64_EQ(count(s, "o"), 2);
        ASSERT_U64_EQ(count(s, "other"), 1);
        ASSERT_ERR(store_slot_take(s, &a, 5), EEXIST);
        ASSERT_OK(store_slot_give(s, id("a")));
        ASSERT_ERR(store_slot_give(s, id("a")), ENOENT);
        ASSERT_OK(store_slot_take(s, &c, 2));
        ASSERT_U64_EQ(count(s, "o"), 2);
        ASSERT_ERR(store_slot_take(s, &a, 0), EBUSY);
        store_close(s);
}

TEST(slots_free_node_releases_only_that_nodes_slots)
{
        struct store *s = open_store();
        struct slot_row a = slot("a", "o", "n1"), b = slot("b", "o", "n2"), c = slot("c", "o", "n1");
        uint64_t n = 99;

        ASSERT_OK(store_slot_take(s, &a, 5));
        ASSERT_OK(store_slot_take(s, &b, 5));
        ASSERT_OK(store_slot_take(s, &c, 5));
        ASSERT_OK(store_slot_free_node(s, id("n1"), &n));
        ASSERT_U64_EQ(n, 2);
        ASSERT_U64_EQ(count(s, "o"), 1);
        ASSERT_OK(store_slot_free_node(s, id("n1"), &n));
        ASSERT_U64_EQ(n, 0);
        ASSERT_OK(store_slot_free_node(s, id("n3"), NULL));
        ASSERT_OK(store_slot_give(s, id("b")));
        ASSERT_U64_EQ(count(s, "o"), 0);
        store_close(s);
}

TEST(slots_check_their_arguments)
{
        struct store *s = open_store();
        struct slot_row a = slot("a", "o", "n1");
        uint64_t n;

        ASSERT_ERR(store_slot_take(s, NULL, 1), EINVAL);
        ASSERT_ERR(store_slot_take(NULL, &a, 1), EINVAL);
        a.org_id[0] = 0;
        ASSERT_ERR(store_slot_take(s, &a, 1), EINVAL);
        ASSERT_ERR(store_slot_give(s, ""), EINVAL);
        ASSERT_ERR(store_slot_free_node(s, NULL, NULL), EINVAL);
        ASSERT_ERR(store_slot_count(s, id("o"), NULL, &n), EINVAL);
        store_close(s);
}

/* Takers on their own connections (separate nodes in real life). */
#define TAKERS 8
#define TAKES 3
#define LIMIT 5
static int g_taken, g_busy;

static void *taker(void *arg)
{
        struct store *s = open_store();

        for (int i = 0; i < TAKES; i++) {
                char name[32];
                snprintf(name, sizeof(name), "t%ld-%d", (long)(intptr_t)arg, i);
                struct slot_row r = slot(name, "race", "n");
                int rc = store_slot_take(s, &r, LIMIT);
                if (rc == 0)
                        __atomic_add_fetch(&g_taken, 1, __ATOMIC_SEQ_CST);
                else if (rc == -EBUSY)
                        __atomic_add_fetch(&g_busy, 1, __ATOMIC_SEQ_CST);
        }
        store_close(s);
        return NULL;
}

TEST(slots_racing_takes_never_exceed_the_limit)
{
        struct store *s = open_store();
        pthread_t th[TAKERS];

        for (long i = 0; i < TAKERS; i++)
                ASSERT_EQ(pthread_create(&th[i], NULL, taker, (void *)(intptr_t)i), 0);
        for (int i = 0; i < TAKERS; i++)
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
        ASSERT_EQ(g_taken, LIMIT);
        ASSERT_EQ(g_busy, TAKERS * TAKES - LIMIT);
        ASSERT_U64_EQ(count(s, "race"), LIMIT);
        store_close(s);
}

static void enqueue(struct store *s, const char *name)
{
        struct queue_row r = { .created_at = 5, .body = (char *)"{}", .caller = (char *)"{}" };

        snprintf(r.id, sizeof(r.id), "%s", id(name));
        snprintf(r.org_id, sizeof(r.org_id), "%s", id("qo"));
        snprintf(r.kind, sizeof(r.kind), "execute");
        snprintf(r.route, sizeof(r.route), "/api/v1/sandbox/x/execute");
        snprintf(r.status, sizeof(r.status), "queued");
        ASSERT_OK(store_org_ensure(s, id("qo"), "Org"));
        ASSERT_OK(store_queue_insert(s, &r));
}

static const char *status_of(struct store *s, const char *name)
{
        static char status[16];
        struct queue_row got = {};

        ASSERT_OK(store_queue_get(s, id("qo"), id(name), &got));
        snprintf(status, sizeof(status), "%s", got.status);
        queue_row_done(&got);
        return status;
}

TEST(queue_start_moves_a_queued_request_once)
{
        struct store *s = open_store();
        struct queue_row got = {};

        enqueue(s, "req");
        ASSERT_OK(store_queue_start(s, id("req"), id("n1"), 77));
        ASSERT_ERR(store_queue_start(s, id("req"), id("n2"), 78), EBUSY);
        ASSERT_ERR(store_queue_start(s, id("none"), "", 78), ENOENT);
        ASSERT_ERR(store_queue_start(s, id("req"), NULL, 78), EINVAL);
        ASSERT_OK(store_queue_get(s, id("qo"), id("req"), &got));
        ASSERT_STREQ(got.status, "processing");
        ASSERT_U64_EQ(got.started_at, 77);
        queue_row_done(&got);
        store_close(s);
}

TEST(queue_fail_node_fails_only_that_nodes_running_requests)
{
        struct store *s = open_store();
        struct queue_row got = {};

        enqueue(s, "on1");
        enqueue(s, "on2");
        enqueue(s, "waits");
        ASSERT_OK(store_queue_start(s, id("on1"), id("n1"), 10));
        ASSERT_OK(store_queue_start(s, id("on2"), id("n2"), 10));
        ASSERT_OK(store_queue_fail_node(s, id("n1"), 503, "{\"e\":1}", 99));
        ASSERT_STREQ(status_of(s, "on2"), "processing");
        ASSERT_STREQ(status_of(s, "waits"), "queued");
        ASSERT_OK(store_queue_get(s, id("qo"), id("on1"), &got));
        ASSERT_STREQ(got.status, "failed");
        ASSERT_EQ(got.response_status, 503);
        ASSERT_STREQ(got.response_body, "{\"e\":1}");
        ASSERT_U64_EQ(got.finished_at, 99);
        queue_row_done(&got);
        store_close(s);
}
