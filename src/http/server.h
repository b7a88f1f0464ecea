/* HTTP glue on libmicrohttpd for every facade.
 *
 * A server carries route GROUPS (one per facade): each group has its routes,
 * an auth hook and an error ENVELOPE that shapes every error the HTTP layer
 * itself answers (404, 405 + Allow, 401, 413, 415, 503, 500). A handler fills
 * one reply of several kinds: JSON, bytes, a file, a stream fed by a producer
 * thread (chunked; SSE helpers) with backpressure and a disconnect callback,
 * or an upgrade to WebSocket (wslay frames).
 *
 * Threads: MHD's polling threads (`threads`) run the non-blocking handlers;
 * ROUTE_BLOCKING handlers run on `workers` threads (their connections are
 * suspended meanwhile); every stream producer and every WebSocket runs on its
 * own thread, at most `max_streams` of them at once (beyond: 503), so long
 * streams never hold an execution worker. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;
struct http_server;
struct http_group;
struct http_stream;
struct http_ws;
struct http_upgrade;
struct http_header_node;

#define HTTP_MAX_CAPTURES 4

struct http_request {
        struct MHD_Connection *conn;
        const char *method;
        const char *path;           /* decoded path without query */
        const char *captures[HTTP_MAX_CAPTURES]; /* ":name" and "*" pieces, in order */
        const char *route;          /* the matched route's pattern; NULL when none matched */
        const char *body;           /* NUL-terminated */
        size_t body_len;
        void *app;                  /* the application context given to http_server_new */
        uint64_t id;
        /* Who the group's auth hook found the caller to be (the facade's
         * own type), or NULL; auth_free (if set) frees it when the request
         * is over. */
        void *auth;
        void (*auth_free)(void *auth);
        /* The client's address when a trusted peer vouched for it (a
         * request another cluster node forwarded, its signature checked):
         * http_client_addr answers it instead of the connection's. */
        char client_addr[64];
};

enum http_reply_kind {
        HTTP_REPLY_JSON,
        HTTP_REPLY_BYTES,
        HTTP_REPLY_FILE,
        HTTP_REPLY_STREAM,
        HTTP_REPLY_WEBSOCKET,
        HTTP_REPLY_UPGRADE,
};

/* What a handler fills. Use the http_* setters below, not the fields beyond
 * status/json/allow/retry_after (they are the server's). */
struct http_response {
        int status;
        json_t *json;               /* owned; serialised compactly, shortest doubles */
        char allow[64];             /* Allow header for 405 */
        unsigned retry_after;       /* seconds, for 429/503 */

        enum http_reply_kind kind;
        char content_type[128];
        char *bytes;                /* HTTP_REPLY_BYTES: owned copy */
        size_t len;
        int fd;                     /* HTTP_REPLY_FILE: owned */
        uint64_t size;
        uint64_t offset;            /* HTTP_REPLY_FILE: where the bytes start in fd */
        struct http_stream *stream; /* HTTP_REPLY_STREAM */
        struct http_ws *ws;         /* HTTP_REPLY_WEBSOCKET */
        struct http_upgrade *upgrade; /* HTTP_REPLY_UPGRADE */
        struct http_header_node *headers;
        bool relayed;               /* the reply is another node's (http_forward) */
        size_t body_len;            /* JSON and BYTES: the body's length once queued */
};

/* How the server serialised JSON before the shortest-double rewrite; kept
 * for tools that want the same jansson flags. Use http_json_dump. */
#define HTTP_JSON_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

typedef void (*http_handler)(struct http_request *req, struct http_response *res);

enum {
        ROUTE_BLOCKING = 1 << 0,    /* run on the worker pool */
        ROUTE_PUBLIC = 1 << 1,      /* the group's auth hook is skipped */
        ROUTE_JSON = 1 << 2,        /* body must be application/json (415 otherwise) */
};

/* A route's body cap, read per request (so it can come from configuration
 * through the app context). NULL: the server's default_max_body. */
typedef size_t (*http_body_cap)(const void *app);

struct route {
        const char *method;         /* "GET", "POST", "DELETE" */
        const char *pattern;        /* "/execute/:lang"; a final "*" takes the rest */
        http_handler fn;
        unsigned flags;
        http_body_cap max_body;
};

/* A facade's hooks. cls is the group's; both may be NULL (open / a plain
 * {"error": message} body). */
struct http_group_ops {
        /* Decides whether req may proceed; otherwise fills res (normally via
         * the envelope) and returns false. Not called for ROUTE_PUBLIC. */
        bool (*auth)(void *cls, struct http_request *req, struct http_response *res);
        /* Shapes an error the HTTP layer itself answers. */
        void (*envelope)(void *cls, struct http_response *res, int status, const char *message);
        /* May be NULL. Runs once per request of the group, just before its
         * reply's headers are sent, whatever answered it (handler, auth hook
         * or the HTTP layer): headers every reply carries (a request id). */
        void (*finish)(void *cls, struct http_request *req, struct http_response *res);
        /* May be NULL. Runs after the auth hook and once the body is read,
         * just before the handler, on the handler's thread (not for
         * ROUTE_PUBLIC routes): true when it answered res itself and the
         * handler is skipped (a cluster forwarding the request to the
         * node that owns the sandbox it names). */
        bool (*intercept)(void *cls, struct http_request *req, struct http_response *res);
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
        unsigned max_streams;       /* streams + WebSockets at once; 0: 64 */
        size_t stream_buffer;       /* per-stream bytes buffered before the producer waits; 0: 64 KiB */
        /* A ROUTE_BLOCKING request runs on its own polling thread, with no
         * hand-off to a worker and back, when that thread serves no other
         * connection (nobody waits behind it), another polling thread is
         * left to accept and serve the rest, and a worker would be free
         * anyway (the same bound on executions at once). */
        bool inline_blocking;
};

/* Creates a server (not yet listening). app is handed to handlers. */
int http_server_new(const struct http_options *opt, void *app, struct http_server **ret);
/* Adds a group. prefix routes unmatched paths to it (longest wins); NULL or
 * "" makes it the default group. ops and cls must outlive the server. */
struct http_group *http_server_group(struct http_server *s, const char *prefix, const struct http_group_ops *ops,
                                     void *cls);
/* Adds routes to a group; they must outlive the server. Returns 0 or -ENOMEM. */
int http_group_routes(struct http_group *g, const struct route *routes, size_t n);
/* Starts listening. Returns 0 or -errno. */
int http_server_start(struct http_server *s);
/* The port actually bound (useful with port 0). */
unsigned http_server_port(const struct http_server *s);
/* Stops accepting new connections and refuses new blocking work with 503. */
void http_server_drain(struct http_server *s);
bool http_server_draining(const struct http_server *s);
/* Blocking jobs queued or running. */
size_t http_server_busy(struct http_server *s);
/* Streams and WebSockets open. */
size_t http_server_streams(struct http_server *s);
/* Closes every connection, waits for producers and WebSockets, frees. NULL-safe. */
void http_server_stop(struct http_server *s);

/* A request the daemon runs itself, later (a queued one): a response to
 * hand to a handler outside any connection, and to free after. Such a
 * request has conn NULL: http_header/http_query answer NULL for it. */
void http_response_init(struct http_response *res);
void http_response_done(struct http_response *res);

/* ---- replies (reply.c); each replaces what res held ---- */
void http_json(struct http_response *res, int status, json_t *body);
/* A copy of data; -ENOMEM leaves a 500. */
int http_bytes(struct http_response *res, int status, const char *content_type, const void *data, size_t len);
/* Sends size bytes of fd from offset 0; fd is taken (closed by the server). */
void http_file(struct http_response *res, int status, const char *content_type, int fd, uint64_t size);
/* Sends size bytes of fd from offset (a 206 of a Range request). */
void http_file_range(struct http_response *res, int status, const char *content_type, int fd, uint64_t offset,
                     uint64_t size);
/* Adds a response header (several allowed, kept in order). 0 or -ENOMEM/-EINVAL. */
int http_response_header(struct http_response *res, const char *name, const char *value);
/* Request header lookup (case-insensitive), and query argument (decoded). */
const char *http_header(struct http_request *req, const char *name);
const char *http_query(struct http_request *req, const char *name);
/* Whether header name's comma/space separated list holds token (any case). */
bool http_header_has_token(struct http_request *req, const char *name, const char *token);
/* The client's address as text ("127.0.0.1", "::1"); "" when unknown;
 * req->client_addr when set. */
void http_client_addr(struct http_request *req, char *buf, size_t len);
/* Compact JSON with every double in its shortest round-trip form
 * (3.522328, not 3.5223279999999999). Free with free(). */
char *http_json_dump(const json_t *j);
/* The rewrite itself on jansson text (exposed for tests). */
char *http_json_shorten(const char *text);

/* ---- streams (stream.c) ----
 * The handler calls http_stream(); once the headers are sent, ops->run runs
 * on a stream thread and writes with http_stream_write / http_sse_*. A write
 * blocks while `stream_buffer` bytes wait for a slow client (backpressure)
 * and returns -EPIPE once the client is gone. If the client goes away before
 * run returns, ops->disconnect runs (from the server's thread: kill what you
 * started; run will see -EPIPE). ops->free runs last, once. A client that
 * leaves while nothing is written is noticed at the next write: send
 * heartbeats (http_sse_comment) on long silences. A silent stream holds no
 * polling thread (its connection is suspended) and no idle timeout; a
 * client that reads nothing for http timeout_s while bytes wait is closed
 * by that timeout (a disconnect). */
struct http_stream_ops {
        void (*run)(struct http_stream *s, void *ctx);
        void (*disconnect)(void *ctx);
        void (*free)(void *ctx);
};
/* content_type NULL: "text/event-stream". On failure ops->free(ctx) has run
 * and res holds a 500. */
int http_stream(struct http_response *res, int status, const char *content_type,
                const struct http_stream_ops *ops, void *ctx);
int http_stream_write(struct http_stream *s, const void *data, size_t len);
/* One SSE event: "event:", "id:" (each if non-NULL) and one "data:" line per
 * line of data, then a blank line. */
int http_sse_event(struct http_stream *s, const char *event, const char *id, const char *data);
/* ": text" — a heartbeat that also tells whether the client is still there. */
int http_sse_comment(struct http_stream *s, const char *text);
bool http_stream_closed(struct http_stream *s);

/* ---- WebSocket (ws.c) ----
 * The handler calls http_websocket(); the server checks the handshake
 * headers (400 otherwise), answers 101 and runs the connection on its own
 * thread: on_open, then on_message per complete message, then on_close
 * (code 1005 when none was given, 1006 when the peer just vanished), then
 * free. Pings are answered, fragmented messages joined, frames are capped by
 * HTTP_WS_MAX_MESSAGE (1009); a frame that breaks RFC 6455 gets 1002.
 * http_ws_send/close may be called from any thread until on_close returns;
 * send says -EAGAIN when more than 4 MiB is already queued, -EPIPE after a
 * close. http_ws_close's frame follows the messages queued before it (a
 * peer that reads none of them for 10 s gets it ahead of them). */
#define HTTP_WS_MAX_MESSAGE (1u << 20)
struct http_ws_ops {
        void (*on_open)(struct http_ws *ws, void *ctx);
        void (*on_message)(struct http_ws *ws, void *ctx, bool binary, const void *data, size_t len);
        void (*on_close)(struct http_ws *ws, void *ctx, unsigned code);
        void (*free)(void *ctx);
};
int http_websocket(struct http_response *res, const struct http_ws_ops *ops, void *ctx);
int http_ws_send(struct http_ws *ws, bool binary, const void *data, size_t len);
int http_ws_close(struct http_ws *ws, unsigned code, const char *reason);
/* Test seam (tests/fuzz/fuzz_ws.c): the same frame handling run at once on
 * the caller's thread, over sock (made non-blocking), as if MHD had read
 * data past the handshake: on_open, the messages data holds, on_close,
 * free; whatever the server answers is written to sock. No server, no
 * thread. 0 or -errno (ops->free has run either way). */
int http_ws_feed(const struct http_ws_ops *ops, void *ctx, int sock, const void *data, size_t len);

/* ---- raw upgrade (upgrade.c) ----
 * The handler calls http_upgrade_raw() and adds its headers (Upgrade and
 * the protocol's own, with http_response_header); the server answers 101
 * (Connection: Upgrade is added) and then runs ops->run on a thread of its
 * own with the client's socket (blocking) and the bytes the client already
 * sent past the request head. The connection is closed when run returns;
 * ops->free runs last, once (also when the upgrade never happens). A
 * server stop shuts the socket down (run sees EOF). Counts against
 * max_streams (beyond: 503). On failure ops->free(ctx) has run and res
 * holds a 500. */
struct http_upgrade_ops {
        void (*run)(int fd, const void *extra, size_t extra_len, void *ctx);
        void (*free)(void *ctx);
};
int http_upgrade_raw(struct http_response *res, const struct http_upgrade_ops *ops, void *ctx);
/* For a raw upgrade's run(): copies bytes both ways between two connected
 * sockets until either side ends or fails. */
void http_splice(int a, int b);

/* ---- forwarding to another node (forward.c) ----
 * Proxies the current request to base_url ("http://host[:port][/prefix]"):
 * same method, path and query, body, and the client's headers except the
 * hop-by-hop ones, Host, Content-Length, any X-Sandboxd-* and the caller's
 * credentials (Authorization, X-API-Key, Cookie; ?token= and ?apiKey= are
 * dropped from the query); extra's headers are added. The other node's
 * reply is relayed as it comes: status and headers (minus hop-by-hop ones
 * and those named in extra->drop_reply), then a body with a Content-Length
 * (up to 8 MiB) as bytes, anything else (chunked, SSE, until close)
 * streamed on a stream thread without buffering; a 101 to an `Upgrade`
 * request becomes a raw upgrade splicing bytes both ways until either side
 * closes. Blocks the calling thread until the reply's head arrived.
 * 0 when res holds the relayed reply (whatever its status), -errno when the
 * node could not be reached or answered no HTTP (res untouched: the caller
 * answers, normally 502). */
struct http_forward_header {
        const char *name, *value;
};
struct http_forward_headers {
        const struct http_forward_header *v;
        size_t n;
        /* Reply headers the local group sets itself (its finish hook): not
         * relayed, so that the client sees one. NULL-terminated; may be NULL. */
        const char *const *drop_reply;
};
int http_forward(struct http_request *req, struct http_response *res, const char *base_url,
                 const struct http_forward_headers *extra);
/* The request's target as forwarded (and signed between nodes): the path
 * percent-encoded (RFC 3986 unreserved and '/' kept), then "?" and the
 * query without token/apiKey when any is left. Free with free(); NULL on
 * ENOMEM. */
char *http_forward_target(struct http_request *req);
/* Pieces of the above, exposed for tests. */
bool http_forward_request_header(const char *name);   /* may cross to the other node */
bool http_forward_reply_header(const char *name);     /* may be relayed back */
/* query ("a=1&token=x", as http_query_string gives it) without the
 * credential arguments; free(). NULL on ENOMEM. */
char *http_forward_query(const char *query);
/* path percent-encoded as above; free(). NULL on ENOMEM. */
char *http_forward_path(const char *path);
/* "http://host[:port][/prefix]" into its parts (prefix without a final
 * '/', "" when none); port 80 when none. 0 or -EINVAL. */
int http_forward_parse_url(const char *url, char *host, size_t hostlen, unsigned *port, char *prefix,
                           size_t prefixlen);

/* ---- request details ---- */
/* Calls fn for every request header, in the order received; stops when fn
 * returns false. */
void http_headers_each(struct http_request *req, bool (*fn)(void *cls, const char *name, const char *value),
                       void *cls);
/* The query string as received (arguments re-encoded, in order; "" when
 * none), without the "?". Free with free(); NULL on ENOMEM. */
char *http_query_string(struct http_request *req);

/* ---- helpers ---- */
/* Splits "host:port" / "[v6]:port". Returns 0 or -EINVAL. */
int http_parse_listen(const char *listen, char *host, size_t hostlen, unsigned *port);
bool http_host_is_loopback(const char *host);
/* Matches a route pattern against a path, filling captures into buf. */
bool http_match(const char *pattern, const char *path, const char **captures, char *buf, size_t buflen);
