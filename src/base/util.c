#include "base/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

int write_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int read_file_small(const char *path, char *buf, size_t max, size_t *ret_len)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = 0;
        while (len + 1 < max) {
                ssize_t n = read(fd, buf + len, max - 1 - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        if (ret_len)
                *ret_len = len;
        return 0;
}

int read_u64_file(const char *path, uint64_t *ret)
{
        char buf[64];
        int r = read_file_small(path, buf, sizeof(buf), NULL);
        if (r < 0)
                return r;
        if (strncmp(buf, "max", 3) == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno != 0 || end == buf)
                return -EINVAL;
        *ret = v;
        return 0;
}

int write_string_file(const char *path, const char *s)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return write_all(fd, s, strlen(s));
}

int mkdir_p(const char *path, mode_t mode)
{
        char tmp[4096];
        size_t len = strlen(path);
        if (len == 0 || len >= sizeof(tmp))
                return -EINVAL;
        memcpy(tmp, path, len + 1);
        for (char *p = tmp + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(tmp, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(tmp, mode) == 0)
                return 0;
        if (errno != EEXIST)
                return -errno;
        /* EEXIST is only success if what exists is a directory (or a link to
         * one): a plain file there must not pass as "created". */
        struct stat st;
        if (stat(tmp, &st) < 0)
                return -errno;
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int rm_rf_at(int dfd, const char *name)
{
        if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int k = rm_rf_at(dirfd(d), de->d_name);
                if (k < 0 && r == 0)
                        r = k;
        }
        closedir(d);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int rm_rf(const char *path)
{
        return rm_rf_at(AT_FDCWD, path);
}

void buf_init(struct buf *b, size_t max)
{
        *b = (struct buf){ .max = max };
}

void buf_free(struct buf *b)
{
        free(b->data);
        *b = (struct buf){ 0 };
}

int buf_append(struct buf *b, const void *data, size_t len)
{
        if (b->len + len > b->max)
                return -ENOBUFS;
        if (b->len + len + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                while (cap < b->len + len + 1)
                        cap *= 2;
                char *n = realloc(b->data, cap);
                if (!n)
                        return -ENOMEM;
                b->data = n;
                b->cap = cap;
        }
        memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = '\0';
        return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
        char tmp[1024];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if ((size_t)n < sizeof(tmp))
                return buf_append(b, tmp, (size_t)n);
        char *big = malloc((size_t)n + 1);
        if (!big)
                return -ENOMEM;
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        int r = buf_append(b, big, (size_t)n);
        free(big);
        return r;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_seq_len(const unsigned char *s, size_t avail)
{
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        size_t n;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
                n = 2;
                cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
                n = 3;
                cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
                n = 4;
                cp = c & 0x07;
        } else {
                return 0;
        }
        if (avail < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
                return 0;
        if (cp >= 0xD800 && cp <= 0xDFFF)
                return 0;
        return n;
}

bool utf8_valid(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;
        while (i < len) {
                size_t n = utf8_seq_len(p + i, len - i);
                if (n == 0)
                        return false;
                i += n;
        }
        return true;
}

size_t utf8_sanitize(const char *s, size_t len, char *out)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0, o = 0;
        while (i < len) {
                size_t n = utf8_seq_len(p + i, len - i);
                if (n == 0) {
                        memcpy(out + o, "\xEF\xBF\xBD", 3);
                        o += 3;
                        i += 1;
                        continue;
                }
                memcpy(out + o, p + i, n);
                o += n;
                i += n;
        }
        out[o] = '\0';
        return o;
}
