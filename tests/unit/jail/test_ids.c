/* jail/ids.c: the start-up check of the jails' host id range and the
 * rotating stateless set. The account files are temporary copies, so the
 * check is tested against known contents. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jail/ids.h"
#include "jail/jail.h"

#include "tap.h"

static char g_passwd[64], g_group[64];

static void write_accounts(const char *passwd, const char *group)
{
        snprintf(g_passwd, sizeof(g_passwd), "/tmp/test_ids_passwd.%d", (int)getpid());
        snprintf(g_group, sizeof(g_group), "/tmp/test_ids_group.%d", (int)getpid());
        FILE *f = fopen(g_passwd, "w");
        fputs(passwd, f);
        fclose(f);
        f = fopen(g_group, "w");
        fputs(group, f);
        fclose(f);
}

static void remove_accounts(void)
{
        unlink(g_passwd);
        unlink(g_group);
}

TEST(ids_check_accepts_a_free_range)
{
        struct err err = { 0 };
        write_accounts("root:x:0:0::/root:/bin/sh\nsvc:x:2000:2001::/:/bin/false\n", "root:x:0:\nsvc:x:2001:\n");
        ASSERT_EQ(jail_ids_check(1000000000, 65536, g_passwd, g_group, &err), 0);
        ASSERT_EQ(jail_ids_check(3000, 100, g_passwd, g_group, &err), 0);
        remove_accounts();
}

TEST(ids_check_refuses_accounts_and_reserved_ids)
{
        struct err err = { 0 };
        write_accounts("root:x:0:0::/root:/bin/sh\nsvc:x:2000:2001::/:/bin/false\n", "root:x:0:\nwheel:x:5000:\n");
        /* a passwd uid, a passwd gid, a group gid */
        ASSERT_EQ(jail_ids_check(1950, 100, g_passwd, g_group, &err), -EEXIST);
        ASSERT_TRUE(strstr(err.msg, "2000") && strstr(err.msg, "svc"));
        ASSERT_EQ(jail_ids_check(2001, 100, g_passwd, g_group, &err), -EEXIST);
        ASSERT_EQ(jail_ids_check(4990, 100, g_passwd, g_group, &err), -EEXIST);
        ASSERT_TRUE(strstr(err.msg, "wheel") != NULL);
        /* nobody, the daemon's own uid, a too small or too large range */
        ASSERT_EQ(jail_ids_check(65000, 1000, g_passwd, g_group, &err), -EEXIST);
        ASSERT_EQ(jail_ids_check(geteuid() ? geteuid() : 1, 100, g_passwd, g_group, &err),
                  geteuid() ? -EEXIST : 0);
        ASSERT_EQ(jail_ids_check(1000000000, JAIL_IDS_MIN_COUNT - 1, g_passwd, g_group, &err), -ERANGE);
        ASSERT_EQ(jail_ids_check(4294967200ULL, 1000, g_passwd, g_group, &err), -ERANGE);
        ASSERT_EQ(jail_ids_check(0, 1000, g_passwd, g_group, &err), -ERANGE);
        remove_accounts();
}

TEST(ids_layout_and_rotation)
{
        struct jail_ctx ctx = { .id_base = 1000000000, .id_count = 1000 };
        uid_t first;
        uint32_t n;
        ASSERT_EQ(jail_ids_template(&ctx), 1000000000);
        jail_ids_sandbox_range(&ctx, &first, &n);
        ASSERT_EQ(first, 1000000000 + 1 + JAIL_IDS_STATELESS);
        ASSERT_EQ(n, 1000 - 1 - JAIL_IDS_STATELESS);
        /* The rotating set never reaches the template's or a sandbox's id. */
        for (unsigned i = 0; i < 3 * JAIL_IDS_STATELESS; i++) {
                uid_t id = jail_ids_stateless(&ctx);
                ASSERT_TRUE(id > jail_ids_template(&ctx) && id < first);
        }
        /* Without a range: the old fixed ids (root) or the daemon's (rootless). */
        struct jail_ctx none = { .outer_uid = 1234 };
        ASSERT_EQ(jail_ids_stateless(&none), JAIL_UID);
        ASSERT_EQ(jail_ids_template(&none), JAIL_TEMPLATE_UID);
        none.userns = true;
        ASSERT_EQ(jail_ids_stateless(&none), 1234);
        jail_ids_sandbox_range(&none, &first, &n);
        ASSERT_EQ(n, 0);
}

TEST(ids_subordinate_finds_the_users_range)
{
        char path[64];
        snprintf(path, sizeof(path), "/tmp/test_ids_subuid.%d", (int)getpid());
        FILE *f = fopen(path, "w");
        fputs("other:100000:65536\nbroken:x:1\n4242:300000:100\nsvc:200000:65536\nsvc:900000:10\n", f);
        fclose(f);
        uint64_t base = 0, count = 0;
        /* by name; the first entry wins */
        ASSERT_EQ(jail_ids_subordinate(path, 1000, "svc", &base, &count), 0);
        ASSERT_EQ(base, 200000);
        ASSERT_EQ(count, 65536);
        /* by uid, when the name has none */
        ASSERT_EQ(jail_ids_subordinate(path, 4242, "nobody", &base, &count), 0);
        ASSERT_EQ(base, 300000);
        ASSERT_EQ(count, 100);
        /* no entry, a malformed one, no file */
        ASSERT_EQ(jail_ids_subordinate(path, 1000, "nobody", &base, &count), -ENOENT);
        ASSERT_EQ(jail_ids_subordinate(path, 1000, "broken", &base, &count), -ENOENT);
        unlink(path);
        ASSERT_EQ(jail_ids_subordinate(path, 1000, "svc", &base, &count), -ENOENT);
}
