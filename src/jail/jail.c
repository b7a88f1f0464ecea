/* The daemon's side of a jail: the process-wide context, spawning (clone,
 * cgroup attach, id maps, the child's report), adopting, killing, reaping
 * and releasing. The child's side is init.c and mount.c. */
#include "jail/jail.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "jail/ids.h"
#include "jail/internal.h"
#include "jail/landlock.h"
#include "jail/seccomp.h"

static const char *const step_names[_STEP_MAX] = {
        "sync", "netns", "hostname", "private-mounts", "root-tmpfs", "bind-usr", "etc",
        "tmp", "workspace", "kernels", "dev", "proc", "pivot_root", "ro-root", "fork",
        "fds", "rlimit", "drop-privileges", "landlock", "seccomp", "chdir", "exec", "tty", "mounts", "command",
};

/* Template jails map their root to the template id (the owner of their
 * user namespace) and the jail user to a stateless id, the executors' host
 * identity; only a privileged daemon may write a two-line map. */
static int write_template_maps(pid_t pid, uid_t root_id, uid_t user_id)
{
        char path[64], map[64];
        snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", (unsigned)root_id, JAIL_UID, (unsigned)user_id);
        snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
        int r = write_string_file(path, map);
        if (r < 0)
                return r;
        snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", (unsigned)root_id, JAIL_GID, (unsigned)user_id);
        snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
        return write_string_file(path, map);
}

/* clone() from this thread with its effective uid set to owner, so that a
 * CLONE_NEWUSER in flags makes a user namespace owned by that unprivileged
 * id, not by root: the kernel charges the namespace's per-user counts
 * (inotify instances, user namespaces…) to its owner in the parent
 * namespace, and root's must not be spent by a template's guests. Raw
 * set*id calls change only the calling thread (see privs.c); the real and
 * saved uid stay 0, so the thread gets its capabilities back. */
static pid_t clone_owned_by(unsigned long flags, uid_t owner, int *pidfd)
{
        if (syscall(SYS_setresuid, -1, owner, -1) < 0)
                return -1;
        pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, pidfd, NULL, 0);
        int e = errno;
        if (pid == 0)
                return 0;
        if (syscall(SYS_setresuid, -1, 0, -1) < 0)
                abort(); /* a worker thread that is not root any more must not go on */
        errno = e;
        return pid;
}

/* Rootless. With a subordinate range (jail/ids.h) the jail user is the
 * sandbox's own host uid, mapped by newuidmap; its group stays the
 * daemon's, so the daemon (as that group) keeps reaching the workspace's
 * files, whose dirs are not reachable by any other uid (0700 data dir).
 * Without one, both are the daemon's own ids. */
static int write_id_maps(const struct jail_ctx *ctx, pid_t pid, uid_t host_id)
{
        char path[64], map[64];
        snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
        int r = write_string_file(path, "deny");
        if (r < 0)
                return r;
        if (ctx->id_count)
                r = jail_ids_map_user(pid, host_id);
        else {
                snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
                snprintf(map, sizeof(map), "%u %u 1\n", JAIL_UID, (unsigned)ctx->outer_uid);
                r = write_string_file(path, map);
        }
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
        snprintf(map, sizeof(map), "%u %u 1\n", JAIL_GID, (unsigned)ctx->outer_gid);
        return write_string_file(path, map);
}

/* How long a jail child may take to set up and exec before the spawn is
 * given up (and the child killed by the caller): a child stuck in setup must
 * not hold a worker, or a template's lock, forever. */
#define CHILD_REPORT_TIMEOUT_MS 20000

static enum err_reason step_reason(int errnum)
{
        switch (errnum) {
        case EAGAIN:
        case ENOMEM:
        case EMFILE:
        case ENFILE: return ERR_BUSY;
        case ENOSPC: return ERR_NO_SPACE;
        default: return ERR_UNAVAILABLE;
        }
}

int jail_step_err(struct err *err, const char *step, int r)
{
        err_set(err, step_reason(-r), -r, "jail setup failed at %s: %s", step, strerror(-r));
        return r;
}

/* The child's side of the report is fork-safe: a step number and an errno
 * over the pipe; the names are given here. 0 at EOF (exec'd), 1 for a
 * deferred workload's "ready", or -errno with err set. */
static int read_child_report(int fd, struct err *err)
{
        struct child_report rep;
        ssize_t n;
        struct pollfd p = { fd, POLLIN, 0 };
        int pr;
        do
                pr = poll(&p, 1, CHILD_REPORT_TIMEOUT_MS);
        while (pr < 0 && errno == EINTR);
        if (pr == 0)
                return err_set(err, ERR_BUSY, ETIMEDOUT, "jail setup failed at timeout: no report from the child in %d s",
                               CHILD_REPORT_TIMEOUT_MS / 1000);
        do
                n = read(fd, &rep, sizeof(rep));
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return 0;
        if (n != (ssize_t)sizeof(rep))
                return jail_step_err(err, "report", n < 0 ? -errno : -EIO);
        if (rep.step == STEP_COMMAND && rep.err == 0)
                return 1;
        const char *step = rep.step >= 0 && rep.step < _STEP_MAX ? step_names[rep.step] : "unknown";
        return jail_step_err(err, step, rep.err > 0 ? -rep.err : -EIO);
}

static void format_opts(char *buf, size_t len, uint64_t bytes, uint64_t inodes, const char *mode)
{
        snprintf(buf, len, "size=%llu,nr_inodes=%llu,mode=%s", (unsigned long long)bytes,
                 (unsigned long long)(inodes ? inodes : 16384), mode);
}

static struct cgroup *cgroup_take_free(struct jail_ctx *ctx, uint64_t memory_bytes, uint64_t pids)
{
        struct cgroup *cg = NULL;
        pthread_mutex_lock(&ctx->cg_lock);
        for (size_t i = 0; i < ctx->cg_nfree; i++) {
                struct jail_cg_slot *slot = &ctx->cg_free[i];
                if (slot->memory_bytes == memory_bytes && slot->pids == pids) {
                        cg = slot->cg;
                        *slot = ctx->cg_free[--ctx->cg_nfree];
                        break;
                }
        }
        pthread_mutex_unlock(&ctx->cg_lock);
        return cg;
}

/* Keeps an emptied group for the next jail with the same limits (empty:
 * the caller has just seen it empty). */
static bool cgroup_give_back(struct jail_ctx *ctx, struct cgroup *cg, uint64_t memory_bytes, uint64_t pids,
                             bool empty)
{
        /* A sandbox's group stays in its family (cgroup_is_nested). */
        if (!ctx || !cg || cgroup_is_nested(cg) || !(empty || cgroup_is_empty(cg)) || cgroup_reset(cg) < 0)
                return false;
        bool kept = false;
        pthread_mutex_lock(&ctx->cg_lock);
        if (ctx->cg_nfree < ARRAY_SIZE(ctx->cg_free)) {
                ctx->cg_free[ctx->cg_nfree++] = (struct jail_cg_slot){ cg, memory_bytes, pids };
                kept = true;
        }
        pthread_mutex_unlock(&ctx->cg_lock);
        return kept;
}

pid_t jail_clone_as(unsigned long flags, uid_t owner, int *pidfd)
{
        return owner != (uid_t)-1 ? clone_owned_by(flags, owner, pidfd)
                                  : (pid_t)syscall(SYS_clone, flags, NULL, pidfd, NULL, 0);
}

/* The jail's child, from the spawner when there is one, else from this
 * thread. Returns the pid or -errno; the child never returns. */
static pid_t clone_jail_child(struct jail_ctx *ctx, unsigned long flags, uid_t owner, struct child_args *a,
                              int *pidfd)
{
        pid_t pid = jail_spawner_clone(ctx, flags, owner, a, pidfd);
        if (pid != -ENOTCONN)
                return pid;
        pid = jail_clone_as(flags, owner, pidfd);
        if (pid == 0)
                jail_child_main(a); /* never returns */
        return pid < 0 ? -errno : pid;
}

/* The mount namespace of our child pid (jail_proc.mntns_fd), or -1. */
static int open_mntns(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
        return open(path, O_RDONLY | O_CLOEXEC);
}

int jail_spawn(struct jail_ctx *ctx, const struct jail_spec *spec, struct jail_proc *ret,
               struct err *err)
{
        int sync[2] = { -1, -1 }, report[2] = { -1, -1 }, cmd[2] = { -1, -1 }, r;
        struct cgroup *cg = NULL;
        struct child_args a = { .ctx = ctx, .spec = spec, .replay_fd = spec->replay_fd, .sysuser_fd = -1,
                                .cmd_fd = -1 };

        snprintf(a.root, sizeof(a.root), "%s", ctx->root_dir);
        format_opts(a.tmp_opts, sizeof(a.tmp_opts), spec->limits.tmp_bytes, spec->limits.tmp_inodes, "1777");
        format_opts(a.ws_opts, sizeof(a.ws_opts), spec->limits.workspace_bytes,
                    spec->limits.workspace_inodes, "0777");

        cg = spec->cgroup_parent ? NULL : cgroup_take_free(ctx, spec->limits.memory_bytes, spec->limits.pids);
        if (!cg) {
                struct cgroup_limits cl = { spec->limits.memory_bytes, spec->limits.pids };
                r = cgroup_create_in(ctx->cgroot, spec->cgroup_parent, spec->cgroup_name, &cl, &cg);
                if (r < 0)
                        return jail_step_err(err, "cgroup", r);
        }
        _cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0 || pipe2(sync, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0 ||
            (spec->deferred && pipe2(cmd, O_CLOEXEC) < 0)) {
                r = jail_step_err(err, "pipes", -errno);
                goto fail;
        }
        a.cmd_fd = cmd[0];
        a.sync_fd = sync[0];
        a.report_fd = report[1];
        a.devnull_fd = spec->has_stdin ? spec->stdin_fd : devnull;
        if (spec->deferred && (spec->pty || spec->template)) {
                r = err_set(err, ERR_INVALID, EINVAL, "jail setup failed: a deferred jail takes no terminal "
                            "and no template");
                goto fail;
        }
        if (spec->pty && (spec->ctl_fd < 0 || spec->template)) {
                /* the master goes back over ctl_fd */
                r = err_set(err, ERR_INVALID, EINVAL, "jail setup failed: a terminal needs a control socket "
                            "and cannot be given to a template");
                goto fail;
        }

        /* The cgroup namespace is unshared by the child after the parent has
         * attached it, so its root is the execution's own group. */
        unsigned long flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
        if (spec->template && ctx->userns) {
                r = err_set(err, ERR_INVALID, EOPNOTSUPP, "jail setup failed: template jails need a privileged daemon");
                goto fail;
        }
        if (ctx->userns || spec->template)
                flags |= CLONE_NEWUSER;
        if ((ctx->netns_fd < 0 && !spec->has_netns) || spec->template)
                flags |= CLONE_NEWNET;
        int pidfd = -1;
        /* Rootless: the child's own user namespace maps JAIL_UID to the host
         * id (write_id_maps), so inside, the jail user's files belong to
         * JAIL_UID. */
        uid_t host_id = spec->host_id ? spec->host_id : jail_ids_stateless(ctx);
        a.host_id = ctx->userns ? JAIL_UID : host_id;
        pid_t pid = clone_jail_child(ctx, flags | SIGCHLD, spec->template ? jail_ids_template(ctx) : (uid_t)-1,
                                     &a, &pidfd);
        if (pid < 0) {
                r = jail_step_err(err, "clone", pid);
                goto fail;
        }

        close(sync[0]);
        close(report[1]);
        sync[0] = report[1] = -1;
        if (cmd[0] >= 0)
                close(cmd[0]);
        cmd[0] = -1;
        if ((r = cgroup_attach(cg, pid)) < 0)
                jail_step_err(err, "cgroup-attach", r);
        else if (spec->template && (r = write_template_maps(pid, jail_ids_template(ctx), a.host_id)) < 0)
                jail_step_err(err, "id-maps", r);
        else if (ctx->userns && (r = write_id_maps(ctx, pid, host_id)) < 0)
                jail_step_err(err, "id-maps", r);
        if (r == 0 && write(sync[1], "g", 1) != 1)
                r = jail_step_err(err, "sync", -errno);
        close(sync[1]);
        sync[1] = -1;
        if (r == 0 && (r = read_child_report(report[0], err)) >= 0 && r != (int)spec->deferred)
                r = jail_step_err(err, "report", -EPROTO); /* exec'd without its command, or "ready" unasked */
        if (r < 0 || !spec->deferred) {
                close(report[0]);
                report[0] = -1;
        }
        if (r < 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, __WALL);
                close(pidfd);
                goto fail;
        }
        *ret = (struct jail_proc){ .ctx = ctx, .memory_bytes = spec->limits.memory_bytes,
                                   .pids = spec->limits.pids, .pid = pid, .pidfd = pidfd, .cg = cg,
                                   .cmd_fd = cmd[1], .report_fd = report[0], .mntns_fd = open_mntns(pid) };
        return 0;
fail:
        for (int i = 0; i < 2; i++) {
                if (sync[i] >= 0)
                        close(sync[i]);
                if (report[i] >= 0)
                        close(report[i]);
                if (cmd[i] >= 0)
                        close(cmd[i]);
        }
        cgroup_destroy(cg);
        return r;
}

int jail_adopt(struct jail_ctx *ctx, pid_t pid, const struct jail_limits *lim, const char *cgroup_name,
               struct jail_proc *ret)
{
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return -errno;
        struct cgroup *cg = cgroup_take_free(ctx, lim->memory_bytes, lim->pids);
        int r = 0;
        if (!cg) {
                struct cgroup_limits cl = { lim->memory_bytes, lim->pids };
                r = cgroup_create(ctx->cgroot, cgroup_name, &cl, &cg);
        }
        if (r == 0 && (r = cgroup_attach(cg, pid)) < 0)
                cgroup_destroy(cg);
        if (r < 0) {
                close(pidfd);
                return r;
        }
        *ret = (struct jail_proc){ .ctx = ctx, .foreign = true, .memory_bytes = lim->memory_bytes,
                                   .pids = lim->pids, .pid = pid, .pidfd = pidfd, .cg = cg,
                                   .cmd_fd = -1, .report_fd = -1, .mntns_fd = -1 };
        return 0;
}

/* A deferred jail's pipes, once its command went or it is torn down. A
 * jail_proc that never spawned is all zeroes: fd 0 is never one of them. */
static void close_command_fds(struct jail_proc *p)
{
        if (p->cmd_fd > 0)
                close(p->cmd_fd);
        if (p->report_fd > 0)
                close(p->report_fd);
        p->cmd_fd = p->report_fd = -1;
}

int jail_start_command(struct jail_proc *p, const char *const *argv, const char *const *envp, const char *cwd,
                       struct err *err)
{
        if (p->cmd_fd <= 0 || p->report_fd <= 0)
                return err_set(err, ERR_INVALID, EINVAL, "jail setup failed at command: not a waiting jail");
        _cleanup_free_ char *msg = NULL;
        size_t len = 0;
        int r = jail_cmd_encode(argv, envp, cwd, &msg, &len);
        if (r < 0) {
                close_command_fds(p);
                return err_set(err, ERR_INVALID, -r, "jail setup failed at command: %s", strerror(-r));
        }
        /* Blocking: the workload reads as we write (SIGPIPE is ignored). */
        r = write_all(p->cmd_fd, msg, len);
        close(p->cmd_fd);
        p->cmd_fd = -1;
        if (r < 0)
                jail_step_err(err, "command", r);
        else if ((r = read_child_report(p->report_fd, err)) > 0)
                r = jail_step_err(err, "report", -EPROTO);
        close_command_fds(p);
        return r;
}

int jail_swap_workspace(const struct jail_proc *p)
{
        if (p->pidfd < 0)
                return -ESRCH;
        /* Rootless: the jail's mount namespace belongs to its user
         * namespace, which the daemon (its owner) joins first to hold
         * CAP_SYS_ADMIN there. */
        int ns = p->ctx && p->ctx->userns ? CLONE_NEWUSER | CLONE_NEWNS : CLONE_NEWNS;
        pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* A single-threaded child of the daemon: raw system calls only. */
                if (setns(p->pidfd, ns) < 0)
                        _exit(1);
                _exit(jail_swap_in_real_workspace() < 0 ? 2 : 0);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

void jail_kill_init(struct jail_proc *p)
{
        /* Signal through the pidfd: unlike a pid, it cannot name a recycled
         * process if the jail was reaped concurrently. */
        if (p->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
        else if (p->pid > 0)
                kill(p->pid, SIGKILL);
}

void jail_kill(struct jail_proc *p)
{
        jail_kill_init(p);
        /* The kernel kills every other process of a pid namespace (and of
         * any below it) when its init dies: nobody in the group needs a
         * signal of ours (reading its members is eight cgroup files, ~0.15
         * ms, per jail). Not so for an adopted process, which is not its
         * namespace's init. */
        if (p->cg && p->foreign)
                cgroup_kill_all(p->cg);
}

int jail_set_background(struct jail_proc *p, bool on)
{
        return p->cg ? cgroup_set_cpu_idle(p->cg, on) : -ENOENT;
}

/* A foreign process is somebody else's child: wait for its pidfd to say it
 * exited (bounded), there is nothing to reap. */
static int wait_foreign(struct jail_proc *p)
{
        struct pollfd pf = { p->pidfd, POLLIN, 0 };
        poll(&pf, 1, 2000);
        p->pid = 0;
        close(p->pidfd);
        p->pidfd = -1;
        return 0;
}

int jail_reap(struct jail_proc *p, int *ret_status)
{
        int status = 0;
        if (p->pid <= 0)
                return -ECHILD;
        if (p->foreign) {
                /* Its real status went to its parent in the template jail;
                 * "exited 1" makes an unanswered death an EngineError. */
                if (ret_status)
                        *ret_status = 1 << 8;
                return wait_foreign(p);
        }
        close_command_fds(p);
        while (waitpid(p->pid, &status, __WALL) < 0) {
                if (errno != EINTR)
                        return -errno;
        }
        p->pid = 0;
        if (p->pidfd >= 0) {
                close(p->pidfd);
                p->pidfd = -1;
        }
        if (ret_status)
                *ret_status = status;
        return 0;
}

/* A template's executor: everything it started lives in its execution's
 * pid namespace, which the kernel empties when the executor's pid 1 (its
 * parent, which only waits for it) exits. So the pidfd kill comes first,
 * and the group is swept only if a look after the executor's exit finds
 * anyone left. The sweep before the exit (jail_kill) always found the
 * executor still listed: it read cgroup.procs of every hierarchy (v1: four
 * opens, four pid lists), slept 1 ms and read them all again — most of the
 * reaper's CPU per stateless request. */
static int kill_reap_foreign(struct jail_proc *p, int *ret_status)
{
        jail_kill_init(p);
        int r = jail_reap(p, ret_status);
        if (p->cg && !(p->cg_empty = cgroup_is_empty(p->cg)))
                cgroup_kill_all(p->cg);
        return r;
}

int jail_kill_reap(struct jail_proc *p, int *ret_status)
{
        if (p->pid > 0 && p->foreign && p->pidfd >= 0)
                return kill_reap_foreign(p, ret_status);
        jail_kill(p);
        return jail_reap(p, ret_status);
}

void jail_proc_release(struct jail_proc *p)
{
        if (p->pid > 0)
                jail_kill_reap(p, NULL);
        close_command_fds(p);
        if (p->mntns_fd > 0)
                close(p->mntns_fd);
        p->mntns_fd = -1;
        if (!cgroup_give_back(p->ctx, p->cg, p->memory_bytes, p->pids, p->cg_empty))
                cgroup_destroy(p->cg);
        p->cg = NULL;
}

/* The shared empty network namespace: a child unshares one and we keep a
 * handle to it. It has only a down loopback, so nothing inside can reach any
 * address, and one namespace for all jails avoids the ~1 ms create and the
 * background teardown cost of a namespace per run (isolation probe). */
static int make_empty_netns(int *ret_fd)
{
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0);
        if (pid < 0) {
                int r = -errno;
                close(pfd[0]);
                close(pfd[1]);
                return r;
        }
        if (pid == 0) {
                char c;
                close(pfd[1]);
                (void)!read(pfd[0], &c, 1);
                _exit(0);
        }
        close(pfd[0]);
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int r = fd < 0 ? -errno : 0;
        close(pfd[1]);
        waitpid(pid, NULL, 0);
        if (r == 0)
                *ret_fd = fd;
        return r;
}

static int ctx_fail(struct err *err, enum err_reason reason, int r, const char *what, const char *path)
{
        return err_set(err, reason, -r, "jail setup failed: %s%s%s: %s", what, path ? " " : "", path ? path : "",
                       strerror(-r));
}

int jail_ctx_init(struct jail_ctx *ctx, const char *run_dir, const char *kernels_dir,
                  int cgroup_force, struct err *err)
{
        int r;
        *ctx = (struct jail_ctx){ .netns_fd = -1, .kernels_fd = -1, .forkserver_dir_fd = -1, .init_fd = -1,
                                  .spawner_fd = -1 };
        pthread_mutex_init(&ctx->cg_lock, NULL);
        pthread_mutex_init(&ctx->spawner_lock, NULL);
        ctx->userns = geteuid() != 0;
        ctx->outer_uid = geteuid();
        ctx->outer_gid = getegid();

        if (!realpath(kernels_dir, ctx->kernels_dir))
                return ctx_fail(err, ERR_INVALID, -errno, "kernels directory not found:", kernels_dir);
        ctx->kernels_fd = open(ctx->kernels_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ctx->kernels_fd < 0)
                return ctx_fail(err, ERR_UNAVAILABLE, -errno, "cannot open the kernels directory", ctx->kernels_dir);
        /* The mount point for jail roots must be reachable by a template
         * jail's root (JAIL_TEMPLATE_UID), whatever the data dir's mode:
         * prefer a root-owned 0755 directory under /run. */
        if (access("/run", W_OK) == 0)
                snprintf(ctx->root_dir, sizeof(ctx->root_dir), "/run/sandboxd/%d/jailroot", (int)getpid());
        else
                snprintf(ctx->root_dir, sizeof(ctx->root_dir), "%s/jailroot", run_dir);
        if ((r = mkdir_p(ctx->root_dir, 0755)) < 0)
                return ctx_fail(err, ERR_UNAVAILABLE, r, "cannot create the jail root directory", ctx->root_dir);
        /* Rootless mode cannot join a namespace owned by the host user
         * namespace, so each jail makes its own (empty) one instead. */
        if (!ctx->userns && (r = make_empty_netns(&ctx->netns_fd)) < 0)
                return ctx_fail(err, ERR_UNAVAILABLE, r, "cannot create the empty network namespace", NULL);
        ctx->landlock = landlock_abi_version() >= 6;
        jail_find_host_strings();
        if ((r = seccomp_prog_build(false, &ctx->seccomp)) < 0 ||
            (r = seccomp_prog_build(true, &ctx->seccomp_inet)) < 0)
                return ctx_fail(err, ERR_UNAVAILABLE, r, "cannot build the seccomp policy", NULL);
        char name[64];
        /* pid plus start time: a daemon killed with -9 leaves its (empty)
         * groups behind, and pids wrap around quickly on a busy host; a
         * restart that inherited the old pid must not collide with them. */
        snprintf(name, sizeof(name), "sandboxd-%d-%llx", (int)getpid(), (unsigned long long)wall_ms());
        if ((r = cgroup_root_open(name, cgroup_force, &ctx->cgroot)) < 0)
                return ctx_fail(err, ERR_UNAVAILABLE, r, "cannot open the cgroup root", NULL);
        return 0;
}

/* Checks name in dir for amode, then puts an fd in *slot (closing the old
 * one): dir itself, or (as_path) name opened O_PATH. 0 or -errno. */
static int set_fd_checked(int *slot, const char *dir, const char *name, int amode, bool as_path)
{
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || faccessat(dfd, name, amode, 0) < 0)
                return -errno;
        int fd = as_path ? openat(dfd, name, O_PATH | O_CLOEXEC) : TAKE_FD(dfd);
        if (fd < 0)
                return -errno;
        if (*slot >= 0)
                close(*slot);
        *slot = fd;
        return 0;
}

int jail_ctx_set_forkserver_dir(struct jail_ctx *ctx, const char *dir)
{
        return set_fd_checked(&ctx->forkserver_dir_fd, dir, JAIL_FORKSERVER_LIB, R_OK, false);
}

int jail_ctx_set_init_dir(struct jail_ctx *ctx, const char *dir)
{
        return set_fd_checked(&ctx->init_fd, dir, JAIL_INIT_BIN, X_OK, true);
}

void jail_ctx_done(struct jail_ctx *ctx)
{
        jail_spawner_stop(ctx);
        if (ctx->init_fd >= 0)
                close(ctx->init_fd);
        ctx->init_fd = -1;
        while (ctx->cg_nfree > 0)
                cgroup_destroy(ctx->cg_free[--ctx->cg_nfree].cg);
        if (ctx->netns_fd >= 0)
                close(ctx->netns_fd);
        ctx->netns_fd = -1;
        seccomp_prog_free(ctx->seccomp);
        ctx->seccomp = NULL;
        seccomp_prog_free(ctx->seccomp_inet);
        ctx->seccomp_inet = NULL;
        cgroup_root_free(ctx->cgroot);
        ctx->cgroot = NULL;
        if (ctx->kernels_fd >= 0)
                close(ctx->kernels_fd);
        ctx->kernels_fd = -1;
        if (ctx->forkserver_dir_fd >= 0)
                close(ctx->forkserver_dir_fd);
        ctx->forkserver_dir_fd = -1;
        /* Remove our (empty) mount point directories under /run. */
        if (strncmp(ctx->root_dir, "/run/sandboxd/", 14) == 0) {
                char dir[4096];
                rmdir(ctx->root_dir);
                snprintf(dir, sizeof(dir), "%s", ctx->root_dir);
                char *slash = strrchr(dir, '/');
                if (slash) {
                        *slash = '\0';
                        rmdir(dir);
                }
        }
}
