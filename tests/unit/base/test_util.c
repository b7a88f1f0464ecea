/* Unit tests for the shared helpers (src/base/util.c) through their public
 * functions: UTF-8 validation and sanitising, the capped buffer, time
 * formatting, and the file-system helpers on a mkdtemp() tree. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "tap.h"

/* ---- UTF-8 ---- */

struct utf8_case {
        const char *s;
        size_t len;
        bool valid;
        const char *what;
};

#define U(lit, ok, what) { lit, sizeof(lit) - 1, ok, what }

static const struct utf8_case utf8_cases[] = {
        /* valid, 1..4 bytes and the edges of each length */
        U("", true, "empty"),
        U("hello", true, "ASCII"),
        U("\x00", true, "NUL"),
        U("\x7F", true, "U+007F"),
        U("\xC2\x80", true, "U+0080 (first 2-byte)"),
        U("\xC3\xA9t\xC3\xA9", true, "été"),
        U("\xDF\xBF", true, "U+07FF (last 2-byte)"),
        U("\xE0\xA0\x80", true, "U+0800 (first 3-byte)"),
        U("\xE2\x82\xAC", true, "U+20AC euro"),
        U("\xED\x9F\xBF", true, "U+D7FF (before surrogates)"),
        U("\xEE\x80\x80", true, "U+E000 (after surrogates)"),
        U("\xEF\xBF\xBD", true, "U+FFFD"),
        U("\xEF\xBF\xBF", true, "U+FFFF (last 3-byte)"),
        U("\xF0\x90\x80\x80", true, "U+10000 (first 4-byte)"),
        U("\xF0\x9F\x98\x80", true, "U+1F600 emoji"),
        U("\xF4\x8F\xBF\xBF", true, "U+10FFFF (last code point)"),
        U("a\xF0\x9F\x98\x80" "b\xC3\xA9" "c", true, "mixed"),
        /* overlong encodings */
        U("\xC0\x80", false, "overlong NUL (C0 80)"),
        U("\xC0\xAF", false, "overlong '/' (C0 AF)"),
        U("\xC1\xBF", false, "overlong U+007F (C1 BF)"),
        U("\xE0\x80\x80", false, "overlong 3-byte NUL"),
        U("\xE0\x80\xAF", false, "overlong 3-byte '/'"),
        U("\xE0\x9F\xBF", false, "overlong U+07FF in 3 bytes"),
        U("\xF0\x80\x80\x80", false, "overlong 4-byte NUL"),
        U("\xF0\x8F\xBF\xBF", false, "overlong U+FFFF in 4 bytes"),
        /* UTF-16 surrogates */
        U("\xED\xA0\x80", false, "U+D800"),
        U("\xED\xAD\xBF", false, "U+DB7F"),
        U("\xED\xB0\x80", false, "U+DC00"),
        U("\xED\xBF\xBF", false, "U+DFFF"),
        U("\xED\xA0\xBD\xED\xB8\x80", false, "CESU-8 surrogate pair"),
        /* beyond U+10FFFF */
        U("\xF4\x90\x80\x80", false, "U+110000"),
        U("\xF5\x80\x80\x80", false, "F5 lead"),
        U("\xF7\xBF\xBF\xBF", false, "U+1FFFFF"),
        U("\xF8\x88\x80\x80\x80", false, "5-byte form"),
        U("\xFC\x84\x80\x80\x80\x80", false, "6-byte form"),
        U("\xFE", false, "FE"),
        U("\xFF", false, "FF"),
        /* stray continuation bytes */
        U("\x80", false, "lone continuation"),
        U("\xBF", false, "lone continuation BF"),
        U("a\x80" "b", false, "continuation after ASCII"),
        U("\xC3\xA9\xA9", false, "extra continuation"),
        /* truncated sequences */
        U("\xC3", false, "truncated 2-byte"),
        U("\xE2\x82", false, "truncated 3-byte"),
        U("\xE2", false, "lead of 3-byte only"),
        U("\xF0\x9F\x98", false, "truncated 4-byte"),
        U("abc\xF0\x9F", false, "truncated at the end"),
        U("\xC3" "a", false, "2-byte lead then ASCII"),
        U("\xE2\x28\xA1", false, "bad second byte"),
        U("\xE2\x82\x28", false, "bad third byte"),
        U("\xF0\x9F\x98" "a", false, "bad fourth byte"),
        U("\xF0\x28\x8C\xBC", false, "4-byte bad second"),
};

TEST(utf8_valid_table)
{
        for (size_t i = 0; i < ARRAY_SIZE(utf8_cases); i++) {
                const struct utf8_case *c = &utf8_cases[i];
                if (utf8_valid(c->s, c->len) != c->valid)
                        TAP_FAIL("case %zu (%s): utf8_valid != %d", i, c->what, c->valid);
        }
}

/* The length bound is honoured: a valid sequence cut by len is invalid,
 * and bytes after len are never looked at. */
TEST(utf8_valid_respects_len)
{
        ASSERT_TRUE(!utf8_valid("\xC3\xA9", 1));
        ASSERT_TRUE(!utf8_valid("\xF0\x9F\x98\x80", 3));
        ASSERT_TRUE(utf8_valid("ab\xFF", 2));
        ASSERT_TRUE(utf8_valid("\xFF", 0));
}

/* Sanitising any input yields valid UTF-8; valid input comes back as is. */
TEST(utf8_sanitize_table)
{
        char out[64];
        for (size_t i = 0; i < ARRAY_SIZE(utf8_cases); i++) {
                const struct utf8_case *c = &utf8_cases[i];
                ASSERT_TRUE(3 * c->len + 1 <= sizeof(out));
                memset(out, 'X', sizeof(out));
                size_t n = utf8_sanitize(c->s, c->len, out);
                if (n > 3 * c->len)
                        TAP_FAIL("case %zu (%s): %zu bytes out of %zu", i, c->what, n, c->len);
                if (out[n] != '\0')
                        TAP_FAIL("case %zu (%s): not NUL-terminated", i, c->what);
                if (!utf8_valid(out, n))
                        TAP_FAIL("case %zu (%s): sanitised output is not valid", i, c->what);
                if (c->valid && (n != c->len || memcmp(out, c->s, n) != 0))
                        TAP_FAIL("case %zu (%s): valid input changed", i, c->what);
                if (!c->valid && !memmem(out, n, "\xEF\xBF\xBD", 3))
                        TAP_FAIL("case %zu (%s): no U+FFFD in output", i, c->what);
        }
}

TEST(utf8_sanitize_output)
{
        char out[64];
        size_t n;

        n = utf8_sanitize("a\xFF" "b", 3, out);
        ASSERT_EQ(n, 5);
        ASSERT_STREQ(out, "a\xEF\xBF\xBD" "b");

        /* overlong NUL: both bytes invalid, no NUL smuggled through */
        n = utf8_sanitize("\xC0\x80", 2, out);
        ASSERT_EQ(n, 6);
        ASSERT_STREQ(out, "\xEF\xBF\xBD\xEF\xBF\xBD");

        /* a surrogate is replaced, the valid neighbours stay */
        n = utf8_sanitize("x\xED\xA0\x80y", 5, out);
        ASSERT_TRUE(memcmp(out, "x\xEF\xBF\xBD", 4) == 0);
        ASSERT_EQ(out[n - 1], 'y');
        ASSERT_TRUE(utf8_valid(out, n));

        /* truncated sequence at the end */
        n = utf8_sanitize("ok\xE2\x82", 4, out);
        ASSERT_TRUE(memcmp(out, "ok\xEF\xBF\xBD", 5) == 0);
        ASSERT_TRUE(utf8_valid(out, n));

        /* a valid sequence right after a bad byte is kept whole */
        n = utf8_sanitize("\xFF\xC3\xA9", 3, out);
        ASSERT_EQ(n, 5);
        ASSERT_STREQ(out, "\xEF\xBF\xBD\xC3\xA9");

        /* NUL is kept (JSON escapes it) */
        n = utf8_sanitize("a\0b", 3, out);
        ASSERT_EQ(n, 3);
        ASSERT_TRUE(memcmp(out, "a\0b", 4) == 0);

        /* worst case is exactly 3*len */
        n = utf8_sanitize("\xFF\xFE\x80\xC1", 4, out);
        ASSERT_EQ(n, 12);
        ASSERT_EQ(out[12], '\0');

        n = utf8_sanitize("", 0, out);
        ASSERT_EQ(n, 0);
        ASSERT_EQ(out[0], '\0');
}

/* ---- struct buf ---- */

TEST(buf_append_cap)
{
        struct buf b;
        buf_init(&b, 10);
        ASSERT_TRUE(b.data == NULL && b.len == 0 && b.max == 10);
        ASSERT_OK(buf_append(&b, "0123456", 7));
        ASSERT_EQ(b.len, 7);
        ASSERT_STREQ(b.data, "0123456");
        ASSERT_EQ(buf_append(&b, "abcd", 4), -ENOBUFS); /* 11 > 10 */
        ASSERT_EQ(b.len, 7);                          /* nothing partial */
        ASSERT_STREQ(b.data, "0123456");
        ASSERT_OK(buf_append(&b, "abc", 3)); /* exactly max */
        ASSERT_EQ(b.len, 10);
        ASSERT_STREQ(b.data, "0123456abc");
        ASSERT_EQ(buf_append(&b, "x", 1), -ENOBUFS);
        ASSERT_OK(buf_append(&b, "", 0));
        ASSERT_EQ(b.len, 10);
        buf_free(&b);
        ASSERT_TRUE(b.data == NULL && b.len == 0 && b.cap == 0 && b.max == 0);
        buf_free(&b); /* twice is harmless */

        /* max 0: only empty appends fit */
        buf_init(&b, 0);
        ASSERT_EQ(buf_append(&b, "x", 1), -ENOBUFS);
        ASSERT_OK(buf_append(&b, "", 0));
        ASSERT_EQ(b.len, 0);
        buf_free(&b);
}

TEST(buf_append_grows_and_keeps_bytes)
{
        struct buf b;
        buf_init(&b, 1 * MiB);
        char chunk[100];
        for (int i = 0; i < 1000; i++) {
                memset(chunk, 'a' + i % 26, sizeof(chunk));
                ASSERT_OK(buf_append(&b, chunk, sizeof(chunk)));
        }
        ASSERT_EQ(b.len, 100000);
        ASSERT_TRUE(b.cap > b.len);
        ASSERT_EQ(b.data[b.len], '\0');
        for (size_t i = 0; i < b.len; i++)
                if (b.data[i] != 'a' + (char)((i / 100) % 26))
                        TAP_FAIL("byte %zu corrupted", i);
        /* binary data with NULs */
        buf_free(&b);
        buf_init(&b, 16);
        ASSERT_OK(buf_append(&b, "a\0b\0", 4));
        ASSERT_EQ(b.len, 4);
        ASSERT_TRUE(memcmp(b.data, "a\0b\0", 5) == 0);
        buf_free(&b);
}

TEST(buf_printf_short_and_long)
{
        struct buf b;
        buf_init(&b, 64 * KiB);
        ASSERT_OK(buf_printf(&b, "%s=%d;", "x", 42));
        ASSERT_STREQ(b.data, "x=42;");

        /* around the 1024-byte stack buffer and well beyond it */
        static const size_t lens[] = { 1022, 1023, 1024, 1025, 5000, 40000 };
        for (size_t i = 0; i < ARRAY_SIZE(lens); i++) {
                size_t n = lens[i];
                char *s = malloc(n + 1);
                ASSERT_TRUE(s != NULL);
                for (size_t j = 0; j < n; j++)
                        s[j] = (char)('A' + j % 23);
                s[n] = '\0';
                b.len = 0;
                ASSERT_OK(buf_printf(&b, "<%s>", s));
                ASSERT_EQ(b.len, n + 2);
                ASSERT_EQ(b.data[0], '<');
                ASSERT_EQ(b.data[n + 1], '>');
                ASSERT_EQ(b.data[n + 2], '\0');
                ASSERT_TRUE(memcmp(b.data + 1, s, n) == 0);
                free(s);
        }
        buf_free(&b);
}

TEST(buf_printf_respects_cap)
{
        struct buf b;
        buf_init(&b, 2000);
        ASSERT_OK(buf_printf(&b, "%0500d", 7));
        ASSERT_EQ(b.len, 500);
        /* a long formatted string that does not fit: nothing appended */
        ASSERT_EQ(buf_printf(&b, "%01600d", 7), -ENOBUFS);
        ASSERT_EQ(b.len, 500);
        ASSERT_EQ(b.data[500], '\0');
        /* a short one that does not fit either */
        ASSERT_OK(buf_printf(&b, "%01490d", 7));
        ASSERT_EQ(b.len, 1990);
        ASSERT_EQ(buf_printf(&b, "%s", "01234567890"), -ENOBUFS);
        ASSERT_EQ(b.len, 1990);
        ASSERT_OK(buf_printf(&b, "%s", "0123456789"));
        ASSERT_EQ(b.len, 2000);
        buf_free(&b);
}

/* ---- time ---- */

TEST(iso8601_ms_format)
{
        static const struct {
                uint64_t ms;
                const char *want;
        } cases[] = {
                { 0, "1970-01-01T00:00:00.000Z" },
                { 1, "1970-01-01T00:00:00.001Z" },
                { 999, "1970-01-01T00:00:00.999Z" },
                { 1000, "1970-01-01T00:00:01.000Z" },
                { 951782400999ULL, "2000-02-29T00:00:00.999Z" },
                { 1700000000123ULL, "2023-11-14T22:13:20.123Z" },
                { 253402300799999ULL, "9999-12-31T23:59:59.999Z" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char buf[32];
                memset(buf, 'X', sizeof(buf));
                iso8601_ms(cases[i].ms, buf);
                ASSERT_STREQ(buf, cases[i].want);
                ASSERT_EQ(strlen(buf), 24);
        }
}

TEST(clocks_monotonic_and_wall)
{
        uint64_t a = now_ns(), b = now_ns();
        ASSERT_TRUE(b >= a);
        ASSERT_TRUE(now_ms() >= a / 1000000ULL);
        uint64_t w = wall_ms();
        ASSERT_TRUE(w > 1600000000000ULL); /* after 2020 */
        char buf[32];
        iso8601_ms(w, buf);
        ASSERT_EQ(buf[4], '-');
        ASSERT_EQ(buf[10], 'T');
        ASSERT_EQ(buf[23], 'Z');
}

/* ---- file-system helpers ---- */

static char g_dir[64];

static void cleanup_dir(void)
{
        if (g_dir[0])
                rm_rf(g_dir);
}

static const char *make_tmpdir(void)
{
        snprintf(g_dir, sizeof(g_dir), "/tmp/sbx-util-XXXXXX");
        ASSERT_TRUE(mkdtemp(g_dir) != NULL);
        atexit(cleanup_dir);
        return g_dir;
}

/* dir + "/" + rel in one of a few rotating static buffers. */
static const char *pj(const char *dir, const char *rel)
{
        static char bufs[4][PATH_MAX];
        static int next;
        char *b = bufs[next++ % 4];
        snprintf(b, PATH_MAX, "%s/%s", dir, rel);
        return b;
}

static bool is_dir(const char *p)
{
        struct stat st;
        return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *p)
{
        struct stat st;
        return lstat(p, &st) == 0;
}

static void write_file(const char *p, const char *text)
{
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_all(fd, text, strlen(text)));
        close(fd);
}

TEST(mkdir_p_creates_and_is_idempotent)
{
        const char *t = make_tmpdir();
        umask(022);
        ASSERT_OK(mkdir_p(pj(t, "a/b/c"), 0750));
        ASSERT_TRUE(is_dir(pj(t, "a")));
        ASSERT_TRUE(is_dir(pj(t, "a/b")));
        ASSERT_TRUE(is_dir(pj(t, "a/b/c")));
        struct stat st;
        ASSERT_OK(stat(pj(t, "a/b/c"), &st));
        ASSERT_EQ(st.st_mode & 07777, 0750);
        ASSERT_OK(mkdir_p(pj(t, "a/b/c"), 0755));  /* already there */
        ASSERT_OK(mkdir_p(pj(t, "a/b/d/"), 0755)); /* trailing slash */
        ASSERT_TRUE(is_dir(pj(t, "a/b/d")));
        ASSERT_OK(mkdir_p(pj(t, "/x//y"), 0755));  /* doubled slashes */
        ASSERT_TRUE(is_dir(pj(t, "x/y")));
}

TEST(mkdir_p_errors)
{
        const char *t = make_tmpdir();
        write_file(pj(t, "file"), "x");
        ASSERT_EQ(mkdir_p(pj(t, "file/sub"), 0755), -ENOTDIR);
        /* the final component exists but is not a directory */
        ASSERT_EQ(mkdir_p(pj(t, "file"), 0755), -ENOTDIR);
        /* …while a symlink to a directory is fine */
        ASSERT_OK(mkdir_p(pj(t, "realdir"), 0755));
        ASSERT_OK(symlink(pj(t, "realdir"), pj(t, "dirlink")));
        ASSERT_OK(mkdir_p(pj(t, "dirlink"), 0755));
        ASSERT_OK(mkdir_p(pj(t, "dirlink/inner"), 0755));
        ASSERT_TRUE(is_dir(pj(t, "realdir/inner")));
        ASSERT_EQ(mkdir_p("", 0755), -EINVAL);
        char *longp = malloc(5000);
        ASSERT_TRUE(longp != NULL);
        memset(longp, 'a', 4999);
        longp[0] = '/';
        longp[4999] = '\0';
        ASSERT_EQ(mkdir_p(longp, 0755), -EINVAL);
        free(longp);
}

TEST(rm_rf_tree_does_not_follow_symlinks)
{
        const char *t = make_tmpdir();
        /* outside/ must survive; tree/ holds links to it */
        ASSERT_OK(mkdir_p(pj(t, "outside/deep"), 0755));
        write_file(pj(t, "outside/keep"), "precious");
        write_file(pj(t, "outside/deep/keep2"), "precious too");
        ASSERT_OK(mkdir_p(pj(t, "tree/d/e"), 0755));
        write_file(pj(t, "tree/f"), "1");
        write_file(pj(t, "tree/d/g"), "2");
        write_file(pj(t, "tree/d/e/h"), "3");
        ASSERT_OK(symlink(pj(t, "outside"), pj(t, "tree/link_dir")));
        ASSERT_OK(symlink(pj(t, "outside/keep"), pj(t, "tree/d/link_file")));
        ASSERT_OK(symlink("../../../outside", pj(t, "tree/d/e/rel_link")));
        ASSERT_OK(symlink("/nonexistent/dangling", pj(t, "tree/dangling")));
        ASSERT_OK(mkfifo(pj(t, "tree/fifo"), 0600));
        /* an empty directory with no permissions at all (root only: an
         * unprivileged rm_rf cannot open it) */
        if (geteuid() == 0)
                ASSERT_OK(mkdir(pj(t, "tree/locked"), 0));

        ASSERT_OK(rm_rf(pj(t, "tree")));
        ASSERT_TRUE(!exists(pj(t, "tree")));
        ASSERT_TRUE(is_dir(pj(t, "outside")));
        ASSERT_TRUE(is_dir(pj(t, "outside/deep")));
        char buf[64];
        ASSERT_OK(read_file_small(pj(t, "outside/keep"), buf, sizeof(buf), NULL));
        ASSERT_STREQ(buf, "precious");
        ASSERT_OK(read_file_small(pj(t, "outside/deep/keep2"), buf, sizeof(buf), NULL));
        ASSERT_STREQ(buf, "precious too");
}

TEST(rm_rf_symlink_root_removes_only_the_link)
{
        const char *t = make_tmpdir();
        ASSERT_OK(mkdir_p(pj(t, "target"), 0755));
        write_file(pj(t, "target/x"), "x");
        ASSERT_OK(symlink(pj(t, "target"), pj(t, "link")));
        ASSERT_OK(rm_rf(pj(t, "link")));
        ASSERT_TRUE(!exists(pj(t, "link")));
        ASSERT_TRUE(exists(pj(t, "target/x")));
}

TEST(rm_rf_file_and_missing)
{
        const char *t = make_tmpdir();
        write_file(pj(t, "plain"), "x");
        ASSERT_OK(rm_rf(pj(t, "plain")));
        ASSERT_TRUE(!exists(pj(t, "plain")));
        ASSERT_OK(rm_rf(pj(t, "never-existed")));
        ASSERT_OK(rm_rf(pj(t, "never/existed/either")));
        /* rm_rf_at relative to a directory fd */
        ASSERT_OK(mkdir_p(pj(t, "sub/a/b"), 0755));
        int dfd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(rm_rf_at(dfd, "sub"));
        close(dfd);
        ASSERT_TRUE(!exists(pj(t, "sub")));
        ASSERT_TRUE(is_dir(t));
}

/* ---- small files ---- */

TEST(read_u64_file_values)
{
        const char *t = make_tmpdir();
        const char *p = pj(t, "val");
        uint64_t v;

        write_file(p, "max\n");
        v = 0;
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_TRUE(v == UINT64_MAX);

        write_file(p, "max");
        v = 0;
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_TRUE(v == UINT64_MAX);

        write_file(p, "268435456\n");
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 268435456);

        write_file(p, "0");
        v = 5;
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_EQ(v, 0);

        write_file(p, "18446744073709551615\n");
        v = 0;
        ASSERT_OK(read_u64_file(p, &v));
        ASSERT_TRUE(v == UINT64_MAX);

        v = 77;
        write_file(p, "");
        ASSERT_EQ(read_u64_file(p, &v), -EINVAL);
        write_file(p, "abc\n");
        ASSERT_EQ(read_u64_file(p, &v), -EINVAL);
        write_file(p, "99999999999999999999\n");
        ASSERT_EQ(read_u64_file(p, &v), -EINVAL);
        ASSERT_EQ(v, 77); /* untouched on failure */
        ASSERT_EQ(read_u64_file(pj(t, "missing"), &v), -ENOENT);
}

TEST(read_file_small_and_write_string_file)
{
        const char *t = make_tmpdir();
        const char *p = pj(t, "f");
        char buf[8];
        size_t len = 99;
        write_file(p, "0123456789");
        ASSERT_OK(read_file_small(p, buf, sizeof(buf), &len));
        ASSERT_EQ(len, 7); /* at most max-1 bytes, NUL-terminated */
        ASSERT_STREQ(buf, "0123456");
        /* write_string_file does not create files (cgroup/proc style) */
        ASSERT_EQ(write_string_file(pj(t, "nope"), "x"), -ENOENT);
        ASSERT_TRUE(!exists(pj(t, "nope")));
        write_file(p, "");
        ASSERT_OK(write_string_file(p, "abc"));
        ASSERT_OK(read_file_small(p, buf, sizeof(buf), &len));
        ASSERT_EQ(len, 3);
        ASSERT_STREQ(buf, "abc");
        ASSERT_EQ(read_file_small(pj(t, "missing"), buf, sizeof(buf), NULL), -ENOENT);
}

TEST(read_all_and_write_all_contract)
{
        int p[2];
        ASSERT_OK(pipe(p));
        ASSERT_OK(write_all(p[1], "hello", 5));
        close(p[1]);
        char buf[8] = { 0 };
        ASSERT_OK(read_all(p[0], buf, 3));
        ASSERT_STREQ(buf, "hel");
        /* Two bytes left, three wanted: the file ended first. */
        ASSERT_ERR(read_all(p[0], buf, 3), EIO);
        close(p[0]);
        ASSERT_ERR(read_all(p[0], buf, 1), EBADF);
        ASSERT_ERR(write_all(p[1], "x", 1), EBADF);
        ASSERT_OK(read_all(-1, buf, 0)); /* nothing to read: nothing touched */
}
