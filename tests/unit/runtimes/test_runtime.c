/* Unit tests for the language table (src/runtimes/runtime.c): name
 * normalisation and resolution, listing order, and kernel argv expansion. */
#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/jail.h"
#include "runtimes/runtime.h"
#include "tap.h"

TEST(runtime_listing_order)
{
        static const char *const ids[] = { "javascript", "python", "perl", "ruby", "shell" };
        ASSERT_EQ(runtime_count(), ARRAY_SIZE(ids));
        for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
                const struct runtime *rt = runtime_at(i);
                ASSERT_TRUE(rt != NULL);
                ASSERT_STREQ(rt->id, ids[i]);
                ASSERT_TRUE(runtime_find(ids[i]) == rt);
                ASSERT_TRUE(rt->name && rt->name[0]);
                ASSERT_TRUE(rt->argv[0] && rt->argv[0][0] == '/');
                ASSERT_TRUE(rt->version_argv[0] && rt->version_argv[0][0] == '/');
        }
        ASSERT_TRUE(runtime_at(runtime_count()) == NULL);
        ASSERT_TRUE(runtime_at((size_t)-1) == NULL);
}

TEST(runtime_find_is_exact)
{
        ASSERT_TRUE(runtime_find(NULL) == NULL);
        ASSERT_TRUE(runtime_find("") == NULL);
        ASSERT_TRUE(runtime_find("Python") == NULL); /* canonical ids only */
        ASSERT_TRUE(runtime_find("python3") == NULL);
        ASSERT_TRUE(runtime_find("typescript") == NULL);
        ASSERT_TRUE(runtime_find("__proto__") == NULL);
}

TEST(runtime_normalize_aliases)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "python", "python" },        { "python3", "python" },     { "py", "python" },
                { "PY", "python" },            { "Python3", "python" },     { "PYTHON", "python" },
                { "javascript", "javascript" }, { "JavaScript", "javascript" }, { "js", "javascript" },
                { "JS", "javascript" },        { "node", "javascript" },    { "Node", "javascript" },
                { "typescript", "typescript" }, { "TypeScript", "typescript" }, { "ts", "typescript" },
                { "TS", "typescript" },        { "perl", "perl" },          { "PERL", "perl" },
                { "ruby", "ruby" },            { "rb", "ruby" },            { "Ruby", "ruby" },
                { "shell", "shell" },          { "bash", "shell" },         { "SH", "shell" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *got = runtime_normalize(cases[i].in);
                if (!got || strcmp(got, cases[i].out) != 0)
                        TAP_FAIL("normalize('%s') = '%s', want '%s'", cases[i].in, got ? got : "(null)",
                                 cases[i].out);
        }
}

TEST(runtime_normalize_unknown)
{
        static const char *const bad[] = {
                "",          "__proto__", "constructor", "toString", "hasOwnProperty", "valueOf",
                "prototype", "python ",   " python",     "pyth",     "python3.11",     "python2",
                "nodejs",    "deno",      "cobol",       "j",        "javascript\n",   "p",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (runtime_normalize(bad[i]) != NULL)
                        TAP_FAIL("normalize('%s') should be NULL", bad[i]);
        ASSERT_TRUE(runtime_normalize(NULL) == NULL);
}

TEST(runtime_resolve_names)
{
        bool ts = true;
        const struct runtime *rt = runtime_resolve("python3", &ts);
        ASSERT_TRUE(rt == runtime_find("python"));
        ASSERT_EQ(ts, false);

        ts = false;
        rt = runtime_resolve("ts", &ts);
        ASSERT_TRUE(rt == runtime_find("javascript"));
        ASSERT_EQ(ts, true);

        ts = true;
        rt = runtime_resolve("JS", &ts);
        ASSERT_TRUE(rt == runtime_find("javascript"));
        ASSERT_EQ(ts, false);

        rt = runtime_resolve("TypeScript", NULL); /* ret_typescript optional */
        ASSERT_TRUE(rt == runtime_find("javascript"));
        ASSERT_TRUE(runtime_resolve("rb", NULL) == runtime_find("ruby"));
        ASSERT_TRUE(runtime_resolve("perl", NULL) == runtime_find("perl"));

        /* unknown: NULL and the out-param untouched */
        static const char *const bad[] = { "__proto__", "constructor", "toString", "cobol", "" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                bool untouched = true;
                if (runtime_resolve(bad[i], &untouched) != NULL)
                        TAP_FAIL("resolve('%s') should be NULL", bad[i]);
                ASSERT_EQ(untouched, true);
                untouched = false;
                ASSERT_TRUE(runtime_resolve(bad[i], &untouched) == NULL);
                ASSERT_EQ(untouched, false);
        }
        ASSERT_TRUE(runtime_resolve(NULL, NULL) == NULL);
}

/* ---- argv expansion ---- */

static size_t argv_len(const char **a)
{
        size_t n = 0;
        while (a[n])
                n++;
        return n;
}

TEST(build_argv_expected)
{
        const char *out[JAIL_MAX_ARGS + 1];
        char scratch[512];

        ASSERT_OK(runtime_build_argv(runtime_find("javascript"), "once", 192, out, ARRAY_SIZE(out), scratch,
                                     sizeof(scratch)));
        ASSERT_EQ(argv_len(out), 5);
        ASSERT_STREQ(out[0], "/usr/bin/node");
        ASSERT_STREQ(out[1], "--max-old-space-size=192");
        ASSERT_STREQ(out[2], "--stack-size=984");
        ASSERT_STREQ(out[3], JAIL_KERNELS_DIR "/node_kernel.js");
        ASSERT_STREQ(out[4], "once");

        ASSERT_OK(runtime_build_argv(runtime_find("python"), "repl", 0, out, ARRAY_SIZE(out), scratch,
                                     sizeof(scratch)));
        ASSERT_EQ(argv_len(out), 4);
        ASSERT_STREQ(out[0], "/usr/bin/python3");
        ASSERT_STREQ(out[1], "-I");
        ASSERT_STREQ(out[2], JAIL_KERNELS_DIR "/python_kernel.py");
        ASSERT_STREQ(out[3], "repl");

        ASSERT_OK(runtime_build_argv(runtime_find("perl"), "once", 64, out, ARRAY_SIZE(out), scratch,
                                     sizeof(scratch)));
        ASSERT_EQ(argv_len(out), 3);
        ASSERT_STREQ(out[0], "/usr/bin/perl");
        ASSERT_STREQ(out[1], JAIL_KERNELS_DIR "/perl_kernel.pl");
        ASSERT_STREQ(out[2], "once");

        ASSERT_OK(runtime_build_argv(runtime_find("ruby"), "repl", 64, out, ARRAY_SIZE(out), scratch,
                                     sizeof(scratch)));
        ASSERT_EQ(argv_len(out), 4);
        ASSERT_STREQ(out[0], "/usr/bin/ruby");
        ASSERT_STREQ(out[1], "--disable-gems");
        ASSERT_STREQ(out[2], JAIL_KERNELS_DIR "/ruby_kernel.rb");
        ASSERT_STREQ(out[3], "repl");
}

/* Repo root from this file's path (the Makefile compiles it relative to the
 * root, so a relative __FILE__ means the current directory). */
static void repo_path(char *buf, size_t len, const char *rel)
{
        const char *me = __FILE__;
        const char *tail = strstr(me, "tests/unit/runtimes/test_runtime.c");
        int n = tail ? (int)(tail - me) : 0;
        snprintf(buf, len, "%.*s%s", n, me, rel);
}

/* Every runtime: no placeholder survives, the mode pointer is passed
 * through, the heap value lands where @HEAP@ was, and the kernel named
 * exists in the source tree. */
TEST(build_argv_every_runtime)
{
        for (size_t i = 0; i < runtime_count(); i++) {
                const struct runtime *rt = runtime_at(i);
                if (rt->kind != RUNTIME_KERNEL)
                        continue;
                const char *out[JAIL_MAX_ARGS + 1];
                char scratch[512];
                static const char mode[] = "once";
                memset(out, 0, sizeof(out));
                ASSERT_OK(runtime_build_argv(rt, mode, 777, out, ARRAY_SIZE(out), scratch, sizeof(scratch)));
                size_t n = argv_len(out), kernels = 0, modes = 0, heaps = 0, tmpl = 0;
                while (tmpl < RUNTIME_MAX_ARGV && rt->argv[tmpl])
                        tmpl++;
                ASSERT_EQ(n, tmpl);
                ASSERT_STREQ(out[0], rt->argv[0]);
                for (size_t j = 0; j < n; j++) {
                        if (strchr(out[j], '@'))
                                TAP_FAIL("%s: placeholder left in '%s'", rt->id, out[j]);
                        if (out[j] == mode)
                                modes++;
                        if (strcmp(out[j], "--max-old-space-size=777") == 0)
                                heaps++;
                        if (strncmp(out[j], JAIL_KERNELS_DIR "/", strlen(JAIL_KERNELS_DIR) + 1) == 0) {
                                kernels++;
                                char path[PATH_MAX];
                                char rel[256];
                                snprintf(rel, sizeof(rel), "src/runtimes/kernels/%s",
                                         out[j] + strlen(JAIL_KERNELS_DIR) + 1);
                                repo_path(path, sizeof(path), rel);
                                if (access(path, R_OK) != 0)
                                        TAP_FAIL("%s: kernel %s missing", rt->id, path);
                        }
                        /* expanded strings live in scratch, the rest in the table */
                        bool in_scratch = out[j] >= scratch && out[j] < scratch + sizeof(scratch);
                        bool in_table = false;
                        for (size_t k = 0; k < tmpl; k++)
                                in_table |= out[j] == rt->argv[k];
                        ASSERT_TRUE(in_scratch || in_table || out[j] == mode);
                }
                ASSERT_EQ(kernels, 1);
                ASSERT_EQ(modes, 1);
                ASSERT_EQ(heaps, strcmp(rt->id, "javascript") == 0 ? 1 : 0);
        }
}

TEST(build_argv_scratch_too_small)
{
        for (size_t i = 0; i < runtime_count(); i++) {
                const struct runtime *rt = runtime_at(i);
                if (rt->kind != RUNTIME_KERNEL)
                        continue;
                const char *out[JAIL_MAX_ARGS + 1];
                static const size_t lens[] = { 0, 1, 8, 24 };
                for (size_t l = 0; l < ARRAY_SIZE(lens); l++) {
                        char scratch[64];
                        memset(scratch, '#', sizeof(scratch));
                        int r = runtime_build_argv(rt, "once", 64, out, ARRAY_SIZE(out), scratch, lens[l]);
                        if (r != -E2BIG)
                                TAP_FAIL("%s: scratch %zu: r=%d, want -E2BIG", rt->id, lens[l], r);
                        for (size_t k = lens[l]; k < sizeof(scratch); k++)
                                if (scratch[k] != '#')
                                        TAP_FAIL("%s: scratch %zu: byte %zu written", rt->id, lens[l], k);
                }
        }
}

/* The exact scratch size fits; one byte less does not. */
TEST(build_argv_scratch_exact)
{
        for (size_t i = 0; i < runtime_count(); i++) {
                const struct runtime *rt = runtime_at(i);
                if (rt->kind != RUNTIME_KERNEL)
                        continue;
                const char *out[JAIL_MAX_ARGS + 1];
                char scratch[512];
                ASSERT_OK(runtime_build_argv(rt, "once", 4096, out, ARRAY_SIZE(out), scratch, sizeof(scratch)));
                size_t need = 0;
                for (size_t j = 0; out[j]; j++)
                        if (out[j] >= scratch && out[j] < scratch + sizeof(scratch))
                                need += strlen(out[j]) + 1;
                ASSERT_TRUE(need > 0);
                char *exact = malloc(need);
                ASSERT_TRUE(exact != NULL);
                ASSERT_OK(runtime_build_argv(rt, "once", 4096, out, ARRAY_SIZE(out), exact, need));
                ASSERT_EQ(runtime_build_argv(rt, "once", 4096, out, ARRAY_SIZE(out), exact, need - 1), -E2BIG);
                free(exact);
        }
}

TEST(build_argv_out_too_small)
{
        const struct runtime *rt = runtime_find("python"); /* 4 args + NULL */
        const char *out[8];
        char scratch[512];
        ASSERT_OK(runtime_build_argv(rt, "once", 64, out, 5, scratch, sizeof(scratch)));
        ASSERT_TRUE(out[4] == NULL);
        ASSERT_EQ(runtime_build_argv(rt, "once", 64, out, 4, scratch, sizeof(scratch)), -E2BIG);
        ASSERT_EQ(runtime_build_argv(rt, "once", 64, out, 1, scratch, sizeof(scratch)), -E2BIG);
        rt = runtime_find("javascript"); /* 5 args + NULL */
        ASSERT_OK(runtime_build_argv(rt, "once", 64, out, 6, scratch, sizeof(scratch)));
        ASSERT_EQ(runtime_build_argv(rt, "once", 64, out, 5, scratch, sizeof(scratch)), -E2BIG);
}

/* shell is a process runtime: no kernel to build an argv for; bash -c. */
TEST(shell_is_a_process_runtime)
{
        const struct runtime *rt = runtime_find("shell");
        ASSERT_TRUE(rt != NULL);
        ASSERT_EQ(rt->kind, RUNTIME_PROCESS);
        ASSERT_STREQ(rt->argv[0], "/bin/bash");
        ASSERT_STREQ(rt->argv[1], "-c");
        ASSERT_TRUE(rt->argv[2] == NULL);
        ASSERT_TRUE(!rt->contexts && !rt->zygote);
        const char *out[JAIL_MAX_ARGS + 1];
        char scratch[512];
        ASSERT_EQ(runtime_build_argv(rt, "once", 64, out, ARRAY_SIZE(out), scratch, sizeof(scratch)), -EOPNOTSUPP);
        for (size_t i = 0; i < runtime_count(); i++)
                if (runtime_at(i)->kind == RUNTIME_KERNEL)
                        ASSERT_TRUE(runtime_at(i)->kernel != NULL);
}
