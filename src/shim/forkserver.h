/* Wire format between the daemon and the fork-server shim
 * (JAIL_FORKSERVER_LIB, see forkserver.c and docs/kernel-protocol.md).
 *
 * A template is an ordinary once-mode kernel started with the shim in
 * LD_PRELOAD and SANDBOXD_FORKSERVER=1. After it has booted and announced
 * {"ready":true}, the daemon writes one struct forkserver_config followed by
 * bpf_len bytes of seccomp program (struct sock_filter[]) on fd 3. The shim
 * answers {"ready":true} again and from then on serves fork requests: one
 * byte 'F' carrying three fds (SCM_RIGHTS: stdout, stderr, control socket of
 * the new execution). After 'G', each executor sends one byte 'N' with its
 * seccomp listener (SCM_RIGHTS) on that control socket (engine/notify.c). */
#pragma once

#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#define FORKSERVER_MAGIC 0x46584253U /* "SBXF" */
#define FORKSERVER_VERSION 1
#define FORKSERVER_MAX_RLIMITS 8
#define FORKSERVER_MAX_BPF (64 * 1024)

struct forkserver_rlimit {
        int32_t resource;
        uint32_t pad;
        uint64_t soft, hard;
};

struct forkserver_config {
        uint32_t magic, version;
        uint32_t uid, gid;     /* what each execution drops to */
        uint32_t nrlimits;
        uint32_t bpf_len;      /* bytes of seccomp program that follow */
        uint32_t landlock;     /* 1: apply Landlock scoping */
        uint32_t pad;
        char tmp_opts[128];    /* tmpfs options of the private /tmp */
        char ws_opts[128];     /* and of the private /workspace */
        struct forkserver_rlimit rlimits[FORKSERVER_MAX_RLIMITS];
};

/* Sends one byte carrying one SOL_SOCKET control message (SCM_RIGHTS fds or
 * SCM_CREDENTIALS) of at most 16 bytes: how the daemon hands a template its
 * fds and how an executor reports its pid. Returns sendmsg()'s result. */
static inline ssize_t forkserver_send_byte(int sock, char byte, int type, const void *data, size_t len)
{
        struct iovec iov = { &byte, 1 };
        union {
                char buf[CMSG_SPACE(16)];
                struct cmsghdr align;
        } u;
        if (len > 16)
                return -1;
        memset(&u, 0, sizeof(u));
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = CMSG_SPACE(len) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = type;
        cm->cmsg_len = CMSG_LEN(len);
        memcpy(CMSG_DATA(cm), data, len);
        return sendmsg(sock, &msg, MSG_NOSIGNAL);
}
