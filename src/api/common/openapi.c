#include "api/common/openapi.h"

#include "api/common/embed.h"

EMBED(api_openapi_viewer_html, "src/api/common/openapi.html");

/* The viewer is inline script and style only; it fetches the document from
 * its own origin and nothing else may load (no CDN, no fonts, no frames). */
static const char viewer_csp[] =
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'";

bool api_openapi_viewer(struct http_response *res)
{
        /* The page's URL may carry ?token=: no Referer may take it along. */
        if (http_response_header(res, "Content-Security-Policy", viewer_csp) < 0 ||
            http_response_header(res, "X-Content-Type-Options", "nosniff") < 0 ||
            http_response_header(res, "Referrer-Policy", "no-referrer") < 0)
                return false;
        http_bytes(res, 200, "text/html; charset=utf-8", api_openapi_viewer_html, api_openapi_viewer_html_len);
        return true;
}
