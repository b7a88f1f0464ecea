#include "api/common/auth.h"

#include <string.h>
#include <strings.h>

bool api_key_equal(const char *given, const char *key)
{
        size_t lg = strlen(given), lk = strlen(key);
        unsigned char diff = (unsigned char)(lg != lk);
        for (size_t i = 0; i < lk; i++)
                diff |= (unsigned char)(given[i % (lg ? lg : 1)] ^ key[i]);
        return diff == 0 && lg == lk;
}

const char *api_bearer_token(const char *authorization)
{
        if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
                return NULL;
        return authorization + 7;
}
