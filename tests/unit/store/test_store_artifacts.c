/* The store contract for artifacts (issue 15): rows scoped by org, pages
 * filtered by state, sandbox and name prefix with expired rows hidden, the
 * expired rows of every org for the sweeper, and an org's bytes. Public
 * store.h functions only, so it runs against any backend (STORE_URL). */
#include "store_fixture.h"

static void make(struct artifact_row *r, const char *org, const char *name, const char *art_name,
                 const char *state, uint64_t size, uint64_t created, uint64_t expires)
{
        *r = (struct artifact_row){ .size = size, .created_at = created, .expires_at = expires,
                                    .metadata = (char *)"{\"k\":1}" };
        snprintf(r->id, sizeof(r->id), "%s", id(name));
        snprintf(r->org_id, sizeof(r->org_id), "%s", id(org));
        snprintf(r->state, sizeof(r->state), "%s", state);
        snprintf(r->name, sizeof(r->name), "%s", art_name);
        snprintf(r->content_type, sizeof(r->content_type), "text/plain");
        snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", name[0] == 's' ? "sbx-1" : "");
}

struct listing {
        char buf[512];
};

static void on_row(const struct artifact_row *r, void *userdata)
{
        struct listing *l = userdata;
        size_t n = strlen(l->buf);
        snprintf(l->buf + n, sizeof(l->buf) - n, "%s%s", n ? "," : "", unid(r->id) ? unid(r->id) : "?");
}

static const char *list(struct store *s, const char *org, const char *sandbox, const char *prefix, uint64_t now,
                        uint64_t limit, uint64_t offset, uint64_t *total)
{
        static struct listing l;
        l.buf[0] = '\0';
        struct artifact_filter f = { .org_id = id(org), .state = "ready", .sandbox_id = sandbox,
                                     .name_prefix = prefix, .now = now };
        ASSERT_OK(store_artifact_each(s, &f, limit, offset, on_row, &l, total));
        return l.buf;
}

TEST(artifacts_scoped_filtered_and_paged)
{
        struct store *s = open_store();
        struct artifact_row r, got;
        uint64_t total = 0, bytes = 0;

        ASSERT_OK(store_org_ensure(s, id("ao1"), "one"));
        ASSERT_OK(store_org_ensure(s, id("ao2"), "two"));
        make(&r, "ao1", "a1", "logs/a.txt", "ready", 10, 100, 0);
        ASSERT_OK(store_artifact_put(s, &r));
        make(&r, "ao1", "s2", "logs/b.txt", "ready", 20, 200, 0);
        ASSERT_OK(store_artifact_put(s, &r));
        make(&r, "ao1", "a3", "build/x", "ready", 30, 300, 1000);
        ASSERT_OK(store_artifact_put(s, &r));
        make(&r, "ao1", "u4", "upload", "uploading", 40, 400, 5000);
        ASSERT_OK(store_artifact_put(s, &r));
        make(&r, "ao2", "a5", "logs/c.txt", "ready", 50, 500, 0);
        ASSERT_OK(store_artifact_put(s, &r));

        /* Newest first; uploads and other orgs' rows are not listed. */
        ASSERT_STREQ(list(s, "ao1", "", "", 500, 100, 0, &total), "a3,s2,a1");
        ASSERT_U64_EQ(total, 3);
        ASSERT_STREQ(list(s, "ao1", "", "", 500, 1, 1, &total), "s2");
        ASSERT_STREQ(list(s, "ao1", "", "logs/", 500, 100, 0, &total), "s2,a1");
        ASSERT_U64_EQ(total, 2);
        ASSERT_STREQ(list(s, "ao1", "", "logs/%", 500, 100, 0, &total), "");   /* no wildcards */
        ASSERT_STREQ(list(s, "ao1", "sbx-1", "", 500, 100, 0, &total), "s2");
        /* Expired at now >= expires_at. */
        ASSERT_STREQ(list(s, "ao1", "", "", 1000, 100, 0, &total), "s2,a1");
        ASSERT_U64_EQ(total, 2);

        /* Get and delete are scoped by org. */
        ASSERT_OK(store_artifact_get(s, id("ao1"), id("a1"), &got));
        ASSERT_STREQ(got.name, "logs/a.txt");
        ASSERT_STREQ(got.metadata, "{\"k\":1}");
        ASSERT_U64_EQ(got.size, 10);
        artifact_row_done(&got);
        ASSERT_ERR(store_artifact_get(s, id("ao2"), id("a1"), &got), ENOENT);
        ASSERT_ERR(store_artifact_delete(s, id("ao2"), id("a1")), ENOENT);

        /* Bytes count every row of the org, uploads included. */
        ASSERT_OK(store_artifact_bytes(s, id("ao1"), &bytes));
        ASSERT_U64_EQ(bytes, 100);
        ASSERT_OK(store_artifact_delete(s, id("ao1"), id("a1")));
        ASSERT_OK(store_artifact_bytes(s, id("ao1"), &bytes));
        ASSERT_U64_EQ(bytes, 90);

        /* Put replaces: the upload becomes ready. */
        make(&r, "ao1", "u4", "upload", "ready", 41, 400, 0);
        ASSERT_OK(store_artifact_put(s, &r));
        ASSERT_STREQ(list(s, "ao1", "", "up", 500, 100, 0, &total), "u4");
        store_close(s);
}

static void on_expired(const struct artifact_row *r, void *userdata)
{
        if (unid(r->id))
                on_row(r, userdata);
}

TEST(artifacts_expired_of_every_org)
{
        struct store *s = open_store();
        struct artifact_row r;
        struct listing l = { .buf = "" };

        ASSERT_OK(store_org_ensure(s, id("eo1"), "one"));
        ASSERT_OK(store_org_ensure(s, id("eo2"), "two"));
        make(&r, "eo1", "e1", "x", "ready", 1, 1, 2000);
        ASSERT_OK(store_artifact_put(s, &r));
        make(&r, "eo2", "e2", "y", "uploading", 1, 1, 1000);
        ASSERT_OK(store_artifact_put(s, &r));
        make(&r, "eo2", "e3", "z", "ready", 1, 1, 0);
        ASSERT_OK(store_artifact_put(s, &r));
        ASSERT_OK(store_artifact_each_expired(s, 2000, on_expired, &l));
        ASSERT_STREQ(l.buf, "e2,e1");
        l.buf[0] = '\0';
        ASSERT_OK(store_artifact_each_expired(s, 1999, on_expired, &l));
        ASSERT_STREQ(l.buf, "e2");
        ASSERT_EQ(store_artifact_each_expired(s, 1, NULL, NULL), -EINVAL);
        store_close(s);
}
