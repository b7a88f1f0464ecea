/* What the C microbenchmarks share: p50/p99 of a sample of nanoseconds,
 * printed as "name p50_ms p99_ms" lines for the Python harness. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static inline void report(const char *name, uint64_t *ns, int n)
{
        qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
        printf("%s %.3f %.3f\n", name, (double)ns[n / 2] / 1e6, (double)ns[(n * 99) / 100] / 1e6);
        fflush(stdout);
}
