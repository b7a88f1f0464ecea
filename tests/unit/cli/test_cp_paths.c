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

/* {link's path in the tree, its target, inside?} */
static const struct {
        const char *sub, *target;
        bool inside;
} links[] = {
        { "l", "f", true },
        { "l", "./sub/f", true },
        { "d/l", "../f", true },
        { "d/e/l", "../../f", true },
        { "l", ".", true },
        { "d/l", "./.././f", true },
        { "l", "/etc/passwd", false },
        { "l", "", false },
        { "l", "..", false },
        { "l", "../x", false },
        { "d/l", "../../x", false },
        { "l", "a/../../x", false },
        /* d/x -> "." is inside, but d/x/../.. is the tree's parent */
        { "d/l", "x/../../f", false },
        { "d/l", "x/../f", false },
        /* the top itself a link: even "." is its parent folder */
        { "", "f", false },
        { "", ".", false },
};

TEST(link_inside_or_not)
{
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
                if (cp_link_inside(links[i].sub, links[i].target) != links[i].inside)
                        TAP_FAIL("cp_link_inside('%s', '%s') != %d", links[i].sub, links[i].target, links[i].inside);
}
