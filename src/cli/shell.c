/* `sandboxd shell SANDBOX [--session NAME] [--cmd ARGV…]`: an interactive
 * terminal over the bridge's PTY WebSocket (docs/bridge/pty.md).
 *
 * The local terminal goes raw (every key to the sandbox's PTY, ^C too) and
 * is restored on every way out, signals included; its size is sent at the
 * start and on every SIGWINCH. The exit status is the shell's (the server's
 * `exit` message: 128 + signal when one killed it).
 *
 * Without --session each run gets a terminal of its own (a fresh bridge
 * session, deleted at the end, which kills what is left of it); with
 * --session NAME it joins that named terminal (its replay first) and leaves
 * it running. The bridge starts a shell, not a command: --cmd starts `sh`
 * with an empty prompt and types `exec ARGV` into it, hiding that line's
 * echo. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <termios.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/io.h"
#include "cli/cli.h"
#include "client/ws.h"

#define SHELL_USAGE                                                                                                    \
        "Usage: sandboxd shell SANDBOX [--session NAME] [--cmd ARGV…]\n"                                                \
        "An interactive terminal in the sandbox (bash in /workspace) over its PTY WebSocket.\n"                         \
        "Exits with the shell's exit status (128 + signal when it was killed).\n\n"                                     \
        "  --session NAME  join (or start) the named terminal and leave it running on exit;\n"                          \
        "                  without it, a terminal of this run's own, ended on exit\n"                                   \
        "  --cmd ARGV…     run this command instead of bash (the rest of the line; write\n"                             \
        "  -- ARGV…        `-- ARGV…` when ARGV has options of sandboxd's own, like --help)\n"                           \
        "Works with stdin not a terminal too (no raw mode; the end of input sends ^D,\n"            \
        "repeated each second until the shell ends).\n"                                   \
        "http:// servers only (no wss://).\n"

/* After the end of piped input, ^D again this often until the shell ends. */
#define EOF_REPEAT_MS 1000
/* After the shell's exit message, how long the server's close may take. */
#define EXIT_CLOSE_WAIT_MS 2000

struct shell {
        struct cli_ctx *ctx;
        const char *id;
        char session[80];
        bool own_session;
        char **cmd;             /* --cmd argv, NULL-ended, or NULL */
        struct client_ws *ws;
        bool tty_in;
        bool ready, typed, discard_line;
        bool exited;
        int exit_code;
        int out_errno;
};

/* ---- the local terminal ---- */

static struct termios saved_termios;
static volatile sig_atomic_t termios_saved;
static int sig_pipe[2] = { -1, -1 };

/* Async-signal-safe: tcsetattr and write are. */
static void restore_terminal(void)
{
        if (termios_saved)
                tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_termios);
}

static void on_signal(int sig)
{
        int saved = errno;
        if (sig != SIGWINCH)
                restore_terminal();
        unsigned char b = (unsigned char)sig;
        if (write(sig_pipe[1], &b, 1) < 0) {
                /* the pipe is full: a signal is already pending */
        }
        errno = saved;
}

static const int caught[] = { SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static int signals_start(void)
{
        if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        struct sigaction sa = { .sa_handler = on_signal };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ARRAY_SIZE(caught); i++)
                sigaction(caught[i], &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        return 0;
}

static void signals_stop(void)
{
        for (size_t i = 0; i < ARRAY_SIZE(caught); i++)
                signal(caught[i], SIG_DFL);
        for (int i = 0; i < 2; i++)
                if (sig_pipe[i] >= 0)
                        close(sig_pipe[i]);
        sig_pipe[0] = sig_pipe[1] = -1;
}

static int raw_mode(void)
{
        struct termios t;
        if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
                return -errno;
        termios_saved = 1;
        atexit(restore_terminal);
        t = saved_termios;
        cfmakeraw(&t);
        return tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) < 0 ? -errno : 0;
}

static void term_size(unsigned *cols, unsigned *rows)
{
        struct winsize w;
        *cols = 80, *rows = 24;
        if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &w) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0) && w.ws_col &&
            w.ws_row)
                *cols = w.ws_col, *rows = w.ws_row;
}

/* ---- the socket ---- */

static void send_resize(struct shell *s)
{
        unsigned cols, rows;
        char msg[96];
        term_size(&cols, &rows);
        snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}", cols, rows);
        client_ws_send(s->ws, false, msg, strlen(msg));
}

/* `exec 'a' 'b'\n`, each word single-quoted for sh. */
static int type_command(struct shell *s)
{
        struct buf b;
        buf_init(&b, 1 * MiB);
        int r = buf_printf(&b, "exec");
        for (char **a = s->cmd; r >= 0 && *a; a++) {
                r = buf_printf(&b, " '");
                for (const char *p = *a; r >= 0 && *p; p++)
                        r = *p == '\'' ? buf_printf(&b, "'\\''") : buf_append(&b, p, 1);
                if (r >= 0)
                        r = buf_printf(&b, "'");
        }
        if (r >= 0)
                r = buf_printf(&b, "\n");
        if (r >= 0)
                r = client_ws_send(s->ws, true, b.data, b.len);
        buf_free(&b);
        s->typed = true;
        return r;
}

static void on_control(struct shell *s, const char *data, size_t len)
{
        json_t *j = json_loadb(data, len, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "type"));
        if (type && !strcmp(type, "ready")) {
                s->ready = true;
                if (s->tty_in)
                        send_resize(s);
                if (s->cmd && !s->typed)
                        type_command(s);
        } else if (type && !strcmp(type, "exit")) {
                s->exited = true;
                s->exit_code = (int)json_integer_value(json_object_get(j, "code"));
        } else if (type && !strcmp(type, "error")) {
                const char *m = json_string_value(json_object_get(j, "message"));
                fprintf(stderr, "%ssandboxd shell: %s%s", s->tty_in ? "\r\n" : "", m ? m : "error",
                        s->tty_in ? "\r\n" : "\n");
        }
        json_decref(j);
}

static void on_message(void *cls, bool binary, const void *data, size_t len)
{
        struct shell *s = cls;
        if (!binary) {
                on_control(s, data, len);
                return;
        }
        const char *p = data;
        if (s->discard_line) {
                /* The echo of the typed `exec …` line. */
                const char *nl = memchr(p, '\n', len);
                if (!nl)
                        return;
                s->discard_line = false;
                len -= (size_t)(nl + 1 - p);
                p = nl + 1;
        }
        if (len && !s->out_errno) {
                int r = write_all(STDOUT_FILENO, p, len);
                if (r < 0)
                        s->out_errno = -r;
        }
}

/* ---- the session ---- */

static int session_open(struct shell *s, const char *name)
{
        if (name) {
                snprintf(s->session, sizeof(s->session), "%s", name);
                return 0;
        }
        unsigned char rnd[8];
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return cli_fail(s->ctx, "no randomness for a session id");
        int n = snprintf(s->session, sizeof(s->session), "cli-");
        for (size_t i = 0; i < sizeof(rnd); i++)
                n += snprintf(s->session + n, sizeof(s->session) - (size_t)n, "%02x", rnd[i]);
        char path[256];
        snprintf(path, sizeof(path), "/v1/sandbox/%s/session", s->id);
        /* --cmd's sh gets an empty prompt: only the command's output shows. */
        json_t *body = json_pack("{s:s}", "id", s->session);
        if (s->cmd)
                json_object_set_new(body, "env", json_pack("{s:s}", "PS1", ""));
        struct client_reply r;
        int rc = cli_call(s->ctx, "POST", path, body, &r);
        json_decref(body);
        if (rc == 0) {
                s->own_session = true;
                client_reply_clear(&r);
        }
        return rc;
}

static void session_close(struct shell *s)
{
        if (!s->own_session)
                return;
        char path[256];
        struct client_reply r;
        struct err err = { 0 };
        snprintf(path, sizeof(path), "/v1/sandbox/%s/session/%s", s->id, s->session);
        if (client_json(s->ctx->client, "DELETE", path, NULL, &r, &err) == 0)
                client_reply_clear(&r);
        err_done(&err);
}

static int connect_pty(struct shell *s)
{
        unsigned cols, rows;
        char path[512], header[128];
        term_size(&cols, &rows);
        snprintf(path, sizeof(path), "/v1/sandbox/%s/pty?cols=%u&rows=%u%s", s->id, cols, rows,
                 s->cmd ? "&shell=sh" : "");
        snprintf(header, sizeof(header), "Session-Id: %s", s->session);
        const char *headers[] = { header, NULL };
        struct client_reply r;
        struct err err = { 0 };
        int rc = client_ws_connect(s->ctx->client, path, headers, on_message, s, &s->ws, &r, &err);
        if (rc == -EPROTO)
                rc = cli_fail_reply(s->ctx, &r);
        else if (rc < 0)
                rc = cli_fail_err(s->ctx, &err);
        client_reply_clear(&r);
        err_done(&err);
        return rc;
}

/* ---- the loop ---- */

/* A signal other than SIGWINCH ends the loop: returns it, else 0. */
static int drain_signals(struct shell *s)
{
        unsigned char b[16];
        ssize_t n;
        int stop = 0;
        while ((n = read(sig_pipe[0], b, sizeof(b))) > 0)
                for (ssize_t i = 0; i < n; i++) {
                        if (b[i] == SIGWINCH && s->ready)
                                send_resize(s);
                        else if (b[i] != SIGWINCH)
                                stop = b[i];
                }
        return stop;
}

static void forward_input(struct shell *s, bool *in_open)
{
        char buf[16384];
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (n <= 0) {
                /* The end of piped input: ^D, so a shell at its prompt ends
                 * (run_loop repeats it: one typed ahead while bash switches
                 * its terminal out of canonical mode can be lost). */
                client_ws_send(s->ws, true, "\x04", 1);
                *in_open = false;
                return;
        }
        client_ws_send(s->ws, true, buf, (size_t)n);
}

/* Runs until the connection ends or a signal stops it (returned). */
static int run_loop(struct shell *s)
{
        bool in_open = true;
        for (;;) {
                struct pollfd p[3] = {
                        { client_ws_fd(s->ws), POLLIN | (client_ws_want_write(s->ws) ? POLLOUT : 0), 0 },
                        { sig_pipe[0], POLLIN, 0 },
                        { in_open && s->ready ? STDIN_FILENO : -1, POLLIN, 0 },
                };
                int n = poll(p, 3, s->exited ? EXIT_CLOSE_WAIT_MS : in_open ? -1 : EOF_REPEAT_MS);
                if (n == 0 && s->exited)
                        return 0; /* the exit is known; the close frame is late */
                if (n == 0)
                        client_ws_send(s->ws, true, "\x04", 1);
                if (n < 0 && errno != EINTR) {
                        cli_fail(s->ctx, "poll: %s", strerror(errno));
                        return 0;
                }
                int sig = drain_signals(s);
                if (sig)
                        return sig;
                if (p[2].revents)
                        forward_input(s, &in_open);
                if (client_ws_pump(s->ws, p[0].revents) <= 0 || s->out_errno)
                        return 0;
        }
}

static int shell_finish(struct shell *s, int sig)
{
        restore_terminal();
        termios_saved = 0;
        if (s->tty_in && !s->exited)
                fputs("\r\n", stderr);
        if (sig)
                return 128 + sig;
        if (s->exited)
                return s->exit_code;
        if (s->out_errno)
                return cli_fail(s->ctx, "cannot write the output: %s", strerror(s->out_errno));
        uint16_t code = client_ws_close_code(s->ws);
        return code ? cli_fail(s->ctx, "the terminal closed without an exit status (close code %u)", code)
                    : cli_fail(s->ctx, "the connection to %s was cut", s->ctx->cfg.url);
}

static int parse_args(struct shell *s, int argc, char **argv, const char **session)
{
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--cmd") || !strcmp(argv[i], "--")) {
                        if (i + 1 >= argc)
                                return cli_usage_error(s->ctx, "%s needs a command", argv[i]);
                        s->cmd = argv + i + 1;
                        break;
                } else if (!strcmp(argv[i], "--session")) {
                        if (i + 1 >= argc)
                                return cli_usage_error(s->ctx, "--session needs a name");
                        *session = argv[++i];
                } else if (argv[i][0] == '-') {
                        return cli_usage_error(s->ctx, "unknown option %s", argv[i]);
                } else if (!s->id) {
                        s->id = argv[i];
                } else {
                        return cli_usage_error(s->ctx, "one sandbox only (extra '%s')", argv[i]);
                }
        }
        if (!s->id)
                return cli_usage_error(s->ctx, "which sandbox? (sandboxd ls lists them)");
        if (s->cmd && *session)
                return cli_usage_error(s->ctx, "--cmd starts a terminal of its own: no --session with it");
        return 0;
}

int cli_shell(int argc, char **argv)
{
        struct cli_ctx ctx;
        int rc = cli_ctx_open(&ctx, "shell", &argc, argv);
        if (rc != 0 || ctx.help) {
                if (ctx.help)
                        fputs(SHELL_USAGE, stdout);
                return rc;
        }
        struct shell s = { .ctx = &ctx, .tty_in = isatty(STDIN_FILENO) };
        const char *session = NULL;
        rc = parse_args(&s, argc, argv, &session);
        if (rc == 0)
                rc = cli_sandbox_check(&ctx, s.id);
        if (rc == 0)
                rc = session_open(&s, session);
        if (rc == 0)
                rc = connect_pty(&s);
        if (rc == 0 && signals_start() < 0)
                rc = cli_fail(&ctx, "cannot catch signals: %s", strerror(errno));
        if (rc == 0 && s.tty_in && raw_mode() < 0)
                rc = cli_fail(&ctx, "cannot set the terminal to raw mode: %s", strerror(errno));
        if (rc == 0) {
                s.discard_line = s.cmd != NULL;
                int sig = run_loop(&s);
                rc = shell_finish(&s, sig);
        }
        restore_terminal();
        signals_stop();
        client_ws_free(s.ws);
        session_close(&s);
        cli_ctx_close(&ctx);
        return rc;
}
