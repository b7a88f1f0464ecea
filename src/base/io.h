/* File-descriptor I/O with one contract: every function returns 0 or
 * -errno, retries EINTR and short transfers. Fork-safe (no malloc, no
 * stdio), so the jail's cloned child and the fork-server shim use it too. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Writes all of buf. */
int write_all(int fd, const void *buf, size_t len);
/* Sends all of buf on a socket, MSG_NOSIGNAL (a peer gone is -EPIPE, not
 * a signal). */
int send_all(int fd, const void *buf, size_t len);
/* Reads exactly len bytes; -EIO when the file ends first. */
int read_all(int fd, void *buf, size_t len);
/* Reads a whole small file (at most max - 1 bytes) into a NUL-terminated buffer. */
int read_file_small(const char *path, char *buf, size_t max, size_t *ret_len);
/* Reads an unsigned integer from a one-value file (cgroup style; "max" is UINT64_MAX). */
int read_u64_file(const char *path, uint64_t *ret);
/* Writes a string to a file that already exists (cgroup/proc style). */
int write_string_file(const char *path, const char *s);
/* Sends one byte carrying one SOL_SOCKET control message (SCM_RIGHTS fds or
 * SCM_CREDENTIALS) of at most 16 bytes, MSG_NOSIGNAL: how fds and pids
 * cross between the daemon, a jail's init and a template. No retry of
 * EAGAIN (the caller decides). */
int io_send_byte(int sock, char byte, int type, const void *data, size_t len);
