/* The /mcp session table (src/api/mcp/sessions.c): ids, lookup, LRU
 * eviction that spares sessions in use, expiry, removal while in use; and
 * the Origin parsing the facade's auth hook stands on. */
#include <errno.h>
#include <unistd.h>

#include "tap.h"

#include "api/common/host_check.h"
#include "api/mcp/internal.h"

static struct mcp_entry *create(struct mcp_table *t)
{
        struct mcp_entry *e = NULL;
        ASSERT_EQ(mcp_table_create(t, &e), 0);
        ASSERT_NOT_NULL(e);
        return e;
}

/* The session of id is live (and is want, when given); counts as a use. */
static void expect_live(struct mcp_table *t, const char *id, struct mcp_entry *want)
{
        struct mcp_entry *got = mcp_table_get(t, id);
        ASSERT_TRUE(got != NULL && (!want || got == want));
        mcp_table_put(t, got);
}

static void expect_gone(struct mcp_table *t, const char *id)
{
        ASSERT_TRUE(mcp_table_get(t, id) == NULL);
}

/* A new session nobody uses; its id into id. */
static void create_idle(struct mcp_table *t, char id[MCP_HTTP_ID_LEN + 1])
{
        struct mcp_entry *e = create(t);
        snprintf(id, MCP_HTTP_ID_LEN + 1, "%s", mcp_entry_id(e));
        mcp_table_put(t, e);
}

TEST(ids_are_random_hex_and_found)
{
        struct mcp_table t;
        mcp_table_init(&t, 8, 60000);
        struct mcp_entry *a = create(&t), *b = create(&t);
        ASSERT_EQ(strlen(mcp_entry_id(a)), MCP_HTTP_ID_LEN);
        ASSERT_EQ(strspn(mcp_entry_id(a), "0123456789abcdef"), MCP_HTTP_ID_LEN);
        ASSERT_TRUE(strcmp(mcp_entry_id(a), mcp_entry_id(b)) != 0);
        expect_live(&t, mcp_entry_id(a), a);
        expect_gone(&t, "00000000000000000000000000000000");
        expect_gone(&t, "");
        mcp_table_put(&t, a);
        mcp_table_put(&t, b);
        mcp_table_done(&t);
}

TEST(full_table_ends_the_least_recently_used_idle_session)
{
        struct mcp_table t;
        char a[MCP_HTTP_ID_LEN + 1], b[MCP_HTTP_ID_LEN + 1], c[MCP_HTTP_ID_LEN + 1];
        mcp_table_init(&t, 2, 60000);
        create_idle(&t, a);
        create_idle(&t, b);
        expect_live(&t, a, NULL); /* a used last: b is the oldest */
        create_idle(&t, c);
        expect_gone(&t, b);
        expect_live(&t, a, NULL);
        expect_live(&t, c, NULL);
        mcp_table_done(&t);
}

TEST(sessions_in_use_are_never_evicted)
{
        struct mcp_table t;
        mcp_table_init(&t, 1, 60000);
        struct mcp_entry *busy = create(&t), *e = NULL;
        ASSERT_EQ(mcp_table_create(&t, &e), -EBUSY);
        ASSERT_TRUE(e == NULL);
        mcp_table_put(&t, busy);
        ASSERT_EQ(mcp_table_create(&t, &e), 0);
        mcp_table_put(&t, e);
        mcp_table_done(&t);
}

TEST(idle_sessions_expire_but_not_while_in_use)
{
        struct mcp_table t;
        char idle[MCP_HTTP_ID_LEN + 1];
        mcp_table_init(&t, 8, 50);
        create_idle(&t, idle);
        struct mcp_entry *busy = create(&t);
        usleep(120 * 1000);
        expect_gone(&t, idle);
        expect_live(&t, mcp_entry_id(busy), busy);
        mcp_table_put(&t, busy);
        mcp_table_done(&t);
}

TEST(removed_while_in_use_lives_until_put)
{
        struct mcp_table t;
        mcp_table_init(&t, 8, 60000);
        struct mcp_entry *e = create(&t);
        ASSERT_TRUE(mcp_table_remove(&t, mcp_entry_id(e)));
        ASSERT_FALSE(mcp_table_remove(&t, mcp_entry_id(e)));
        expect_gone(&t, mcp_entry_id(e));
        ASSERT_NOT_NULL(mcp_entry_session(e)); /* still usable by its running call */
        mcp_table_drop(&t, e);                 /* no longer listed: a no-op */
        mcp_table_put(&t, e);                  /* freed here (ASan: no leak, no use after free) */
        mcp_table_done(&t);
}

TEST(origin_authority)
{
        ASSERT_TRUE(strcmp(api_origin_authority("http://localhost:8787"), "localhost:8787") == 0);
        ASSERT_TRUE(strcmp(api_origin_authority("HTTPS://[::1]"), "[::1]") == 0);
        ASSERT_TRUE((api_origin_authority("null")) == NULL);
        ASSERT_TRUE((api_origin_authority(NULL)) == NULL);
        ASSERT_TRUE((api_origin_authority("http://")) == NULL);
        ASSERT_TRUE((api_origin_authority("http://evil.example/path")) == NULL);
        ASSERT_TRUE((api_origin_authority("file://x")) == NULL);
        ASSERT_TRUE(api_host_is_loopback_literal(api_origin_authority("http://127.0.0.1:1")));
        ASSERT_FALSE(api_host_is_loopback_literal(api_origin_authority("http://127.0.0.1.evil.example")));
}
