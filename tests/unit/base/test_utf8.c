/* base/utf8.c: utf8_complete_len, which keeps a character split between
 * two chunks of a stream (a REPL's SSE output) for the next chunk. */
#include <string.h>

#include "base/utf8.h"
#include "tap.h"

static size_t complete(const char *s)
{
        return utf8_complete_len(s, strlen(s));
}

TEST(whole_text_is_complete)
{
        ASSERT_EQ(complete(""), 0);
        ASSERT_EQ(complete("abc\n"), 4);
        ASSERT_EQ(complete("h\xc3\xa9"), 3);                 /* é */
        ASSERT_EQ(complete("\xe2\x82\xac"), 3);              /* € */
        ASSERT_EQ(complete("x\xf0\x9f\x98\x80"), 5);         /* 😀 */
}

TEST(a_split_character_is_held_back)
{
        ASSERT_EQ(complete("h\xc3"), 1);
        ASSERT_EQ(complete("ab\xe2\x82"), 2);
        ASSERT_EQ(complete("ab\xe2"), 2);
        ASSERT_EQ(complete("x\xf0\x9f\x98"), 1);
        ASSERT_EQ(complete("\xf0"), 0);
}

TEST(invalid_bytes_are_not_held)
{
        /* Stray continuation bytes can never complete: pass them on (the
         * sanitiser makes them U+FFFD) rather than hold them forever. */
        ASSERT_EQ(complete("a\x80\x80\x80\x80"), 5);
        ASSERT_EQ(complete("\xc3\xa9\xa9"), 3);
}
