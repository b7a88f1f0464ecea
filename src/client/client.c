/* libcurl under the client interface (client.h). One easy handle per call:
 * the MCP endpoint calls from many threads at once, and a handle is not
 * shareable between threads. */
#include "client/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/io.h"

struct client {
        struct client_config cfg;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_start(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

int client_new(const struct client_config *cfg, struct client **ret)
{
        pthread_once(&curl_once, curl_start);
        struct client *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->cfg = *cfg;
        size_t n = strlen(c->cfg.url);
        while (n > 0 && c->cfg.url[n - 1] == '/')
                c->cfg.url[--n] = '\0';
        *ret = c;
        return 0;
}

void client_free(struct client *c)
{
        free(c);
}

const char *client_url(const struct client *c)
{
        return c->cfg.url;
}

const char *client_key(const struct client *c)
{
        return c->cfg.key;
}

void client_reply_clear(struct client_reply *r)
{
        free(r->body);
        json_decref(r->json);
        memset(r, 0, sizeof(*r));
}

static const char *json_message(json_t *j, const char **code)
{
        json_t *e = json_object_get(j, "error");
        *code = json_string_value(json_object_get(j, "code"));
        if (json_is_object(e)) {
                if (!*code)
                        *code = json_string_value(json_object_get(e, "code"));
                return json_string_value(json_object_get(e, "message"));
        }
        const char *m = json_string_value(json_object_get(j, "message"));
        return m ? m : json_string_value(e);
}

void client_reply_message(const struct client_reply *r, char *out, size_t len)
{
        const char *code = NULL, *msg = r->json ? json_message(r->json, &code) : NULL;
        if (msg && code)
                snprintf(out, len, "%s (%s, HTTP %ld)", msg, code, r->status);
        else if (msg)
                snprintf(out, len, "%s (HTTP %ld)", msg, r->status);
        else
                snprintf(out, len, "HTTP %ld: %.200s", r->status, r->body ? r->body : "");
}

int client_escape_path(const char *in, char *out, size_t len)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
                bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                             strchr("._~/-", *p);
                if (o + (plain ? 1 : 3) >= len)
                        return -ENAMETOOLONG;
                if (plain) {
                        out[o++] = (char)*p;
                } else {
                        out[o++] = '%';
                        out[o++] = hex[*p >> 4];
                        out[o++] = hex[*p & 15];
                }
        }
        out[o] = '\0';
        return 0;
}

/* ---- one transfer ---- */

struct transfer {
        const struct client_request *rq;
        struct buf body;
        long status;
        bool status_known;
        /* SSE */
        client_sse_fn sse;
        void *sse_cls;
        struct buf line, data;
        char event[64];
        const atomic_bool *stop;        /* or NULL */
        int stopped;
        int write_errno;
};

/* Error and JSON bodies are held in memory (downloads go to out_fd). */
#define CLIENT_BODY_MAX ((size_t)256 << 20)
#define CLIENT_EVENT_MAX ((size_t)64 << 20)

static void transfer_init(struct transfer *t)
{
        buf_init(&t->body, CLIENT_BODY_MAX);
        buf_init(&t->line, CLIENT_EVENT_MAX);
        buf_init(&t->data, CLIENT_EVENT_MAX);
}

static bool status_ok(long s)
{
        return s >= 200 && s < 300;
}

static long transfer_status(struct transfer *t, CURL *h)
{
        if (!t->status_known) {
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &t->status);
                t->status_known = true;
        }
        return t->status;
}

/* One SSE line (without its newline): fields accumulate; a blank line
 * dispatches the event. */
static int sse_line(struct transfer *t, const char *l, size_t n)
{
        if (n == 0) {
                if (t->data.len == 0 && !t->event[0])
                        return 0;
                if (t->data.len > 0 && t->data.data[t->data.len - 1] == '\n')
                        t->data.len--;
                if (t->data.len > 0)
                        t->data.data[t->data.len] = '\0';
                int r = t->sse(t->sse_cls, t->event[0] ? t->event : "message", t->data.len ? t->data.data : "",
                               t->data.len);
                t->data.len = 0;
                t->event[0] = '\0';
                return r;
        }
        if (l[0] == ':')
                return 0;
        const char *colon = memchr(l, ':', n);
        size_t klen = colon ? (size_t)(colon - l) : n;
        const char *v = colon ? colon + 1 : l + n;
        size_t vlen = n - (size_t)(v - l);
        if (vlen > 0 && *v == ' ')
                v++, vlen--;
        if (klen == 4 && !memcmp(l, "data", 4)) {
                if (buf_append(&t->data, v, vlen) < 0 || buf_append(&t->data, "\n", 1) < 0)
                        return -ENOMEM;
        } else if (klen == 5 && !memcmp(l, "event", 5)) {
                snprintf(t->event, sizeof(t->event), "%.*s", (int)vlen, v);
        }
        return 0;
}

static int sse_feed(struct transfer *t, const char *p, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (p[i] != '\n') {
                        if (buf_append(&t->line, &p[i], 1) < 0)
                                return -ENOMEM;
                        continue;
                }
                size_t len = t->line.len;
                if (len > 0 && t->line.data[len - 1] == '\r')
                        len--;
                int r = sse_line(t, t->line.data, len);
                t->line.len = 0;
                if (r != 0)
                        return r;
        }
        return 0;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *cls)
{
        struct transfer *t = cls;
        size_t n = size * nmemb;
        if (t->stop && atomic_load(t->stop)) {
                t->stopped = -ECANCELED;
                return 0;
        }
        if (t->sse && status_ok(t->status)) {
                int r = sse_feed(t, p, n);
                if (r != 0) {
                        t->stopped = r;
                        return 0;
                }
                return n;
        }
        if (t->rq && t->rq->out_fd >= 0 && status_ok(t->status)) {
                if (write_all(t->rq->out_fd, p, n) < 0) {
                        t->write_errno = errno ? errno : EIO;
                        return 0;
                }
                return n;
        }
        return buf_append(&t->body, p, n) < 0 ? 0 : n;
}

/* The status is known once the headers are in: the write callback needs it
 * to tell a streamed 2xx body from an error body. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *cls)
{
        struct transfer *t = cls;
        size_t n = size * nmemb;
        long code;
        if (n > 9 && !strncmp(p, "HTTP/", 5) && sscanf(p, "HTTP/%*s %ld", &code) == 1)
                t->status = code;
        return n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *cls)
{
        const struct client_request *rq = cls;
        ssize_t n = read(rq->in_fd, p, size * nmemb);
        return n < 0 ? CURL_READFUNC_ABORT : (size_t)n;
}

static int on_progress(void *cls, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
        const struct client_request *rq = cls;
        /* An empty body (a bodiless POST) is a download's progress. */
        if (rq->in_fd >= 0 || (rq->data && rq->len > 0))
                rq->progress(rq->progress_cls, (uint64_t)ulnow, (uint64_t)(ultotal > 0 ? ultotal : 0));
        else
                rq->progress(rq->progress_cls, (uint64_t)dlnow, (uint64_t)(dltotal > 0 ? dltotal : 0));
        return 0;
}

static int on_stop_check(void *cls, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
        struct transfer *t = cls;
        (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
        if (!atomic_load(t->stop))
                return 0;
        t->stopped = -ECANCELED;
        return 1;
}

static struct curl_slist *request_headers(const struct client *c, const struct client_request *rq)
{
        struct curl_slist *l = NULL;
        char line[700];
        if (c->cfg.key[0]) {
                snprintf(line, sizeof(line), "Authorization: Bearer %s", c->cfg.key);
                l = curl_slist_append(l, line);
        }
        if (rq->content_type) {
                snprintf(line, sizeof(line), "Content-Type: %s", rq->content_type);
                l = curl_slist_append(l, line);
        }
        l = curl_slist_append(l, "Expect:");
        for (const char *const *h = rq->headers; h && *h; h++)
                l = curl_slist_append(l, *h);
        return l;
}

static void set_body(CURL *h, const struct client_request *rq)
{
        if (rq->data) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->data);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->len);
        } else if (rq->in_fd >= 0) {
                curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(h, CURLOPT_READDATA, rq);
                if (rq->in_size > 0)
                        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->in_size);
        }
}

static int finish_reply(struct transfer *t, CURL *h, struct client_reply *out)
{
        memset(out, 0, sizeof(*out));
        out->status = transfer_status(t, h);
        char *ct = NULL;
        if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
                snprintf(out->content_type, sizeof(out->content_type), "%s", ct);
        out->len = t->body.len;
        out->body = t->body.data ? TAKE_PTR(t->body.data) : strdup("");
        buf_free(&t->body);
        if (!out->body)
                return -ENOMEM;
        if (strstr(out->content_type, "json"))
                out->json = json_loadb(out->body, out->len, 0, NULL);
        return 0;
}

static int perform(struct client *c, struct transfer *t, struct client_reply *out, struct err *err)
{
        const struct client_request *rq = t->rq;
        char url[4096];
        if ((size_t)snprintf(url, sizeof(url), "%s%s", c->cfg.url, rq->path) >= sizeof(url))
                return err_set(err, ERR_INVALID, ENAMETOOLONG, "request path too long");
        CURL *h = curl_easy_init();
        if (!h)
                return err_set(err, ERR_INTERNAL, ENOMEM, "cannot start an HTTP transfer");
        struct curl_slist *headers = request_headers(c, rq);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        /* A loopback server (the local daemon, the daemon's own /mcp calls)
         * is never reached through an http_proxy of the environment. */
        curl_easy_setopt(h, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        if (!strcmp(rq->method, "HEAD"))
                curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        set_body(h, rq);
        if (rq->progress) {
                curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
                curl_easy_setopt(h, CURLOPT_XFERINFODATA, rq);
        } else if (t->stop) {
                curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_stop_check);
                curl_easy_setopt(h, CURLOPT_XFERINFODATA, t);
        }
        CURLcode cc = curl_easy_perform(h);
        int r = 0;
        if (t->stopped)
                r = t->stopped;
        else if (t->write_errno)
                r = err_set(err, ERR_FILESYSTEM, t->write_errno, "cannot write the download: %s", strerror(t->write_errno));
        else if (cc != CURLE_OK)
                r = err_set(err, ERR_UNAVAILABLE, ECONNREFUSED, "%s: %s", c->cfg.url, curl_easy_strerror(cc));
        if (r == 0 || t->stopped)
                finish_reply(t, h, out);
        curl_slist_free_all(headers);
        curl_easy_cleanup(h);
        buf_free(&t->body);
        buf_free(&t->line);
        buf_free(&t->data);
        return r;
}

int client_request(struct client *c, const struct client_request *rq, struct client_reply *out, struct err *err)
{
        struct transfer t = { .rq = rq };
        transfer_init(&t);
        memset(out, 0, sizeof(*out));
        return perform(c, &t, out, err);
}

static int json_request(struct client *c, const char *method, const char *path, json_t *body, client_sse_fn fn,
                        void *cls, const atomic_bool *stop, struct client_reply *out, struct err *err)
{
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        if (body && !text)
                return err_set(err, ERR_INTERNAL, ENOMEM, "out of memory");
        const char *accept[] = { fn ? "Accept: text/event-stream" : "Accept: application/json", NULL };
        struct client_request rq = {
                .method = method, .path = path, .headers = accept, .data = text, .len = text ? strlen(text) : 0,
                .in_fd = -1, .out_fd = -1, .content_type = text ? "application/json" : NULL,
        };
        struct transfer t = { .rq = &rq, .sse = fn, .sse_cls = cls, .stop = stop };
        transfer_init(&t);
        memset(out, 0, sizeof(*out));
        return perform(c, &t, out, err);
}

int client_json(struct client *c, const char *method, const char *path, json_t *body, struct client_reply *out,
                struct err *err)
{
        return json_request(c, method, path, body, NULL, NULL, NULL, out, err);
}

int client_sse(struct client *c, const char *method, const char *path, json_t *body, client_sse_fn fn, void *cls,
               struct client_reply *out, struct err *err)
{
        return json_request(c, method, path, body, fn, cls, NULL, out, err);
}

int client_sse_stoppable(struct client *c, const char *method, const char *path, json_t *body, client_sse_fn fn,
                         void *cls, const atomic_bool *stop, struct client_reply *out, struct err *err)
{
        return json_request(c, method, path, body, fn, cls, stop, out, err);
}
