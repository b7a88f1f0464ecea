/* The store contract for checkpoints (issue 15): rows scoped by org,
 * listed newest first (all the org's or one sandbox's) a page at a time,
 * the org's count and bytes together. Public store.h functions only, so it
 * runs against any backend (STORE_URL). */
#include "store_fixture.h"

static void make_row(struct checkpoint_row *r, const char *cid, const char *org, const char *sbx, uint64_t size,
                     uint64_t at)
{
        *r = (struct checkpoint_row){ .size_bytes = size, .file_count = size / 10, .created_at = at,
                                      .name = (char *)"n", .description = (char *)"", .meta_json = (char *)"{}" };
        snprintf(r->id, sizeof(r->id), "%s", id(cid));
        snprintf(r->org_id, sizeof(r->org_id), "%s", id(org));
        snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", id(sbx));
        snprintf(r->checksum, sizeof(r->checksum), "sha256:%llu", (unsigned long long)size);
}

struct listing {
        char buf[512];
};

static void on_row(const struct checkpoint_row *r, void *userdata)
{
        struct listing *l = userdata;
        size_t n = strlen(l->buf);
        snprintf(l->buf + n, sizeof(l->buf) - n, "%s%s", n ? "," : "", r->checksum + 7);
}

static const char *list(struct store *s, const char *org, const char *sbx, uint64_t limit, uint64_t offset,
                        uint64_t *total)
{
        static struct listing l;
        l.buf[0] = '\0';
        ASSERT_OK(store_checkpoint_each(s, id(org), sbx ? id(sbx) : NULL, limit, offset, on_row, &l, total));
        return l.buf;
}

TEST(checkpoints_scoped_by_org)
{
        struct store *s = open_store();
        struct checkpoint_row r, got = {};
        uint64_t total = 0, count = 0, bytes = 0;

        make_row(&r, "ck1", "co1", "sa", 100, 10);
        ASSERT_OK(store_checkpoint_create(s, &r));
        ASSERT_ERR(store_checkpoint_create(s, &r), EEXIST);
        make_row(&r, "ck2", "co1", "sb", 200, 20);
        ASSERT_OK(store_checkpoint_create(s, &r));
        make_row(&r, "ck3", "co1", "sa", 300, 30);
        r.description = (char *)"third";
        r.meta_json = (char *)"{\"env\":{}}";
        ASSERT_OK(store_checkpoint_create(s, &r));
        make_row(&r, "ck4", "co2", "sa", 400, 40);
        ASSERT_OK(store_checkpoint_create(s, &r));

        ASSERT_STREQ(list(s, "co1", NULL, 100, 0, &total), "300,200,100");
        ASSERT_U64_EQ(total, 3);
        ASSERT_STREQ(list(s, "co1", NULL, 1, 1, &total), "200");
        ASSERT_STREQ(list(s, "co1", "sa", 100, 0, &total), "300,100");
        ASSERT_U64_EQ(total, 2);
        ASSERT_STREQ(list(s, "co2", NULL, 100, 0, &total), "400");

        ASSERT_OK(store_checkpoint_get(s, id("co1"), id("ck3"), &got));
        ASSERT_STREQ(got.description, "third");
        ASSERT_STREQ(got.meta_json, "{\"env\":{}}");
        ASSERT_U64_EQ(got.size_bytes, 300);
        ASSERT_U64_EQ(got.file_count, 30);
        ASSERT_U64_EQ(got.created_at, 30);
        ASSERT_STREQ(got.sandbox_id, id("sa"));
        checkpoint_row_done(&got);
        ASSERT_ERR(store_checkpoint_get(s, id("co2"), id("ck3"), &got), ENOENT);

        ASSERT_OK(store_checkpoint_usage(s, id("co1"), &count, &bytes));
        ASSERT_U64_EQ(count, 3);
        ASSERT_U64_EQ(bytes, 600);
        ASSERT_OK(store_checkpoint_usage(s, id("co9"), &count, &bytes));
        ASSERT_U64_EQ(count, 0);
        ASSERT_U64_EQ(bytes, 0);

        ASSERT_ERR(store_checkpoint_delete(s, id("co2"), id("ck1")), ENOENT);
        ASSERT_OK(store_checkpoint_delete(s, id("co1"), id("ck1")));
        ASSERT_ERR(store_checkpoint_delete(s, id("co1"), id("ck1")), ENOENT);
        ASSERT_STREQ(list(s, "co1", NULL, 100, 0, &total), "300,200");
        store_close(s);
}

TEST(checkpoints_bad_arguments)
{
        struct store *s = open_store();
        struct checkpoint_row r;
        uint64_t total, count, bytes;

        make_row(&r, "ck5", "co3", "sa", 1, 1);
        r.name = NULL;
        ASSERT_ERR(store_checkpoint_create(s, &r), EINVAL);
        make_row(&r, "ck5", "co3", "sa", 1, 1);
        r.org_id[0] = '\0';
        ASSERT_ERR(store_checkpoint_create(s, &r), EINVAL);
        ASSERT_ERR(store_checkpoint_create(s, NULL), EINVAL);
        ASSERT_ERR(store_checkpoint_delete(s, "", "x"), EINVAL);
        ASSERT_ERR(store_checkpoint_each(s, id("co3"), NULL, 1, 0, NULL, NULL, &total), EINVAL);
        ASSERT_ERR(store_checkpoint_each(NULL, id("co3"), NULL, 1, 0, on_row, NULL, &total), EINVAL);
        ASSERT_ERR(store_checkpoint_usage(s, id("co3"), NULL, &bytes), EINVAL);
        (void)count;
        store_close(s);
}
