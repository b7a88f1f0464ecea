/* Unit tests for the checkpoint scope (files_filter_match in
 * src/sandbox/files/archive.c): includes and excludes match a path or any
 * of its parents, "*" crosses "/", excludes win. */
#include "sandbox/archive.h"
#include "tap.h"

static bool in(const char *const *inc, size_t ni, const char *const *exc, size_t ne, const char *rel)
{
        const struct files_filter f = { inc, ni, exc, ne };
        return files_filter_match(&f, rel);
}

TEST(filter_everything_by_default)
{
        ASSERT_TRUE(in(NULL, 0, NULL, 0, "a"));
        ASSERT_TRUE(in(NULL, 0, NULL, 0, "a/b/c.txt"));
}

TEST(filter_excludes_cover_subtrees)
{
        static const char *const exc[] = { "node_modules", "*.log" };
        ASSERT_FALSE(in(NULL, 0, exc, 2, "node_modules"));
        ASSERT_FALSE(in(NULL, 0, exc, 2, "node_modules/pkg/index.js"));
        ASSERT_FALSE(in(NULL, 0, exc, 2, "deep/dir/x.log"));
        ASSERT_TRUE(in(NULL, 0, exc, 2, "src/node_modules_notes.txt"));
        ASSERT_TRUE(in(NULL, 0, exc, 2, "main.py"));
}

TEST(filter_includes_and_parents)
{
        static const char *const inc[] = { "*.py", "src" };
        static const char *const exc[] = { "src/gen" };
        ASSERT_TRUE(in(inc, 2, NULL, 0, "a.py"));
        ASSERT_TRUE(in(inc, 2, NULL, 0, "lib/deep/b.py"));
        ASSERT_TRUE(in(inc, 2, NULL, 0, "src/data.bin"));
        ASSERT_FALSE(in(inc, 2, NULL, 0, "lib"));       /* a directory outside: walked, not kept */
        ASSERT_FALSE(in(inc, 2, NULL, 0, "notes.txt"));
        ASSERT_FALSE(in(inc, 2, NULL, 0, "srcx/a.txt"));
        ASSERT_FALSE(in(inc, 2, exc, 1, "src/gen/x.py")); /* excludes win */
        ASSERT_TRUE(in(inc, 2, exc, 1, "src/keep.py"));
}
