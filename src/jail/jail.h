/* The jail: spawns one process tree in fresh pid, mount, ipc, uts and cgroup
 * namespaces (plus a user namespace when the daemon is not root), inside the
 * shared empty network namespace, on a read-only pivot_root'ed view of the
 * system, as an unprivileged uid with no capabilities, no_new_privs, Landlock
 * scoping and the seccomp policy. Pid 1 of the jail is our own tiny init that
 * reaps and exits when the workload exits, which tears the namespace down.
 *
 * jail/ knows nothing about HTTP, JSON or languages. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "jail/cgroup.h"

#define JAIL_UID 65534
#define JAIL_GID 65534
#define JAIL_KERNELS_DIR "/opt/sandboxd/kernels"
/* The fork-server shim (src/shim/forkserver.c), next to the kernels in templates. */
#define JAIL_FORKSERVER_LIB "libsandboxd-forkserver.so"
/* Pid 1 once guest code runs (src/jail/init_main.c), next to the daemon. */
#define JAIL_INIT_BIN "sandboxd-init"
#define JAIL_WORKSPACE "/workspace"
#define JAIL_MAX_ARGS 16
#define JAIL_MAX_ENV 64
#define JAIL_MAX_BINDS 8

struct seccomp_prog;

/* Process-wide jail state, built once at start-up. */
struct jail_ctx {
        bool userns;            /* rootless: a user namespace per jail */
        uid_t outer_uid;        /* uid/gid that JAIL_UID maps to (rootless) */
        gid_t outer_gid;
        bool landlock;          /* kernel supports Landlock scoping */
        int netns_fd;           /* shared empty network namespace, or -1 */
        struct seccomp_prog *seccomp;
        /* The same policy with AF_INET/AF_INET6/AF_NETLINK sockets allowed,
         * for jail_spec.allow_inet; NULL: none built (never then). */
        struct seccomp_prog *seccomp_inet;
        struct cgroup_root *cgroot;
        char root_dir[4096];    /* empty dir each jail mounts its tmpfs root on */
        /* Emptied cgroups kept for reuse: mkdir ×3 and the occasional
         * multi-millisecond first attach stay off the request path. */
        pthread_mutex_t cg_lock;
        struct jail_cg_slot {
                struct cgroup *cg;
                uint64_t memory_bytes, pids;
        } cg_free[64];
        size_t cg_nfree;
        char kernels_dir[4096]; /* host dir bound read-only at JAIL_KERNELS_DIR */
        int kernels_fd;         /* that dir, opened by the daemon: template jails
                                 * (another uid) may not traverse its parents */
        int forkserver_dir_fd;  /* dir holding JAIL_FORKSERVER_LIB, copied into
                                 * template jails; -1: no templates */
        int init_fd;            /* JAIL_INIT_BIN (O_PATH), exec'd as pid 1; -1:
                                 * init stays a copy of the daemon */
        /* Host ids of jails (jail/ids.h); id_count 0: none set. */
        uint32_t id_base, id_count;
        uint32_t id_next;       /* rotating stateless set (atomic) */
        /* The spawner (jail_ctx_start_spawner): its socket, or -1 when the
         * daemon clones jails itself; one request at a time. */
        int spawner_fd;
        pid_t spawner_pid;
        pthread_mutex_t spawner_lock;
};

/* Creates the context: checks privileges, makes the shared netns, compiles
 * seccomp, opens the cgroup root. cgroup_force: -1 auto, or a backend.
 * Returns 0 or -errno; err names what failed ("jail setup failed: cannot
 * open the cgroup root: …"). */
int jail_ctx_init(struct jail_ctx *ctx, const char *run_dir, const char *kernels_dir,
                  int cgroup_force, struct err *err);
void jail_ctx_done(struct jail_ctx *ctx);
/* Finds JAIL_FORKSERVER_LIB in dir, for template
 * jails. Returns 0 or -errno (templates are then unavailable). */
int jail_ctx_set_forkserver_dir(struct jail_ctx *ctx, const char *dir);
/* Finds JAIL_INIT_BIN in dir: every jail's pid 1 execs it before guest code
 * runs. Returns 0 or -errno (pid 1 then stays a copy of the daemon, with
 * its argv/env strings blanked). */
int jail_ctx_set_init_dir(struct jail_ctx *ctx, const char *dir);
/* Forks the spawner (src/jail/spawner.c): a small single-threaded copy of
 * the caller that clone()s every later jail as the caller's own child, so
 * that the caller's memory is never shared with (and write-protected for)
 * a jail. Call once the context is complete (ids, init and fork-server
 * dirs) and before the process grows, from the thread that lives as long
 * as the jails do (their parent-death signal follows it). Returns 0 or
 * -errno; without it (or once it has died) jails are cloned by the caller
 * itself, as before. jail_ctx_done stops it. */
int jail_ctx_start_spawner(struct jail_ctx *ctx);

struct jail_limits {
        uint64_t memory_bytes;  /* cgroup memory limit; 0 = none */
        uint64_t pids;          /* cgroup pids.max; 0 = none */
        uint64_t cpu_seconds;   /* RLIMIT_CPU backstop (soft; hard = soft + 1) */
        uint64_t file_bytes;    /* RLIMIT_FSIZE */
        uint64_t nofile;        /* RLIMIT_NOFILE */
        uint64_t data_bytes;    /* RLIMIT_DATA; used when no cgroup can limit memory */
        uint64_t tmp_bytes;     /* size of the private /tmp tmpfs */
        uint64_t tmp_inodes;
        uint64_t workspace_bytes;  /* tmpfs /workspace size when no dir is given */
        uint64_t workspace_inodes;
};

/* An extra mount attached after /workspace: a sandbox's bucket mount. */
struct jail_bind {
        int tree_fd;        /* detached mount (jail_bind_tree); the caller closes it */
        /* Absolute and normalised, inside the jail: below /workspace (the
         * directories are made in the workspace as the jail user's) or a
         * directory made on the jail's root tmpfs (the caller keeps it off
         * the system directories). No symlink is followed on the way. */
        const char *path;
};

struct jail_spec {
        const char *argv[JAIL_MAX_ARGS + 1];  /* NULL-terminated, paths as seen inside */
        const char *envp[JAIL_MAX_ENV + 1];   /* complete environment, NULL-terminated */
        const char *workspace_dir;            /* host dir bound at /workspace, or NULL for tmpfs */
        /* > 0: a detached copy of the workspace mount (jail_workspace_tree),
         * attached at /workspace instead of binding workspace_dir by path.
         * 0 (a zeroed spec) or -1: none. Stays the caller's to close. */
        int workspace_tree_fd;
        const char *cwd;                      /* inside the jail; NULL = /workspace */
        const char *cgroup_name;              /* unique name for the execution's group */
        /* The sandbox's parent group (cgroup_create_parent): the execution's
         * group is made below it, never recycled; NULL: below the root. */
        struct cgroup *cgroup_parent;
        struct jail_limits limits;
        int stdout_fd, stderr_fd, ctl_fd;     /* become fds 1, 2 and 3 */
        bool has_stdin;                       /* stdin_fd becomes fd 0; else /dev/null */
        int stdin_fd;
        /* A terminal instead of fds 0-2 (stdout_fd/stderr_fd may be -1): the
         * jail gets a fresh devpts instance (/dev/pts, /dev/ptmx); the
         * workload opens a pair, makes the slave its controlling terminal
         * (new session) and fds 0-2, and sends the master to the daemon
         * over ctl_fd (required) as one byte 'T' with SCM_RIGHTS, then
         * closes fd 3. Size pty_rows x pty_cols (0: 24x80). */
        bool pty;
        unsigned short pty_rows, pty_cols;
        /* Replay isolation (code-context restore): when >= 0, /workspace starts
         * as an overlay whose writes land in a throw-away tmpfs, until the
         * daemon swaps the real workspace in (jail_swap_workspace). The
         * jail's init only closes it: it holds no privilege while replayed
         * code runs. -1: no overlay. */
        int replay_fd;
        /* Fork-server template: JAIL_FORKSERVER_LIB is copied next to the kernels
         * (the spec's environment preloads it). The workload runs as uid 0 of a fresh user
         * namespace (JAIL_TEMPLATE_UID outside) with its own empty network
         * namespace, keeps its namespaced capabilities and gets no seccomp
         * filter, so it can give every forked child its own namespaces.
         * It never runs guest code; each child drops to JAIL_UID and applies
         * the seccomp policy itself before running any. Root only. */
        bool template;
        /* The host uid and gid JAIL_UID maps to (root mode): the sandbox's
         * own id (jail/ids.h), 0 for one of the rotating stateless set. The
         * workload runs in a user namespace of its own, owned by that id;
         * a template's executors take a stateless id. Ignored when rootless
         * (the daemon's id is the only one it can map). */
        uid_t host_id;
        /* seccomp refusals (engine/notify.c): when ctl_fd >= 0 the workload
         * installs the policy with a listener and sends it over fd 3 as one
         * byte 'N' with SCM_RIGHTS, before the terminal's 'T'. ctl_only_seccomp:
         * fd 3 carries nothing else and is closed before exec. */
        bool ctl_only_seccomp;
        /* has_netns: join netns_fd (a sandbox's own namespace, or a fresh
         * one) instead of the context's shared empty one. Root only. */
        bool has_netns;
        int netns_fd;
        /* Sockets of the inet families (loopback TCP/UDP in a sandbox's own
         * namespace, whose only interface is lo): the context's
         * seccomp_inet program. Honoured only with has_netns: a jail in
         * the shared namespace never gets it. */
        bool allow_inet;
        /* /etc/resolv.conf names 127.0.0.1 (the egress DNS stub the daemon
         * runs in the sandbox's namespace) instead of no server at all.
         * Honoured only with has_netns. */
        bool local_dns;
        /* Extra mounts, attached in order after /workspace (on the real
         * workspace when replaying, so they survive the swap). */
        struct jail_bind binds[JAIL_MAX_BINDS];
        size_t nbinds;
        /* A pre-spawned jail: everything is built and the workload confined
         * (uid, rlimits, Landlock, seccomp, fds) as for any spawn, but it
         * then waits for its command (jail_start_command) instead of
         * exec'ing argv (unused, may be empty); jail_spawn returns once it
         * waits. Not with pty or template. */
        bool deferred;
};

/* Without an id range (jail_ctx_set_ids not called): the templates' root. */
#define JAIL_TEMPLATE_UID 65533

/* A detached copy (open_tree OPEN_TREE_CLONE) of the mount dir_fd (an
 * O_PATH fd of a mounted workspace, opened under the sandbox's lock) is
 * on, for jail_spec.workspace_tree_fd: each spawn needs a fresh one. Fails
 * (-EINVAL) once that mount was detached, e.g. by a concurrent DELETE, and
 * without CAP_SYS_ADMIN (-EPERM). Returns the fd or -errno. */
int jail_workspace_tree(int dir_fd);
/* A detached copy of the mount dir_fd is on, for jail_spec.binds: nosuid,
 * nodev, and read-only when readonly. -EINVAL once that mount was detached
 * (unmounted meanwhile). Returns the fd or -errno. */
int jail_bind_tree(int dir_fd, bool readonly);
/* Opens the directory rel (relative, '/'-separated, no "." or "..") below
 * base_fd, making the missing ones (mode 0755 less the umask, chowned to
 * owner unless it is (uid_t)-1), one component at a time and never through
 * a symlink. No allocation: also run by the jail's cloned child for
 * jail_spec.binds. Returns an O_PATH fd or -1 with errno set. */
int jail_open_mount_point(int base_fd, const char *rel, uid_t owner);
/* Attaches tree_fd (jail_bind_tree; consumed by the move, still the
 * caller's to close) at path (as jail_bind.path) in the running jail whose
 * init pidfd names, from a short-lived child that joins its mount
 * namespace: a mount made after the jail started. Below /workspace the
 * missing directories are made (owner as jail_open_mount_point); on the
 * read-only root only existing ones are used. Returns 0 or -errno. */
int jail_attach_bind(int pidfd, int tree_fd, const char *path, uid_t owner);

struct jail_proc {
        struct jail_ctx *ctx;
        bool foreign;       /* not our child (a template's executor): reaped by others */
        uint64_t memory_bytes, pids; /* the cgroup's limits, for reuse */
        pid_t pid;          /* the jail's init, as seen by the daemon */
        int pidfd;          /* pollable: readable when init exited */
        struct cgroup *cg;  /* may be NULL with CGROUP_NONE */
        bool cg_empty;      /* cg seen empty after the process exited (jail_kill_reap) */
        /* A deferred jail until jail_start_command: the daemon's ends of
         * the command pipe and of the child's report pipe; else -1. */
        int cmd_fd, report_fd;
        /* The jail's mount namespace, held until jail_proc_release: its
         * teardown (unmounting the jail's tree, which waits for an RCU grace
         * period) then happens on the releasing thread, not in init's exit
         * that the run waits for. -1 (or 0 in a zeroed struct): none. */
        int mntns_fd;
};

/* Spawns the jail and returns once the workload has exec'd (or failed to).
 * On failure nothing is left running. Returns 0 or -errno; err names the
 * failing step ("jail setup failed at pivot_root: Permission denied"). */
int jail_spawn(struct jail_ctx *ctx, const struct jail_spec *spec, struct jail_proc *ret,
               struct err *err);
/* Sends a deferred jail's workload its command (argv NULL-terminated, at
 * most JAIL_MAX_ARGS; envp the complete environment; cwd NULL for
 * /workspace) and returns once it has exec'd it, as jail_spawn would:
 * err names the failing step ("exec"). One command per jail: the pipe is
 * closed after it. On failure the jail is left for the caller to kill.
 * Returns 0 or -errno. */
int jail_start_command(struct jail_proc *p, const char *const *argv, const char *const *envp, const char *cwd,
                       struct err *err);
/* Fills err for a jail start that failed at STEP with -errno r, in
 * jail_spawn's words. The reason is ERR_BUSY for exhausted resources
 * (EAGAIN, ENOMEM, EMFILE, ENFILE), ERR_NO_SPACE for ENOSPC, else
 * ERR_UNAVAILABLE. Returns r. Also for the steps a caller adds around
 * jail_spawn (its pipes, the terminal). */
int jail_step_err(struct err *err, const char *step, int r);
/* Adopts a process started by a template jail (not our child): opens a
 * pidfd for it and moves it into a fresh (or recycled) cgroup with the
 * given limits. Returns 0 or -errno. */
int jail_adopt(struct jail_ctx *ctx, pid_t pid, const struct jail_limits *lim, const char *cgroup_name,
               struct jail_proc *ret);

/* Ends a replay (spec.replay_fd): from a short-lived child of the daemon
 * that joins the jail's mount namespace, replaces the overlay at /workspace
 * with the real workspace. The jail itself needs no capability for it.
 * Returns 0 or -errno. */
int jail_swap_workspace(const struct jail_proc *p);

/* SIGKILLs the whole jail (init, hence its pid namespace, and the cgroup). */
void jail_kill(struct jail_proc *p);
/* Only the signal to init (for an adopted template fork: the executor),
 * without jail_kill's sweep of the cgroup's members: enough where the reap
 * that follows sweeps only if someone is left (kill_reap_foreign), or where
 * init's exit takes the rest along. */
void jail_kill_init(struct jail_proc *p);
/* Lets the jail's tasks run only on CPUs nothing else wants (on: its cgroup's
 * cpu.idle), or normally again. Returns 0 or -errno (-ENOENT: no cpu
 * controller for its group). Released groups come back normal. */
int jail_set_background(struct jail_proc *p, bool on);
/* Waits for init and returns its wait status; frees the cgroup unless
 * keep_cgroup. Safe to call once per successful spawn. */
int jail_reap(struct jail_proc *p, int *ret_status);
/* jail_kill, then jail_reap: what releasing a finished jail takes. For a
 * template's executor, the group is swept only when someone is left in it
 * once the executor has exited (see release_foreign). */
int jail_kill_reap(struct jail_proc *p, int *ret_status);
/* Frees what jail_reap left: an emptied cgroup goes back to the reuse list
 * (reset), anything else is destroyed. NULL-safe on fields. */
void jail_proc_release(struct jail_proc *p);
