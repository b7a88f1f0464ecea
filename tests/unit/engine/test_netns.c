/* engine_netns_socket and engine_netns_loopback_up (src/engine/netns.c) on
 * a namespace made here: the loopback comes up (and stays up when asked
 * again), sockets made for the namespace talk over its loopback, the
 * daemon's namespace does not see them, and no calling thread is left
 * switched. Needs root (skips otherwise). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "tap.h"

static void *make_ns(void *arg)
{
        int *fd = arg;
        /* This thread ends right after: it never returns to the pool. */
        *fd = unshare(CLONE_NEWNET) == 0 ? open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC) : -errno;
        return NULL;
}

static int new_netns(void)
{
        if (geteuid() != 0)
                SKIP("needs root");
        int fd = -1;
        pthread_t t;
        ASSERT_EQ(pthread_create(&t, NULL, make_ns, &fd), 0);
        pthread_join(t, NULL);
        if (fd < 0)
                SKIP("cannot make a network namespace");
        return fd;
}

static ino_t my_netns(void)
{
        struct stat st;
        ASSERT_EQ(stat("/proc/thread-self/ns/net", &st), 0);
        return st.st_ino;
}

static bool lo_up(int ns)
{
        int fd = engine_netns_socket(ns, AF_INET, SOCK_DGRAM);
        ASSERT_TRUE(fd >= 0);
        struct ifreq ifr = { 0 };
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        ASSERT_EQ(ioctl(fd, SIOCGIFFLAGS, &ifr), 0);
        close(fd);
        return ifr.ifr_flags & IFF_UP;
}

/* A listener on 127.0.0.1 of ns; its port. */
static int listen_in(int ns, unsigned *port)
{
        int fd = engine_netns_socket(ns, AF_INET, SOCK_STREAM);
        ASSERT_TRUE(fd >= 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        ASSERT_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ASSERT_EQ(listen(fd, 4), 0);
        ASSERT_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        *port = ntohs(a.sin_port);
        return fd;
}

static int connect_to(int fd, unsigned port)
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        return connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : -errno;
}

TEST(loopback_comes_up_and_calling_thread_stays_home)
{
        int ns = new_netns();
        ino_t home = my_netns();
        ASSERT_FALSE(lo_up(ns));
        ASSERT_OK(engine_netns_loopback_up(ns));
        ASSERT_TRUE(lo_up(ns));
        ASSERT_OK(engine_netns_loopback_up(ns)); /* idempotent */
        ASSERT_TRUE(lo_up(ns));
        ASSERT_EQ(my_netns(), home);
        close(ns);
}

TEST(sockets_meet_only_inside_their_namespace)
{
        int ns = new_netns();
        ASSERT_OK(engine_netns_loopback_up(ns));
        unsigned port;
        int l = listen_in(ns, &port);
        int c = engine_netns_socket(ns, AF_INET, SOCK_STREAM);
        ASSERT_OK(connect_to(c, port));
        int a = accept(l, NULL, NULL);
        ASSERT_TRUE(a >= 0);
        ASSERT_EQ(write(c, "x", 1), 1);
        char b;
        ASSERT_EQ(read(a, &b, 1), 1);
        /* From the daemon's namespace, that port is another one's. */
        int h = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int r = connect_to(h, port);
        ASSERT_TRUE(r == -ECONNREFUSED || r == 0); /* 0 only if the host happens to listen there */
        close(h);
        close(a);
        close(c);
        close(l);
        close(ns);
}

TEST(a_down_loopback_refuses)
{
        int ns = new_netns();
        int c = engine_netns_socket(ns, AF_INET, SOCK_STREAM);
        ASSERT_TRUE(c >= 0);
        ASSERT_EQ(connect_to(c, 8080), -ENETUNREACH);
        close(c);
        close(ns);
}

TEST(a_bad_namespace_fd_fails)
{
        ASSERT_TRUE(engine_netns_socket(-1, AF_INET, SOCK_STREAM) < 0);
        ASSERT_TRUE(engine_netns_loopback_up(-1) < 0);
}
