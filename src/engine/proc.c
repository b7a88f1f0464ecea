/* Jailed processes: spawn, fds, signals, exit status, teardown. */
#include "engine/internal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static void close_fd(int *fd)
{
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

static void proc_destroy(struct proc *p)
{
        proc_release(p);
        free(p);
}

/* A started jail becomes a live, tracked proc with these pipe ends. */
static void proc_attach(struct engine *e, struct proc *p, int out_fd, int err_fd)
{
        p->engine = e;
        p->out_fd = out_fd;
        p->err_fd = err_fd;
        p->in_fd = -1;
        p->side_fd = -1;
        p->alive = true;
        if (!p->destroy)
                p->destroy = proc_destroy;
        set_nonblock(p->out_fd);
        set_nonblock(p->err_fd);
        engine_track(e, p);
}

int proc_watch_refusals(struct proc *p, int sock, int timeout_ms)
{
        if (!p->engine || !p->engine->notifier)
                return 0; /* no seccomp policy: the workload sent nothing */
        int fd = notify_recv_tagged_fd(sock, NOTIFY_TAG, timeout_ms);
        if (fd < 0)
                return fd;
        char label[48];
        snprintf(label, sizeof(label), "jail_pid=%d", (int)p->jp.pid);
        return notifier_watch(p->engine->notifier, fd, label, &p->watch);
}

int proc_spawn_jail(struct engine *e, struct jail_spec *spec, struct proc *p, struct err *err)
{
        int out[2] = { -1, -1 }, errp[2] = { -1, -1 }, own[2] = { -1, -1 }, r;
        char cgname[64];
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
                r = jail_step_err(err, "pipes", -errno);
                goto fail;
        }
        /* No control socket of the caller's: one just for the seccomp
         * listener, closed in the jail before exec. */
        if (spec->ctl_fd < 0 && e->jail.seccomp) {
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, own) < 0) {
                        r = jail_step_err(err, "pipes", -errno);
                        goto fail;
                }
                spec->ctl_fd = own[1];
                spec->ctl_only_seccomp = true;
        }
        spec->stdout_fd = out[1];
        spec->stderr_fd = errp[1];
        engine_next_cgroup_name(e, cgname, sizeof(cgname));
        spec->cgroup_name = cgname;
        /* A jail without a sandbox's namespace gets one of its own. */
        int own_netns = spec->has_netns || spec->template ? -1 : engine_netns_take(e);
        if (own_netns >= 0) {
                spec->has_netns = true;
                spec->netns_fd = own_netns;
        }
        r = jail_spawn(&e->jail, spec, &p->jp, err);
        if (own_netns >= 0) {
                close(own_netns); /* the jail holds it now, or failed */
                spec->has_netns = false;
        }
        if (r < 0)
                goto fail;
        close(out[1]);
        close(errp[1]);
        proc_attach(e, p, out[0], errp[0]);
        if (own[0] >= 0) {
                spec->ctl_fd = -1;
                r = proc_watch_refusals(p, own[0], 1000);
                close_pair(own);
                if (r < 0) {
                        proc_release(p);
                        return jail_step_err(err, "seccomp", r);
                }
        }
        return 0;
fail:
        close_pair(out);
        close_pair(errp);
        close_pair(own);
        return r;
}

int proc_adopt(struct engine *e, pid_t pid, const struct exec_limits *lim, int out_fd, int err_fd,
               struct proc *p)
{
        char cgname[64];
        engine_next_cgroup_name(e, cgname, sizeof(cgname));
        struct jail_limits jl = engine_jail_limits(e, lim);
        int r = jail_adopt(&e->jail, pid, &jl, cgname, &p->jp);
        if (r < 0)
                return r;
        proc_attach(e, p, out_fd, err_fd);
        return 0;
}

/* The side channel is the jail's fd 3 (ctl_fd), so the seccomp listener
 * comes over it first; what follows is the workload's. */
static int spawn_with_pipes(struct engine *e, struct jail_spec *spec, const struct proc_spec *ps, struct proc *p,
                            struct err *err)
{
        int in[2] = { -1, -1 }, side[2] = { -1, -1 };
        if (ps->stdin_pipe) {
                if (pipe2(in, O_CLOEXEC) < 0)
                        return jail_step_err(err, "pipes", -errno);
                spec->has_stdin = true;
                spec->stdin_fd = in[0];
        }
        if (ps->side_channel && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, side) < 0) {
                close_pair(in);
                return jail_step_err(err, "pipes", -errno);
        }
        spec->ctl_fd = side[1];
        int r = proc_spawn_jail(e, spec, p, err);
        close_fd(&in[0]);
        close_fd(&side[1]);
        if (r == 0 && side[0] >= 0 && (r = proc_watch_refusals(p, side[0], 1000)) < 0) {
                proc_release(p);
                jail_step_err(err, "seccomp", r);
        }
        if (r < 0) {
                close_fd(&in[1]);
                close_fd(&side[0]);
                return r;
        }
        p->in_fd = in[1];
        if (p->in_fd >= 0)
                set_nonblock(p->in_fd);
        p->side_fd = side[0];
        if (p->side_fd >= 0)
                set_nonblock(p->side_fd);
        return 0;
}

/* Receives the terminal master the workload sent before exec (already
 * queued: jail_spawn returns only after the exec), after the seccomp
 * listener it sent first. */
static int recv_master(struct proc *p, int sock)
{
        int r = proc_watch_refusals(p, sock, 1000);
        return r < 0 ? r : notify_recv_tagged_fd(sock, 'T', 0);
}

static int spawn_with_terminal(struct engine *e, struct jail_spec *spec, struct proc *p, struct err *err)
{
        int ctl[2] = { -1, -1 };
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0)
                return jail_step_err(err, "pipes", -errno);
        spec->ctl_fd = ctl[1];
        int r = proc_spawn_jail(e, spec, p, err);
        close_fd(&ctl[1]);
        if (r == 0 && (r = recv_master(p, ctl[0])) < 0)
                jail_step_err(err, "tty", r);
        close_fd(&ctl[0]);
        if (r < 0) {
                if (p->engine)
                        proc_release(p);
                return r;
        }
        /* The unused pipes: a terminal carries everything on its master. */
        close_fd(&p->out_fd);
        close_fd(&p->err_fd);
        p->out_fd = r;
        p->pty = true;
        set_nonblock(p->out_fd);
        return 0;
}

/* ps's argv and envp into argv (JAIL_MAX_ARGS + 1 slots) and envp
 * (JAIL_MAX_ENV + 1), NULL-terminated, within the jail's limits. */
static int copy_command(const struct proc_spec *ps, const char **argv, const char **envp, struct err *err)
{
        size_t n = 0;
        for (; ps->argv && ps->argv[n]; n++) {
                if (n >= JAIL_MAX_ARGS)
                        return err_set(err, ERR_INVALID, E2BIG, "process start failed at argv: more than %d arguments",
                                       JAIL_MAX_ARGS);
                argv[n] = ps->argv[n];
        }
        if (n == 0)
                return err_set(err, ERR_INVALID, EINVAL, "process start failed at argv: no program given");
        argv[n] = NULL;
        for (n = 0; ps->envp && ps->envp[n]; n++) {
                if (n >= JAIL_MAX_ENV)
                        return err_set(err, ERR_INVALID, E2BIG,
                                       "process start failed at env: more than %d variables", JAIL_MAX_ENV);
                envp[n] = ps->envp[n];
        }
        envp[n] = NULL;
        return 0;
}

int proc_start(struct proc *p, const struct proc_spec *ps, struct err *err)
{
        const char *argv[JAIL_MAX_ARGS + 1], *envp[JAIL_MAX_ENV + 1];
        int r = copy_command(ps, argv, envp, err);
        if (r < 0)
                return r;
        return jail_start_command(&p->jp, argv, envp, ps->cwd, err);
}

int proc_spawn_into(struct engine *e, const struct proc_spec *ps, struct proc *p, struct err *err)
{
        const struct exec_limits *lim = ps->limits ? ps->limits : engine_limits(e);
        _cleanup_(spec_binds_close) struct jail_spec spec = { .workspace_dir = ps->workspace_dir, .cwd = ps->cwd,
                                                              .replay_fd = -1, .ctl_fd = -1,
                                                              .deferred = ps->deferred };
        int r = ps->deferred ? 0 : copy_command(ps, spec.argv, spec.envp, err);
        if (r < 0)
                return r;
        spec.limits = engine_jail_limits(e, lim);
        spec.pty = ps->io == PROC_IO_PTY;
        spec.pty_rows = ps->rows;
        spec.pty_cols = ps->cols;
        _cleanup_close_ int tree = -1;
        if (ps->where) {
                where_apply(ps->where, &spec);
                r = workspace_tree(e, ps->where->ws, &tree, err);
                if (r == 0 && !e->jail.userns)
                        r = where_binds(ps->where, &spec, err);
                if (r < 0)
                        return r;
                spec.workspace_tree_fd = tree;
        }
        p->group = ps->where ? kproc_group_ref(ps->where->group) : NULL;
        r = spec.pty ? spawn_with_terminal(e, &spec, p, err) : spawn_with_pipes(e, &spec, ps, p, err);
        if (r < 0) {
                kproc_group_unref(p->group);
                p->group = NULL;
        }
        return r;
}

int proc_spawn(struct engine *e, const struct proc_spec *ps, struct proc **ret, struct err *err)
{
        _cleanup_free_ struct proc *p = calloc(1, sizeof(*p));
        if (!p)
                return err_set(err, ERR_INTERNAL, ENOMEM, "process start failed: out of memory");
        int r = proc_spawn_into(e, ps, p, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

void proc_fds(const struct proc *p, struct proc_fds *ret)
{
        *ret = (struct proc_fds){ .stdin_fd = p->pty ? p->out_fd : p->in_fd, .stdout_fd = p->out_fd,
                                  .stderr_fd = p->err_fd, .exit_fd = p->alive ? p->jp.pidfd : -1,
                                  .side_fd = p->side_fd > 0 ? p->side_fd : -1 };
}

ssize_t proc_read(struct proc *p, int which, void *buf, size_t len)
{
        int fd = which == 2 ? p->err_fd : p->out_fd;
        if (fd < 0)
                return -EBADF;
        ssize_t n = read(fd, buf, len);
        /* A terminal master reads EIO once every slave fd is closed: EOF. */
        if (n < 0 && errno == EIO && p->pty)
                return 0;
        return n < 0 ? -errno : n;
}

ssize_t proc_write(struct proc *p, const void *buf, size_t len)
{
        int fd = p->pty ? p->out_fd : p->in_fd;
        if (fd < 0)
                return -EBADF;
        ssize_t n = write(fd, buf, len);
        return n < 0 ? -errno : n;
}

void proc_close_stdin(struct proc *p)
{
        if (!p->pty)
                close_fd(&p->in_fd);
}

int proc_resize(struct proc *p, unsigned short rows, unsigned short cols)
{
        if (!p->pty)
                return -ENOTTY;
        struct winsize ws = { .ws_row = rows, .ws_col = cols };
        return ioctl(p->out_fd, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

/* The workload is the only child of the jail's init (init reaps orphans but
 * starts nothing else). Signals from outside the pid namespace reach its
 * init only as SIGKILL, so the workload is signalled directly. */
static int workload_pidfd(const struct proc *p)
{
        char path[96], buf[64];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", p->jp.pid, p->jp.pid);
        int r = read_file_small(path, buf, sizeof(buf), NULL);
        if (r < 0)
                return r;
        pid_t child = (pid_t)strtol(buf, NULL, 10);
        if (child <= 0)
                return -ESRCH;
        int fd = (int)syscall(SYS_pidfd_open, child, 0);
        return fd < 0 ? -errno : fd;
}

void proc_watch_workload(struct proc *p)
{
        int fd = workload_pidfd(p);
        if (fd > 0)
                p->work_fd = fd;
        else if (fd == 0)
                close(fd); /* 0 means none here; never happens in the daemon */
}

#ifndef PIDFD_GET_INFO
/* linux/pidfd.h of Linux 6.15 (the build headers may be older). */
struct pidfd_info {
        uint64_t mask, cgroupid;
        uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
        int32_t exit_code;
        uint32_t coredump_mask, spare1;
};
#define PIDFD_GET_INFO _IOWR(0xFF, 11, struct pidfd_info)
#define PIDFD_INFO_EXIT (1UL << 3)
#endif

int proc_take_workload_exit(struct proc *p)
{
        struct pidfd_info info = { .mask = PIDFD_INFO_EXIT };
        if (p->work_fd <= 0 || !p->alive)
                return -EBADF;
        if (ioctl(p->work_fd, PIDFD_GET_INFO, &info) < 0)
                return -errno;
        if (!(info.mask & PIDFD_INFO_EXIT))
                return -ENODATA; /* before Linux 6.15: no exit information */
        int st = info.exit_code;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
        p->wait_status = W_EXITCODE(code, 0);
        p->exit_early = true;
        /* As jail_kill once init is gone: init exits right after its reap
         * and takes the pid namespace along; the signal only hastens it. */
        jail_kill_init(&p->jp);
        return 0;
}

int proc_signal(struct proc *p, int sig)
{
        if (!p->alive)
                return -ESRCH;
        if (sig == SIGKILL) {
                jail_kill(&p->jp);
                return 0;
        }
        _cleanup_close_ int fd = workload_pidfd(p);
        if (fd < 0)
                return fd;
        return syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) < 0 ? -errno : 0;
}

/* The jail's init made a session of its own (jail/init.c), so its host pid
 * is the group's id; a pid namespace's init ignores a signal it has no
 * handler for from outside, and the group id stays taken until the daemon
 * reaps init. */
int proc_signal_group(struct proc *p, int sig)
{
        if (!p->alive)
                return -ESRCH;
        return kill(-p->jp.pid, sig) < 0 ? -errno : 0;
}

void proc_status_decode(int status, struct proc_status *ret)
{
        *ret = (struct proc_status){ .exited = true };
        if (WIFSIGNALED(status))
                ret->signal = WTERMSIG(status);
        else if (WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 128 + NSIG)
                ret->signal = WEXITSTATUS(status) - 128;
        else
                ret->code = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

void proc_reap(struct proc *p)
{
        if (!p->alive)
                return;
        jail_kill_reap(&p->jp, &p->wait_status);
        p->alive = false;
}

int proc_wait(struct proc *p, int timeout_ms, struct proc_status *ret)
{
        if (p->alive) {
                struct pollfd pf = { p->jp.pidfd, POLLIN, 0 };
                int n = poll(&pf, 1, timeout_ms);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ETIMEDOUT;
                proc_reap(p);
        }
        proc_status_decode(p->wait_status, ret);
        return 0;
}

int proc_run(struct proc *p, const void *stdin_data, size_t stdin_len, const struct exec_limits *lim,
             struct exec_outcome *ret)
{
        if (!lim)
                lim = engine_limits(p->engine);
        *ret = (struct exec_outcome){ 0 };
        buf_init(&ret->out, lim->output_bytes);
        buf_init(&ret->err, lim->output_bytes);
        if (!p->alive)
                return -ESRCH;
        struct run_state s;
        run_init(&s, p, lim, ret);
        if (p->in_fd >= 0 || p->pty) {
                s.pending = stdin_data;
                s.pending_len = stdin_data ? stdin_len : 0;
        }
        int r = run_loop(&s);
        run_finish(&s, r);
        return r;
}

void proc_release(struct proc *p)
{
        proc_reap(p);
        if (p->engine)
                notifier_unwatch(p->engine->notifier, p->watch);
        p->watch = NULL;
        engine_untrack(p->engine, p);
        jail_proc_release(&p->jp);
        kproc_group_unref(p->group); /* after its child group is gone */
        p->group = NULL;
        close_fd(&p->in_fd);
        close_fd(&p->out_fd);
        close_fd(&p->err_fd);
        if (p->side_fd > 0)
                close_fd(&p->side_fd);
        if (p->work_fd > 0)
                close_fd(&p->work_fd);
}

void proc_free(struct proc *p)
{
        if (p)
                p->destroy(p);
}

void proc_bury(struct proc *p)
{
        if (p)
                engine_bury(p->engine, p);
}
