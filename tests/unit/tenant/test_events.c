/* tenant/events.c: emit appends durably and wakes a waiter; cancel wakes
 * it too; a silent wait times out; a new log starts after the newest id
 * stored by an earlier one (a restart). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/time.h"
#include "base/util.h"
#include "store/store.h"
#include "tap.h"
#include "tenant/events.h"

static char dir[PATH_MAX - 64];

static void remove_dir(void)
{
        rm_rf(dir);
}

static struct store *open_store(void)
{
        char url[PATH_MAX];
        struct store *s = NULL;
        struct err err = {};
        if (!dir[0]) {
                snprintf(dir, sizeof(dir), "/tmp/sbx-events-XXXXXX");
                ASSERT_TRUE(mkdtemp(dir) != NULL);
                atexit(remove_dir);
        }
        snprintf(url, sizeof(url), "sqlite:%s/store.db", dir);
        ASSERT_OK(store_open(url, &s, &err));
        return s;
}

struct waiter {
        struct events *ev;
        uint64_t seen;
        bool cancel;
        bool woke;
};

static void *wait_thread(void *arg)
{
        struct waiter *w = arg;
        w->woke = events_wait(w->ev, w->seen, &w->cancel, now_ns() + 10000000000ULL);
        return NULL;
}

struct names {
        char buf[256];
};

static void on_event(const struct event_row *r, void *userdata)
{
        struct names *n = userdata;
        size_t len = strlen(n->buf);
        snprintf(n->buf + len, sizeof(n->buf) - len, "%s%s:%s:%s", len ? "," : "", r->name, r->sandbox_id, r->payload);
}

TEST(events_emit_wakes_a_waiter_and_is_stored)
{
        struct store *s = open_store();
        struct events *ev;
        const struct events_options o = { .keep_per_org = 100 };
        ASSERT_OK(events_new(s, &o, &ev));
        struct waiter w = { .ev = ev, .seen = events_latest(ev) };
        pthread_t t;
        ASSERT_EQ(pthread_create(&t, NULL, wait_thread, &w), 0);
        uint64_t id = 0;
        ASSERT_OK(events_emit(ev, "org_a", "sandbox.created", "sb1", json_pack("{s:i}", "n", 1), &id));
        pthread_join(t, NULL);
        ASSERT_TRUE(w.woke);
        ASSERT_EQ(events_latest(ev), id);
        struct names n = { "" };
        ASSERT_OK(store_event_each(s, "org_a", 0, 10, on_event, &n));
        ASSERT_STREQ(n.buf, "sandbox.created:sb1:{\"n\":1}");
        /* No sandbox and no data: "" and {}. A NULL log is a no-op. */
        ASSERT_OK(events_emit(ev, "org_a", "x.y", NULL, NULL, NULL));
        ASSERT_OK(events_emit(NULL, "org_a", "x.y", NULL, json_object(), NULL));
        n.buf[0] = '\0';
        ASSERT_OK(store_event_each(s, "org_a", id, 10, on_event, &n));
        ASSERT_STREQ(n.buf, "x.y::{}");
        events_free(ev);
        store_close(s);
}

TEST(events_cancel_wakes_and_silence_times_out)
{
        struct store *s = open_store();
        struct events *ev;
        const struct events_options o = { 0 };
        ASSERT_OK(events_new(s, &o, &ev));
        struct waiter w = { .ev = ev, .seen = events_latest(ev) };
        pthread_t t;
        ASSERT_EQ(pthread_create(&t, NULL, wait_thread, &w), 0);
        events_cancel(ev, &w.cancel);
        pthread_join(t, NULL);
        ASSERT_FALSE(w.woke);
        bool never = false;
        ASSERT_FALSE(events_wait(ev, events_latest(ev), &never, now_ns() + 20000000ULL));
        /* Something newer than seen: no wait at all. */
        ASSERT_TRUE(events_wait(ev, events_latest(ev) + 1, &never, now_ns()));
        events_free(ev);
        store_close(s);
}

TEST(events_a_new_log_continues_after_the_stored_ids)
{
        struct store *s = open_store();
        struct events *ev;
        const struct events_options o = { .keep_per_org = 1 };
        uint64_t a = 0, b = 0;
        ASSERT_OK(events_new(s, &o, &ev));
        ASSERT_OK(events_emit(ev, "org_b", "one", NULL, NULL, &a));
        ASSERT_OK(events_emit(ev, "org_b", "two", NULL, NULL, &b));
        events_free(ev);
        ASSERT_OK(events_new(s, &o, &ev));
        ASSERT_EQ(events_latest(ev), b);
        uint64_t c = 0;
        ASSERT_OK(events_emit(ev, "org_b", "three", NULL, NULL, &c));
        ASSERT_GT(c, b);
        ASSERT_GT(b, a);
        events_free(ev);
        store_close(s);
}
