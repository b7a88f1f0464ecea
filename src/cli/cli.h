/* The command-line client: `sandboxd <command> …` beside serving (a bare
 * `sandboxd --listen …`, or `sandboxd serve …`, serves). Every command is a
 * client of a sandboxd server over HTTP (src/client/), found as client.h
 * says: --url/--key flags, SANDBOXD_URL/SANDBOXD_API_KEY, the client config
 * file, else the local server at 127.0.0.1:8787.
 *
 * Exit statuses: 0 success; 1 a failure (the server's message on stderr);
 * 2 a usage error; `exec` and `shell` exit with the command's own status
 * (128 + signal when it was killed). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/client.h"

struct cli_command {
        const char *name;
        const char *args;       /* one-line synopsis of the arguments */
        const char *summary;    /* one line for `sandboxd help` */
        int (*run)(int argc, char **argv);  /* argv[0] is the command's name */
};

/* True when argv[1] names a command (so main does not parse server flags). */
bool cli_is_command(const char *name);
/* Runs argv[1] (argv[0] is the program). Returns the exit status. */
int cli_main(int argc, char **argv);

/* ---- shared by the commands (cli/common.c) ---- */

/* What every command gets from the global options, which may come before or
 * after its own: --url URL, --key KEY, --json, -h/--help. */
struct cli_ctx {
        const char *name;               /* the command's name, for messages */
        struct client_config cfg;
        struct client *client;
        bool json;                      /* machine-readable output on stdout */
        bool help;                      /* -h/--help was given */
        bool tty_out, tty_err;          /* stdout / stderr is a terminal */
};

/* Removes the global options from argv (argc updated) and, unless help was
 * asked for, opens the client. Returns 0, or an exit status (2) after
 * printing why. */
int cli_ctx_open(struct cli_ctx *ctx, const char *name, int *argc, char **argv);
void cli_ctx_close(struct cli_ctx *ctx);

/* "sandboxd <cmd>: <message>" on stderr; returns 1 (the exit status). */
int cli_fail(const struct cli_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for an answer that was not 2xx (the API's own message) or no
 * answer at all (err). */
int cli_fail_reply(const struct cli_ctx *ctx, const struct client_reply *r);
int cli_fail_err(const struct cli_ctx *ctx, const struct err *err);
/* A usage error: the message and the command's usage line; returns 2. */
int cli_usage_error(const struct cli_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Pretty JSON on stdout (the --json output). */
void cli_print_json(const json_t *j);

/* One call to the server with a JSON body (may be NULL); on a non-2xx answer
 * or none, prints why and returns 1; else 0 with the reply in out. */
int cli_call(struct cli_ctx *ctx, const char *method, const char *path, json_t *body, struct client_reply *out);

/* ---- progress bars (cli/progress.c) ---- */

/* One line on stderr redrawn with '\r' (at most every 100 ms): label, bar,
 * percent, bytes done/total, rate, ETA; without a total, bytes and rate.
 * Draws nothing unless on (callers pass: stderr is a terminal and no
 * --quiet). */
struct cli_progress {
        bool on, drawn;
        char label[64];
        uint64_t done, total;   /* total 0 = unknown */
        uint64_t start_ms, drawn_ms;
};
void cli_progress_start(struct cli_progress *p, bool on, const char *label, uint64_t total);
/* total 0 keeps the one known. */
void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_add(struct cli_progress *p, uint64_t n);
/* A client_progress_fn; cls is the struct cli_progress. */
void cli_progress_fn(void *cls, uint64_t done, uint64_t total);
/* The last draw and its newline (nothing when off). */
void cli_progress_end(struct cli_progress *p);

/* ---- sandbox references (cli/sandbox_ref.c) ---- */

/* Fails (exit status 1, after saying so) unless the server lists the
 * sandbox id in GET /sandboxes: the bridge routes would create an unknown
 * id on first use, which a typo must not do. */
int cli_sandbox_check(struct cli_ctx *ctx, const char *id);

/* A command not written yet says so (exit 1). */
int cli_pending(const char *name);

/* The commands (one file each under src/cli/). */
int cli_run(int argc, char **argv);
int cli_exec(int argc, char **argv);
int cli_cp(int argc, char **argv);
int cli_shell(int argc, char **argv);
int cli_ls(int argc, char **argv);
int cli_rm(int argc, char **argv);
int cli_contexts(int argc, char **argv);
int cli_keys(int argc, char **argv);
int cli_completion(int argc, char **argv);
int cli_mcp(int argc, char **argv);
