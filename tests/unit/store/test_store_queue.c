/* The store contract for queue mode (issue 15): per-org insertion order,
 * heads, positions, the org scoping of reads, paging, stats and the
 * housekeeping settle. Public store.h functions only (STORE_URL). */
#include "store_fixture.h"

static void enqueue(struct store *s, const char *org, const char *name, uint64_t created)
{
        struct queue_row r = { .created_at = created, .body = (char *)"{\"code\":\"1\"}", .caller = (char *)"{}" };
        snprintf(r.id, sizeof(r.id), "%s", id(name));
        snprintf(r.org_id, sizeof(r.org_id), "%s", id(org));
        snprintf(r.kind, sizeof(r.kind), "execute");
        snprintf(r.route, sizeof(r.route), "/api/v1/sandboxes/x/execute");
        snprintf(r.status, sizeof(r.status), "queued");
        ASSERT_OK(store_org_ensure(s, id(org), "Org"));
        ASSERT_OK(store_queue_insert(s, &r));
}

/* Moves a request on: status, times, answer (NULL body kept NULL). */
static void advance(struct store *s, const char *org, const char *name, const char *status, uint64_t started,
                    uint64_t finished, uint32_t code, const char *body)
{
        struct queue_row r = {};
        ASSERT_OK(store_queue_get(s, id(org), id(name), &r));
        snprintf(r.status, sizeof(r.status), "%s", status);
        r.started_at = started;
        r.finished_at = finished;
        r.response_status = code;
        free(r.response_body);
        r.response_body = body ? strdup(body) : NULL;
        ASSERT_OK(store_queue_update(s, &r));
        queue_row_done(&r);
}

static void on_row(const struct queue_row *row, void *userdata)
{
        const char *name = unid(row->id);
        if (name)
                seen_add(userdata, name);
}

static const char *heads(struct store *s)
{
        static struct seen v;
        v = (struct seen){};
        ASSERT_OK(store_queue_heads(s, on_row, &v));
        return v.buf;
}

TEST(queue_keeps_insertion_order_per_org)
{
        struct store *s = open_store();
        struct queue_row got = {};
        struct seen page = {};
        uint64_t ahead = 9, depth = 9, total = 0;

        enqueue(s, "qa", "q1", 300);   /* created_at does not order the queue: insertion does */
        enqueue(s, "qa", "q2", 200);
        enqueue(s, "qb", "q4", 50);
        enqueue(s, "qa", "q3", 100);
        ASSERT_OK(store_queue_position(s, id("qa"), id("q2"), &ahead, &depth));
        ASSERT_EQ(ahead, 1);
        ASSERT_EQ(depth, 3);
        ASSERT_STREQ(heads(s), "q1,q4");

        advance(s, "qa", "q1", "processing", 400, 0, 0, NULL);
        ASSERT_STREQ(heads(s), "q2,q4");   /* by insertion across orgs too */
        ASSERT_OK(store_queue_position(s, id("qa"), id("q3"), &ahead, &depth));
        ASSERT_EQ(ahead, 1);
        ASSERT_EQ(depth, 2);

        ASSERT_OK(store_queue_get(s, id("qa"), id("q1"), &got));
        ASSERT_STREQ(got.status, "processing");
        ASSERT_STREQ(got.body, "{\"code\":\"1\"}");
        ASSERT_TRUE(got.response_body == NULL);
        ASSERT_EQ(got.started_at, 400);
        queue_row_done(&got);
        ASSERT_ERR(store_queue_get(s, id("qb"), id("q1"), &got), ENOENT);   /* another org's */

        ASSERT_OK(store_queue_each(s, id("qa"), 10, 0, on_row, &page, &total));
        ASSERT_STREQ(page.buf, "q3,q2,q1");   /* newest first */
        ASSERT_EQ(total, 3);
        page = (struct seen){};
        ASSERT_OK(store_queue_each(s, id("qa"), 1, 1, on_row, &page, &total));
        ASSERT_STREQ(page.buf, "q2");
        store_close(s);
}

TEST(queue_refuses_duplicates_and_missing_rows)
{
        struct store *s = open_store();
        struct queue_row r = { .body = (char *)"{}", .caller = (char *)"{}" };

        enqueue(s, "qa", "q1", 1);
        snprintf(r.id, sizeof(r.id), "%s", id("q1"));
        snprintf(r.org_id, sizeof(r.org_id), "%s", id("qa"));
        snprintf(r.kind, sizeof(r.kind), "sandbox");
        snprintf(r.status, sizeof(r.status), "queued");
        ASSERT_ERR(store_queue_insert(s, &r), EEXIST);
        snprintf(r.id, sizeof(r.id), "%s", id("nope"));
        ASSERT_ERR(store_queue_update(s, &r), ENOENT);
        snprintf(r.org_id, sizeof(r.org_id), "%s", id("no-such-org"));
        ASSERT_ERR(store_queue_insert(s, &r), ENOENT);   /* the org must exist */
        store_close(s);
}

TEST(queue_stats_and_settle)
{
        struct store *s = open_store();
        struct queue_stats st = {};
        struct queue_row got = {};

        enqueue(s, "qs", "done1", 1000);
        enqueue(s, "qs", "done2", 1000);
        enqueue(s, "qs", "running", 1000);
        enqueue(s, "qs", "old", 500);
        enqueue(s, "qs", "fresh", 5000);
        advance(s, "qs", "done1", "completed", 1100, 1200, 200, "{\"ok\":1}");   /* waited 100 */
        advance(s, "qs", "done2", "failed", 1301, 1400, 500, "{}");             /* waited 301 */
        advance(s, "qs", "running", "processing", 1050, 0, 0, NULL);            /* waited 50 */

        ASSERT_OK(store_queue_stats(s, id("qs"), 1000, &st));
        ASSERT_EQ(st.depth, 2);
        ASSERT_EQ(st.processing, 1);
        ASSERT_EQ(st.oldest_created_at, 500);
        ASSERT_EQ(st.completed, 1);
        ASSERT_EQ(st.failed, 1);
        ASSERT_EQ(st.expired, 0);
        ASSERT_EQ(st.started, 3);
        ASSERT_EQ(st.avg_wait_ms, 150);   /* (100 + 301 + 50) / 3, truncated */
        ASSERT_EQ(st.p95_wait_ms, 301);

        /* A restart: what was running failed; what waited too long expired;
         * what finished long ago is forgotten. */
        ASSERT_OK(store_queue_settle(s, true, 503, "{\"error\":\"restart\"}", 6000, 900, 1300));
        ASSERT_OK(store_queue_get(s, id("qs"), id("running"), &got));
        ASSERT_STREQ(got.status, "failed");
        ASSERT_EQ(got.response_status, 503);
        ASSERT_STREQ(got.response_body, "{\"error\":\"restart\"}");
        ASSERT_EQ(got.finished_at, 6000);
        queue_row_done(&got);
        ASSERT_OK(store_queue_get(s, id("qs"), id("old"), &got));
        ASSERT_STREQ(got.status, "expired");
        queue_row_done(&got);
        ASSERT_OK(store_queue_get(s, id("qs"), id("fresh"), &got));
        ASSERT_STREQ(got.status, "queued");
        queue_row_done(&got);
        ASSERT_ERR(store_queue_get(s, id("qs"), id("done1"), &got), ENOENT);   /* finished at 1200 < 1300 */
        ASSERT_OK(store_queue_get(s, id("qs"), id("done2"), &got));             /* finished at 1400 */
        queue_row_done(&got);
        store_close(s);
}
