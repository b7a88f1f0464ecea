/* Fuzzes path normalisation and confinement (files_normalize in
 * src/sandbox/files/resolve.c): the input, NUL-terminated, is a user path of the files
 * API or a context cwd.
 *
 * Invariants on success: the output starts with "/workspace" (followed by
 * '/' or the end), contains no "/../", "/./" or "//", does not end with '/'
 * or "/." or "/.." (unless it is exactly "/workspace"), is shorter than
 * PATH_MAX, and normalising it again gives it back (idempotence). Failures
 * are only -EACCES, -ENAMETOOLONG or -EINVAL. The result (status and
 * output) must equal a straightforward segment-stack model of the contract.
 * A second call with a tight, exactly-sized heap output buffer checks that
 * outlen is honoured (ASan catches any overflow). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/files.h"
#include "base/util.h"
#include "fuzz.h"

/* The contract, written as plainly as possible: split on '/', skip "" and
 * ".", ".." pops (escaping above "/" is -EACCES), a pushed segment longer
 * than NAME_MAX is -ENAMETOOLONG; errors are reported in input order. */
static int model_normalize(const char *path, char *out, size_t outlen)
{
        size_t len = strlen(path);
        if (!utf8_valid(path, len))
                return -EINVAL;
        if (len >= PATH_MAX)
                return -ENAMETOOLONG;
        char *full = malloc(len + sizeof(FILES_ROOT) + 2);
        CHECK(full);
        if (path[0] == '/')
                strcpy(full, path);
        else
                strcat(strcat(strcpy(full, FILES_ROOT), "/"), path);

        size_t nseg = 0, cap = 16;
        const char **segs = malloc(cap * sizeof(*segs));
        size_t *lens = malloc(cap * sizeof(*lens));
        CHECK(segs && lens);
        int r = 0;
        for (char *p = full; *p;) {
                char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);
                if (n == 0 || (n == 1 && p[0] == '.')) {
                        /* skip */
                } else if (n == 2 && p[0] == '.' && p[1] == '.') {
                        if (nseg == 0) {
                                r = -EACCES;
                                break;
                        }
                        nseg--;
                } else {
                        if (n > NAME_MAX) {
                                r = -ENAMETOOLONG;
                                break;
                        }
                        if (nseg == cap) {
                                cap *= 2;
                                segs = realloc(segs, cap * sizeof(*segs));
                                lens = realloc(lens, cap * sizeof(*lens));
                                CHECK(segs && lens);
                        }
                        segs[nseg] = p;
                        lens[nseg++] = n;
                }
                p = *end ? end + 1 : end;
        }
        if (r == 0) {
                static const char first[] = "workspace"; /* FILES_ROOT's segment */
                if (nseg == 0 || lens[0] != strlen(first) || memcmp(segs[0], first, lens[0]) != 0) {
                        r = -EACCES;
                } else {
                        size_t o = 0;
                        for (size_t i = 0; i < nseg && r == 0; i++) {
                                if (o + 1 + lens[i] + 1 > outlen || o + 1 + lens[i] >= PATH_MAX) {
                                        r = -ENAMETOOLONG;
                                        break;
                                }
                                out[o++] = '/';
                                memcpy(out + o, segs[i], lens[i]);
                                o += lens[i];
                        }
                        if (r == 0)
                                out[o] = '\0';
                }
        }
        free(segs);
        free(lens);
        free(full);
        return r;
}

static void check_normalized(const char *out)
{
        size_t n = strlen(out);
        CHECK(n < PATH_MAX);
        CHECK(strncmp(out, FILES_ROOT, strlen(FILES_ROOT)) == 0);
        CHECK(out[strlen(FILES_ROOT)] == '\0' || out[strlen(FILES_ROOT)] == '/');
        CHECK(strstr(out, "/../") == NULL);
        CHECK(strstr(out, "/./") == NULL);
        CHECK(strstr(out, "//") == NULL);
        if (strcmp(out, FILES_ROOT) != 0) {
                CHECK(out[n - 1] != '/');
                CHECK(!(n >= 2 && strcmp(out + n - 2, "/.") == 0));
                CHECK(!(n >= 3 && strcmp(out + n - 3, "/..") == 0));
        }
        CHECK(utf8_valid(out, n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *path = malloc(size + 1);
        if (!path)
                return 0;
        memcpy(path, data, size);
        path[size] = '\0';

        static char out[PATH_MAX], again[PATH_MAX], model[PATH_MAX];
        int r = files_normalize(path, out, sizeof(out));
        CHECK(r == 0 || r == -EACCES || r == -ENAMETOOLONG || r == -EINVAL);

        int m = model_normalize(path, model, sizeof(model));
        CHECK(r == m);
        if (r == 0) {
                CHECK(strcmp(out, model) == 0);
                check_normalized(out);
                /* Idempotence. */
                CHECK(files_normalize(out, again, sizeof(again)) == 0);
                CHECK(strcmp(out, again) == 0);
                /* Relative spelling of the same path gives the same result. */
                const char *rel = out[strlen(FILES_ROOT)] ? out + strlen(FILES_ROOT) + 1 : "";
                CHECK(files_normalize(rel, again, sizeof(again)) == 0);
                CHECK(strcmp(out, again) == 0);
        }

        /* A tight output buffer: exactly big enough must work, one byte
         * less must be -ENAMETOOLONG, never an overflow. */
        if (r == 0) {
                size_t need = strlen(out) + 1;
                char *tight = malloc(need);
                CHECK(tight);
                CHECK(files_normalize(path, tight, need) == 0);
                CHECK(strcmp(tight, out) == 0);
                CHECK(files_normalize(path, tight, need - 1) == -ENAMETOOLONG);
                free(tight);
        } else {
                size_t small = 1 + size % 64;
                char *tight = malloc(small);
                CHECK(tight);
                CHECK(files_normalize(path, tight, small) != 0);
                free(tight);
        }
        free(path);
        return 0;
}
