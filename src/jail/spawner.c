/* The spawner: a small single-threaded copy of the daemon, forked once the
 * jail context is complete and before the daemon grows, that clone()s every
 * jail on the daemon's behalf.
 *
 * Why: a jail cloned from the daemon itself copies the page tables of a big
 * multi-threaded process and write-protects all of its private memory; every
 * daemon thread then takes a copy-on-write fault on each page it writes
 * next (measured: ~27 faults in the next request's thread after each node
 * pool refill, 1.7 µs apiece on this VM after an idle pause). Cloned from
 * the spawner instead, the daemon's memory is never shared, and the jail's
 * first moments run on a copy of a process that holds none of the heap the
 * daemon built after start-up (other tenants' env, keys).
 *
 * The jail stays the daemon's child: the spawner clones with CLONE_PARENT,
 * so the daemon waits for it, reaps it and holds its pidfd as before, and
 * jail.c's parent side (cgroup attach, id maps, "go", the child's report)
 * is unchanged. Only the clone and the child's code move here: the request
 * carries the child's arguments (child_args and the jail_spec, their
 * strings, their fds by SCM_RIGHTS); the answer is the pid and the pidfd.
 *
 * One request at a time (spawner_lock): the clone itself takes tens of
 * microseconds in a small process; the jail builds itself in parallel. */
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/io.h"
#include "base/log.h"
#include "jail/internal.h"

#define SPAWN_MAGIC 0x5350574eU /* "SPWN" */
#define SPAWN_MAX_FDS 32
#define SPAWN_NULL_STR UINT32_MAX
/* The strings of one request: argv, envp, binds, paths. The kernel's own
 * limit for argv + envp of an exec is lower. */
#define SPAWN_MAX_BLOB (8u << 20)

struct spawn_req {
        uint32_t magic;
        uint32_t nfds;     /* fds that came with the header, in fd_slots order */
        uint32_t fd_mask;  /* which of fd_slots' slots they fill */
        uint32_t owner;    /* effective uid to clone with (template jails), or (uid_t)-1 */
        int32_t policy;    /* the requesting thread's scheduling policy, for the child */
        uint64_t flags;    /* clone flags, CLONE_PARENT and CLONE_PIDFD added here */
        uint64_t blob_len; /* strings following the header, in str_slots order */
        struct child_args args; /* its ctx and spec pointers are meaningless here */
        struct jail_spec spec;  /* its string pointers are meaningless here */
};

struct spawn_reply {
        int32_t pid; /* > 0, or -errno of the clone */
};

/* Every fd the child may use, at the same place on both sides. A slot is
 * sent only when it holds an fd the child will use. */
static size_t fd_slots(struct child_args *a, struct jail_spec *s, int **slot, bool *used)
{
        size_t n = 0;
#define SLOT(field, cond)           \
        do {                        \
                slot[n] = &(field); \
                used[n++] = (cond); \
        } while (0)
        SLOT(a->sync_fd, a->sync_fd >= 0);
        SLOT(a->report_fd, a->report_fd >= 0);
        SLOT(a->devnull_fd, a->devnull_fd >= 0);
        SLOT(a->replay_fd, a->replay_fd >= 0);
        SLOT(a->cmd_fd, a->cmd_fd >= 0);
        SLOT(s->stdout_fd, s->stdout_fd >= 0);
        SLOT(s->stderr_fd, s->stderr_fd >= 0);
        SLOT(s->ctl_fd, s->ctl_fd >= 0);
        SLOT(s->stdin_fd, s->has_stdin && s->stdin_fd >= 0);
        SLOT(s->netns_fd, s->has_netns && s->netns_fd >= 0);
        SLOT(s->workspace_tree_fd, s->workspace_tree_fd > 0);
        for (size_t i = 0; i < JAIL_MAX_BINDS; i++)
                SLOT(s->binds[i].tree_fd, i < s->nbinds && s->binds[i].tree_fd >= 0);
#undef SLOT
        return n;
}

/* Every string pointer of the spec, at the same place on both sides. */
static size_t str_slots(struct jail_spec *s, const char ***slot)
{
        size_t n = 0;
        for (size_t i = 0; i <= JAIL_MAX_ARGS; i++)
                slot[n++] = &s->argv[i];
        for (size_t i = 0; i <= JAIL_MAX_ENV; i++)
                slot[n++] = &s->envp[i];
        slot[n++] = &s->workspace_dir;
        slot[n++] = &s->cwd;
        for (size_t i = 0; i < JAIL_MAX_BINDS; i++)
                slot[n++] = &s->binds[i].path;
        return n;
}

#define MAX_FD_SLOTS (11 + JAIL_MAX_BINDS)
#define MAX_STR_SLOTS (JAIL_MAX_ARGS + 1 + JAIL_MAX_ENV + 1 + 2 + JAIL_MAX_BINDS)

/* ---- the spawner's side ------------------------------------------------ */

/* Receives a message of exactly len bytes into buf and the fds that came
 * with it (at most max_fds; *nfds of them). On a stream socket the message
 * may arrive in pieces; the fds come with its first byte. 0 or -errno. */
static int recv_with_fds(int sock, void *buf, size_t len, int *fds, size_t max_fds, size_t *nfds)
{
        union {
                char buf[CMSG_SPACE(SPAWN_MAX_FDS * sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = { buf, len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                              .msg_controllen = CMSG_SPACE(max_fds * sizeof(int)) };
        ssize_t n;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return n < 0 ? -errno : -EPIPE;
        *nfds = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k && *nfds < max_fds; i++)
                        memcpy(&fds[(*nfds)++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        }
        if (msg.msg_flags & MSG_CTRUNC)
                return -EPROTO;
        return (size_t)n < len ? read_all(sock, (char *)buf + n, len - (size_t)n) : 0;
}

/* Points the request's string slots into blob; -EPROTO if it is not exactly
 * those strings. */
static int decode_strings(struct jail_spec *s, char *blob, size_t len)
{
        const char **slot[MAX_STR_SLOTS];
        size_t n = str_slots(s, slot), off = 0;
        for (size_t i = 0; i < n; i++) {
                uint32_t l;
                if (len - off < sizeof(l))
                        return -EPROTO;
                memcpy(&l, blob + off, sizeof(l));
                off += sizeof(l);
                if (l == SPAWN_NULL_STR) {
                        *slot[i] = NULL;
                        continue;
                }
                if (l >= len - off || blob[off + l] != '\0')
                        return -EPROTO;
                *slot[i] = blob + off;
                off += (size_t)l + 1;
        }
        return off == len ? 0 : -EPROTO;
}

/* Puts the received fds into the slots the header names; the others get -1. */
static int place_fds(struct child_args *a, struct jail_spec *s, uint32_t mask, const int *fds, size_t nfds)
{
        int *slot[MAX_FD_SLOTS];
        bool used[MAX_FD_SLOTS];
        size_t n = fd_slots(a, s, slot, used), next = 0;
        for (size_t i = 0; i < n; i++) {
                if (!(mask & (1u << i))) {
                        *slot[i] = -1;
                        continue;
                }
                if (next >= nfds)
                        return -EPROTO;
                *slot[i] = fds[next++];
        }
        return next == nfds ? 0 : -EPROTO;
}

static int send_reply(int sock, pid_t pid, int pidfd)
{
        struct spawn_reply rep = { .pid = pid };
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = { &rep, sizeof(rep) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (pidfd >= 0) {
                memset(&u, 0, sizeof(u));
                msg.msg_control = u.buf;
                msg.msg_controllen = sizeof(u.buf);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &pidfd, sizeof(int));
        }
        ssize_t n;
        do
                n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(rep) ? 0 : -EPIPE;
}

/* Clones the jail's child as the daemon's child, with jail_spawn's flags
 * and owner. */
static pid_t clone_for_daemon(struct spawn_req *req, int *pidfd)
{
        pid_t pid = jail_clone_as((unsigned long)req->flags | CLONE_PARENT | CLONE_PIDFD, (uid_t)req->owner, pidfd);
        int e = errno;
        if (pid == 0) {
                /* As if cloned by the requesting thread: a jail the pool
                 * filler starts is SCHED_BATCH like the filler (base/thread.c),
                 * one a request starts is not. */
                struct sched_param sp = { 0 };
                if (req->policy != SCHED_OTHER)
                        (void)sched_setscheduler(0, req->policy, &sp);
                req->args.spec = &req->spec;
                jail_child_main(&req->args); /* never returns */
        }
        return pid < 0 ? -e : pid;
}

/* One request: its header and fds, its strings, the clone, the answer.
 * < 0 ends the spawner (the daemon is gone or spoke nonsense). */
static int serve_one(const struct jail_ctx *ctx, int sock)
{
        struct spawn_req *req = malloc(sizeof(*req));
        int fds[SPAWN_MAX_FDS];
        size_t nfds = 0;
        if (!req)
                return -ENOMEM;
        int r = recv_with_fds(sock, req, sizeof(*req), fds, SPAWN_MAX_FDS, &nfds);
        char *blob = NULL;
        if (r == 0 && (req->magic != SPAWN_MAGIC || req->blob_len > SPAWN_MAX_BLOB || req->nfds != nfds))
                r = -EPROTO;
        if (r == 0 && !(blob = malloc(req->blob_len + 1)))
                r = -ENOMEM;
        if (r == 0)
                r = read_all(sock, blob, req->blob_len);
        if (r == 0)
                r = decode_strings(&req->spec, blob, req->blob_len);
        if (r == 0)
                r = place_fds(&req->args, &req->spec, req->fd_mask, fds, nfds);
        if (r == 0) {
                req->args.ctx = ctx;
                req->spec.cgroup_name = NULL; /* the daemon's side only */
                req->spec.cgroup_parent = NULL;
                int pidfd = -1;
                pid_t pid = clone_for_daemon(req, &pidfd);
                r = send_reply(sock, pid, pid > 0 ? pidfd : -1);
                if (pidfd >= 0)
                        close(pidfd);
        }
        for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
        free(blob);
        free(req);
        return r;
}

/* Closes every fd but 0-2, the socket and the context's own: the spawner
 * must not keep the daemon's listening sockets or databases open. */
static void close_other_fds(const struct jail_ctx *ctx, int sock)
{
        int keep[] = { 2, sock, ctx->netns_fd, ctx->kernels_fd, ctx->forkserver_dir_fd, ctx->init_fd };
        size_t n = ARRAY_SIZE(keep);
        for (size_t i = 1; i < n; i++) /* insertion sort: six values */
                for (size_t j = i; j > 0 && keep[j] < keep[j - 1]; j--) {
                        int t = keep[j];
                        keep[j] = keep[j - 1];
                        keep[j - 1] = t;
                }
        int from = 3;
        for (size_t i = 0; i < n; i++) {
                if (keep[i] >= from) {
                        if (keep[i] > from)
                                syscall(SYS_close_range, (unsigned)from, (unsigned)keep[i] - 1, 0U);
                        from = keep[i] + 1;
                }
        }
        syscall(SYS_close_range, (unsigned)from, ~0U, 0U);
}

static __attribute__((noreturn)) void spawner_main(const struct jail_ctx *ctx, int sock, pid_t daemon)
{
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != daemon)
                _exit(0);
        prctl(PR_SET_NAME, "spawner", 0, 0, 0);
        /* None of the daemon's handlers may run here (they would act on
         * this copy's stale state), and nothing stays blocked: a SIGTERM
         * ends the spawner like any process. The jail's child resets its
         * own signals anyway. */
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        signal(sig, sig == SIGPIPE ? SIG_IGN : SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        close_other_fds(ctx, sock);
        while (serve_one(ctx, sock) == 0)
                ;
        _exit(0); /* not exit(): no atexit handler of the daemon runs here */
}

/* ---- the daemon's side ------------------------------------------------- */

int jail_ctx_start_spawner(struct jail_ctx *ctx)
{
        int sv[2];
        if (ctx->spawner_fd >= 0)
                return -EALREADY;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid_t daemon = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(sv[0]);
                close(sv[1]);
                return -e;
        }
        if (pid == 0) {
                close(sv[0]);
                spawner_main(ctx, sv[1], daemon);
        }
        close(sv[1]);
        ctx->spawner_fd = sv[0];
        ctx->spawner_pid = pid;
        return 0;
}

/* Ends the spawner: EOF on its socket, then a reap (a SIGKILL if it is
 * stuck, which it should never be). */
static void stop_spawner_locked(struct jail_ctx *ctx)
{
        if (ctx->spawner_fd >= 0)
                close(ctx->spawner_fd);
        __atomic_store_n(&ctx->spawner_fd, -1, __ATOMIC_RELAXED);
        if (ctx->spawner_pid > 0) {
                for (int i = 0; i < 200; i++) {
                        if (waitpid(ctx->spawner_pid, NULL, WNOHANG) != 0)
                                goto reaped;
                        usleep(5000);
                }
                kill(ctx->spawner_pid, SIGKILL);
                waitpid(ctx->spawner_pid, NULL, 0);
        }
reaped:
        ctx->spawner_pid = 0;
}

void jail_spawner_stop(struct jail_ctx *ctx)
{
        pthread_mutex_lock(&ctx->spawner_lock);
        stop_spawner_locked(ctx);
        pthread_mutex_unlock(&ctx->spawner_lock);
}

/* The request's strings, length-prefixed, NULL as SPAWN_NULL_STR. */
static int encode_strings(struct jail_spec *s, char **ret, size_t *ret_len)
{
        const char **slot[MAX_STR_SLOTS];
        size_t n = str_slots(s, slot), len = 0;
        for (size_t i = 0; i < n; i++)
                len += sizeof(uint32_t) + (*slot[i] ? strlen(*slot[i]) + 1 : 0);
        if (len > SPAWN_MAX_BLOB)
                return -E2BIG;
        char *blob = malloc(len ? len : 1), *p = blob;
        if (!blob)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                size_t l = *slot[i] ? strlen(*slot[i]) : 0;
                uint32_t wire = *slot[i] ? (uint32_t)l : SPAWN_NULL_STR;
                memcpy(p, &wire, sizeof(wire));
                p += sizeof(wire);
                if (*slot[i]) {
                        memcpy(p, *slot[i], l + 1);
                        p += l + 1;
                }
        }
        *ret = blob;
        *ret_len = len;
        return 0;
}

static int send_request(int sock, const struct spawn_req *req, const int *fds, const char *blob)
{
        union {
                char buf[CMSG_SPACE(SPAWN_MAX_FDS * sizeof(int))];
                struct cmsghdr align;
        } u;
        memset(&u, 0, sizeof(u));
        struct iovec iov = { (void *)req, sizeof(*req) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (req->nfds > 0) {
                msg.msg_control = u.buf;
                msg.msg_controllen = CMSG_SPACE(req->nfds * sizeof(int));
                struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(req->nfds * sizeof(int));
                memcpy(CMSG_DATA(cm), fds, req->nfds * sizeof(int));
        }
        ssize_t n;
        do
                n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return n < 0 ? -errno : -EPIPE;
        int r = send_all(sock, (const char *)req + n, sizeof(*req) - (size_t)n);
        return r < 0 ? r : send_all(sock, blob, req->blob_len);
}

static int recv_reply(int sock, int *pidfd)
{
        struct spawn_reply rep;
        size_t n = 0;
        *pidfd = -1;
        int r = recv_with_fds(sock, &rep, sizeof(rep), pidfd, 1, &n);
        if ((r < 0 || rep.pid <= 0) && *pidfd >= 0) {
                close(*pidfd);
                *pidfd = -1;
        }
        return r < 0 ? (r == -EPROTO ? -EPROTO : -EPIPE) : rep.pid;
}

/* The request for a, with a copy of its spec; the fds to send in order. */
static int build_request(const struct child_args *a, unsigned long flags, uid_t owner, struct spawn_req *req,
                         int *fds)
{
        *req = (struct spawn_req){ .magic = SPAWN_MAGIC, .flags = flags, .owner = (uint32_t)owner,
                                   .policy = sched_getscheduler(0), .args = *a, .spec = *a->spec };
        int *slot[MAX_FD_SLOTS];
        bool used[MAX_FD_SLOTS];
        size_t n = fd_slots(&req->args, &req->spec, slot, used);
        for (size_t i = 0; i < n; i++) {
                if (!used[i])
                        continue;
                if (req->nfds >= SPAWN_MAX_FDS)
                        return -E2BIG;
                req->fd_mask |= 1u << i;
                fds[req->nfds++] = *slot[i];
        }
        return 0;
}

pid_t jail_spawner_clone(struct jail_ctx *ctx, unsigned long flags, uid_t owner, const struct child_args *a,
                         int *pidfd)
{
        if (__atomic_load_n(&ctx->spawner_fd, __ATOMIC_RELAXED) < 0) /* checked again under the lock */
                return -ENOTCONN;
        _cleanup_free_ struct spawn_req *req = malloc(sizeof(*req));
        _cleanup_free_ char *blob = NULL;
        int fds[SPAWN_MAX_FDS];
        if (!req)
                return -ENOMEM;
        int r = build_request(a, flags, owner, req, fds);
        size_t blob_len = 0;
        if (r == 0 && (r = encode_strings(&req->spec, &blob, &blob_len)) == 0)
                req->blob_len = blob_len;
        if (r < 0)
                return r;
        pthread_mutex_lock(&ctx->spawner_lock);
        if (ctx->spawner_fd < 0) {
                pthread_mutex_unlock(&ctx->spawner_lock);
                return -ENOTCONN;
        }
        r = send_request(ctx->spawner_fd, req, fds, blob);
        pid_t pid = r < 0 ? r : recv_reply(ctx->spawner_fd, pidfd);
        if (r < 0 || pid == -EPIPE || pid == -ECONNRESET || pid == -EPROTO) {
                /* The spawner is gone (or out of step): from now on jails
                 * are cloned by the daemon itself, as without one. */
                log_warn("msg=\"the jail spawner stopped: jails are cloned from the daemon from now on\" "
                         "err=\"%s\"", strerror(-(r < 0 ? r : pid)));
                stop_spawner_locked(ctx);
                pid = -ENOTCONN;
        }
        pthread_mutex_unlock(&ctx->spawner_lock);
        if (pid > 0 && *pidfd < 0) {
                /* A pid without its pidfd: unusable, and the jail's child
                 * waits for "go" that never comes; end it. */
                kill(pid, SIGKILL);
                waitpid(pid, NULL, __WALL);
                return -EPROTO;
        }
        return pid;
}
