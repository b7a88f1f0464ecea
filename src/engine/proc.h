/* A jailed process: an argv run in a fresh jail (the same namespaces,
 * seccomp policy, cgroup limits, accounting and teardown as a kernel) with
 * stdin/stdout/stderr pipes or a terminal. The interface is fd-based and
 * non-blocking so a caller can stream (poll proc_fds(), then proc_read /
 * proc_write); proc_run is the run-to-completion convenience on top. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"

struct kproc_where;

enum proc_io {
        PROC_IO_PIPES,    /* stdout and stderr pipes; stdin /dev/null or a pipe */
        PROC_IO_PTY,      /* one terminal for 0, 1 and 2 (fresh devpts in the jail) */
};

struct proc_spec {
        const char *const *argv;     /* NULL-terminated, paths inside the jail */
        const char *const *envp;     /* complete environment, NULL-terminated */
        const char *workspace_dir;   /* host dir bound at /workspace; NULL: private tmpfs */
        const char *cwd;             /* inside the jail; NULL: /workspace */
        enum proc_io io;
        bool stdin_pipe;             /* PROC_IO_PIPES: a stdin pipe instead of /dev/null */
        /* PROC_IO_PIPES: the workload also gets fd 3, one end of a socket
         * pair whose other end is proc_fds.side_fd (a channel beside the
         * user's stdout and stderr bytes, e.g. a shell's state). */
        bool side_channel;
        unsigned short rows, cols;   /* PROC_IO_PTY: initial size (0: 24x80) */
        const struct exec_limits *limits; /* NULL: the engine's */
        /* A sandbox's jail context (workspace fd, network namespace, host
         * id, parent cgroup; the process takes a reference on the group).
         * NULL: workspace_dir as given, fresh namespace, stateless id. */
        const struct kproc_where *where;
        /* Pre-spawn: the jail is built and the workload confined now, but
         * it waits for its command (argv, envp and cwd here are ignored)
         * until proc_start. One command per jail, never a second. */
        bool deferred;
};

struct proc;

/* Spawns the jail; returns once the workload has exec'd. 0 or -errno
 * (err: the failing step, as jail_spawn). */
int proc_spawn(struct engine *e, const struct proc_spec *spec, struct proc **ret, struct err *err);

/* Runs spec's argv, envp and cwd (the rest of spec is the one p was
 * spawned with) in p, spawned with spec.deferred; returns once the
 * workload has exec'd, as proc_spawn. Once per process. 0 or -errno (err
 * set); on failure the caller frees p. */
int proc_start(struct proc *p, const struct proc_spec *spec, struct err *err);

/* The daemon's ends, non-blocking, -1 when absent. With PROC_IO_PTY,
 * stdout is the terminal master (read and write) and the others are -1. */
struct proc_fds {
        int stdin_fd, stdout_fd, stderr_fd;
        int exit_fd;                 /* readable once the process has exited */
        int side_fd;                 /* spec.side_channel: the daemon's end, else -1 */
};
void proc_fds(const struct proc *p, struct proc_fds *ret);

/* Non-blocking I/O on those fds: bytes moved, 0 at EOF (read), or -errno
 * (-EAGAIN: nothing now). which: 1 stdout (or the terminal), 2 stderr. */
ssize_t proc_read(struct proc *p, int which, void *buf, size_t len);
ssize_t proc_write(struct proc *p, const void *buf, size_t len);
/* Closes stdin (EOF for the workload). Not for terminals: write ^D. */
void proc_close_stdin(struct proc *p);
/* Sets the terminal size (TIOCSWINSZ; the workload gets SIGWINCH). */
int proc_resize(struct proc *p, unsigned short rows, unsigned short cols);
/* Sends sig to the workload (not to the jail's init). SIGKILL kills the
 * whole jail. 0 or -errno (-ESRCH: gone). */
int proc_signal(struct proc *p, int sig);
/* Sends sig to every process of the jail's process group (the workload and
 * whatever it started, as a shell's job would get it), but not to its init.
 * A process that made a group of its own is missed: SIGKILL (proc_signal)
 * is the sure end. 0 or -errno (-ESRCH: gone). */
int proc_signal_group(struct proc *p, int sig);

/* How a process ended. A workload killed by signal N is reported by the
 * jail's init as exit code 128+N, as a shell would: that reads as signal N. */
struct proc_status {
        bool exited;                 /* false: still running */
        int code;                    /* exit code (0 when signaled) */
        int signal;                  /* terminating signal, or 0 */
};
void proc_status_decode(int wait_status, struct proc_status *ret);
/* Waits up to timeout_ms (-1: forever; 0: poll) for the exit, reaping it.
 * 0 with ret filled, -ETIMEDOUT, or -errno. */
int proc_wait(struct proc *p, int timeout_ms, struct proc_status *ret);

/* Runs to completion under lim (NULL: the engine's): feeds stdin_data (if
 * the spec has a stdin pipe), captures stdout/stderr up to the output
 * limits, enforces CPU, wall, memory and pids, reaps. The outcome's
 * exit_status is the jail's (proc_status_decode). 0 or -errno. */
int proc_run(struct proc *p, const void *stdin_data, size_t stdin_len, const struct exec_limits *lim,
             struct exec_outcome *ret);

/* Kills (if running), reaps, releases the cgroup and closes fds. NULL-safe. */
void proc_free(struct proc *p);
/* The same, off the caller's thread (the engine's reaper). NULL-safe. */
void proc_bury(struct proc *p);
