#include "api/common/host_check.h"

#include <string.h>
#include <strings.h>

/* ":" followed by 1-5 digits, then the end; or nothing at all. */
static bool port_suffix_ok(const char *s)
{
        if (!*s)
                return true;
        if (*s++ != ':')
                return false;
        size_t n = 0;
        for (; s[n]; n++)
                if (s[n] < '0' || s[n] > '9')
                        return false;
        return n >= 1 && n <= 5;
}

bool api_host_is_loopback_literal(const char *host)
{
        static const struct {
                const char *name;
                bool any_case;
        } names[] = { { "127.0.0.1", false }, { "localhost", true }, { "[::1]", false } };
        if (!host)
                return false;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                size_t n = strlen(names[i].name);
                bool same = names[i].any_case ? strncasecmp(host, names[i].name, n) == 0
                                              : strncmp(host, names[i].name, n) == 0;
                if (same && port_suffix_ok(host + n))
                        return true;
        }
        return false;
}

const char *api_origin_authority(const char *origin)
{
        static const char *const schemes[] = { "http://", "https://" };
        if (!origin)
                return NULL;
        for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
                size_t n = strlen(schemes[i]);
                if (strncasecmp(origin, schemes[i], n) == 0 && origin[n] && !strchr(origin + n, '/'))
                        return origin + n;
        }
        return NULL;
}
