/* Unit tests for the tunables table (src/config/config.c), through its public
 * functions only: defaults, bounds, size suffixes, bools and the file
 * parser. Config files are written to mkstemp() temp files. */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>

#include "config/config.h"
#include "base/util.h"
#include "tap.h"

/* Writes text to a new temp file; the path is returned in a static buffer.
 * The previous file is removed first and the last one at exit. */
static char g_tmp[64];

static void rm_tmp(void)
{
        if (g_tmp[0])
                unlink(g_tmp);
        g_tmp[0] = '\0';
}

static const char *write_tmp(const char *text)
{
        static bool registered;
        if (!registered)
                atexit(rm_tmp);
        registered = true;
        rm_tmp();
        snprintf(g_tmp, sizeof(g_tmp), "/tmp/sbx-config-XXXXXX");
        int fd = mkstemp(g_tmp);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(write_all(fd, text, strlen(text)));
        close(fd);
        return g_tmp;
}

TEST(config_defaults)
{
        struct config c;
        memset(&c, 0xAB, sizeof(c));
        config_defaults(&c);
        ASSERT_STREQ(c.listen, "127.0.0.1:8787");
        ASSERT_STREQ(c.data_dir, "./data");
        ASSERT_STREQ(c.kernels_dir, "");
        ASSERT_STREQ(c.api_key, "");
        ASSERT_STREQ(c.log_level, "info");
        ASSERT_STREQ(c.cgroup, "auto");
        ASSERT_EQ(c.insecure, false);
        ASSERT_EQ(c.http_threads, 4);
        ASSERT_EQ(c.http_max_connections, 4096);
        ASSERT_EQ(c.http_header_bytes, 32 * KiB);
        ASSERT_EQ(c.exec_workers, 8);
        ASSERT_EQ(c.exec_queue, 64);
        ASSERT_EQ(c.code_bytes, 64 * KiB);
        ASSERT_EQ(c.request_bytes, 96 * KiB);
        ASSERT_EQ(c.cpu_ms, 10000);
        ASSERT_EQ(c.wall_ms, 30000);
        ASSERT_EQ(c.memory_bytes, 256 * MiB);
        ASSERT_EQ(c.pids, 64);
        ASSERT_EQ(c.output_bytes, 32 * KiB);
        ASSERT_EQ(c.output_entries, 200);
        ASSERT_EQ(c.file_bytes, 1 * MiB);
        ASSERT_EQ(c.nofile, 256);
        ASSERT_EQ(c.tmp_bytes, 64 * MiB);
        ASSERT_EQ(c.workspace_bytes, 16 * MiB);
        ASSERT_EQ(c.idle_ttl_ms, 86400000);
        ASSERT_EQ(c.max_contexts, 8);
        ASSERT_EQ(c.max_resident_contexts, 32);
}

/* The printed table lists every key with its default and bounds; every
 * default read back from it must be accepted by config_set (so no default
 * lies outside its own bounds) and leave the defaults unchanged. */
TEST(config_print_table_rows)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        ASSERT_TRUE(f != NULL);
        config_print_table(f);
        fclose(f);
        ASSERT_TRUE(strstr(text, "| `limits.code_bytes` | 65536 | 1 … 16777216 |") != NULL);
        ASSERT_TRUE(strstr(text, "| `listen` | `127.0.0.1:8787` | string |") != NULL);
        ASSERT_TRUE(strstr(text, "| `insecure` | false | bool |") != NULL);

        struct config def, c;
        config_defaults(&def);
        c = def;
        size_t rows = 0;
        for (char *p = text; (p = strstr(p, "\n| `")); p++) {
                char key[64], val[300];
                char *k = p + 4, *ke = strchr(k, '`');
                ASSERT_TRUE(ke && (size_t)(ke - k) < sizeof(key));
                memcpy(key, k, (size_t)(ke - k));
                key[ke - k] = '\0';
                ASSERT_TRUE(strncmp(ke, "` | ", 4) == 0);
                char *v = ke + 4, *ve;
                if (*v == '`') {
                        v++;
                        ve = strchr(v, '`');
                } else {
                        ve = strchr(v, ' ');
                }
                ASSERT_TRUE(ve && (size_t)(ve - v) < sizeof(val));
                memcpy(val, v, (size_t)(ve - v));
                val[ve - v] = '\0';
                if (strchr(key, '<')) { /* a pattern row: pool.<lang> */
                        ASSERT_STREQ(key, "pool.<lang>");
                        continue;
                }
                int r = config_set(&c, key, val);
                if (r < 0)
                        TAP_FAIL("default of '%s' ('%s') rejected: %d", key, val, r);
                rows++;
        }
        ASSERT_TRUE(rows >= 33);
        ASSERT_TRUE(memcmp(&c, &def, sizeof(c)) == 0);
        free(text);
}

TEST(config_set_bounds)
{
        struct config c;
        config_defaults(&c);
        /* http.threads: 1 … 64 */
        ASSERT_EQ(config_set(&c, "http.threads", "0"), -ERANGE);
        ASSERT_EQ(c.http_threads, 4); /* unchanged on failure */
        ASSERT_EQ(config_set(&c, "http.threads", "65"), -ERANGE);
        ASSERT_EQ(c.http_threads, 4);
        ASSERT_OK(config_set(&c, "http.threads", "1"));
        ASSERT_EQ(c.http_threads, 1);
        ASSERT_OK(config_set(&c, "http.threads", "64"));
        ASSERT_EQ(c.http_threads, 64);
        /* limits.memory_bytes: 16 MiB … 64 GiB, with suffixes */
        ASSERT_EQ(config_set(&c, "limits.memory_bytes", "15M"), -ERANGE);
        ASSERT_EQ(config_set(&c, "limits.memory_bytes", "16777215"), -ERANGE);
        ASSERT_OK(config_set(&c, "limits.memory_bytes", "16M"));
        ASSERT_EQ(c.memory_bytes, 16 * MiB);
        ASSERT_OK(config_set(&c, "limits.memory_bytes", "64G"));
        ASSERT_EQ(c.memory_bytes, 64 * GiB);
        ASSERT_EQ(config_set(&c, "limits.memory_bytes", "65G"), -ERANGE);
        ASSERT_EQ(c.memory_bytes, 64 * GiB);
        /* exec.queue allows 0 */
        ASSERT_OK(config_set(&c, "exec.queue", "0"));
        ASSERT_EQ(c.exec_queue, 0);
        /* a value that overflows even before bounds */
        ASSERT_EQ(config_set(&c, "sandbox.idle_ttl_ms", "99999999999999999999"), -ERANGE);
        ASSERT_EQ(c.idle_ttl_ms, 86400000);
        ASSERT_OK(config_set(&c, "sandbox.idle_ttl_ms", "0"));
        ASSERT_EQ(c.idle_ttl_ms, 0);
        /* non-numbers */
        ASSERT_EQ(config_set(&c, "limits.pids", "many"), -EINVAL);
        ASSERT_EQ(config_set(&c, "limits.pids", ""), -EINVAL);
        ASSERT_EQ(config_set(&c, "limits.pids", "-5"), -EINVAL);
        ASSERT_EQ(c.pids, 64);
}

TEST(config_pool_sizes)
{
        struct config c;
        config_defaults(&c);
        ASSERT_EQ(config_pool_size(&c, "python"), 2);
        ASSERT_EQ(c.pool_refill_per_s, 50);
        ASSERT_EQ(c.pool_grow_idle_s, 60);
        ASSERT_EQ(c.pool_memory_budget, 1 * GiB);
        /* pool.size is the shorthand for every language... */
        ASSERT_OK(config_set(&c, "pool.size", "0"));
        ASSERT_EQ(config_pool_size(&c, "python"), 0);
        ASSERT_EQ(config_pool_size(&c, "javascript"), 0);
        ASSERT_EQ(config_pool_size(&c, "perl"), 0);
        ASSERT_EQ(config_pool_size(&c, "ruby"), 0);
        /* ...and a later pool.<lang> overrides one of them. */
        ASSERT_OK(config_set(&c, "pool.perl", "5"));
        ASSERT_EQ(config_pool_size(&c, "perl"), 5);
        ASSERT_EQ(config_pool_size(&c, "ruby"), 0);
        ASSERT_EQ(config_set(&c, "pool.perl", "65"), -ERANGE);
        ASSERT_EQ(config_pool_size(&c, "perl"), 5);
        /* An unknown language falls back to pool.size. */
        ASSERT_OK(config_set(&c, "pool.size", "3"));
        ASSERT_EQ(config_pool_size(&c, "cobol"), 3);
        ASSERT_EQ(config_pool_size(&c, "perl"), 3);
}

/* pool.<lang> is a table, not one field per language: any id is stored
 * (main.c checks it against the runtimes), bad ids are unknown keys. */
TEST(config_pool_table)
{
        struct config c;
        config_defaults(&c);
        ASSERT_EQ(c.npools, 0);
        ASSERT_OK(config_set(&c, "pool.shell", "1"));
        ASSERT_OK(config_set(&c, "pool.python", "7"));
        ASSERT_OK(config_set(&c, "pool.shell", "4")); /* updates, no second entry */
        ASSERT_EQ(c.npools, 2);
        ASSERT_STREQ(c.pools[0].lang, "shell");
        ASSERT_EQ(config_pool_size(&c, "shell"), 4);
        ASSERT_EQ(config_pool_size(&c, "python"), 7);
        ASSERT_EQ(config_set(&c, "pool.", "1"), -ENOENT);
        ASSERT_EQ(config_set(&c, "pool.Python", "1"), -ENOENT);
        ASSERT_EQ(config_set(&c, "pool.a b", "1"), -ENOENT);
        ASSERT_EQ(config_set(&c, "pool.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1"), -ENOENT);
        ASSERT_EQ(config_set(&c, "pool.ruby", "x"), -EINVAL);
        ASSERT_EQ(c.npools, 2);
        /* The table is bounded. */
        char key[32];
        for (int i = 0; c.npools < CONFIG_POOLS_MAX; i++) {
                snprintf(key, sizeof(key), "pool.l%d", i);
                ASSERT_OK(config_set(&c, key, "1"));
        }
        ASSERT_EQ(config_set(&c, "pool.onemore", "1"), -E2BIG);
        ASSERT_OK(config_set(&c, "pool.shell", "2")); /* existing entries still update */
        /* pool.size forgets every override. */
        ASSERT_OK(config_set(&c, "pool.size", "5"));
        ASSERT_EQ(c.npools, 0);
        ASSERT_EQ(config_pool_size(&c, "shell"), 5);
}

TEST(config_set_unknown_key)
{
        struct config c, before;
        config_defaults(&c);
        before = c;
        ASSERT_EQ(config_set(&c, "no.such.key", "1"), -ENOENT);
        ASSERT_EQ(config_set(&c, "", "1"), -ENOENT);
        ASSERT_EQ(config_set(&c, "HTTP.THREADS", "8"), -ENOENT); /* keys are case-sensitive */
        ASSERT_EQ(config_set(&c, "http.threads ", "8"), -ENOENT);
        ASSERT_EQ(config_set(&c, "limits", "8"), -ENOENT);
        ASSERT_TRUE(memcmp(&c, &before, sizeof(c)) == 0);
}

TEST(config_set_strings)
{
        struct config c;
        config_defaults(&c);
        ASSERT_OK(config_set(&c, "listen", "[::1]:9000"));
        ASSERT_STREQ(c.listen, "[::1]:9000");
        ASSERT_OK(config_set(&c, "api_key", ""));
        ASSERT_STREQ(c.api_key, "");
        /* capacity: listen is char[256] → 255 characters fit, 256 do not */
        char s[300];
        memset(s, 'a', 255);
        s[255] = '\0';
        ASSERT_OK(config_set(&c, "listen", s));
        ASSERT_EQ(strlen(c.listen), 255);
        memset(s, 'b', 256);
        s[256] = '\0';
        ASSERT_EQ(config_set(&c, "listen", s), -ERANGE);
        ASSERT_EQ(c.listen[0], 'a'); /* unchanged */
        ASSERT_EQ(config_set(&c, "cgroup", "v1234567"), -ERANGE); /* char[8] */
        ASSERT_OK(config_set(&c, "cgroup", "none"));
        ASSERT_STREQ(c.cgroup, "none");
}

TEST(config_parse_u64_suffixes)
{
        static const struct {
                const char *s;
                uint64_t v;
        } ok[] = {
                { "0", 0 },
                { "42", 42 },
                { "64K", 64 * KiB },
                { "64k", 64 * KiB },
                { "16M", 16 * MiB },
                { "16m", 16 * MiB },
                { "1G", 1 * GiB },
                { "2g", 2 * GiB },
                { "2KiB", 2 * KiB },
                { "3MiB", 3 * MiB },
                { "4GiB", 4 * GiB },
                { "5KB", 5 * KiB },
                { "6B", 6 },
                { "007", 7 },
                { "18446744073709551615", UINT64_MAX },
                { "17179869183G", 17179869183ULL * GiB },
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                uint64_t v = 12345;
                int r = config_parse_u64(ok[i].s, &v);
                if (r != 0 || v != ok[i].v)
                        TAP_FAIL("'%s': r=%d v=%llu, want %llu", ok[i].s, r, (unsigned long long)v,
                                 (unsigned long long)ok[i].v);
        }

        static const struct {
                const char *s;
                int r;
        } bad[] = {
                { "", -EINVAL },       { "K", -EINVAL },      { "-1", -EINVAL },   { "+1", -EINVAL },
                { " 1", -EINVAL },     { "1 ", -EINVAL },     { "1 K", -EINVAL },  { "12X", -EINVAL },
                { "1.5M", -EINVAL },   { "0x10", -EINVAL },   { "1KK", -EINVAL },  { "1KiBB", -EINVAL },
                { "1KBB", -EINVAL },   { "1T", -EINVAL },     { "1Kb", -EINVAL },  { "1e3", -EINVAL },
                { "16i", -EINVAL },    { "16iB", -EINVAL },   { "16Ki", -EINVAL },
                { "18446744073709551616", -ERANGE },
                { "17179869184G", -ERANGE },
                { "18014398509481984K", -ERANGE },
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                uint64_t v = 12345;
                int r = config_parse_u64(bad[i].s, &v);
                if (r != bad[i].r || v != 12345)
                        TAP_FAIL("'%s': r=%d v=%llu, want r=%d and v untouched", bad[i].s, r,
                                 (unsigned long long)v, bad[i].r);
        }
        uint64_t v = 1;
        ASSERT_EQ(config_parse_u64(NULL, &v), -EINVAL);
        ASSERT_EQ(v, 1);
}

TEST(config_set_bools)
{
        struct config c;
        config_defaults(&c);
        static const char *const yes[] = { "1", "true", "TRUE", "yes", "Yes", "on", "ON" };
        static const char *const no[] = { "0", "false", "False", "no", "NO", "off", "Off" };
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                c.insecure = false;
                ASSERT_OK(config_set(&c, "insecure", yes[i]));
                if (!c.insecure)
                        TAP_FAIL("'%s' should be true", yes[i]);
        }
        for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
                c.insecure = true;
                ASSERT_OK(config_set(&c, "insecure", no[i]));
                if (c.insecure)
                        TAP_FAIL("'%s' should be false", no[i]);
        }
        static const char *const bad[] = { "", "2", "maybe", "y", "n", "truee", " true", "-1" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                c.insecure = true;
                if (config_set(&c, "insecure", bad[i]) != -EINVAL)
                        TAP_FAIL("'%s' should be -EINVAL", bad[i]);
                ASSERT_EQ(c.insecure, true);
        }
}

TEST(config_load_file_ok)
{
        const char *path = write_tmp("# sandboxd test config\n"
                                     "\n"
                                     "   \t\n"
                                     "listen = 0.0.0.0:9999\n"
                                     "  http.threads=8   # trailing comment\n"
                                     "limits.memory_bytes = 512M\n"
                                     "insecure = yes\n"
                                     "\t# indented comment = ignored\n"
                                     "log_level =debug\n"
                                     "api_key =\n"
                                     "limits.cpu_ms = 2000");  /* no final newline */
        struct config c;
        config_defaults(&c);
        int line = -1;
        ASSERT_OK(config_load_file(&c, path, &line));
        ASSERT_EQ(line, -1); /* ret_line written only on failure */
        ASSERT_STREQ(c.listen, "0.0.0.0:9999");
        ASSERT_EQ(c.http_threads, 8);
        ASSERT_EQ(c.memory_bytes, 512 * MiB);
        ASSERT_EQ(c.insecure, true);
        ASSERT_STREQ(c.log_level, "debug");
        ASSERT_STREQ(c.api_key, "");
        ASSERT_EQ(c.cpu_ms, 2000);
        ASSERT_EQ(c.pids, 64); /* untouched keys keep defaults */
}

TEST(config_load_file_empty_and_comments_only)
{
        struct config c, before;
        config_defaults(&c);
        before = c;
        ASSERT_OK(config_load_file(&c, write_tmp(""), NULL));
        ASSERT_OK(config_load_file(&c, write_tmp("# only\n\n#comments\n"), NULL));
        ASSERT_TRUE(memcmp(&c, &before, sizeof(c)) == 0);
}

static void expect_load_error(const char *text, int want_r, int want_line)
{
        struct config c;
        config_defaults(&c);
        int line = -1;
        int r = config_load_file(&c, write_tmp(text), &line);
        if (r != want_r || line != want_line)
                TAP_FAIL("r=%d line=%d, want r=%d line=%d for:\n%s", r, line, want_r, want_line, text);
}

TEST(config_load_file_errors_report_line)
{
        /* A line without '=' */
        expect_load_error("# c\n\nhttp.threads = 2\njust some words\nlimits.pids = 8\n", -EINVAL, 4);
        /* Unknown key on line 3 (comments and blanks count as lines) */
        expect_load_error("\n# x\nno.such = 1\n", -ENOENT, 3);
        /* Out of range on line 2 */
        expect_load_error("limits.pids = 8\nlimits.pids = 3\n", -ERANGE, 2);
        /* Bad bool on line 1 */
        expect_load_error("insecure = perhaps\n", -EINVAL, 1);
        /* Bad size on the last line, without newline */
        expect_load_error("limits.tmp_bytes = 1M\nlimits.tmp_bytes = 12Q", -EINVAL, 2);
        /* '=' only inside a comment does not count */
        expect_load_error("http.threads # = 4\n", -EINVAL, 1);
        /* Empty key */
        expect_load_error(" = 4\n", -ENOENT, 1);
}

TEST(config_load_file_stops_at_first_error)
{
        struct config c;
        config_defaults(&c);
        int line = 0;
        const char *path = write_tmp("http.threads = 2\nbogus line\nhttp.threads = 3\n");
        ASSERT_EQ(config_load_file(&c, path, &line), -EINVAL);
        ASSERT_EQ(line, 2);
        ASSERT_EQ(c.http_threads, 2); /* earlier lines applied, later ones not */
        /* ret_line may be NULL */
        config_defaults(&c);
        ASSERT_EQ(config_load_file(&c, path, NULL), -EINVAL);
}

TEST(config_load_file_missing)
{
        struct config c;
        config_defaults(&c);
        int line = -7;
        ASSERT_EQ(config_load_file(&c, "/nonexistent/sandboxd.conf", &line), -ENOENT);
        ASSERT_EQ(line, -7);
}

/* Issue 13: the enumerated strings refuse any other word, prefixes and
 * the empty string included, and keep the last good value. */
TEST(config_set_choices)
{
        struct config c;
        config_defaults(&c);
        ASSERT_STREQ(c.journal_sync, "group");
        ASSERT_EQ(c.journal_sync_ms, 100);
        ASSERT_EQ(c.workspace_images, 4);
        ASSERT_OK(config_set(&c, "sandbox.journal_sync", "always"));
        ASSERT_STREQ(c.journal_sync, "always");
        ASSERT_OK(config_set(&c, "sandbox.journal_sync", "none"));
        ASSERT_STREQ(c.journal_sync, "none");
        const char *bad[] = { "", "grou", "groups", "ALWAYS", "none|group", "|", "off" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                ASSERT_ERR(config_set(&c, "sandbox.journal_sync", bad[i]), EINVAL);
        ASSERT_STREQ(c.journal_sync, "none");
        ASSERT_OK(config_set(&c, "controller.egress_mode", "enforce"));
        ASSERT_ERR(config_set(&c, "controller.egress_mode", "enforc"), EINVAL);
        ASSERT_OK(config_set(&c, "pool.workspace_images", "0"));
        ASSERT_EQ(c.workspace_images, 0);
        ASSERT_ERR(config_set(&c, "pool.workspace_images", "65"), ERANGE);
}
