/* Small shared helpers: scope-bound cleanup, time, checked string building.
 * Nothing here logs or allocates behind the caller's back. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define KiB (1024ULL)
#define MiB (1024ULL * KiB)
#define GiB (1024ULL * MiB)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define UNUSED __attribute__((unused))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Transfer ownership out of a cleanup-managed variable. */
#define TAKE_PTR(p) ({ typeof(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

/* Monotonic clock in nanoseconds / milliseconds; wall clock in ms since epoch. */
uint64_t now_ns(void);
static inline uint64_t now_ms(void) { return now_ns() / 1000000ULL; }
uint64_t wall_ms(void);
/* Formats epoch milliseconds as ISO-8601 UTC with milliseconds ("...Z"). */
void iso8601_ms(uint64_t epoch_ms, char buf[static 32]);

/* Writes all of buf, retrying on EINTR and short writes. Returns 0 or -errno. */
int write_all(int fd, const void *buf, size_t len);
/* Reads a whole small file (at most max bytes) into a NUL-terminated buffer. */
int read_file_small(const char *path, char *buf, size_t max, size_t *ret_len);
/* Reads an unsigned integer from a one-value file (cgroup style). */
int read_u64_file(const char *path, uint64_t *ret);
/* Writes a string to a file that already exists (cgroup/proc style). */
int write_string_file(const char *path, const char *s);
/* mkdir -p with the given mode. Returns 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf below dirfd/name without following symlinks. Returns 0 or -errno. */
int rm_rf_at(int dirfd, const char *name);
int rm_rf(const char *path);

/* A growable byte buffer with a hard cap; appends beyond the cap fail with
 * -ENOBUFS so callers can turn that into a limit error. */
struct buf {
        char *data;
        size_t len;
        size_t cap;
        size_t max;
};
void buf_init(struct buf *b, size_t max);
void buf_free(struct buf *b);
int buf_append(struct buf *b, const void *data, size_t len);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Validates UTF-8 (RFC 3629: no overlongs, no surrogates, max U+10FFFF). */
bool utf8_valid(const char *s, size_t len);
/* Copies s to out replacing invalid sequences with U+FFFD, so the result is
 * valid UTF-8 for JSON (NUL is kept; JSON escapes it). out must hold 3*len+1
 * bytes. */
size_t utf8_sanitize(const char *s, size_t len, char *out);
