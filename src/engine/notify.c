/* The seccomp listener thread: see notify.h. */
#include "engine/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/thread.h"
#include "base/time.h"
#include "base/util.h"
#include "jail/seccomp.h"

struct notify_watch {
        uint64_t id;        /* epoll data; 0 is the stop eventfd */
        int fd;
        uint64_t count;     /* __atomic: read by the execution's worker */
        char label[64];
        struct notify_watch *next;
};

struct notifier {
        const struct seccomp_prog *prog;
        struct bg_thread thread;
        /* The watch list. The thread holds it while it answers, so that
         * notifier_unwatch never frees a watch under it. */
        pthread_mutex_t lock;
        struct notify_watch *watches;
        uint64_t next_id;
        int epfd, stopfd;
        /* Log rate, touched by the thread only. */
        uint64_t log_second, logged, suppressed;
};

static struct notify_watch *find_watch(struct notifier *n, uint64_t id)
{
        for (struct notify_watch *w = n->watches; w; w = w->next)
                if (w->id == id)
                        return w;
        return NULL;
}

static void log_refusal(struct notifier *n, const struct notify_watch *w, const struct seccomp_notif *req, int e)
{
        uint64_t sec = now_ns() / 1000000000ULL;
        if (sec != n->log_second) {
                if (n->suppressed)
                        log_info("msg=\"syscall refusals not logged (rate limit)\" count=%" PRIu64, n->suppressed);
                n->log_second = sec;
                n->logged = n->suppressed = 0;
        }
        if (n->logged >= NOTIFY_LOG_PER_S) {
                n->suppressed++;
                return;
        }
        n->logged++;
        char name[32];
        seccomp_syscall_name(req->data.nr, name, sizeof(name));
        log_info("msg=\"syscall refused\" syscall=%s nr=%d errno=%d %s guest_pid=%u", name, req->data.nr, e,
                 w->label, req->pid);
}

/* One pending notification (epoll said so, so RECV does not block): the
 * policy's errno, counted and logged before the answer wakes the caller, so
 * a run's count and log are complete once the guest has moved on. Never
 * CONTINUE. */
static void answer(struct notifier *n, struct notify_watch *w)
{
        struct seccomp_notif req;
        memset(&req, 0, sizeof(req)); /* the kernel insists */
        if (ioctl(w->fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
                return; /* ENOENT: the caller died meanwhile */
        int e = seccomp_prog_refusal(n->prog, &req.data);
        if (e == 0)
                e = ENOSYS; /* cannot happen: only refusals notify */
        uint64_t count = __atomic_add_fetch(&w->count, 1, __ATOMIC_RELAXED);
        /* Logged before the answer too (a faster run path let the answer
         * reach the client before this thread wrote the line). At most
         * NOTIFY_LOG_PER_S lines a second: it costs the guest little. */
        log_refusal(n, w, &req, e);
        struct seccomp_notif_resp resp = { .id = req.id, .val = 0, .error = -e, .flags = 0 };
        (void)ioctl(w->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        if (count >= NOTIFY_MAX_PER_PROC) {
                log_warn("msg=\"syscall refusals no longer counted (cap reached)\" count=%" PRIu64 " %s", count,
                         w->label);
                (void)epoll_ctl(n->epfd, EPOLL_CTL_DEL, w->fd, NULL);
                close(w->fd);
                w->fd = -1;
        }
}

static void handle(struct notifier *n, const struct epoll_event *ev)
{
        pthread_mutex_lock(&n->lock);
        struct notify_watch *w = find_watch(n, ev->data.u64);
        if (w && w->fd >= 0 && (ev->events & EPOLLIN))
                answer(n, w);
        else if (w && w->fd >= 0 && (ev->events & (EPOLLHUP | EPOLLERR)))
                /* Every task of the filter is gone: stop polling (level
                 * triggered HUP would spin); the owner closes the fd. */
                (void)epoll_ctl(n->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        pthread_mutex_unlock(&n->lock);
}

static void notifier_main(void *arg)
{
        struct notifier *n = arg;
        for (;;) {
                bg_thread_lock(&n->thread);
                bool running = bg_thread_running(&n->thread);
                bg_thread_unlock(&n->thread);
                if (!running)
                        return;
                struct epoll_event ev[16];
                int k = epoll_wait(n->epfd, ev, ARRAY_SIZE(ev), -1);
                for (int i = 0; i < k; i++)
                        if (ev[i].data.u64 != 0)
                                handle(n, &ev[i]);
        }
}

int notifier_start(const struct seccomp_prog *prog, struct notifier **ret)
{
        struct notifier *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->prog = prog;
        n->next_id = 1;
        n->epfd = epoll_create1(EPOLL_CLOEXEC);
        n->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        pthread_mutex_init(&n->lock, NULL);
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0 };
        int r = n->epfd < 0 || n->stopfd < 0 ? -errno : 0;
        if (r == 0 && epoll_ctl(n->epfd, EPOLL_CTL_ADD, n->stopfd, &ev) < 0)
                r = -errno;
        if (r == 0)
                r = bg_thread_init(&n->thread, NULL);
        if (r == 0)
                r = bg_thread_start(&n->thread, "seccomp-notify", 1, notifier_main, n);
        if (r < 0) {
                notifier_free(n);
                return r;
        }
        *ret = n;
        return 0;
}

void notifier_free(struct notifier *n)
{
        if (!n)
                return;
        if (n->stopfd >= 0)
                (void)!eventfd_write(n->stopfd, 1); /* stays readable: epoll_wait returns */
        bg_thread_done(&n->thread);
        while (n->watches) {
                struct notify_watch *w = n->watches;
                n->watches = w->next;
                if (w->fd >= 0)
                        close(w->fd);
                free(w);
        }
        if (n->epfd >= 0)
                close(n->epfd);
        if (n->stopfd >= 0)
                close(n->stopfd);
        pthread_mutex_destroy(&n->lock);
        free(n);
}

int notifier_watch(struct notifier *n, int listener_fd, const char *label, struct notify_watch **ret)
{
        struct notify_watch *w = calloc(1, sizeof(*w));
        if (!w) {
                close(listener_fd);
                return -ENOMEM;
        }
        w->fd = listener_fd;
        snprintf(w->label, sizeof(w->label), "%s", label);
        pthread_mutex_lock(&n->lock);
        w->id = n->next_id++;
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = w->id };
        int r = epoll_ctl(n->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0 ? -errno : 0;
        if (r == 0) {
                w->next = n->watches;
                n->watches = w;
        }
        pthread_mutex_unlock(&n->lock);
        if (r < 0) {
                close(w->fd);
                free(w);
                return r;
        }
        *ret = w;
        return 0;
}

uint64_t notify_watch_count(const struct notify_watch *w)
{
        return w ? __atomic_load_n(&w->count, __ATOMIC_RELAXED) : 0;
}

void notifier_unwatch(struct notifier *n, struct notify_watch *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&n->lock);
        for (struct notify_watch **pp = &n->watches; *pp; pp = &(*pp)->next) {
                if (*pp == w) {
                        *pp = w->next;
                        break;
                }
        }
        if (w->fd >= 0) {
                (void)epoll_ctl(n->epfd, EPOLL_CTL_DEL, w->fd, NULL);
                close(w->fd);
        }
        pthread_mutex_unlock(&n->lock);
        free(w);
}

int notify_recv_tagged_fd(int sock, char tag, int timeout_ms)
{
        struct pollfd p = { sock, POLLIN, 0 };
        if (timeout_ms > 0 && poll(&p, 1, timeout_ms) != 1)
                return -ETIMEDOUT;
        char byte;
        struct iovec iov = { &byte, 1 };
        /* Room for credentials too: a socket with SO_PASSCRED (a template
         * executor's) adds them to every message. */
        union {
                char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
                struct cmsghdr align;
        } u;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0)
                return -errno;
        int fd = -1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
                    cm->cmsg_len == CMSG_LEN(sizeof(int)) && fd < 0)
                        memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
        if (n == 1 && byte == tag && fd >= 0 && !(msg.msg_flags & MSG_CTRUNC))
                return fd;
        if (fd >= 0)
                close(fd);
        return -EPROTO;
}
