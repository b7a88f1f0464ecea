/* Unit tests for the bridge's argv quoting (the anchor's shellQuote, the
 * vectors of cloudflare-bridge.md §2), the Session-Id rule and the
 * workspace path rule (resolveWorkspacePath). */
#include <errno.h>
#include <string.h>

#include "api/bridge/bridge.h"
#include "base/buf.h"
#include "sandbox/sandbox.h"
#include "tap.h"

static void check_quote(const char *in, const char *want)
{
        struct buf b;
        buf_init(&b, 1 << 20);
        int r = bridge_quote(in, &b);
        buf_append(&b, "", 1);
        if (r < 0 || strcmp(b.data, want) != 0)
                TAP_FAIL("quote(%s) = %s, want %s", in, b.data ? b.data : "(none)", want);
        buf_free(&b);
}

TEST(quote_vectors_of_the_reference)
{
        check_quote("it's", "$'it\\'s'");
        check_quote("say \"hi\"", "$'say \"hi\"'");
        check_quote("a\\b", "$'a\\\\b'");
        check_quote("$(id)", "$'$(id)'");
        check_quote("line1\nline2", "$'line1\\nline2'");
        check_quote("env", "env");
        check_quote("A=1", "A=1");
        check_quote("printenv", "printenv");
}

TEST(quote_plain_words_pass_unchanged)
{
        check_quote("abcXYZ019@%+=:,./-", "abcXYZ019@%+=:,./-");
        check_quote("/workspace/a.txt", "/workspace/a.txt");
}

TEST(quote_everything_else)
{
        check_quote("", "$''");
        check_quote("a b", "$'a b'");
        check_quote("tab\there", "$'tab\\there'");
        check_quote("cr\rx", "$'cr\\rx'");
        check_quote("`id`", "$'`id`'");
        check_quote("a;b|c&d", "$'a;b|c&d'");
        check_quote("\\'\n\r\t", "$'\\\\\\'\\n\\r\\t'");
        check_quote("é", "$'é'");
}

TEST(session_ids)
{
        ASSERT_TRUE(bridge_session_id_valid("a"));
        ASSERT_TRUE(bridge_session_id_valid("Session_1.x-y"));
        char max[129];
        memset(max, 'a', 128);
        max[128] = '\0';
        ASSERT_TRUE(bridge_session_id_valid(max));
        static const char *const bad[] = { "", "a..b", "..", "a b", "a/b", "é", "a\n", "a:b" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (bridge_session_id_valid(bad[i]))
                        TAP_FAIL("accepted '%s'", bad[i]);
        char over[130];
        memset(over, 'a', 129);
        over[129] = '\0';
        ASSERT_FALSE(bridge_session_id_valid(over));
}

static void check_path(const char *in, int want_r, const char *want)
{
        char out[4096] = "";
        int r = sbx_workspace_path(in, out, sizeof(out));
        if (r != want_r || (r == 0 && strcmp(out, want) != 0))
                TAP_FAIL("path(%s) = %d '%s', want %d '%s'", in, r, out, want_r, want ? want : "");
}

TEST(workspace_paths)
{
        check_path("", 0, "/workspace");
        check_path(".", 0, "/workspace");
        check_path("sub/dir", 0, "/workspace/sub/dir");
        check_path("./a//b/./c/", 0, "/workspace/a/b/c");
        check_path("a/../b", 0, "/workspace/b");
        check_path("/workspace", 0, "/workspace");
        check_path("/workspace/x/..", 0, "/workspace");
        check_path("/tmp/../workspace/y", 0, "/workspace/y");
        check_path("..", -EPERM, NULL);
        check_path("/", -EPERM, NULL);
        check_path("/tmp", -EPERM, NULL);
        check_path("/workspacefoo", -EPERM, NULL);
        check_path("/../../..", -EPERM, NULL);
        check_path("a/../../..", -EPERM, NULL);
        check_path("../workspace/z", 0, "/workspace/z");
}
