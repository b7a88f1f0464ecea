/* HTTP glue on libmicrohttpd: a route table, bounded bodies, ErrorResponse
 * errors, and a bounded worker pool for handlers that block (executions):
 * their connections are suspended while a worker runs them, so the polling
 * threads keep serving everything else. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;
struct http_server;

#define HTTP_MAX_CAPTURES 4

struct http_request {
        struct MHD_Connection *conn;
        const char *method;
        const char *path;           /* decoded path without query */
        const char *captures[HTTP_MAX_CAPTURES]; /* ":name" and "*" pieces, in order */
        const char *body;           /* NUL-terminated */
        size_t body_len;
        void *app;                  /* the application context given to http_server_start */
        uint64_t id;
};

struct http_response {
        int status;
        json_t *json;               /* owned; serialised compactly */
        char allow[64];             /* Allow header for 405 */
        unsigned retry_after;       /* seconds, for 429/503 */
};

/* How response bodies are serialised. 17 significant digits: every double
 * (e.g. a guest's {"json": [0.1 + 0.2, 1.7976931348623157e308]} result)
 * survives the round trip; fewer digits rounded results and could even
 * turn a finite number into one that parses as infinity. */
#define HTTP_JSON_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

typedef void (*http_handler)(struct http_request *req, struct http_response *res);

enum {
        ROUTE_BLOCKING = 1 << 0,    /* run on the worker pool */
        ROUTE_PUBLIC = 1 << 1,      /* no API key needed */
        ROUTE_JSON = 1 << 2,        /* body must be application/json (415 otherwise) */
};

struct route {
        const char *method;         /* "GET", "POST", "DELETE" */
        const char *pattern;        /* "/execute/:lang"; a final "*" takes the rest */
        http_handler fn;
        unsigned flags;
        size_t max_body;            /* 0: the server default */
};

struct http_options {
        const char *listen;         /* HOST:PORT */
        unsigned threads;
        unsigned max_connections;
        unsigned timeout_s;
        size_t header_bytes;
        size_t default_max_body;
        unsigned workers;
        unsigned queue;
        const char *api_key;        /* empty: no auth */
};

/* Starts listening. routes must outlive the server. *ret is set before the
 * socket listens (a handler may reach it through app at once); it is NULL
 * again on failure. Returns 0 or -errno. */
int http_server_start(const struct http_options *opt, const struct route *routes, size_t nroutes,
                      void *app, struct http_server **ret);
/* The port actually bound (useful with port 0). */
unsigned http_server_port(const struct http_server *s);
/* Stops accepting new connections and refuses new blocking work with 503. */
void http_server_drain(struct http_server *s);
bool http_server_draining(const struct http_server *s);
/* Blocking jobs queued or running. */
size_t http_server_busy(struct http_server *s);
void http_server_stop(struct http_server *s);

/* Fills res with an ErrorResponse {code, message, context, httpStatus,
 * timestamp}. context may be NULL (→ {}); it is stolen. */
void http_error(struct http_response *res, int status, const char *code, const char *message,
                json_t *context);
void http_errorf(struct http_response *res, int status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void http_json(struct http_response *res, int status, json_t *body);
/* Request header lookup (case-insensitive). */
const char *http_header(struct http_request *req, const char *name);
/* Splits "host:port" / "[v6]:port". Returns 0 or -EINVAL. */
int http_parse_listen(const char *listen, char *host, size_t hostlen, unsigned *port);
bool http_host_is_loopback(const char *host);
/* Matches a route pattern against a path, filling captures into buf. */
bool http_match(const char *pattern, const char *path, const char **captures, char *buf, size_t buflen);
