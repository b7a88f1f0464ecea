#include "base/utf8.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_seq_len(const unsigned char *s, size_t avail)
{
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        size_t n;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
                n = 2;
                cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
                n = 3;
                cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
                n = 4;
                cp = c & 0x07;
        } else {
                return 0;
        }
        if (avail < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
                return 0;
        if (cp >= 0xD800 && cp <= 0xDFFF)
                return 0;
        return n;
}

bool utf8_valid(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;
        while (i < len) {
                size_t n = utf8_seq_len(p + i, len - i);
                if (n == 0)
                        return false;
                i += n;
        }
        return true;
}

size_t utf8_sanitize(const char *s, size_t len, char *out)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0, o = 0;
        while (i < len) {
                size_t n = utf8_seq_len(p + i, len - i);
                if (n == 0) {
                        memcpy(out + o, "\xEF\xBF\xBD", 3);
                        o += 3;
                        i += 1;
                        continue;
                }
                memcpy(out + o, p + i, n);
                o += n;
                i += n;
        }
        out[o] = '\0';
        return o;
}

size_t utf8_complete_len(const char *s, size_t len)
{
        for (size_t back = 1; back <= 4 && back <= len; back++) {
                unsigned char c = (unsigned char)s[len - back];
                if (c < 0x80)
                        return len;
                if (c < 0xc0)
                        continue; /* a continuation byte: look further back */
                size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
                return back < need ? len - back : len;
        }
        return len;
}
