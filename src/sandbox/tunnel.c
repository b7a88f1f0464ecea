/* Tunnels: a port of a sandbox made reachable through the daemon (the
 * bridge's preview URLs). A tunnel is only a record (sandbox, port, random
 * token); each proxied connection is a TCP socket made in the sandbox's own
 * network namespace and connected to 127.0.0.1:port there, so the daemon
 * never opens a path into a namespace it did not make, and the guest's
 * server never sees the host's network.
 *
 * Tunnels live in memory only: they die with their sandbox (sandbox_wipe,
 * sbx_mgr_free) and with the daemon. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/time.h"
#include "base/util.h"
#include "sandbox/internal.h"

struct tunnel {
        struct sbx_tunnel t;
        char sandbox[STORE_ID_MAX];
        struct tunnel *next;
};

static int random_hex(char *out, size_t bytes)
{
        unsigned char b[64];
        if (bytes > sizeof(b) || getrandom(b, bytes, 0) != (ssize_t)bytes)
                return -EIO;
        for (size_t i = 0; i < bytes; i++)
                snprintf(out + 2 * i, 3, "%02x", b[i]);
        return 0;
}

/* Tokens are capabilities: compared without an early exit. */
static bool token_equal(const char *a, const char *b)
{
        size_t n = strlen(a);
        if (n != strlen(b))
                return false;
        unsigned char d = 0;
        for (size_t i = 0; i < n; i++)
                d |= (unsigned char)(a[i] ^ b[i]);
        return d == 0;
}

/* Caller holds tunnel_lock. */
static struct tunnel **tunnel_find(struct sandbox_mgr *m, const char *id, unsigned port)
{
        struct tunnel **p = &m->tunnels;
        while (*p && (strcmp((*p)->sandbox, id) != 0 || (*p)->t.port != port))
                p = &(*p)->next;
        return p;
}

static int tunnel_new(const char *id, unsigned port, const char *name, struct tunnel **ret)
{
        struct tunnel *tn = calloc(1, sizeof(*tn));
        if (!tn)
                return -ENOMEM;
        snprintf(tn->sandbox, sizeof(tn->sandbox), "%s", id);
        tn->t.port = port;
        tn->t.created_ms = wall_ms();
        snprintf(tn->t.name, sizeof(tn->t.name), "%s", name ? name : "");
        int r = random_hex(tn->t.id, SBX_TUNNEL_ID_BYTES);
        if (r == 0)
                r = random_hex(tn->t.token, SBX_TUNNEL_TOKEN_BYTES);
        if (r < 0) {
                free(tn);
                return r;
        }
        *ret = tn;
        return 0;
}

int sbx_tunnel_open(struct sandbox_mgr *m, const char *id, unsigned port, const char *name, struct sbx_tunnel *ret,
                    struct err *err)
{
        if (port == 0 || port > 65535 || (name && strlen(name) >= sizeof(ret->name)))
                return err_set(err, ERR_INVALID, EINVAL, "Invalid port or name");
        /* Made on first use, like every call; its namespace now, so that
         * the first command already runs where the tunnel leads. */
        struct sandbox *s = sandbox_enter(m, id, err);
        if (!s)
                return err_ret(err);
        sandbox_netns(m, s);
        sandbox_leave(m, s);
        int r = 0;
        pthread_mutex_lock(&m->tunnel_lock);
        struct tunnel **p = tunnel_find(m, id, port);
        if (!*p)
                r = tunnel_new(id, port, name, p);
        else if (name && *name)
                snprintf((*p)->t.name, sizeof((*p)->t.name), "%s", name);
        if (r == 0)
                *ret = (*p)->t;
        pthread_mutex_unlock(&m->tunnel_lock);
        return r < 0 ? err_set(err, ERR_INTERNAL, -r, "Cannot make a tunnel token") : 0;
}

void sbx_tunnel_close(struct sandbox_mgr *m, const char *id, unsigned port)
{
        pthread_mutex_lock(&m->tunnel_lock);
        struct tunnel **p = tunnel_find(m, id, port);
        struct tunnel *tn = *p;
        if (tn)
                *p = tn->next;
        pthread_mutex_unlock(&m->tunnel_lock);
        free(tn);
}

void tunnels_drop(struct sandbox_mgr *m, const char *id)
{
        pthread_mutex_lock(&m->tunnel_lock);
        for (struct tunnel **p = &m->tunnels; *p;) {
                struct tunnel *tn = *p;
                if (id && strcmp(tn->sandbox, id) != 0) {
                        p = &tn->next;
                        continue;
                }
                *p = tn->next;
                free(tn);
        }
        pthread_mutex_unlock(&m->tunnel_lock);
}

/* The tunnel of token and its sandbox id; false when there is none. */
static bool tunnel_lookup(struct sandbox_mgr *m, const char *token, struct sbx_tunnel *ret, char *sid, size_t len)
{
        bool found = false;
        pthread_mutex_lock(&m->tunnel_lock);
        for (struct tunnel *tn = m->tunnels; tn && !found; tn = tn->next)
                if (token_equal(tn->t.token, token)) {
                        *ret = tn->t;
                        snprintf(sid, len, "%s", tn->sandbox);
                        found = true;
                }
        pthread_mutex_unlock(&m->tunnel_lock);
        return found;
}

/* A TCP socket in the sandbox's namespace; -ENETUNREACH when it has none
 * (nothing can listen there yet). */
static int sandbox_socket(struct sandbox_mgr *m, const char *sid, struct err *err)
{
        struct sandbox *s = sandbox_enter(m, sid, err);
        if (!s)
                return err_ret(err);
        int fd = s->netns_fd >= 0 ? engine_netns_socket(s->netns_fd, AF_INET, SOCK_STREAM) : -ENETUNREACH;
        sandbox_leave(m, s);
        return fd;
}

int sbx_tunnel_connect(struct sandbox_mgr *m, const char *token, struct sbx_tunnel *ret, int *ret_fd,
                       struct err *err)
{
        char sid[STORE_ID_MAX];
        if (!tunnel_lookup(m, token, ret, sid, sizeof(sid)))
                return err_set(err, ERR_NOT_FOUND, ENOENT, "No such tunnel");
        int fd = sandbox_socket(m, sid, err);
        if (fd < 0 && err->reason != ERR_OK)
                return fd;
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)ret->port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        /* Loopback: the answer (accepted, or refused) is immediate. */
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                int e = errno;
                close(fd);
                fd = -e;
        }
        if (fd < 0)
                return err_set(err, ERR_UNAVAILABLE, -fd, "Nothing is listening on port %u in the sandbox (%s)",
                               ret->port, strerror(-fd));
        *ret_fd = fd;
        return 0;
}
