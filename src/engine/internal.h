/* Shared by the files of engine/ only: the engine, process and kernel
 * structs and the helpers they call across files. */
#pragma once

#include <pthread.h>

#include "base/thread.h"

#include "engine/engine.h"
#include "engine/kproc.h"
#include "engine/notify.h"
#include "engine/proc.h"

/* A jailed process (proc.c). A kernel embeds one as its first member. */
struct proc {
        struct engine *engine;
        struct jail_proc jp;
        int in_fd, out_fd, err_fd;  /* daemon ends, non-blocking, or -1;
                                     * a terminal's master is out_fd */
        int side_fd;                /* side channel (proc_spec.side_channel), or -1;
                                     * set from proc_attach on: 0 before it */
        bool pty;
        bool alive;
        int wait_status;            /* once reaped (or exit_early) */
        int work_fd;                /* a pool member's workload's pidfd (proc_watch_workload), or 0 */
        bool exit_early;            /* wait_status is the workload's, init not yet reaped */
        /* Frees the whole object (proc or kproc): the reaper calls it. */
        void (*destroy)(struct proc *p);
        struct proc *prev, *next;   /* engine's live list */
        struct proc *dead_next;     /* engine's reap queue */
        struct notify_watch *watch; /* its seccomp refusals (notify.c), or NULL */
        struct kproc_group *group;  /* its sandbox's parent cgroup (a reference), or NULL */
};

struct kproc {
        struct proc p;
        const struct runtime *rt;
        int ctl_fd;                 /* daemon end of the control socket, non-blocking */
        int replay_fd;              /* daemon end of the replay socket, or -1 */
        bool once;
        bool counters_fresh;        /* cgroup counters already reset after boot */
        uint64_t pool_bytes;        /* memory counted against pool.memory_budget */
        bool forked;                /* forked from a template: its random state is the template's */
        bool cpu_marked;            /* cpu_mark is valid (a resident kernel that ran) */
        uint64_t cpu_mark;          /* its group's CPU counter when the last run ended */
        struct buf ctl_in;          /* partial control-channel input */
};

/* kproc.c: a sandbox's jail context onto a spec, and the detached copy of
 * its workspace mount for one spawn (*ret = -1: bind by path). */
void where_apply(const struct kproc_where *where, struct jail_spec *spec);
int workspace_tree(struct engine *e, const struct kproc_workspace *ws, int *ret, struct err *err);
/* Detached copies of where's binds into spec->binds (none when rootless:
 * the sandbox layer refuses mounts there). 0 or -errno with err set;
 * spec_binds_close frees them in every case. */
int where_binds(const struct kproc_where *where, struct jail_spec *spec, struct err *err);
void spec_binds_close(struct jail_spec *spec);

#define POOL_MAX 64

/* Warm interpreters of one language: already jailed, booted and waiting
 * for their single request. */
struct pool {
        const struct runtime *rt;
        struct kproc *ready[POOL_MAX];
        size_t n;
        uint64_t target;       /* pool.<lang> */
        uint64_t want;         /* target grown by demand (pool.c), back to target when idle */
        uint64_t last_take_ns; /* when a request last took a member or found none */
        uint64_t member_bytes; /* memory of the last member started (its cgroup's peak) */
        uint64_t hits, misses;
};

/* A fork-server template of one language (see python_kernel.py "zygote"). */
struct zygote {
        const struct runtime *rt;
        struct kproc *kp;
        pthread_mutex_t lock;
        uint64_t forks, failures, retry_at_ns;
};

#define NETNS_POOL_MAX 8

/* Fresh empty network namespaces, ready for sandboxes and jails (netns.c). */
struct netns_pool {
        bool enabled;             /* root mode: namespaces made here */
        int home_fd;              /* the daemon's own namespace */
        int fds[NETNS_POOL_MAX];
        size_t n;
        struct bg_thread filler;  /* internal lock */
};

struct engine {
        struct engine_options opt;
        struct netns_pool netns;
        struct zygote zygotes[ENGINE_MAX_RUNTIMES];
        size_t nzygotes;
        struct jail_ctx jail;
        pthread_mutex_t lock;
        uint64_t seq;
        struct proc *live;
        size_t nlive;

        /* Pools and the background thread that fills them. */
        struct pool pools[ENGINE_MAX_RUNTIMES];
        size_t npools;
        struct bg_thread filler;  /* on the engine lock */
        size_t inflight;        /* stateless executions being served right now */
        uint64_t refill_at_ns;  /* refill even with executions in flight from then */
        uint64_t next_spawn_ns; /* pool.refill_per_s: earliest next pool start */
        uint64_t pool_bytes;    /* memory held by warm members (pool.memory_budget) */

        /* Used processes waiting to be killed and reaped off the request path. */
        struct proc *dead;
        size_t ndead;
        uint64_t dead_at_ns; /* when the oldest of them was buried */
        /* Dead ones whose teardown waits until no execution is in flight or
         * was for REAP_GRACE_MS (engine_bury_idle); counted for the cap. */
        struct proc *dead_idle;
        size_t ndead_idle;
        uint64_t dead_idle_bytes;
        uint64_t quiet_at_ns;     /* the last stateless execution ended then */
        struct bg_thread reaper;  /* on the engine lock */

        /* Answers and counts every jail's refused syscalls (notify.c). */
        struct notifier *notifier;
};

/* engine.c */
void engine_track(struct engine *e, struct proc *p);
void engine_untrack(struct engine *e, struct proc *p);
/* Hands a used process to the reaper thread (NULL-safe). */
void engine_bury(struct engine *e, struct proc *p);
/* Queues p for the reaper; engine lock held. */
void engine_bury_locked(struct engine *e, struct proc *p);
/* Like engine_bury, for a process whose jail is done (its init exited, or
 * it is killed here): the reaper tears it down once the engine is quiet,
 * not next to the following request (NULL-safe). held_bytes: what the
 * jail may hold until then (its memory peak). */
void engine_bury_idle(struct engine *e, struct proc *p, uint64_t held_bytes);
void engine_next_cgroup_name(struct engine *e, char *buf, size_t len);
struct jail_limits engine_jail_limits(const struct engine *e, const struct exec_limits *lim);
void engine_inflight(struct engine *e, int delta);

/* proc.c: the answer of a process run without waiting for its jail's init
 * to exit. Opens the pidfd of p's workload (a waiting pool member's
 * launcher): it hangs up once init has reaped it. */
void proc_watch_workload(struct proc *p);
/* Once that pidfd hung up: the workload's status as init would have
 * exited with it (init_main.c) into p->wait_status, init told to finish
 * (it is exiting anyway); its reap is left to the teardown. 0, or -errno
 * when the kernel does not tell (then wait for init as before). */
int proc_take_workload_exit(struct proc *p);
int set_nonblock(int fd);
void close_pair(int p[2]);
bool pidfd_exited(int pidfd);

/* proc.c */
/* Spawns spec's jail with stdout/stderr pipes made here (the daemon ends
 * go to p); stdin, ctl_fd and the rest of spec are the caller's. Fills and
 * tracks p. */
int proc_spawn_jail(struct engine *e, struct jail_spec *spec, struct proc *p, struct err *err);
/* proc_spawn into a caller's zeroed p (a kproc's: its destroy is kept).
 * On failure p holds nothing to release. */
int proc_spawn_into(struct engine *e, const struct proc_spec *ps, struct proc *p, struct err *err);
/* Takes the seccomp listener the workload sent on sock (within timeout_ms)
 * and has the notifier watch it for p. 0 or -errno. */
int proc_watch_refusals(struct proc *p, int sock, int timeout_ms);
/* Adopts a template's executor with the given pipe ends (taken). */
int proc_adopt(struct engine *e, pid_t pid, const struct exec_limits *lim, int out_fd, int err_fd,
               struct proc *p);
/* Kills, reaps (wait_status), untracks, releases the cgroup, closes fds. */
void proc_release(struct proc *p);
void proc_reap(struct proc *p);

/* run.c: the poll loop shared by kernels and plain processes. */
struct run_state {
        struct proc *p;
        struct kproc *kp;       /* the JSON-line protocol, or NULL */
        const struct exec_limits *lim;
        struct exec_outcome *o;
        const char *pending;    /* bytes not yet written (ctl for kernels, stdin for procs) */
        size_t pending_len, pending_off;
        uint64_t start_ns, deadline_ns, cpu_base;
        uint64_t cpu_debt;      /* CPU a resident kernel burned since its last run, charged to this one */
        uint64_t cpu_end;       /* the group's CPU counter as run_finish read it */
        bool cpu_end_read;      /* cpu_end is valid */
        uint64_t newlines;
        uint64_t refused_base;  /* p's refusal count when the run started */
        uint64_t bytes;         /* stdout+stderr bytes seen, kept or not */
        bool out_eof, err_eof;
        bool watch_workload;    /* p->work_fd may end the run (workload_gone) */
        const struct exec_sink *sink; /* NULL: output is only kept */
};
void run_init(struct run_state *s, struct proc *p, const struct exec_limits *lim, struct exec_outcome *o);
/* Until the kernel answers or the process exits or a limit kills it. */
int run_loop(struct run_state *s);
/* After run_loop: reads what is left, samples usage, kills and reaps if
 * the run ended the process. */
void run_finish(struct run_state *s, int r);
void run_hit_limit(struct run_state *s, enum exec_limit l);

/* kproc.c: the protocol side of run_loop. */
int kproc_read_ctl(struct run_state *s);
void run_write_pending(struct run_state *s, int fd);
int kproc_wait_line(struct kproc *kp, int timeout_ms, const char *flag);
int kproc_wait_ready(struct kproc *kp, int timeout_ms);
/* Fills err for a kernel that started but failed at STEP (boot, config…)
 * with -errno r: "kernel start failed at STEP: <strerror>". Returns r. */
int kproc_step_err(struct err *err, const char *step, int r);
/* A kproc around an adopted or spawned proc (ctl taken). */
struct kproc *kproc_new(const struct runtime *rt, int ctl_fd, int replay_fd, bool once,
                        const struct exec_limits *lim);

/* netns.c */
int netns_pool_start(struct netns_pool *np, bool enabled);
void netns_pool_stop(struct netns_pool *np);

/* pool.c */
struct kproc *pool_take(struct engine *e, const struct runtime *rt);
void filler_main(void *arg);

/* zygote.c */
struct zygote *zygote_for(struct engine *e, const struct runtime *rt);
struct kproc *zygote_fork(struct engine *e, const struct runtime *rt, const struct exec_limits *lim);
void zygotes_start(struct engine *e);
