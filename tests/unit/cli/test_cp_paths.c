/* Unit tests for `sandboxd cp`'s path rules (src/cli/cp_tar.c): the
 * normalisation every archive name and remote path goes through, and the
 * lexical check that keeps a downloaded symlink inside the copied tree. */
#include <errno.h>
#include <string.h>

#include "cli/cp.h"
#include "tap.h"

static void norm_is(const char *in, bool abs_ok, const char *want)
{
        char out[64];
        int r = cp_norm_path(in, abs_ok, out, sizeof(out));
        if (r != 0 || strcmp(out, want))
                TAP_FAIL("cp_norm_path('%s') = %d '%s', want '%s'", in, r, r == 0 ? out : "", want);
}

TEST(norm_path_plain_forms)
{
        norm_is("a/b", false, "a/b");
        norm_is("./a//b/./c/", false, "a/b/c");
        norm_is(".", false, "");
        norm_is("./", false, "");
        norm_is("", false, "");
        norm_is("/a/b", true, "a/b");
        norm_is("a/..b/c..", false, "a/..b/c..");
}

TEST(norm_path_refuses_escapes)
{
        static const char *bad[] = { "..", "../a", "a/../b", "a/..", "./a/../../x" };
        char out[64];
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ASSERT_EQ(cp_norm_path(bad[i], true, out, sizeof(out)), -EINVAL);
        ASSERT_EQ(cp_norm_path("/etc/passwd", false, out, sizeof(out)), -EINVAL);
        ASSERT_EQ(cp_norm_path("a/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", false, out,
                               sizeof(out)),
                  -ENAMETOOLONG);
}

TEST(link_inside_the_tree)
{
        ASSERT_TRUE(cp_link_inside("l", "f"));
        ASSERT_TRUE(cp_link_inside("l", "./sub/f"));
        ASSERT_TRUE(cp_link_inside("d/l", "../f"));
        ASSERT_TRUE(cp_link_inside("d/e/l", "../../f"));
        ASSERT_TRUE(cp_link_inside("l", "."));
        ASSERT_TRUE(cp_link_inside("d/l", "./.././f"));
}

TEST(link_leaving_the_tree)
{
        ASSERT_FALSE(cp_link_inside("l", "/etc/passwd"));
        ASSERT_FALSE(cp_link_inside("l", ""));
        ASSERT_FALSE(cp_link_inside("l", ".."));
        ASSERT_FALSE(cp_link_inside("l", "../x"));
        ASSERT_FALSE(cp_link_inside("d/l", "../../x"));
        ASSERT_FALSE(cp_link_inside("l", "a/../../x"));
        /* d/x -> "." is inside, but d/x/../.. is the tree's parent */
        ASSERT_FALSE(cp_link_inside("d/l", "x/../../f"));
        ASSERT_FALSE(cp_link_inside("d/l", "x/../f"));
        /* the top itself a link: even "." is its parent folder */
        ASSERT_FALSE(cp_link_inside("", "f"));
        ASSERT_FALSE(cp_link_inside("", "."));
}
