/* Fuzzes the Cookie header parser (ctl_cookie_get in
 * src/api/controller/cookie.c). The first byte picks the name length (0-15)
 * from the bytes that follow; the rest, NUL-terminated, is the header. The
 * output buffer is exactly cap bytes on the heap (ASan catches overruns).
 *
 * Invariants on success: the value is NUL-terminated within cap, made only
 * of cookie-octets (no blank, '"', ',', ';', '\\', control or non-ASCII
 * byte), and occurs in the header. Failures are only -ENOENT, -ENOBUFS
 * and -EINVAL. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/controller/controller.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        size_t nlen = data[0] & 15;
        if (size - 1 < nlen)
                return 0;
        char name[16];
        memcpy(name, data + 1, nlen);
        name[nlen] = '\0';
        size_t hlen = size - 1 - nlen;
        char *header = malloc(hlen + 1);
        memcpy(header, data + 1 + nlen, hlen);
        header[hlen] = '\0';
        size_t cap = 1 + (data[0] >> 4) * 4;
        char *out = malloc(cap);
        int r = ctl_cookie_get(header, name, out, cap);
        if (r == 0) {
                size_t n = strnlen(out, cap);
                CHECK(n < cap);
                for (size_t i = 0; i < n; i++) {
                        unsigned char c = (unsigned char)out[i];
                        CHECK(c > 0x20 && c < 0x7f && c != '"' && c != ',' && c != ';' && c != '\\');
                }
                CHECK(strstr(header, out) != NULL);
        } else {
                CHECK(r == -ENOENT || r == -ENOBUFS || r == -EINVAL);
        }
        free(out);
        free(header);
        return 0;
}
