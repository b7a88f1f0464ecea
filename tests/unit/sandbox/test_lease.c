/* Cluster mode in the sandbox layer (src/sandbox/lease.c): a node loads a
 * sandbox whose stored row names it or nobody, and refuses (ERR_BUSY,
 * -EREMOTE, naming the owner) one whose row names another node, so a path
 * that reached the sandbox layer without being routed to the owner never
 * makes a second live copy; once the lease moves here, it loads. Needs
 * root (skips otherwise). */
#include "base/time.h"
#include "sandbox_fixture.h"

static struct sandbox_mgr *node_a(void)
{
        struct sandbox_options opt = {
                .max_contexts = 3, .max_resident_contexts = 2, .workspace_bytes = 16 * MiB,
                .workspace_inodes = 1024, .file_bytes = 1 * MiB, .limits = LIM,
        };
        snprintf(opt.node_id, sizeof(opt.node_id), "a");
        return mgr_start(&opt, false);
}

/* A stored row of the default org owned by node (as another node's create
 * or a claim leaves it). */
static void row_owned_by(const char *id, const char *node)
{
        struct sandbox_row row = { 0 };
        snprintf(row.id, sizeof(row.id), "%s", id);
        snprintf(row.org_id, sizeof(row.org_id), "%s", SBX_DEFAULT_ORG);
        snprintf(row.node_id, sizeof(row.node_id), "%s", node);
        row.created_at = row.last_used = wall_ms();
        ASSERT_OK(store_sandbox_put(g.store, &row));
}

TEST(a_sandbox_owned_elsewhere_is_refused_until_its_lease_moves_here)
{
        node_a();
        struct err e = { 0 };
        bool created = true;
        row_owned_by("theirs", "b");
        ASSERT_EQ(sbx_create(g.mgr, "theirs", NULL, &created, &e), -EREMOTE);
        ASSERT_EQ(e.reason, ERR_BUSY);
        ASSERT_FALSE(created);
        ASSERT_TRUE(strstr(e.msg, "\"b\"") != NULL);
        err_done(&e);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 0);
        /* The claim moves it here: now it loads (not created anew). */
        uint64_t epoch = 0;
        ASSERT_OK(store_sandbox_claim(g.store, "theirs", "a", 0, &epoch));
        ASSERT_OK(sbx_create(g.mgr, "theirs", NULL, &created, &e));
        ASSERT_FALSE(created);
        ASSERT_EQ(sbx_loaded_count(g.mgr), 1);
}

TEST(own_and_unowned_rows_load_and_new_ids_are_stamped_here)
{
        node_a();
        struct err e = { 0 };
        bool created = false;
        row_owned_by("legacy", "");
        ASSERT_OK(sbx_create(g.mgr, "legacy", NULL, &created, &e));
        ASSERT_FALSE(created);
        ASSERT_OK(sbx_create(g.mgr, "fresh", NULL, &created, &e));
        ASSERT_TRUE(created);
        char node[STORE_ID_MAX];
        uint64_t epoch;
        ASSERT_OK(store_sandbox_owner(g.store, "fresh", node, &epoch));
        ASSERT_STREQ(node, "a");
}
