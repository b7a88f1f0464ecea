/* A pool of fresh, empty network namespaces (issue 10 row 12). Each sandbox
 * gets one of its own, shared by all its jails, and each other jail
 * (stateless kernels, processes) gets one for itself: abstract unix socket
 * names live in the network namespace, so a shared one would let tenants
 * see (/proc/net/unix) and squat each other's. Creating a namespace costs
 * about a millisecond, so a background filler keeps a few ready and the
 * request path only takes one.
 *
 * A namespace is made by the filler thread itself: unshare(CLONE_NEWNET)
 * moves only the calling thread, which keeps a handle to the new namespace
 * and goes back to the daemon's with setns(). Root only: a rootless jail
 * gets its own namespace from clone(CLONE_NEWNET) instead. */
#include "engine/internal.h"

#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"

/* Makes one empty namespace (only a down loopback) and returns its fd. */
static int netns_make(int home_fd)
{
        if (unshare(CLONE_NEWNET) < 0)
                return -errno;
        int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        int r = fd < 0 ? -errno : 0;
        if (setns(home_fd, CLONE_NEWNET) < 0) {
                /* This thread would create every later socket in the wrong
                 * namespace: never go on like that. */
                log_error("msg=\"cannot return to the daemon's network namespace\" err=\"%s\"", strerror(errno));
                abort();
        }
        return r < 0 ? r : fd;
}

static int netns_pop(struct netns_pool *np)
{
        int fd = -1;
        bg_thread_lock(&np->filler);
        if (np->n > 0)
                fd = np->fds[--np->n];
        bg_thread_wake(&np->filler);
        bg_thread_unlock(&np->filler);
        return fd;
}

static void netns_filler(void *arg)
{
        struct netns_pool *np = arg;
        bg_thread_lock(&np->filler);
        while (bg_thread_running(&np->filler)) {
                if (np->n >= NETNS_POOL_MAX) {
                        bg_thread_wait(&np->filler, 0);
                        continue;
                }
                bg_thread_unlock(&np->filler);
                int fd = netns_make(np->home_fd);
                bg_thread_lock(&np->filler);
                if (fd < 0) {
                        log_warn("msg=\"cannot make a network namespace\" err=\"%s\"", strerror(-fd));
                        bg_thread_wait(&np->filler, now_ns() + 1000000000ULL);
                } else if (np->n < NETNS_POOL_MAX) {
                        np->fds[np->n++] = fd;
                } else {
                        close(fd);
                }
        }
        bg_thread_unlock(&np->filler);
}

int netns_pool_start(struct netns_pool *np, bool enabled)
{
        *np = (struct netns_pool){ .home_fd = -1 };
        if (!enabled)
                return 0;
        np->home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (np->home_fd < 0)
                return -errno;
        int r = bg_thread_init(&np->filler, NULL);
        if (r == 0)
                r = bg_thread_start(&np->filler, "netns-filler", 1, netns_filler, np);
        if (r < 0) {
                netns_pool_stop(np);
                return r;
        }
        np->enabled = true;
        return 0;
}

void netns_pool_stop(struct netns_pool *np)
{
        bg_thread_done(&np->filler);
        while (np->n > 0)
                close(np->fds[--np->n]);
        if (np->home_fd >= 0)
                close(np->home_fd);
        np->home_fd = -1;
        np->enabled = false;
}

int engine_netns_take(struct engine *e)
{
        struct netns_pool *np = &e->netns;
        if (!np->enabled)
                return -EOPNOTSUPP;
        int fd = netns_pop(np);
        /* Drained (a burst): make one here rather than share. */
        return fd >= 0 ? fd : netns_make(np->home_fd);
}

struct netns_socket_job {
        int netns_fd, domain, type;
        int ret; /* the fd or -errno */
};

/* Runs on its own thread, which ends right after: its namespace switch
 * dies with it, no thread of the daemon's stays switched. */
static void *netns_socket_thread(void *arg)
{
        struct netns_socket_job *j = arg;
        if (setns(j->netns_fd, CLONE_NEWNET) < 0) {
                j->ret = -errno;
                return NULL;
        }
        int fd = socket(j->domain, j->type | SOCK_CLOEXEC, 0);
        j->ret = fd < 0 ? -errno : fd;
        return NULL;
}

int engine_netns_socket(int netns_fd, int domain, int type)
{
        struct netns_socket_job j = { netns_fd, domain, type, -EIO };
        pthread_t t;
        int r = pthread_create(&t, NULL, netns_socket_thread, &j);
        if (r != 0)
                return -r;
        pthread_join(t, NULL);
        return j.ret;
}

int engine_netns_loopback_up(int netns_fd)
{
        int fd = engine_netns_socket(netns_fd, AF_INET, SOCK_DGRAM);
        if (fd < 0)
                return fd;
        /* An interface ioctl acts in the socket's namespace, not the
         * caller's. */
        struct ifreq ifr = { 0 };
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        int r = ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 ? -errno : 0;
        if (r == 0 && !(ifr.ifr_flags & IFF_UP)) {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                r = ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
        }
        close(fd);
        return r;
}
