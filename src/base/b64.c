#include "base/b64.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static bool is_b64_char(unsigned char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
               c == '/';
}

/* EVP_DecodeBlock is lenient in other ways than atob() and counts padding as
 * output bytes, so the input is validated and re-padded here first. */
int b64_decode(const char *in, size_t len, unsigned char **ret, size_t *ret_len)
{
        if (len > (size_t)INT_MAX - 4)
                return -EFBIG;
        _cleanup_free_ char *clean = malloc(len + 4);
        if (!clean)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
                char c = in[i];
                if (c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r')
                        continue;
                clean[n++] = c;
        }
        if (n % 4 == 0 && n > 0 && clean[n - 1] == '=') {
                n--;
                if (clean[n - 1] == '=')
                        n--;
        }
        if (n % 4 == 1)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!is_b64_char((unsigned char)clean[i]))
                        return -EINVAL;
        size_t pad = (4 - n % 4) % 4;
        memset(clean + n, '=', pad);
        n += pad;

        _cleanup_free_ unsigned char *out = malloc(n / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        int k = EVP_DecodeBlock(out, (const unsigned char *)clean, (int)n);
        if (k < 0 || (size_t)k < pad)
                return -EINVAL;
        *ret_len = (size_t)k - pad;
        out[*ret_len] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

char *b64_encode(const unsigned char *in, size_t len)
{
        if (len > (size_t)INT_MAX / 4 * 3 - 3)
                return NULL;
        char *out = malloc((len + 2) / 3 * 4 + 1);
        if (!out)
                return NULL;
        EVP_EncodeBlock((unsigned char *)out, in, (int)len);
        return out;
}
