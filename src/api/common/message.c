#include "api/common/message.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

const char *api_message_utf8(const char *msg, char **owned)
{
        *owned = NULL;
        size_t len = strlen(msg);
        if (utf8_valid(msg, len) || !(*owned = malloc(3 * len + 1)))
                return msg;
        utf8_sanitize(msg, len, *owned);
        return *owned;
}

void api_vformat(char *buf, size_t size, const char *fmt, va_list ap)
{
        int n = vsnprintf(buf, size, fmt, ap);
        /* Drop a partial sequence the cut left at the end. */
        if (n >= (int)size) {
                size_t len = size - 1;
                for (int k = 0; k < 3 && len > 0 && !utf8_valid(buf, len); k++)
                        buf[--len] = '\0';
        }
}
