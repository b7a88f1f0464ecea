/* Raw upgrades: the 101 goes out with the handler's headers, then the
 * client's socket belongs to the handler's run() on a thread of its own
 * (holding one of the server's max_streams slots, like a WebSocket). For
 * protocols the server does not speak itself: a tunnel splices the bytes
 * to a server in a sandbox, whatever they are.
 *
 * MHD cannot stop under an upgraded connection: every open one (raw or
 * WebSocket) is listed here, and a stop ends each: a raw one has its
 * socket shut down so that run() sees EOF and returns. */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "http/internal.h"

struct http_upgrade {
        struct upgraded link;       /* first: the list's entry is the upgrade */
        struct http_server *srv;
        const struct http_upgrade_ops *ops;
        void *ctx;
        MHD_socket sock;
        struct MHD_UpgradeResponseHandle *urh;
        char *extra;                /* bytes MHD read past the request head */
        size_t extra_len;
        bool slot_held;
};

int http_upgrade_raw(struct http_response *res, const struct http_upgrade_ops *ops, void *ctx)
{
        struct http_upgrade *u = reply_alloc_kind(res, HTTP_REPLY_UPGRADE, 101, sizeof(*u), ops->free, ctx);
        if (!u)
                return -ENOMEM;
        u->ops = ops;
        u->ctx = ctx;
        u->sock = MHD_INVALID_SOCKET;
        res->upgrade = u;
        return 0;
}

static void upgrade_free(struct http_upgrade *u)
{
        if (u->ops->free)
                u->ops->free(u->ctx);
        struct http_server *srv = u->slot_held ? u->srv : NULL;
        free(u->extra);
        free(u);
        if (srv)
                slot_release(srv);
}

void upgrade_abandon(struct http_upgrade *u)
{
        upgrade_free(u);
}

static void *upgrade_thread(void *arg)
{
        struct http_upgrade *u = arg;
        u->ops->run(u->sock, u->extra, u->extra_len, u->ctx);
        MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
        upgraded_unlist(u->srv, &u->link);
        upgrade_free(u);
        return NULL;
}

static void upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra, size_t extra_len,
                     MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
        (void)c;
        (void)cls;
        struct conn_state *st = con_cls;
        struct http_upgrade *u = st->res.upgrade;
        st->res.upgrade = NULL; /* the thread owns it now */
        u->sock = sock;
        u->urh = urh;
        /* MHD hands the socket over non-blocking; run() gets a plain one. */
        int fl = fcntl(sock, F_GETFL);
        bool ok = fl >= 0 && fcntl(sock, F_SETFL, fl & ~O_NONBLOCK) == 0;
        if (ok && extra_len) {
                ok = (u->extra = malloc(extra_len)) != NULL;
                if (ok)
                        memcpy(u->extra, extra, extra_len);
                u->extra_len = ok ? extra_len : 0;
        }
        if (ok && upgraded_start(u->srv, &u->link, upgrade_thread, u))
                return;
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        upgrade_free(u);
}

/* Server stop: run() sees EOF on the client's side. Under srv->lock. */
static void upgrade_stop(struct upgraded *link)
{
        struct http_upgrade *u = (struct http_upgrade *)link;
        shutdown(u->sock, SHUT_RDWR);
}

struct MHD_Response *upgrade_response(struct conn_state *st)
{
        struct http_upgrade *u = st->res.upgrade;
        if (!slot_reserve(st->srv)) {
                http_fail(st, 503, "Too many open streams; retry later");
                st->res.retry_after = 1;
                return NULL;
        }
        u->srv = st->srv;
        u->slot_held = true;
        u->link.stop = upgrade_stop;
        st->res.status = MHD_HTTP_SWITCHING_PROTOCOLS;
        /* Connection: Upgrade is MHD's; the handler adds Upgrade and the
         * protocol's own headers. */
        return MHD_create_response_for_upgrade(upgraded, NULL);
}

/* ---- the list of upgraded connections (raw ones and WebSockets) ---- */

bool upgraded_start(struct http_server *srv, struct upgraded *u, void *(*fn)(void *), void *arg)
{
        pthread_mutex_lock(&srv->lock);
        u->next = srv->upgraded;
        srv->upgraded = u;
        pthread_mutex_unlock(&srv->lock);
        if (spawn_detached(fn, arg) == 0)
                return true;
        upgraded_unlist(srv, u);
        return false;
}

void upgraded_unlist(struct http_server *srv, struct upgraded *u)
{
        pthread_mutex_lock(&srv->lock);
        for (struct upgraded **p = &srv->upgraded; *p; p = &(*p)->next)
                if (*p == u) {
                        *p = u->next;
                        break;
                }
        pthread_cond_broadcast(&srv->cond);
        pthread_mutex_unlock(&srv->lock);
}

void upgraded_stop_all(struct http_server *srv)
{
        pthread_mutex_lock(&srv->lock);
        for (struct upgraded *u = srv->upgraded; u; u = u->next)
                u->stop(u);
        while (srv->upgraded)
                pthread_cond_wait(&srv->cond, &srv->lock);
        pthread_mutex_unlock(&srv->lock);
}
