/* What the files of src/http/ share; nothing outside http/ includes it. */
#pragma once

#include <microhttpd.h>
#include <pthread.h>

#include "base/util.h"
#include "http/server.h"

struct route_table {
        const struct route *v;
        size_t n;
};

struct http_group {
        char prefix[128];           /* "" for the default group */
        const struct http_group_ops *ops;
        void *cls;
        struct route_table *tables;
        size_t ntables;
        struct http_group *next;
};

/* One queued blocking job. */
struct job {
        struct conn_state *st;
        struct job *next;
};

struct http_server {
        struct MHD_Daemon *mhd;
        struct http_group *groups;
        struct http_options opt;
        char listen[300];
        void *app;
        unsigned port;
        uint64_t next_id;

        pthread_mutex_t lock;
        pthread_cond_t cond;        /* a stream/ws slot freed, an upgraded connection gone */
        /* Jobs queued (or stopping): the workers' own, so that a job wakes
         * one worker and no stop waiter, and a finished job wakes nobody. */
        pthread_cond_t work_cond;
        struct job *head, *tail;
        size_t queued, running;     /* running includes inline runs */
        unsigned inlined;           /* polling threads running a blocking request themselves */
        bool stopping, draining;
        pthread_t *workers;
        unsigned nworkers;

        size_t nstreams;            /* streams + WebSockets holding a slot */
        struct upgraded *upgraded;  /* open WebSockets and raw upgrades, ended first on stop */
        struct http_stream *stream_list; /* streams whose request is not over */
        /* Held around MHD_resume_connection by stream producers; once
         * resume_closed is set (before MHD_stop_daemon) they stop resuming. */
        pthread_mutex_t resume_lock;
        bool resume_closed;
};

enum conn_phase { PHASE_BODY, PHASE_QUEUED, PHASE_DONE };

/* Per-request state, MHD's con_cls. */
struct conn_state {
        struct http_server *srv;
        struct http_request req;
        struct http_response res;
        const struct route *route;
        struct http_group *group;   /* whose envelope answers this request's errors */
        enum conn_phase phase;
        char *path;
        struct buf body;
        bool too_large;
        uint64_t start_ns;
        /* Room for the captures, which are pieces of the path: its length
         * and a NUL per capture, up to CAPBUF_MAX (a file path up to
         * PATH_MAX beside a sandbox id still matches). Sized per request:
         * a fixed 8 KiB made every request zero 8 KiB and take glibc's
         * large-chunk path (a consolidation of its fast bins each time). */
        size_t capbuf_len;
        char capbuf[];
};
#define CAPBUF_MAX 8192

/* router.c */
const struct route *router_find(struct http_server *srv, struct conn_state *st, bool *path_matched, char *allow,
                                size_t allowlen);
void router_free_groups(struct http_server *srv);
/* Fills st->res with an error in st->group's envelope. */
void http_fail(struct conn_state *st, int status, const char *message);

/* reply.c */
void reply_init(struct http_response *res);
void reply_reset(struct http_response *res);
enum MHD_Result reply_send(struct conn_state *st);
/* Starts a reply kind that needs an object of size bytes (zeroed): on
 * failure ops' free(ctx) has run, res holds a 500 and NULL is returned. */
void *reply_alloc_kind(struct http_response *res, enum http_reply_kind kind, int status, size_t size,
                       void (*free_ctx)(void *), void *ctx);
/* Adds the handler's headers, Allow and Retry-After to r. */
void reply_add_headers(const struct http_response *res, struct MHD_Response *r);

/* server.c: stream/WebSocket slots (bounded by opt.max_streams) */
bool slot_reserve(struct http_server *srv);
void slot_release(struct http_server *srv);
/* A detached thread (streams and WebSockets are not joined: the slot count
 * tells when they are all gone). 0 or -errno. */
int spawn_detached(void *(*fn)(void *), void *arg);

/* stream.c */
struct MHD_Response *stream_response(struct conn_state *st);
void stream_start(struct conn_state *st);
void stream_completed(struct http_stream *s, enum MHD_RequestTerminationCode toe);
void stream_unref(struct http_stream *s);
void stream_abandon(struct http_stream *s);
void stream_abort_all(struct http_server *srv);

/* ws.c */
/* Checks the handshake and builds the 101 response; NULL with st->res
 * holding the error otherwise. */
struct MHD_Response *ws_response(struct conn_state *st);
void ws_abandon(struct http_ws *ws);

/* upgrade.c */
/* An upgraded connection (a WebSocket or a raw upgrade), listed while its
 * thread runs: MHD cannot stop under one, so a stop ends them first. */
struct upgraded {
        struct upgraded *next;      /* srv->upgraded, under srv->lock */
        void (*stop)(struct upgraded *u); /* makes its thread return soon */
};
/* Lists u and runs fn(arg) on a detached thread, which must call
 * upgraded_unlist before it frees u. false (u not listed) when no thread
 * could start: the caller closes. */
bool upgraded_start(struct http_server *srv, struct upgraded *u, void *(*fn)(void *), void *arg);
void upgraded_unlist(struct http_server *srv, struct upgraded *u);
/* Server stop: stops every upgraded connection, waits for their threads. */
void upgraded_stop_all(struct http_server *srv);
struct MHD_Response *upgrade_response(struct conn_state *st);
void upgrade_abandon(struct http_upgrade *u);
