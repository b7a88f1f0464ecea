/* The store contract for webhooks (issue 15): org-scoped reads, an event
 * queued once per webhook however often it is offered (a restart must not
 * repeat it), a cursor that only rises, the head of each active webhook's
 * queue in order, health switching a webhook off, and the delete that
 * takes the deliveries with it. Public store.h functions only. */
#include "store_fixture.h"

static void hook_put(struct store *s, const char *org, const char *name)
{
        struct webhook_row w = { .url = (char *)"http://example.com/h", .events_json = (char *)"[\"*\"]",
                                 .description = (char *)"", .sealed_secret = (char *)"sealed", .active = true,
                                 .created_at = 1 };
        snprintf(w.id, sizeof(w.id), "%s", id(name));
        snprintf(w.org_id, sizeof(w.org_id), "%s", id(org));
        ASSERT_OK(store_webhook_create(s, &w));
}

static int offer(struct store *s, const char *hook, const char *org, const char *did, uint64_t event_id,
                 const char *origin)
{
        struct webhook_delivery_row d = { .event_id = event_id, .payload = (char *)"{}", .created_at = event_id };
        snprintf(d.id, sizeof(d.id), "%s", id(did));
        snprintf(d.webhook_id, sizeof(d.webhook_id), "%s", id(hook));
        snprintf(d.org_id, sizeof(d.org_id), "%s", id(org));
        snprintf(d.origin, sizeof(d.origin), "%s", origin);
        snprintf(d.event, sizeof(d.event), "sandbox.created");
        snprintf(d.status, sizeof(d.status), "pending");
        return store_webhook_enqueue(s, id(hook), event_id, &d, 0);
}

/* Appends this test's name of the id full to buf (char[256]). */
static void append_name(char *buf, const char *full)
{
        const char *name = unid(full);
        size_t n = strlen(buf);
        if (name)
                snprintf(buf + n, 256 - n, "%s%s", n ? "," : "", name);
}

static void on_row(const struct webhook_delivery_row *r, void *userdata)
{
        append_name(userdata, r->id);
}

static const char *heads(struct store *s)
{
        static char buf[256];
        buf[0] = '\0';
        ASSERT_OK(store_webhook_delivery_heads(s, on_row, buf));
        return buf;
}

static const char *log_of(struct store *s, const char *org, const char *hook, uint64_t *total)
{
        static char buf[256];
        buf[0] = '\0';
        ASSERT_OK(store_webhook_delivery_each(s, id(org), id(hook), 100, 0, on_row, buf, total));
        return buf;
}

TEST(webhook_reads_are_org_scoped)
{
        struct store *s = open_store();
        struct webhook_row w;
        hook_put(s, "wo1", "wh1");
        ASSERT_OK(store_webhook_get(s, id("wo1"), id("wh1"), &w));
        ASSERT_STREQ(w.url, "http://example.com/h");
        ASSERT_TRUE(w.active);
        webhook_row_done(&w);
        ASSERT_ERR(store_webhook_get(s, id("wo2"), id("wh1"), &w), ENOENT);
        ASSERT_ERR(store_webhook_delete(s, id("wo2"), id("wh1")), ENOENT);
        ASSERT_ERR(store_webhook_create(s, NULL), EINVAL);
        store_close(s);
}

TEST(an_event_is_queued_once_and_the_cursor_only_rises)
{
        struct store *s = open_store();
        struct webhook_row w;
        uint64_t total = 0;
        hook_put(s, "wo3", "wh3");
        ASSERT_OK(offer(s, "wh3", "wo3", "d1", 7, "event"));
        ASSERT_OK(offer(s, "wh3", "wo3", "d1again", 7, "event")); /* ignored: the same event */
        ASSERT_OK(offer(s, "wh3", "wo3", "d1re", 7, "redeliver")); /* a redelivery is a new row */
        ASSERT_STREQ(log_of(s, "wo3", "wh3", &total), "d1re,d1");
        ASSERT_U64_EQ(total, 2);
        ASSERT_OK(store_webhook_enqueue(s, id("wh3"), 3, NULL, 0));
        ASSERT_OK(store_webhook_get(s, id("wo3"), id("wh3"), &w));
        ASSERT_U64_EQ(w.cursor, 7);
        webhook_row_done(&w);
        ASSERT_ERR(store_webhook_enqueue(s, id("nohook"), 3, NULL, 0), ENOENT);
        ASSERT_STREQ(log_of(s, "wo4", "wh3", &total), ""); /* another org sees none */
        ASSERT_U64_EQ(total, 0);
        store_close(s);
}

TEST(heads_go_in_order_and_skip_disabled_webhooks)
{
        struct store *s = open_store();
        struct webhook_delivery_row d;
        uint64_t total = 0;
        hook_put(s, "wo5", "wa");
        hook_put(s, "wo5", "wb");
        ASSERT_OK(offer(s, "wa", "wo5", "a1", 1, "event"));
        ASSERT_OK(offer(s, "wa", "wo5", "a2", 2, "event"));
        ASSERT_OK(offer(s, "wb", "wo5", "b1", 3, "event"));
        ASSERT_STREQ(heads(s), "a1,b1");
        ASSERT_OK(store_webhook_delivery_get(s, id("wo5"), id("wa"), id("a1"), &d));
        snprintf(d.status, sizeof(d.status), "succeeded");
        d.attempts = 2;
        ASSERT_OK(store_webhook_delivery_update(s, &d));
        webhook_delivery_row_done(&d);
        ASSERT_STREQ(heads(s), "a2,b1");
        ASSERT_ERR(store_webhook_delivery_get(s, id("wo6"), id("wa"), id("a1"), &d), ENOENT);
        ASSERT_OK(store_webhook_health(s, id("wb"), 5, true, "failing"));
        ASSERT_STREQ(heads(s), "a2");
        /* The API's update never undoes what the dispatcher decided. */
        struct webhook_row w;
        ASSERT_OK(store_webhook_get(s, id("wo5"), id("wb"), &w));
        ASSERT_FALSE(w.active);
        ASSERT_STREQ(w.disabled_reason, "failing");
        w.active = true;
        ASSERT_OK(store_webhook_update(s, &w));
        webhook_row_done(&w);
        ASSERT_STREQ(heads(s), "a2");
        /* Switched on again: the streak and the reason are gone. */
        ASSERT_OK(store_webhook_set_active(s, id("wo5"), id("wb"), true));
        ASSERT_OK(store_webhook_get(s, id("wo5"), id("wb"), &w));
        ASSERT_TRUE(w.active);
        ASSERT_U64_EQ(w.failing_since, 0);
        ASSERT_STREQ(w.disabled_reason, "");
        webhook_row_done(&w);
        ASSERT_STREQ(heads(s), "a2,b1");
        ASSERT_ERR(store_webhook_set_active(s, id("wo6"), id("wb"), false), ENOENT);
        ASSERT_OK(store_webhook_set_active(s, id("wo5"), id("wb"), false));
        ASSERT_OK(store_webhook_delete(s, id("wo5"), id("wa")));
        ASSERT_STREQ(heads(s), "");
        ASSERT_STREQ(log_of(s, "wo5", "wa", &total), "");
        store_close(s);
}

static void on_hook(const struct webhook_row *r, void *userdata)
{
        append_name(userdata, r->id);
}

static void finish(struct store *s, const char *org, const char *hook, const char *did)
{
        struct webhook_delivery_row d;
        ASSERT_OK(store_webhook_delivery_get(s, id(org), id(hook), id(did), &d));
        snprintf(d.status, sizeof(d.status), "failed");
        ASSERT_OK(store_webhook_delivery_update(s, &d));
        webhook_delivery_row_done(&d);
}

/* keep bounds the finished deliveries only (a pending one is never lost),
 * and webhooks list by created_at, then id compared bytewise ("Z" < "a"). */
TEST(keep_trims_finished_deliveries_and_lists_order_bytewise)
{
        struct store *s = open_store();
        char buf[256] = "";
        uint64_t total = 0;
        hook_put(s, "wo7", "wa");
        hook_put(s, "wo7", "wZ");
        ASSERT_OK(store_webhook_each(s, id("wo7"), 10, 0, on_hook, buf, &total));
        ASSERT_STREQ(buf, "wZ,wa");
        ASSERT_U64_EQ(total, 2);
        buf[0] = '\0';
        ASSERT_OK(store_webhook_each(s, id("wo7"), 1, 1, on_hook, buf, &total));
        ASSERT_STREQ(buf, "wa");
        for (uint64_t e = 1; e <= 4; e++) {
                char did[8];
                snprintf(did, sizeof(did), "k%" PRIu64, e);
                ASSERT_OK(offer(s, "wa", "wo7", did, e, "event"));
        }
        finish(s, "wo7", "wa", "k1");
        finish(s, "wo7", "wa", "k2");
        finish(s, "wo7", "wa", "k3");
        ASSERT_OK(store_webhook_enqueue(s, id("wa"), 4, NULL, 2));
        ASSERT_STREQ(log_of(s, "wo7", "wa", &total), "k4,k3,k2");
        ASSERT_OK(store_webhook_enqueue(s, id("wa"), 4, NULL, 1));
        ASSERT_STREQ(log_of(s, "wo7", "wa", &total), "k4,k3");
        ASSERT_U64_EQ(total, 2);
        store_close(s);
}
