#include "base/time.h"

#include <stdio.h>
#include <time.h>

uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000ULL;
}

void iso8601_ms(uint64_t epoch_ms, char buf[static 32])
{
        time_t secs = (time_t)(epoch_ms / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        size_t n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 32 - n, ".%03uZ", (unsigned)(epoch_ms % 1000));
}
