/* Terminals: one interactive shell with a PTY per (sandbox, session),
 * started lazily by its first attach and shared by every attach after it
 * (the bridge's /pty WebSocket; several sockets may watch one terminal).
 *
 * A terminal's reader thread copies the shell's output into a ring of the
 * last SBX_TERMINAL_RING bytes and hands every chunk to each attached
 * listener. Attaching replays the ring and registers the listener in one
 * step under the terminal's lock, so a listener sees every byte exactly
 * once. Detaching keeps the terminal; the shell's exit ends it (each
 * listener is told), and so do sbx_terminal_close, the sandbox's destroy
 * and the manager's stop. The next attach after an end starts a new shell.
 *
 * Domain code: no HTTP, no JSON view; failures come back as struct err
 * (op "terminal.*"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct sandbox_mgr;
struct sbx_terminal_conn;

/* The replay ring: the last bytes a terminal printed. */
#define SBX_TERMINAL_RING (256 * 1024)
/* Bytes of input queued for a shell that is not reading; beyond, writes
 * fail with -ENOBUFS. */
#define SBX_TERMINAL_INPUT_MAX (4 * 1024 * 1024)
/* Terminal sizes are clamped to this (rows and cols). */
#define SBX_TERMINAL_MAX_DIM 1000

/* How the shell ended: code is the exit code (128+N when killed by signal
 * N, as a shell reports it) and signal is N, or 0. */
struct sbx_terminal_exit {
        int code;
        int signal;
};

/* A listener's callbacks. Each runs with the terminal's lock held (from
 * the terminal's reader thread, or from sbx_terminal_attach's caller for
 * `attached`), so it must not block and must not call back into the
 * terminal (no attach/detach/write from inside). ctx is the caller's. */
struct sbx_terminal_listener {
        /* Once, first: the ring's contents (len may be 0). Whatever the
         * listener sends here goes out before any live output. */
        void (*attached)(void *ctx, const void *replay, size_t len);
        /* Live output. Return < 0 to be unregistered (no further calls,
         * not even exit): a listener that cannot keep up. */
        int (*output)(void *ctx, const void *data, size_t len);
        /* The shell ended; the last call. */
        void (*exit)(void *ctx, const struct sbx_terminal_exit *st);
        void *ctx;
};

struct sbx_terminal_spec {
        const char *session;         /* NULL or "": the sandbox's default terminal */
        const char *shell;           /* NULL or "": bash; see sbx_terminal_shell_check */
        unsigned short rows, cols;   /* 0: 24x80; clamped to SBX_TERMINAL_MAX_DIM */
};

/* Whether shell can start a terminal in sandbox id: a bare name found on
 * the jail's PATH (/usr/local/bin, /usr/bin, /bin), or an absolute path,
 * without "..", to an executable regular file the jail shows (under /usr,
 * /bin, /sbin from the host's read-only /usr, or under /workspace in the
 * sandbox's workspace). NULL or "" is bash. 0, or -errno with err filled
 * (ERR_INVALID when refused). */
int sbx_terminal_shell_check(struct sandbox_mgr *m, const char *id, const char *shell, struct err *err);

/* Attaches l to the terminal of (id, spec->session), starting it first if
 * there is none (spec's shell and size apply only then; the sandbox is
 * created on first use, like every sandbox call). On success l->attached
 * has run and *ret is the attachment, owned by the caller: give it back
 * with sbx_terminal_detach. 0 or -errno with err filled. */
int sbx_terminal_attach(struct sandbox_mgr *m, const char *id, const struct sbx_terminal_spec *spec,
                        const struct sbx_terminal_listener *l, struct sbx_terminal_conn **ret, struct err *err);
/* Queues input for the shell (never blocks). 0, -ENOBUFS when more than
 * SBX_TERMINAL_INPUT_MAX bytes wait, -EPIPE once the shell has ended. */
int sbx_terminal_write(struct sbx_terminal_conn *c, const void *data, size_t len);
/* Resizes the terminal (the shell gets SIGWINCH); sizes clamped to
 * SBX_TERMINAL_MAX_DIM, 0 refused (-EINVAL). -EPIPE once it has ended. */
int sbx_terminal_resize(struct sbx_terminal_conn *c, unsigned short rows, unsigned short cols);
/* Unregisters the listener (no callback runs after this returns) and frees
 * c; the terminal lives on. NULL-safe. Not from inside a callback. */
void sbx_terminal_detach(struct sbx_terminal_conn *c);

/* Ends the terminal of (id, session) (NULL or "": the default one): its
 * shell is killed and its listeners get their exit call. For a session's
 * DELETE. Nothing when there is none. */
void sbx_terminal_close(struct sandbox_mgr *m, const char *id, const char *session);
