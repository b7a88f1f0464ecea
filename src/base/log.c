#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"

static enum log_level min_level = LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const level_names[_LOG_LEVEL_MAX] = { "debug", "info", "warn", "error" };

void log_set_level(enum log_level level)
{
        min_level = level;
}

int log_parse_level(const char *s, enum log_level *ret)
{
        for (int i = 0; i < _LOG_LEVEL_MAX; i++)
                if (strcmp(s, level_names[i]) == 0) {
                        *ret = (enum log_level)i;
                        return 0;
                }
        return -EINVAL;
}

static void log_vmsg(enum log_level level, const char *suffix, const char *fmt, va_list ap)
{
        if (level < min_level)
                return;
        char ts[32], line[2048];
        iso8601_ms(wall_ms(), ts);
        vsnprintf(line, sizeof(line), fmt, ap);
        /* One fprintf per line under a lock so concurrent threads never
         * interleave fields of different records. */
        pthread_mutex_lock(&log_lock);
        fprintf(stderr, "ts=%s level=%s %s%s\n", ts, level_names[level], line, suffix ? suffix : "");
        pthread_mutex_unlock(&log_lock);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        log_vmsg(level, NULL, fmt, ap);
        va_end(ap);
}

int log_error_errno(int r, const char *fmt, ...)
{
        char suffix[128];
        snprintf(suffix, sizeof(suffix), " err=\"%s\"", strerror(r < 0 ? -r : r));
        va_list ap;
        va_start(ap, fmt);
        log_vmsg(LOG_ERROR, suffix, fmt, ap);
        va_end(ap);
        return r;
}
