/* Fuzzes route matching (http_match in src/http/router.c): the input,
 * NUL-terminated, is a decoded request path, matched against every route
 * pattern the daemon registers (src/api/workers/runtime.c, src/api/workers/gateway.c).
 *
 * Invariants when a pattern matches: substituting the captures back into
 * the pattern gives the path exactly; a ":name" capture is non-empty and
 * has no '/'; at most HTTP_MAX_CAPTURES captures. The capture buffer is an
 * exactly-sized heap block (ASan catches any overrun): the match must
 * succeed with exactly the bytes the captures need and fail with one
 * byte less. The server's 1024-byte buffer is tried as well. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http/server.h"

#define SBX "/languages/:lang/sandboxes/:id"
static const char *const patterns[] = {
        "/health", "/ready", "/languages", "/execute", "/execute/:lang", "/runtimes/:lang/interpreter",
        "/runtimes/:lang/execute", SBX, SBX "/execute", SBX "/contexts", SBX "/contexts/:cid", SBX "/env",
        SBX "/files", SBX "/*",
};

/* Rebuilds the path from pattern + captures; returns bytes the captures
 * need in the buffer (each + NUL), or (size_t)-1 if inconsistent. */
static size_t rebuild(const char *pattern, const char **caps, char *out, size_t outlen)
{
        size_t o = 0, need = 0, ncap = 0;
        for (const char *p = pattern; *p;) {
                const char *piece;
                size_t n;
                if (*p == ':' || *p == '*') {
                        if (ncap >= HTTP_MAX_CAPTURES)
                                return (size_t)-1;
                        piece = caps[ncap++];
                        n = strlen(piece);
                        need += n + 1;
                        if (*p == ':') {
                                CHECK(n > 0 && memchr(piece, '/', n) == NULL);
                                p += strcspn(p, "/");
                        } else {
                                p += strlen(p);
                        }
                } else {
                        piece = p++;
                        n = 1;
                }
                if (o + n >= outlen)
                        return (size_t)-1;
                memcpy(out + o, piece, n);
                o += n;
        }
        out[o] = '\0';
        return need;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *path = malloc(size + 1);
        char *again = malloc(size + 2);
        if (!path || !again)
                abort();
        memcpy(path, data, size);
        path[size] = '\0';

        for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
                const char *caps[HTTP_MAX_CAPTURES] = { 0 };
                char server_buf[1024];
                bool fits = http_match(patterns[i], path, caps, server_buf, sizeof(server_buf));

                /* A buffer as big as the path always suffices. */
                size_t big = size + HTTP_MAX_CAPTURES + 1;
                char *bigbuf = malloc(big);
                CHECK(bigbuf);
                const char *bcaps[HTTP_MAX_CAPTURES] = { 0 };
                bool ok = http_match(patterns[i], path, bcaps, bigbuf, big);
                if (fits)
                        CHECK(ok);
                if (ok) {
                        size_t need = rebuild(patterns[i], bcaps, again, size + 2);
                        CHECK(need != (size_t)-1);
                        CHECK(strcmp(again, path) == 0);

                        /* Exactly enough room works, one byte less fails. */
                        char *tight = malloc(need ? need : 1);
                        CHECK(tight);
                        const char *tcaps[HTTP_MAX_CAPTURES] = { 0 };
                        CHECK(http_match(patterns[i], path, tcaps, tight, need));
                        if (need > 0)
                                CHECK(!http_match(patterns[i], path, tcaps, tight, need - 1));
                        free(tight);
                }
                free(bigbuf);
        }
        free(path);
        free(again);
        return 0;
}
