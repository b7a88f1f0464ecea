/* Unit tests for the byte ring (src/base/ring.c): it holds exactly the last
 * cap bytes ever appended, whatever the sizes and wrap points, checked
 * against a plain model. */
#include <string.h>

#include "base/ring.h"
#include "base/util.h"
#include "tap.h"

/* The expected contents: the last min(total, cap) bytes of the stream. */
static void check_tail(const struct ring *r, const unsigned char *stream, size_t total)
{
        size_t want = total < r->cap ? total : r->cap;
        unsigned char out[64];
        ASSERT_EQ(r->len, want);
        ring_copy(r, out);
        ASSERT_TRUE(memcmp(out, stream + total - want, want) == 0);
}

TEST(ring_empty_copies_nothing)
{
        struct ring r;
        ASSERT_EQ(ring_init(&r, 8), 0);
        unsigned char out[1] = { 0x55 };
        ring_copy(&r, out);
        ASSERT_EQ(r.len, 0);
        ASSERT_EQ(out[0], 0x55);
        ring_free(&r);
        ASSERT_TRUE(r.data == NULL);
}

TEST(ring_keeps_the_last_cap_bytes)
{
        /* Every chunk size from 0 to 2*cap, so every wrap point and the
         * "longer than the ring" path are crossed. */
        unsigned char stream[4096];
        for (size_t i = 0; i < sizeof(stream); i++)
                stream[i] = (unsigned char)(i * 7 + i / 251);
        for (size_t chunk = 0; chunk <= 32; chunk++) {
                struct ring r;
                ASSERT_EQ(ring_init(&r, 16), 0);
                size_t total = 0;
                for (size_t step = 0; total + chunk + step % 3 <= sizeof(stream) && step < 60; step++) {
                        size_t n = chunk + step % 3;
                        ring_append(&r, stream + total, n);
                        total += n;
                        check_tail(&r, stream, total);
                }
                ring_free(&r);
        }
}

TEST(ring_exact_fill_then_one_more)
{
        struct ring r;
        ASSERT_EQ(ring_init(&r, 4), 0);
        ring_append(&r, "abcd", 4);
        check_tail(&r, (const unsigned char *)"abcd", 4);
        ring_append(&r, "e", 1);
        check_tail(&r, (const unsigned char *)"abcde", 5);
        ASSERT_EQ(r.start, 1);
        ring_free(&r);
}

TEST(ring_zero_capacity_is_refused)
{
        struct ring r;
        ASSERT_EQ(ring_init(&r, 0), -ENOMEM);
        ring_free(&r);
}
