/* The Session-Id rule shared by /exec, /file, /session and /pty. */
#include <string.h>

#include "api/bridge/bridge.h"

bool bridge_session_id_valid(const char *sid)
{
        static const char ok[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
        size_t n = strlen(sid);
        return n >= 1 && n <= 128 && strspn(sid, ok) == n && !strstr(sid, "..");
}
