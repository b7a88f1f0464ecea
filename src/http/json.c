/* JSON text with the shortest doubles. jansson prints reals with a fixed
 * precision; 17 digits are needed for every double to read back exactly,
 * but most doubles need fewer (3.5223279999999999 is 3.522328). JavaScript
 * and Python print the shortest text that reads back as the same double;
 * this rewrites jansson's real-number tokens to that, outside strings. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/server.h"

/* Same bits: -0.0 must stay -0.0, and NaN never reaches JSON. */
static bool same_double(double a, double b)
{
        return memcmp(&a, &b, sizeof(a)) == 0;
}

/* jansson's style: no '+' and no leading zeros in the exponent, and a
 * real keeps a '.' or an exponent so it does not read back as an integer. */
static void tidy_real(char *s)
{
        char *e = strchr(s, 'e');
        if (!e) {
                if (!strchr(s, '.'))
                        strcat(s, ".0");
                return;
        }
        char *d = e + 1;
        if (*d == '+')
                memmove(d, d + 1, strlen(d));
        else if (*d == '-')
                d++;
        size_t zeros = strspn(d, "0");
        if (zeros && d[zeros])
                memmove(d, d + zeros, strlen(d + zeros) + 1);
}

/* Writes the shortest form of the real token tok[0..len) into out (≥ 32). */
static void shortest_real(const char *tok, size_t len, char *out, size_t outlen)
{
        char in[64];
        if (len >= sizeof(in)) {
                snprintf(out, outlen, "%.*s", (int)len, tok);
                return;
        }
        memcpy(in, tok, len);
        in[len] = '\0';
        double v = strtod(in, NULL);
        /* A decimal of at most DBL_DIG (15) significant digits survives
         * the trip through a normal double and back (C11 5.2.4.2.2): if a
         * p <= 15 digit text reads back as v, %.15g prints the same digits
         * (%g drops trailing zeros; it also writes 20 as "20", not "2e+01").
         * So when %.15g reads back, its digits are the fewest; else 16 or
         * 17 are. Three tries at most instead of up to seventeen (each a
         * printf of a double: ~1 µs). Subnormals hold fewer digits: every
         * precision is tried for them. */
        bool subnormal = v != 0 && fabs(v) < DBL_MIN;
        for (int p = subnormal ? 1 : DBL_DIG; p <= 17; p++) {
                snprintf(out, outlen, "%.*g", p, v);
                if (same_double(strtod(out, NULL), v)) {
                        tidy_real(out);
                        return;
                }
        }
        snprintf(out, outlen, "%s", in);
}

static bool is_real_token(const char *tok, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (tok[i] == '.' || tok[i] == 'e' || tok[i] == 'E')
                        return true;
        return false;
}

/* Copies the number token tok[0..len) to out, a real in its shortest form
 * (never longer than jansson's: at most 17 digits, the same exponent
 * style). Returns the bytes written. */
static size_t put_number(char *out, const char *tok, size_t len)
{
        char s[64];
        if (is_real_token(tok, len)) {
                shortest_real(tok, len, s, sizeof(s));
                size_t sl = strlen(s);
                if (sl <= len) {
                        memcpy(out, s, sl);
                        return sl;
                }
        }
        memcpy(out, tok, len);
        return len;
}

char *http_json_shorten(const char *text)
{
        size_t n = strlen(text);
        char *out = malloc(n + 1); /* the text only shrinks */
        if (!out)
                return NULL;
        size_t o = 0;
        bool in_string = false;
        for (size_t i = 0; i < n;) {
                char c = text[i];
                if (in_string) {
                        out[o++] = text[i++];
                        if (c == '\\' && i < n)
                                out[o++] = text[i++];
                        else if (c == '"')
                                in_string = false;
                        continue;
                }
                if (c == '-' || (c >= '0' && c <= '9')) {
                        size_t len = strspn(text + i, "-+.0123456789eE");
                        o += put_number(out + o, text + i, len);
                        i += len;
                        continue;
                }
                in_string = c == '"';
                out[o++] = text[i++];
        }
        out[o] = '\0';
        return out;
}

char *http_json_dump(const json_t *j)
{
        char *text = json_dumps(j, HTTP_JSON_DUMP_FLAGS | JSON_ENCODE_ANY);
        if (!text)
                return NULL;
        char *s = http_json_shorten(text);
        free(text);
        return s;
}
