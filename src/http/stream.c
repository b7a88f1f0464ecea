/* Streamed replies (chunked; SSE helpers). The producer runs on its own
 * thread and writes into a bounded ring; MHD's content reader drains it.
 *
 * Backpressure: a write waits while the ring is full, and the ring only
 * empties as fast as MHD can send, i.e. as fast as the client reads.
 * Idle: when the ring is empty the reader suspends the connection (a
 * content reader returning 0 without suspending makes MHD spin) and the
 * next write resumes it. Suspends and resumes are serialised by the
 * server's resume_lock (suspend_unless_woken), never made under a stream's
 * lock. A suspended connection can only be closed by MHD_stop_daemon; the
 * server forbids resumes before that (resume_lock / resume_closed).
 * Disconnect: MHD's completion callback (termination code not OK) marks
 * the stream closed, wakes the producer (-EPIPE) and runs ops->disconnect.
 *
 * References: the response (until MHD frees it), the request state (until
 * the completion callback) and the producer thread each hold one. */
#include <stdio.h>
#include <string.h>

#include "http/internal.h"

struct http_stream {
        struct http_server *srv;
        struct MHD_Connection *conn;
        const struct http_stream_ops *ops;
        void *ctx;
        pthread_mutex_t lock;
        pthread_cond_t cond;        /* room in the ring, or closed */
        char *ring;
        size_t cap, head, len;
        bool suspended;             /* the reader suspended on an empty ring */
        bool done;                  /* run returned: end of stream once drained */
        bool closed;                /* the request is over */
        bool aborting;              /* the server stops: end with an error */
        bool listed;                /* on srv->stream_list */
        int refs;
        struct http_stream *next;   /* srv->stream_list, under srv->lock */
};

int http_stream(struct http_response *res, int status, const char *content_type,
                const struct http_stream_ops *ops, void *ctx)
{
        struct http_stream *s = reply_alloc_kind(res, HTTP_REPLY_STREAM, status, sizeof(*s), ops->free, ctx);
        if (!s)
                return -ENOMEM;
        s->ops = ops;
        s->ctx = ctx;
        s->refs = 1;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        res->stream = s;
        snprintf(res->content_type, sizeof(res->content_type), "%s",
                 content_type ? content_type : "text/event-stream");
        return 0;
}

void stream_unref(struct http_stream *s)
{
        pthread_mutex_lock(&s->lock);
        bool last = --s->refs == 0;
        pthread_mutex_unlock(&s->lock);
        if (!last)
                return;
        if (s->ops->free)
                s->ops->free(s->ctx);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s->ring);
        free(s);
}

/* Replaced before it started: only the response's reference exists. */
void stream_abandon(struct http_stream *s)
{
        stream_unref(s);
}

/* Resumes the connection if its reader suspended it (or is about to). The
 * flag is taken and the resume made in one resume_lock section, so
 * stream_abort_all never finds a flag already taken whose resume has not
 * happened yet (that connection would stay suspended, and MHD_stop_daemon
 * aborts the process on one). After stream_abort_all no stream can
 * suspend again (it is aborting), so resume_closed only guards against a
 * resume after MHD_stop_daemon. Call without s->lock. */
static void wake_reader(struct http_stream *s)
{
        pthread_mutex_lock(&s->srv->resume_lock);
        pthread_mutex_lock(&s->lock);
        bool wake = s->suspended && !s->closed;
        s->suspended = false;
        pthread_mutex_unlock(&s->lock);
        if (wake && !s->srv->resume_closed)
                MHD_resume_connection(s->conn);
        pthread_mutex_unlock(&s->srv->resume_lock);
}

/* Suspends the connection unless a producer or stream_abort_all already
 * took the "suspended" flag (and so resumed, or will not). Serialised with
 * every resume by resume_lock: a resume can then never come before the
 * suspend it is meant to end, which would leave the connection suspended
 * for good (and make MHD_stop_daemon abort the process). */
static void suspend_unless_woken(struct http_stream *s)
{
        pthread_mutex_lock(&s->srv->resume_lock);
        pthread_mutex_lock(&s->lock);
        bool still = s->suspended && !s->aborting;
        pthread_mutex_unlock(&s->lock);
        if (still)
                MHD_suspend_connection(s->conn);
        pthread_mutex_unlock(&s->srv->resume_lock);
}

/* Takes s->lock's "suspended" flag: true when the caller must resume. */
static bool take_suspended(struct http_stream *s)
{
        bool wake = s->suspended && !s->closed;
        s->suspended = false;
        return wake;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        (void)pos;
        struct http_stream *s = cls;
        pthread_mutex_lock(&s->lock);
        if (s->closed || s->aborting) {
                pthread_mutex_unlock(&s->lock);
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (s->len > 0) {
                size_t n = 0;
                while (n < max && s->len > 0) {
                        size_t run = s->cap - s->head < s->len ? s->cap - s->head : s->len;
                        size_t k = run < max - n ? run : max - n;
                        memcpy(buf + n, s->ring + s->head, k);
                        s->head = (s->head + k) % s->cap;
                        s->len -= k;
                        n += k;
                }
                pthread_cond_broadcast(&s->cond);
                pthread_mutex_unlock(&s->lock);
                return (ssize_t)n;
        }
        if (s->done) {
                pthread_mutex_unlock(&s->lock);
                return MHD_CONTENT_READER_END_OF_STREAM;
        }
        s->suspended = true;
        pthread_mutex_unlock(&s->lock);
        suspend_unless_woken(s);
        return 0;
}

static void stream_free_cb(void *cls)
{
        stream_unref(cls);
}

struct MHD_Response *stream_response(struct conn_state *st)
{
        struct http_stream *s = st->res.stream;
        if (!slot_reserve(st->srv)) {
                http_fail(st, 503, "Too many open streams; retry later");
                st->res.retry_after = 1;
                return NULL;
        }
        s->srv = st->srv;
        s->conn = st->req.conn;
        s->cap = st->srv->opt.stream_buffer;
        s->ring = malloc(s->cap);
        struct MHD_Response *r =
                s->ring ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, s,
                                                            stream_free_cb)
                        : NULL;
        if (!r) {
                slot_release(st->srv);
                return NULL;
        }
        s->refs++; /* the response's */
        pthread_mutex_lock(&st->srv->lock);
        s->next = st->srv->stream_list;
        st->srv->stream_list = s;
        s->listed = true;
        pthread_mutex_unlock(&st->srv->lock);
        return r;
}

static void unlist(struct http_stream *s)
{
        struct http_server *srv = s->srv;
        pthread_mutex_lock(&srv->lock);
        for (struct http_stream **p = &srv->stream_list; s->listed && *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        s->listed = false;
                        break;
                }
        pthread_mutex_unlock(&srv->lock);
}

/* MHD_stop_daemon panics on a suspended connection: before it, every
 * stream ends with an error and the suspended ones are resumed so that
 * MHD closes them (their completion runs the disconnect callbacks). The
 * resume_lock is held throughout, so no producer resumes concurrently; a
 * connection flagged suspended cannot complete before it is resumed. */
void stream_abort_all(struct http_server *srv)
{
        struct MHD_Connection **wake = calloc(srv->opt.max_streams, sizeof(*wake));
        size_t n = 0;
        /* No suspend may run between taking the flags and resuming. */
        pthread_mutex_lock(&srv->resume_lock);
        pthread_mutex_lock(&srv->lock);
        for (struct http_stream *s = srv->stream_list; s; s = s->next) {
                pthread_mutex_lock(&s->lock);
                s->aborting = true;
                if (take_suspended(s) && wake && n < srv->opt.max_streams)
                        wake[n++] = s->conn;
                pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&srv->lock);
        for (size_t i = 0; i < n; i++)
                MHD_resume_connection(wake[i]);
        /* Every stream is aborting and none is suspended: from here on no
         * resume is needed, and none may follow MHD_stop_daemon. */
        srv->resume_closed = true;
        pthread_mutex_unlock(&srv->resume_lock);
        free(wake);
}

static void *stream_thread(void *arg)
{
        struct http_stream *s = arg;
        struct http_server *srv = s->srv;
        s->ops->run(s, s->ctx);
        pthread_mutex_lock(&s->lock);
        s->done = true;
        pthread_mutex_unlock(&s->lock);
        wake_reader(s);
        stream_unref(s);
        slot_release(srv);
        return NULL;
}

void stream_start(struct conn_state *st)
{
        struct http_stream *s = st->res.stream;
        pthread_mutex_lock(&s->lock);
        s->refs++; /* the thread's */
        pthread_mutex_unlock(&s->lock);
        if (spawn_detached(stream_thread, s) == 0)
                return;
        /* No producer: an empty stream. The reader has not run yet. */
        pthread_mutex_lock(&s->lock);
        s->done = true;
        pthread_mutex_unlock(&s->lock);
        stream_unref(s);
        slot_release(st->srv);
}

void stream_completed(struct http_stream *s, enum MHD_RequestTerminationCode toe)
{
        if (s->srv)
                unlist(s);
        pthread_mutex_lock(&s->lock);
        bool gone = !s->closed && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
        s->closed = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        if (gone && s->ops->disconnect)
                s->ops->disconnect(s->ctx);
}

bool http_stream_closed(struct http_stream *s)
{
        pthread_mutex_lock(&s->lock);
        bool closed = s->closed;
        pthread_mutex_unlock(&s->lock);
        return closed;
}

int http_stream_write(struct http_stream *s, const void *data, size_t len)
{
        const char *p = data;
        while (len > 0) {
                pthread_mutex_lock(&s->lock);
                while (!s->closed && s->len == s->cap)
                        pthread_cond_wait(&s->cond, &s->lock);
                if (s->closed) {
                        pthread_mutex_unlock(&s->lock);
                        return -EPIPE;
                }
                size_t tail = (s->head + s->len) % s->cap;
                size_t room = s->cap - s->len;
                size_t run = tail >= s->head ? s->cap - tail : room;
                size_t k = len < run ? len : run;
                memcpy(s->ring + tail, p, k);
                s->len += k;
                p += k;
                len -= k;
                pthread_mutex_unlock(&s->lock);
                wake_reader(s);
        }
        return 0;
}

static bool one_line(const char *s)
{
        return s[strcspn(s, "\r\n")] == '\0';
}

int http_sse_event(struct http_stream *s, const char *event, const char *id, const char *data)
{
        if ((event && !one_line(event)) || (id && !one_line(id)))
                return -EINVAL;
        struct buf b;
        buf_init(&b, SIZE_MAX);
        int r = 0;
        if (event)
                r = buf_printf(&b, "event: %s\n", event);
        if (r >= 0 && id)
                r = buf_printf(&b, "id: %s\n", id);
        /* Each line of data is one "data:" field (SSE takes \r\n, \r and \n
         * as line ends, so a bare \r must not reach the wire). */
        for (const char *p = data ? data : ""; r >= 0;) {
                size_t n = strcspn(p, "\r\n");
                r = buf_printf(&b, "data: %.*s\n", (int)n, p);
                if (!p[n])
                        break;
                p += n + (p[n] == '\r' && p[n + 1] == '\n' ? 2 : 1);
        }
        if (r >= 0)
                r = buf_append(&b, "\n", 1);
        if (r >= 0)
                r = http_stream_write(s, b.data, b.len);
        buf_free(&b);
        return r < 0 ? r : 0;
}

int http_sse_comment(struct http_stream *s, const char *text)
{
        if (!one_line(text))
                return -EINVAL;
        char line[256];
        int n = snprintf(line, sizeof(line), ": %s\n\n", text);
        if (n < 0 || (size_t)n >= sizeof(line))
                return -EINVAL;
        return http_stream_write(s, line, (size_t)n);
}
