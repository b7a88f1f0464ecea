/* sandbox.journal_sync's words (src/sandbox/journal.c): exactly the three
 * modes, each to its own value; anything else refused with the output
 * untouched. */
#include <errno.h>

#include "base/util.h"
#include "sandbox/sandbox.h"
#include "tap.h"

TEST(journal_sync_parse)
{
        enum sbx_journal_sync m = SBX_JOURNAL_ALWAYS;
        ASSERT_OK(sbx_journal_sync_parse("group", &m));
        ASSERT_EQ(m, SBX_JOURNAL_GROUP);
        ASSERT_OK(sbx_journal_sync_parse("none", &m));
        ASSERT_EQ(m, SBX_JOURNAL_NONE);
        ASSERT_OK(sbx_journal_sync_parse("always", &m));
        ASSERT_EQ(m, SBX_JOURNAL_ALWAYS);
        const char *bad[] = { "", "Group", "alway", "always ", "fsync", "off" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                ASSERT_ERR(sbx_journal_sync_parse(bad[i], &m), EINVAL);
                ASSERT_EQ(m, SBX_JOURNAL_ALWAYS);
        }
        ASSERT_ERR(sbx_journal_sync_parse(NULL, &m), EINVAL);
}

/* The zero value (a caller that predates the setting) is the default. */
TEST(journal_sync_default_is_zero)
{
        struct sandbox_options o = { 0 };
        ASSERT_EQ(o.journal_sync, SBX_JOURNAL_GROUP);
}
