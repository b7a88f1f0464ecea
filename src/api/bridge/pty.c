/* GET /v1/sandbox/:id/pty: a WebSocket onto the sandbox's terminal of a
 * session (sandbox/terminal.h), as the anchor's /ws/pty (reference §7):
 *
 *   server → client: the replay ring as one binary frame (when not empty),
 *     {"type":"ready"}, then live output as binary frames; when the shell
 *     ends {"type":"exit","code":N[,"signal":"SIGKILL"]} and close 1000.
 *   client → server: binary frames are input; text frames are JSON control
 *     messages ({"type":"resize","cols":N,"rows":N}; unknown types ignored).
 *
 * A socket that falls more than the HTTP layer's queue (4 MiB) behind the
 * terminal is dropped with close 1008 "policy violation" (1013 "try again
 * later" would say it better, but common clients such as Python's
 * websocket-client refuse codes outside RFC 6455's own list): its
 * listener goes first, so the terminal and the other sockets never wait
 * for it, and reconnecting replays the ring. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/app.h"
#include "api/bridge/bridge.h"
#include "base/util.h"
#include "sandbox/sandbox.h"
#include "sandbox/terminal.h"

#define DEFAULT_COLS 80
#define DEFAULT_ROWS 24
/* Close codes (RFC 6455 §7.4.1 and the IANA registry). */
#define CLOSE_NORMAL 1000
#define CLOSE_INTERNAL 1011
#define CLOSE_POLICY 1008

struct pty_sock {
        struct app *app;
        char id[130];
        char session[130];           /* "": the sandbox's default terminal */
        char *shell;                 /* NULL: bash */
        unsigned short rows, cols;
        struct http_ws *ws;
        struct sbx_terminal_conn *conn; /* NULL until attached, and after close */
};

/* ---- frames to the client ---- */

static void send_json(struct http_ws *ws, json_t *msg)
{
        _cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        json_decref(msg);
        if (text)
                http_ws_send(ws, false, text, strlen(text));
}

static void send_error(struct http_ws *ws, const char *message)
{
        /* Domain messages may quote client bytes: JSON needs valid UTF-8. */
        size_t len = strlen(message);
        _cleanup_free_ char *clean = malloc(3 * len + 1);
        if (clean)
                utf8_sanitize(message, len, clean);
        send_json(ws, json_pack("{s:s, s:s}", "type", "error", "message", clean ? clean : "error"));
}

static void on_attached(void *ctx, const void *replay, size_t len)
{
        struct pty_sock *ps = ctx;
        if (len)
                http_ws_send(ps->ws, true, replay, len);
        static const char ready[] = "{\"type\":\"ready\"}";
        http_ws_send(ps->ws, false, ready, sizeof(ready) - 1);
}

static int on_output(void *ctx, const void *data, size_t len)
{
        struct pty_sock *ps = ctx;
        int r = http_ws_send(ps->ws, true, data, len);
        if (r == -EAGAIN)
                http_ws_close(ps->ws, CLOSE_POLICY, "Too far behind the terminal; reconnect to replay");
        return r;
}

static void on_shell_exit(void *ctx, const struct sbx_terminal_exit *st)
{
        struct pty_sock *ps = ctx;
        json_t *msg = json_pack("{s:s, s:i}", "type", "exit", "code", st->code);
        const char *abbrev = st->signal ? sigabbrev_np(st->signal) : NULL;
        char name[32];
        if (msg && abbrev) {
                snprintf(name, sizeof(name), "SIG%s", abbrev);
                json_object_set_new(msg, "signal", json_string(name));
        }
        send_json(ps->ws, msg);
        http_ws_close(ps->ws, CLOSE_NORMAL, NULL);
}

/* ---- the socket's life ---- */

static void pty_open(struct http_ws *ws, void *ctx)
{
        struct pty_sock *ps = ctx;
        ps->ws = ws;
        const struct sbx_terminal_listener l = { on_attached, on_output, on_shell_exit, ps };
        const struct sbx_terminal_spec spec = { ps->session, ps->shell, ps->rows, ps->cols };
        struct err err = { 0 };
        if (sbx_terminal_attach(ps->app->sandboxes, ps->id, &spec, &l, &ps->conn, &err) < 0) {
                send_error(ws, err.msg[0] ? err.msg : "Cannot start the terminal");
                http_ws_close(ws, CLOSE_INTERNAL, "Terminal unavailable");
        }
        err_done(&err);
}

/* A size from a positive number: truncated, at least 1, at most the
 * terminal's maximum. */
static unsigned short dim(double d)
{
        if (d >= SBX_TERMINAL_MAX_DIM)
                return SBX_TERMINAL_MAX_DIM;
        return d < 1 ? 1 : (unsigned short)d;
}

/* {"type":"resize","cols":N,"rows":N}: N a positive number (fractions are
 * truncated, at least 1; the terminal clamps large ones). */
static void control_resize(struct pty_sock *ps, json_t *msg)
{
        json_t *c = json_object_get(msg, "cols"), *r = json_object_get(msg, "rows");
        if (!json_is_number(c) || !json_is_number(r) || !(json_number_value(c) > 0) ||
            !(json_number_value(r) > 0)) {
                send_error(ps->ws, "Invalid dimensions: cols and rows must be positive");
                return;
        }
        sbx_terminal_resize(ps->conn, dim(json_number_value(r)), dim(json_number_value(c)));
}

static void control(struct pty_sock *ps, const void *data, size_t len)
{
        json_t *msg = json_loadb(data, len, 0, NULL);
        if (!json_is_object(msg)) {
                send_error(ps->ws, "Invalid control message");
        } else {
                const char *type = json_string_value(json_object_get(msg, "type"));
                if (type && strcmp(type, "resize") == 0)
                        control_resize(ps, msg);
                /* Any other type: ignored, as the anchor does. */
        }
        json_decref(msg);
}

static void pty_message(struct http_ws *ws, void *ctx, bool binary, const void *data, size_t len)
{
        (void)ws;
        struct pty_sock *ps = ctx;
        if (!ps->conn)
                return; /* never attached: the socket is closing */
        if (!binary) {
                control(ps, data, len);
                return;
        }
        if (sbx_terminal_write(ps->conn, data, len) == -ENOBUFS)
                send_error(ps->ws, "Input dropped: the shell is not reading (over 4 MiB queued)");
}

static void pty_close(struct http_ws *ws, void *ctx, unsigned code)
{
        (void)ws;
        (void)code;
        struct pty_sock *ps = ctx;
        sbx_terminal_detach(ps->conn); /* the terminal lives on */
        ps->conn = NULL;
}

static void pty_free(void *ctx)
{
        struct pty_sock *ps = ctx;
        free(ps->shell);
        free(ps);
}

static const struct http_ws_ops pty_ops = { pty_open, pty_message, pty_close, pty_free };

/* ---- the upgrade request ---- */

/* ?cols / ?rows as the anchor reads them (a JS Number): absent, empty or
 * <= 0 is the default, a non-number is refused, anything else truncated and
 * clamped by the terminal. */
static int dim_query(struct http_request *req, const char *name, unsigned short def, unsigned short *ret)
{
        const char *v = http_query(req, name);
        char *end;
        double d = v ? strtod(v, &end) : 0;
        if (v && (end == v ? v[strspn(v, " \t\n\r")] != '\0' : end[strspn(end, " \t\n\r")] != '\0'))
                return -EINVAL;
        if (isnan(d))
                return -EINVAL;
        *ret = d < 1 ? def : dim(d);
        return 0;
}

static void h_pty(struct http_request *req, struct http_response *res)
{
        struct app *app = req->app;
        unsigned short cols, rows;
        /* Before the handshake checks: a plain GET with a bad size hears
         * about the size, as from the anchor. */
        if (dim_query(req, "cols", DEFAULT_COLS, &cols) < 0 || dim_query(req, "rows", DEFAULT_ROWS, &rows) < 0) {
                bridge_error(res, 400, "invalid_request", "cols and rows must be valid numbers");
                return;
        }
        const char *session = http_header(req, "Session-Id");
        if (!session)
                session = http_query(req, "session");
        if (session && !bridge_session_id_valid(session)) {
                bridge_error(res, 400, "invalid_request", "Invalid session ID format");
                return;
        }
        if (session && strcmp(session, SBX_SESSION_DISABLED) == 0)
                session = NULL; /* the SDK's "no session": the default terminal */
        /* Made with the bridge's limits when this is its first use. */
        if (!bridge_sandbox_ready(req, res, req->captures[0]))
                return;
        const char *shell = http_query(req, "shell");
        struct err err = { 0 };
        if (sbx_terminal_shell_check(app->sandboxes, req->captures[0], shell, &err) < 0) {
                bridge_error_from(res, &err, "exec_transport_error");
                err_done(&err);
                return;
        }
        struct pty_sock *ps = calloc(1, sizeof(*ps));
        if (!ps || (shell && *shell && !(ps->shell = strdup(shell)))) {
                free(ps);
                bridge_error(res, 500, "internal_error", "out of memory");
                return;
        }
        ps->app = app;
        ps->rows = rows;
        ps->cols = cols;
        snprintf(ps->id, sizeof(ps->id), "%s", req->captures[0]);
        snprintf(ps->session, sizeof(ps->session), "%s", session ? session : "");
        http_websocket(res, &pty_ops, ps);
}

const struct route *bridge_pty_routes(size_t *ret_n)
{
        static const struct route routes[] = {
                { "GET", "/v1/sandbox/:id/pty", h_pty, ROUTE_BLOCKING, 0 },
        };
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}
