/* Every backend fills every member of struct store_ops: an op added to
 * backend.h and to one backend only would be a NULL call on the other,
 * found here by `make unit` even where no PostgreSQL server can run. */
#include <stddef.h>
#include <string.h>

#include "store/backend.h"
#include "tap.h"

/* The members after the two data fields are all function pointers, of one
 * size on every ABI we build for. */
static void check_filled(const struct store_ops *ops)
{
        const char *p = (const char *)ops + offsetof(struct store_ops, open);
        const char *end = (const char *)ops + sizeof(*ops);
        size_t slot = 0;

        for (; p + sizeof(void (*)(void)) <= end; p += sizeof(void (*)(void)), slot++) {
                void (*fn)(void);
                memcpy(&fn, p, sizeof(fn));
                if (!fn)
                        TAP_FAIL("%s: store_ops member #%zu after 'open' is NULL", ops->name, slot);
        }
        ASSERT_TRUE(slot > 60);
}

TEST(store_ops_sqlite_fills_every_op)
{
        check_filled(&store_sqlite_ops);
}

TEST(store_ops_pg_fills_every_op)
{
        check_filled(&store_pg_ops);
}

TEST(store_ops_tables_agree_on_serialising)
{
        ASSERT_TRUE(store_sqlite_ops.serialize);   /* one connection */
        ASSERT_TRUE(!store_pg_ops.serialize);      /* a pool: ops run concurrently */
        ASSERT_STREQ(store_pg_ops.name, "postgres");
}
