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

