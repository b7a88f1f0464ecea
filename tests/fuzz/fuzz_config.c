/* Fuzzes the configuration reader (src/config/config.c). The config file is
 * operator input, not guest input, but it is cheap to cover.
 *
 * The input is written to a temp file and loaded with config_load_file over
 * the defaults. Invariants: the result is 0, -EINVAL, -ERANGE or -ENOENT
 * (a failure names a line >= 1); every string field stays NUL-terminated
 * within its array. Then config_parse_u64 runs on each line of the input
 * (NUL-terminated) and on the whole input: on success the value matches a
 * reference parse (digits, optional K/M/G, then "iB" after K/M/G or a bare
 * "B"; anything else, e.g. a stray "i", is invalid). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "base/util.h"
#include <sanitizer/common_interface_defs.h>

#include "fuzz.h"

static char g_path[PATH_MAX];
static int g_fd = -1;

int LLVMFuzzerInitialize(int *argc UNUSED, char ***argv UNUSED)
{
        __sanitizer_set_death_callback(fuzz_cleanup);
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        snprintf(g_path, sizeof(g_path), "%s/sandboxd-fuzz-config-XXXXXX", base);
        g_fd = mkstemp(g_path);
        CHECK(g_fd >= 0);
        return 0;
}

/* Removes the temp file (at exit, failed CHECK, sanitizer death). */
__attribute__((destructor)) void fuzz_cleanup(void)
{
        if (g_fd >= 0) {
                unlink(g_path);
                close(g_fd);
                g_fd = -1;
        }
}

/* Reference for config_parse_u64: returns 0 and the value, or -1. */
static int model_parse_u64(const char *s, uint64_t *ret)
{
        if (!isdigit((unsigned char)*s))
                return -1;
        unsigned __int128 v = 0;
        const char *p = s;
        while (isdigit((unsigned char)*p)) {
                v = v * 10 + (unsigned)(*p - '0');
                if (v > UINT64_MAX)
                        return -1;
                p++;
        }
        uint64_t mul = 1;
        switch (*p) {
        case 'k': case 'K': mul = KiB; p++; break;
        case 'm': case 'M': mul = MiB; p++; break;
        case 'g': case 'G': mul = GiB; p++; break;
        default: break;
        }
        /* "iB" only after a multiplier, a bare "B" anywhere; no stray "i". */
        if (mul > 1 && p[0] == 'i' && p[1] == 'B')
                p += 2;
        else if (p[0] == 'B')
                p += 1;
        if (*p)
                return -1;
        v *= mul;
        if (v > UINT64_MAX)
                return -1;
        *ret = (uint64_t)v;
        return 0;
}

static void check_u64(const char *s)
{
        uint64_t got = 0, want = 0;
        int r = config_parse_u64(s, &got);
        CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
        int m = model_parse_u64(s, &want);
        CHECK((r == 0) == (m == 0));
        if (r == 0)
                CHECK(got == want);
}

#define CHECK_STR(c, f) CHECK(memchr((c).f, '\0', sizeof((c).f)) != NULL)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        CHECK(ftruncate(g_fd, 0) == 0);
        CHECK(pwrite(g_fd, data, size, 0) == (ssize_t)size);

        struct config c;
        config_defaults(&c);
        int line = 0;
        int r = config_load_file(&c, g_path, &line);
        CHECK(r == 0 || r == -EINVAL || r == -ERANGE || r == -ENOENT || r == -E2BIG);
        if (r < 0)
                CHECK(line >= 1);
        CHECK_STR(c, listen);
        CHECK_STR(c, data_dir);
        CHECK_STR(c, kernels_dir);
        CHECK_STR(c, api_key);
        CHECK_STR(c, log_level);
        CHECK_STR(c, cgroup);
        CHECK(c.http_threads >= 1 && c.http_threads <= 64);
        CHECK(c.code_bytes >= 1 && c.code_bytes <= 16 * MiB);

        char *copy = malloc(size + 1);
        CHECK(copy);
        memcpy(copy, data, size);
        copy[size] = '\0';
        check_u64(copy);
        char *save = NULL;
        for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
                check_u64(l);
        free(copy);
        return 0;
}
