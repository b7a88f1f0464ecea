/* Clocks. */
#pragma once

#include <stdint.h>

/* Monotonic clock in nanoseconds / milliseconds; wall clock in ms since epoch. */
uint64_t now_ns(void);
static inline uint64_t now_ms(void) { return now_ns() / 1000000ULL; }
uint64_t wall_ms(void);
/* Formats epoch milliseconds as ISO-8601 UTC with milliseconds ("...Z"). */
void iso8601_ms(uint64_t epoch_ms, char buf[static 32]);
