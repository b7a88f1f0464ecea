/* The Session-Id rule shared by /exec, /file, /session and /pty. */
#include <string.h>

#include "api/bridge/bridge.h"

bool bridge_session_id_valid(const char *sid)
{
        static const char ok[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
        size_t n = strlen(sid);
        return n >= 1 && n <= 128 && strspn(sid, ok) == n && !strstr(sid, "..");
}

bool bridge_session_header(struct http_request *req, struct http_response *res, const char **ret)
{
        const char *sid = http_header(req, "Session-Id");
        *ret = sid;
        if (!sid || bridge_session_id_valid(sid))
                return true;
        bridge_error(res, 400, "invalid_request", "Invalid session ID format");
        return false;
}
