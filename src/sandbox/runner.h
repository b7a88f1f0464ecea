/* A started command run to its end for a facade: its stdout and stderr
 * handed over as they are produced, a timeout (SIGTERM to its process
 * group at the deadline, SIGKILL after a grace), and a heartbeat when
 * nothing was written for a second (a streaming facade notices a client
 * that left only when it writes). The bridge's /exec and the controller's
 * /execute share it. No HTTP here: the ops are the facade's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct proc;

#define SBX_RUN_HEARTBEAT_MS 1000
/* The exit code of a command its timeout ended (as `timeout`). */
#define SBX_RUN_TIMEOUT_CODE 124

struct sbx_run_ops {
        /* Bytes of fd 1 or 2 as they come; < 0 stops the run. */
        int (*output)(void *ctx, int fd, const unsigned char *data, size_t len);
        /* Nothing written for SBX_RUN_HEARTBEAT_MS; NULL: none; < 0 stops. */
        int (*heartbeat)(void *ctx);
        /* The process's side channel (proc_fds side_fd) is readable;
         * false once it is at its end. NULL: not polled. */
        bool (*side)(void *ctx);
};

struct sbx_run {
        struct proc *proc;
        uint64_t timeout_ms;         /* 0: none */
        uint64_t grace_ms;           /* SIGTERM → SIGKILL */
        const struct sbx_run_ops *ops;
        void *ctx;
};

struct sbx_run_result {
        int exit_code;               /* 128 + signal when killed; SBX_RUN_TIMEOUT_CODE when timed out */
        int signal;                  /* the signal that ended it, or 0 */
        bool timed_out;
};

/* Runs run->proc to its exit. 0 with ret filled, or the negative value an
 * op returned (the process may still run: the caller kills it). */
int sbx_run_wait(const struct sbx_run *run, struct sbx_run_result *ret);
/* "Command timed out after <ms>ms\n" into buf; its length. */
size_t sbx_run_timeout_message(uint64_t timeout_ms, char *buf, size_t len);
