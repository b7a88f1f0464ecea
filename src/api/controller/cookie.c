/* The Cookie request header (RFC 6265 §4.2, read leniently as browsers
 * send it) and the Set-Cookie headers of the session and CSRF cookies. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/app.h"
#include "api/controller/controller.h"

/* cookie-octet: %x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E */
static bool cookie_octet(unsigned char c)
{
        return c >= 0x21 && c <= 0x7e && c != '"' && c != ',' && c != ';' && c != '\\';
}

static const char *skip_blanks(const char *p, const char *end)
{
        while (p < end && (*p == ' ' || *p == '\t'))
                p++;
        return p;
}

/* The value of one "name=value" pair [p, end) whose name matched. */
static int copy_value(const char *v, const char *end, char *out, size_t cap)
{
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        if (end - v >= 2 && v[0] == '"' && end[-1] == '"')
                v++, end--;
        for (const char *q = v; q < end; q++)
                if (!cookie_octet((unsigned char)*q))
                        return -EINVAL;
        size_t n = (size_t)(end - v);
        if (n >= cap)
                return -ENOBUFS;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
}

int ctl_cookie_get(const char *header, const char *name, char *out, size_t cap)
{
        size_t nlen = strlen(name);
        if (!header || !nlen || !cap)
                return -ENOENT;
        const char *p = header, *hend = header + strlen(header);
        while (p < hend) {
                const char *end = memchr(p, ';', (size_t)(hend - p));
                if (!end)
                        end = hend;
                p = skip_blanks(p, end);
                const char *eq = memchr(p, '=', (size_t)(end - p));
                if (eq) {
                        const char *nend = eq;
                        while (nend > p && (nend[-1] == ' ' || nend[-1] == '\t'))
                                nend--;
                        if ((size_t)(nend - p) == nlen && memcmp(p, name, nlen) == 0)
                                return copy_value(skip_blanks(eq + 1, end), end, out, cap);
                }
                p = end + 1;
        }
        return -ENOENT;
}

int ctl_set_cookie(struct http_response *res, const struct app *app, const char *name, const char *value,
                   const char *path, uint64_t max_age, bool http_only)
{
        char line[2048];
        int n = snprintf(line, sizeof(line), "%s=%s; Path=%s; Max-Age=%llu; SameSite=Lax%s%s", name, value, path,
                         (unsigned long long)max_age, http_only ? "; HttpOnly" : "",
                         app->cfg->ctl_cookie_secure ? "; Secure" : "");
        if (n < 0 || (size_t)n >= sizeof(line))
                return -E2BIG;
        return http_response_header(res, "Set-Cookie", line);
}

int ctl_set_session_cookie(struct http_response *res, const struct app *app, const char *token, uint64_t max_age)
{
        return ctl_set_cookie(res, app, CTL_SESSION_COOKIE, max_age ? token : "", "/", max_age, true);
}

int ctl_set_csrf_cookie(struct http_response *res, const struct app *app, const char *token, uint64_t max_age)
{
        return ctl_set_cookie(res, app, CTL_CSRF_COOKIE, max_age ? token : "", "/", max_age, false);
}
