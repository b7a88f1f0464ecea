/* The store contract for the issue 15 logs: events (increasing ids never
 * reused, per-org reads after an id, the retention cap and age trim on
 * insert) and audit (filters, newest-first pages, per-action summary, org
 * scoping, age trim). Public store.h functions only (STORE_URL). */
#include <pthread.h>

#include "store_fixture.h"

static uint64_t emit(struct store *s, const char *org, const char *name, const char *sbx, uint64_t at, uint64_t keep,
                     uint64_t not_before)
{
        struct event_row r = { .created_at = at, .payload = (char *)"{\"k\":1}" };
        uint64_t got = 0;
        snprintf(r.org_id, sizeof(r.org_id), "%s", id(org));
        snprintf(r.name, sizeof(r.name), "%s", name);
        snprintf(r.sandbox_id, sizeof(r.sandbox_id), "%s", sbx);
        ASSERT_OK(store_event_append(s, &r, keep, not_before, &got));
        return got;
}

struct listing {
        char buf[1024];
        uint64_t last;
};

static void on_event(const struct event_row *r, void *userdata)
{
        struct listing *l = userdata;
        size_t n = strlen(l->buf);
        ASSERT_GT(r->id, l->last); /* in id order */
        l->last = r->id;
        snprintf(l->buf + n, sizeof(l->buf) - n, "%s%s/%s@%llu%s", n ? "," : "", r->name, r->sandbox_id,
                 (unsigned long long)r->created_at, r->payload);
}

static const char *events(struct store *s, const char *org, uint64_t after, uint64_t limit)
{
        static struct listing l;
        l = (struct listing){};
        ASSERT_OK(store_event_each(s, id(org), after, limit, on_event, &l));
        return l.buf;
}

TEST(events_ids_increase_and_reads_are_per_org)
{
        struct store *s = open_store();
        uint64_t a1 = emit(s, "eo1", "sandbox.created", "x", 10, 0, 0);
        uint64_t b1 = emit(s, "eo2", "sandbox.created", "y", 11, 0, 0);
        uint64_t a2 = emit(s, "eo1", "sandbox.deleted", "x", 12, 0, 0);
        uint64_t last = 0;

        ASSERT_GT(b1, a1);
        ASSERT_GT(a2, b1);
        ASSERT_OK(store_event_last(s, &last));
        ASSERT_GE(last, a2);
        ASSERT_STREQ(events(s, "eo1", 0, 100), "sandbox.created/x@10{\"k\":1},sandbox.deleted/x@12{\"k\":1}");
        ASSERT_STREQ(events(s, "eo1", a1, 100), "sandbox.deleted/x@12{\"k\":1}");
        ASSERT_STREQ(events(s, "eo1", a2, 100), "");
        ASSERT_STREQ(events(s, "eo1", 0, 1), "sandbox.created/x@10{\"k\":1}");
        ASSERT_STREQ(events(s, "eo2", 0, 100), "sandbox.created/y@11{\"k\":1}");
        store_close(s);
}

TEST(events_retention_cap_and_age_trim)
{
        struct store *s = open_store();
        uint64_t first = emit(s, "eo3", "e.one", "", 100, 2, 0);
        emit(s, "eo4", "other.org", "", 100, 2, 0);
        emit(s, "eo3", "e.two", "", 200, 2, 0);
        uint64_t third = emit(s, "eo3", "e.three", "", 300, 2, 0);
        /* Only the newest two of eo3; eo4's row is not eo3's to trim. */
        ASSERT_STREQ(events(s, "eo3", 0, 100), "e.two/@200{\"k\":1},e.three/@300{\"k\":1}");
        ASSERT_STREQ(events(s, "eo4", 0, 100), "other.org/@100{\"k\":1}");
        /* Trimmed ids are never given again, even for the trimmed org. */
        uint64_t fourth = emit(s, "eo3", "e.four", "", 400, 0, 250);
        ASSERT_GT(fourth, third);
        ASSERT_GT(third, first);
        /* not_before dropped every row older than 250, of any org. */
        ASSERT_STREQ(events(s, "eo3", 0, 100), "e.three/@300{\"k\":1},e.four/@400{\"k\":1}");
        ASSERT_STREQ(events(s, "eo4", 0, 100), "");
        store_close(s);
}

TEST(events_bad_arguments)
{
        struct store *s = open_store();
        struct event_row r = { .payload = (char *)"{}" };
        uint64_t got;
        snprintf(r.org_id, sizeof(r.org_id), "%s", id("eo5"));
        ASSERT_ERR(store_event_append(s, &r, 0, 0, &got), EINVAL); /* no name */
        snprintf(r.name, sizeof(r.name), "x");
        r.payload = NULL;
        ASSERT_ERR(store_event_append(s, &r, 0, 0, &got), EINVAL);
        r.payload = (char *)"{}";
        ASSERT_ERR(store_event_append(s, &r, 0, 0, NULL), EINVAL);
        r.org_id[0] = '\0';
        ASSERT_ERR(store_event_append(s, &r, 0, 0, &got), EINVAL);
        ASSERT_ERR(store_event_each(s, id("eo5"), 0, 10, NULL, NULL), EINVAL);
        ASSERT_ERR(store_event_each(s, "", 0, 10, on_event, NULL), EINVAL);
        ASSERT_ERR(store_event_last(NULL, &got), EINVAL);
        store_close(s);
}

/* ---- audit ---- */

static void audit(struct store *s, const char *org, const char *action, const char *sbx, const char *key, uint64_t at,
                  uint64_t not_before)
{
        struct audit_row r = { .status = 200, .created_at = at };
        snprintf(r.org_id, sizeof(r.org_id), "%s", id(org));
        snprintf(r.action, sizeof(r.action), "%s", action);
        snprintf(r.method, sizeof(r.method), "POST");
        snprintf(r.path, sizeof(r.path), "/api/v1/x");
        snprintf(r.sandbox_id, sizeof(r.sandbox_id), "%s", sbx);
        snprintf(r.key_id, sizeof(r.key_id), "%s", key);
        snprintf(r.ip, sizeof(r.ip), "127.0.0.1");
        ASSERT_OK(store_audit_append(s, &r, not_before));
}

static void on_audit(const struct audit_row *r, void *userdata)
{
        char *buf = userdata;
        size_t n = strlen(buf);
        snprintf(buf + n, 1024 - n, "%s%s/%s/%s@%llu", n ? "," : "", r->action, r->sandbox_id, r->key_id,
                 (unsigned long long)r->created_at);
}

static const char *rows(struct store *s, const char *org, const struct audit_filter *f, uint64_t limit,
                        uint64_t offset, uint64_t *total)
{
        static char buf[1024];
        buf[0] = '\0';
        ASSERT_OK(store_audit_each(s, id(org), f, limit, offset, on_audit, buf, total));
        return buf;
}

static void on_count(const struct audit_count *c, void *userdata)
{
        char *buf = userdata;
        size_t n = strlen(buf);
        snprintf(buf + n, 1024 - n, "%s%s=%llu[%llu,%llu]", n ? "," : "", c->action, (unsigned long long)c->count,
                 (unsigned long long)c->first_at, (unsigned long long)c->last_at);
}

TEST(audit_filters_pages_and_summary)
{
        struct store *s = open_store();
        uint64_t total = 0;
        char buf[1024] = "";
        audit(s, "ao1", "sandbox.create", "s1", "k1", 10, 0);
        audit(s, "ao1", "sandbox.execute", "s1", "k1", 20, 0);
        audit(s, "ao1", "sandbox.execute", "s1", "k2", 30, 0);
        audit(s, "ao1", "secrets.create", "", "k2", 40, 0);
        audit(s, "ao2", "sandbox.execute", "s1", "k9", 50, 0);

        ASSERT_STREQ(rows(s, "ao1", &(struct audit_filter){}, 100, 0, &total),
                     "secrets.create//k2@40,sandbox.execute/s1/k2@30,sandbox.execute/s1/k1@20,sandbox.create/s1/k1@10");
        ASSERT_EQ(total, 4);
        ASSERT_STREQ(rows(s, "ao1", &(struct audit_filter){ .action = "sandbox.execute" }, 100, 0, &total),
                     "sandbox.execute/s1/k2@30,sandbox.execute/s1/k1@20");
        ASSERT_STREQ(rows(s, "ao1", &(struct audit_filter){ .key_id = "k1", .sandbox_id = "s1" }, 100, 0, &total),
                     "sandbox.execute/s1/k1@20,sandbox.create/s1/k1@10");
        ASSERT_STREQ(rows(s, "ao1", &(struct audit_filter){ .from = 20, .to = 40 }, 100, 0, &total),
                     "sandbox.execute/s1/k2@30,sandbox.execute/s1/k1@20");
        ASSERT_EQ(total, 2);
        ASSERT_STREQ(rows(s, "ao1", &(struct audit_filter){}, 1, 1, &total), "sandbox.execute/s1/k2@30");
        ASSERT_EQ(total, 4);
        /* Another org's rows are never read, whatever the filter. */
        ASSERT_STREQ(rows(s, "ao2", &(struct audit_filter){ .key_id = "k1" }, 100, 0, &total), "");
        ASSERT_EQ(total, 0);

        ASSERT_OK(store_audit_summary(s, id("ao1"), "s1", on_count, buf));
        ASSERT_STREQ(buf, "sandbox.create=1[10,10],sandbox.execute=2[20,30]");
        buf[0] = '\0';
        ASSERT_OK(store_audit_summary(s, id("ao2"), "s1", on_count, buf));
        ASSERT_STREQ(buf, "sandbox.execute=1[50,50]");
        store_close(s);
}

TEST(audit_age_trim_and_bad_arguments)
{
        struct store *s = open_store();
        uint64_t total = 0;
        audit(s, "ao3", "a.old", "", "", 10, 0);
        audit(s, "ao3", "a.new", "", "", 1000, 500);
        ASSERT_STREQ(rows(s, "ao3", &(struct audit_filter){}, 100, 0, &total), "a.new//@1000");

        struct audit_row r = { .status = 200 };
        snprintf(r.org_id, sizeof(r.org_id), "%s", id("ao3"));
        snprintf(r.method, sizeof(r.method), "POST");
        ASSERT_ERR(store_audit_append(s, &r, 0), EINVAL); /* no action */
        snprintf(r.action, sizeof(r.action), "x");
        r.status = -1;
        ASSERT_ERR(store_audit_append(s, &r, 0), EINVAL);
        ASSERT_ERR(store_audit_append(NULL, &r, 0), EINVAL);
        ASSERT_ERR(store_audit_each(s, id("ao3"), NULL, 1, 0, on_audit, NULL, &total), EINVAL);
        ASSERT_ERR(store_audit_each(s, "", &(struct audit_filter){}, 1, 0, on_audit, NULL, &total), EINVAL);
        ASSERT_ERR(store_audit_summary(s, id("ao3"), "", on_count, NULL), EINVAL);
        store_close(s);
}

/* ---- concurrent appends: a follower "after id N" misses none ---- */

#define WRITERS 4
#define PER_WRITER 60

static int g_writers_done;

struct tail {
        uint64_t cursor, seen;
};

static void on_tail(const struct event_row *r, void *userdata)
{
        struct tail *t = userdata;
        ASSERT_GT(r->id, t->cursor);
        t->cursor = r->id;
        t->seen++;
}

static void *writer(void *arg)
{
        for (int i = 0; i < PER_WRITER; i++)
                emit(arg, "tail", "sandbox.created", "x", 1, 0, 0);
        __atomic_add_fetch(&g_writers_done, 1, __ATOMIC_SEQ_CST);
        return NULL;
}

/* What an SSE stream does: read everything after the last id it saw, over
 * and over, while several threads (on a pool backend, several connections)
 * append. Were ids visible out of order (a lower id committing after a
 * higher one), the follower would move past the lower one and never see
 * it: the final read after every writer finished would come up short. */
TEST(events_a_follower_misses_none_under_concurrent_appends)
{
        struct store *s = open_store();
        pthread_t th[WRITERS];
        struct tail t = {};
        bool done;

        id("");   /* the namespace, before the threads read it */
        for (int i = 0; i < WRITERS; i++)
                ASSERT_EQ(pthread_create(&th[i], NULL, writer, s), 0);
        do {
                done = __atomic_load_n(&g_writers_done, __ATOMIC_SEQ_CST) == WRITERS;
                ASSERT_OK(store_event_each(s, id("tail"), t.cursor, 1000, on_tail, &t));
        } while (!done);
        for (int i = 0; i < WRITERS; i++)
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
        ASSERT_EQ(t.seen, WRITERS * PER_WRITER);
        store_close(s);
}
