#include "base/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"

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

int send_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EPIPE;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int read_all(int fd, void *buf, size_t len)
{
        char *p = buf;
        while (len > 0) {
                ssize_t n = read(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
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

int io_send_byte(int sock, char byte, int type, const void *data, size_t len)
{
        struct iovec iov = { &byte, 1 };
        union {
                char buf[CMSG_SPACE(16)];
                struct cmsghdr align;
        } u;
        if (len > 16)
                return -EINVAL;
        memset(&u, 0, sizeof(u));
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = CMSG_SPACE(len) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = type;
        cm->cmsg_len = CMSG_LEN(len);
        memcpy(CMSG_DATA(cm), data, len);
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (n < 0)
                return -errno;
        return n == 1 ? 0 : -EPIPE;
}
