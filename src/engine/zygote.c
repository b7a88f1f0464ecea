/* Fork-server templates: a booted, jailed interpreter per language that
 * forks executors on request (src/shim/forkserver.c does the jail side). */
#include "engine/internal.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "base/log.h"
#include "jail/seccomp.h"
#include "shim/forkserver.h"

/* The template's configuration (shim/forkserver.h): what every forked
 * executor applies to itself before running guest code, the same policy as
 * any jail. Written once, right after the template has booted. */
static int zygote_send_config(struct engine *e, struct kproc *k, const struct exec_limits *lim)
{
        const struct engine_options *o = &e->opt;
        const struct seccomp_prog *sp = e->jail.seccomp;
        /* The notify variant: executors install it with a listener and send
         * that back after "G" (zygote_fork). */
        uint32_t bpf_len = (uint32_t)(sp->notify.len * sizeof(struct sock_filter));
        struct forkserver_config c = {
                .magic = FORKSERVER_MAGIC, .version = FORKSERVER_VERSION, .uid = JAIL_UID, .gid = JAIL_GID,
                .bpf_len = bpf_len, .landlock = e->jail.landlock,
        };
        snprintf(c.tmp_opts, sizeof(c.tmp_opts), "size=%llu,nr_inodes=%llu,mode=1777",
                 (unsigned long long)o->tmp_bytes, (unsigned long long)o->tmp_inodes);
        snprintf(c.ws_opts, sizeof(c.ws_opts), "size=%llu,nr_inodes=%llu,mode=0777",
                 (unsigned long long)o->workspace_bytes, (unsigned long long)o->workspace_inodes);
        uint64_t cpu = lim->cpu_ms / 1000 + 2;
        const struct forkserver_rlimit rl[] = {
                { RLIMIT_CPU, 0, cpu, cpu + 1 },
                { RLIMIT_FSIZE, 0, o->file_bytes, o->file_bytes },
                { RLIMIT_NOFILE, 0, o->nofile, o->nofile },
                { RLIMIT_CORE, 0, 0, 0 },
                { RLIMIT_MSGQUEUE, 0, 0, 0 },
        };
        memcpy(c.rlimits, rl, sizeof(rl));
        c.nrlimits = ARRAY_SIZE(rl);
        int r = write_all(k->ctl_fd, &c, sizeof(c));
        return r < 0 ? r : write_all(k->ctl_fd, sp->notify.filter, bpf_len);
}

/* Starts (or restarts) a template; caller holds z->lock. */
static int zygote_start(struct engine *e, struct zygote *z)
{
        const struct exec_limits *lim = &e->opt.limits;
        struct err err = { 0 };
        engine_bury(e, z->kp ? &z->kp->p : NULL);
        z->kp = NULL;
        struct kproc *k = NULL;
        int r = kproc_spawn(e, z->rt, "zygote", NULL, false, lim, &k, &err);
        /* Two "ready" lines: the kernel's once booted, then the shim's once
         * it has the configuration and serves forks. */
        if (r == 0 && (r = kproc_wait_ready(k, 10000)) < 0)
                kproc_step_err(&err, "boot", r);
        if (r == 0 && (r = zygote_send_config(e, k, lim)) < 0)
                kproc_step_err(&err, "config", r);
        if (r == 0 && (r = kproc_wait_ready(k, 10000)) < 0)
                kproc_step_err(&err, "forkserver", r);
        if (r < 0) {
                log_warn("msg=\"template start failed\" lang=%s err=\"%s\"", z->rt->id, err.msg);
                err_done(&err);
                engine_bury(e, k ? &k->p : NULL);
                z->failures++;
                z->retry_at_ns = now_ns() + 1000000000ULL; /* fall back to pools/spawns meanwhile */
                return r;
        }
        z->kp = k;
        return 0;
}

/* Starts the templates not running yet. A request may have started one
 * already (it got there before this thread): restarting that one would kill
 * the executions forked from it, which live in its pid namespace. */
void zygotes_start(struct engine *e)
{
        for (size_t i = 0; i < e->nzygotes; i++) {
                struct zygote *z = &e->zygotes[i];
                pthread_mutex_lock(&z->lock);
                if (!kproc_alive(z->kp))
                        zygote_start(e, z);
                pthread_mutex_unlock(&z->lock);
        }
}

struct zygote *zygote_for(struct engine *e, const struct runtime *rt)
{
        for (size_t i = 0; i < e->nzygotes; i++)
                if (e->zygotes[i].rt == rt)
                        return &e->zygotes[i];
        return NULL;
}

/* Hands three fds to the template: the child's stdout, stderr and control
 * socket. One byte of data carries them (SCM_RIGHTS). */
static int send_fds(int sock, const int fds[3])
{
        for (int tries = 0; tries < 100; tries++) {
                int r = io_send_byte(sock, 'F', SCM_RIGHTS, fds, 3 * sizeof(int));
                if (r != -EAGAIN && r != -EINTR)
                        return r;
                struct pollfd p = { sock, POLLOUT, 0 };
                poll(&p, 1, 10);
        }
        return -EAGAIN;
}

/* Receives the executor's "P" with SCM_CREDENTIALS: the kernel translates
 * its pid into ours, which is how we find (and cgroup) a grandchild of a
 * process in another pid namespace. */
static int recv_pid(int sock, pid_t *ret)
{
        struct pollfd p = { sock, POLLIN, 0 };
        if (poll(&p, 1, 3000) != 1)
                return -ETIMEDOUT;
        char byte;
        struct iovec iov = { &byte, 1 };
        union {
                char buf[CMSG_SPACE(sizeof(struct ucred))];
                struct cmsghdr align;
        } u;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n != 1 || byte != 'P')
                return n < 0 ? -errno : -EPROTO;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS) {
                        struct ucred uc;
                        memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
                        if (uc.pid <= 0)
                                return -EPROTO;
                        *ret = uc.pid;
                        return 0;
                }
        }
        return -EPROTO;
}

/* Sends the child's ends to a live template (restarting a dead one). */
static int zygote_request(struct engine *e, struct zygote *z, const int fds[3])
{
        pthread_mutex_lock(&z->lock);
        int r = 0;
        if (!kproc_alive(z->kp) || pidfd_exited(z->kp->p.jp.pidfd))
                r = now_ns() < z->retry_at_ns ? -EAGAIN : zygote_start(e, z);
        if (r == 0) {
                r = send_fds(z->kp->ctl_fd, fds);
                if (r < 0)
                        kproc_kill(z->kp); /* restarted on the next request */
                z->forks++;
        }
        pthread_mutex_unlock(&z->lock);
        return r;
}

/* Asks the template for a fresh executor; NULL when there is no template
 * for this language or it failed (callers fall back to pools/spawns). */
struct kproc *zygote_fork(struct engine *e, const struct runtime *rt, const struct exec_limits *lim)
{
        struct zygote *z = zygote_for(e, rt);
        if (!z)
                return NULL;
        int out[2] = { -1, -1 }, err[2] = { -1, -1 }, ctl[2] = { -1, -1 }, one = 1, r;
        struct kproc *k = NULL;
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
            setsockopt(ctl[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
                r = -errno;
                goto fail;
        }
        int fds[3] = { out[1], err[1], ctl[1] };
        r = zygote_request(e, z, fds);
        close(out[1]);
        close(err[1]);
        close(ctl[1]);
        out[1] = err[1] = ctl[1] = -1;
        pid_t pid = 0;
        if (r < 0 || (r = recv_pid(ctl[0], &pid)) < 0)
                goto fail;
        k = kproc_new(rt, ctl[0], -1, true, lim);
        if (!k) {
                r = -ENOMEM;
                goto fail;
        }
        ctl[0] = -1;
        if ((r = proc_adopt(e, pid, lim, out[0], err[0], &k->p)) < 0)
                goto fail;
        out[0] = err[0] = -1;
        /* A new or recycled (reset) cgroup: nothing to reset again. */
        k->counters_fresh = true;
        k->forked = true;
        if ((r = write_all(k->ctl_fd, "G", 1)) < 0 || (r = proc_watch_refusals(&k->p, k->ctl_fd, 3000)) < 0) {
                log_debug("msg=\"template fork failed\" lang=%s err=\"%s\"", rt->id, strerror(-r));
                kproc_free(k);
                return NULL;
        }
        return k;
fail:
        log_debug("msg=\"template fork failed\" lang=%s err=\"%s\"", rt->id, strerror(-r));
        kproc_free(k);
        close_pair(out);
        close_pair(err);
        close_pair(ctl);
        return NULL;
}
